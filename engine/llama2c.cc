// The llama2.c checkpoint format: seven int32 header fields, then f32 tensors
// in a fixed order. Every size is checked against the file; nothing is guessed.
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>

#include "formats/checkpoint_config.h"
#include "engine/engine.h"
#include "corruptions/engine_hooks.h"
#include "engine/weights.h"

namespace verity {
namespace {
Result<std::unique_ptr<Model>> LoadModelFile(const std::string& path, kernels::DType dtype);
}  // namespace

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, kernels::DType dtype, int ctx) {
  Result<std::unique_ptr<Model>> loaded = Status::Error(path + ": not loaded");
  try {
    loaded = LoadModelFile(path, dtype);
  } catch (const std::bad_alloc&) {  // sizes are checked against the files first; this is the last line
    return Status::Error(path + ": out of memory while loading the weights (as " + kernels::DTypeName(dtype) + ")");
  }
  VERITY_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, std::move(loaded));
  if (ctx != kModelContext) {
    Status s = SetContext(model->config, ctx);
    if (!s.ok()) return Status::Error(path + ": " + s.message());
  }
  return model;
}

namespace {

Result<std::unique_ptr<Model>> LoadModelFile(const std::string& path, kernels::DType dtype) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return LoadHfModel(path, dtype);
  VERITY_RETURN_IF_ERROR(CheckRegularFile(path, "model file"));
  VERITY_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  // GGUF by its magic, or by its name (so a damaged .gguf gets the GGUF reader's errors).
  const bool gguf_name = path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
  if (gguf_name || (file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0)) return LoadGgufModel(path, dtype);
  auto model = std::make_unique<Model>();
  VERITY_ASSIGN_OR_RETURN(model->config, ParseLlama2cHeader(file->data(), file->size(), path));
  ModelConfig& c = model->config;
  c.rope_theta = corruptions::ActiveEngineHooks().Llama2cRopeTheta(c.rope_theta);  // the format value
  VERITY_ASSIGN_OR_RETURN(const Llama2cLayout lay, Llama2cLayoutOf(c, path));

  model->source = path;
  model->dtype = dtype;
  model->ffn_dim = FfnDim(c, dtype);
  // The tensors follow the header (byte 28, so f32-aligned in the mapping),
  // each one layer after another.
  const unsigned char* p = file->data() + kLlama2cHeaderBytes;
  auto take = [&p](int64_t floats) {
    const unsigned char* r = p;
    p += floats * 4;
    return r;
  };
  const int64_t L = c.n_layers;
  const unsigned char* embedding = take(lay.embedding);
  const unsigned char* rms_att = take(lay.rms_att);
  const unsigned char* wq = take(lay.wq);
  const unsigned char* wk = take(lay.wk);
  const unsigned char* wv = take(lay.wv);
  const unsigned char* wo = take(lay.wo);
  const unsigned char* rms_ffn = take(lay.rms_ffn);
  const unsigned char* w1 = take(lay.w1);
  const unsigned char* w2 = take(lay.w2);
  const unsigned char* w3 = take(lay.w3);
  const unsigned char* rms_final = take(lay.rms_final);
  take(lay.rope_tables);  // unused legacy tables: never read
  const unsigned char* classifier = c.shared_classifier ? nullptr : take(lay.classifier);

  WeightPlacer place(*model, path);
  auto tensor = [](std::string name, const unsigned char* base, int64_t layer_floats, int64_t l) {
    return StoredTensor{std::move(name), TensorDType::kF32, base + l * layer_floats * 4, /*mapped=*/true};
  };
  const int d = c.dim, kv = c.kv_dim(), hd = c.hidden_dim, ffn = model->ffn_dim;
  VERITY_ASSIGN_OR_RETURN(model->token_embedding,
                          place.Vector(tensor("token_embedding_table", embedding, 0, 0), lay.embedding));
  for (int64_t l = 0; l < L; l++) {
    LayerWeights w;
    const std::string at = "[layer " + std::to_string(l) + "]";
    VERITY_ASSIGN_OR_RETURN(w.rms_att, place.Vector(tensor("rms_att_weight" + at, rms_att, lay.rms_att / L, l), d));
    VERITY_ASSIGN_OR_RETURN(w.wq, place.Matrix(tensor("wq" + at, wq, lay.wq / L, l), d, d));
    VERITY_ASSIGN_OR_RETURN(w.wk, place.Matrix(tensor("wk" + at, wk, lay.wk / L, l), kv, d));
    VERITY_ASSIGN_OR_RETURN(w.wv, place.Matrix(tensor("wv" + at, wv, lay.wv / L, l), kv, d));
    VERITY_ASSIGN_OR_RETURN(w.wo, place.Matrix(tensor("wo" + at, wo, lay.wo / L, l), d, d));
    VERITY_ASSIGN_OR_RETURN(w.rms_ffn, place.Vector(tensor("rms_ffn_weight" + at, rms_ffn, lay.rms_ffn / L, l), d));
    VERITY_ASSIGN_OR_RETURN(w.w1, place.Matrix(tensor("w1" + at, w1, lay.w1 / L, l), hd, d, ffn, d));
    VERITY_ASSIGN_OR_RETURN(w.w2, place.Matrix(tensor("w2" + at, w2, lay.w2 / L, l), d, hd, d, ffn));
    VERITY_ASSIGN_OR_RETURN(w.w3, place.Matrix(tensor("w3" + at, w3, lay.w3 / L, l), hd, d, ffn, d));
    model->layers.push_back(std::move(w));
  }
  VERITY_ASSIGN_OR_RETURN(model->rms_final, place.Vector(tensor("rms_final_weight", rms_final, 0, 0), d));
  if (c.shared_classifier) {
    // The embedding table itself for f32; a converted copy (the table stays f32 for lookups).
    StoredTensor shared{"token_embedding_table (shared classifier)", TensorDType::kF32,
                        reinterpret_cast<const unsigned char*>(model->token_embedding), /*mapped=*/false};
    VERITY_ASSIGN_OR_RETURN(model->classifier, place.Matrix(shared, c.vocab_size, d));
    // A copy (the table was not aligned for the kernels) holds the same f32
    // bytes: look rows up in it too, so the table is resident once.
    if (model->classifier.dtype == kernels::DType::kF32 && model->classifier.data != model->token_embedding)
      model->token_embedding = static_cast<const float*>(model->classifier.data);
  } else {
    VERITY_ASSIGN_OR_RETURN(model->classifier, place.Matrix(tensor("wcls", classifier, 0, 0), c.vocab_size, d));
  }
  if (ffn != hd)
    place.Note(path + ": q8_0: FFN width " + std::to_string(hd) + " padded with zero weights to " +
               std::to_string(ffn) + " (exact)");
  place.Finish();
  model->mappings.push_back(std::move(file));
  return model;
}

}  // namespace

Status WriteSyntheticLlama2c(const ModelConfig& c, uint64_t seed, const std::string& path) {
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, "synthetic config"));
  VERITY_ASSIGN_OR_RETURN(const Llama2cLayout lay, Llama2cLayoutOf(c, "synthetic config"));
  if (c.head_dim * c.n_heads != c.dim)
    return Status::Error(path + ": a llama2.c file needs head_dim = dim / n_heads, got " + std::to_string(c.head_dim));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::Error(path + ": cannot create (" + std::strerror(errno) + ")");
  int32_t h[kLlama2cHeaderBytes / 4] = {c.dim,          c.hidden_dim,
                                        c.n_layers,     c.n_heads,
                                        c.n_kv_heads,   c.shared_classifier ? c.vocab_size : -c.vocab_size,
                                        c.max_positions};
  bool ok = std::fwrite(h, sizeof h, 1, f) == 1;
  std::mt19937_64 rng(seed);
  std::vector<float> buf;
  // Weights ~ U(-a, a) with a = sqrt(3 / fan_in) (unit variance outputs); norms near 1.
  auto emit = [&](int64_t count, int fan_in, bool norm) {
    buf.resize(static_cast<size_t>(count));
    const double a = fan_in > 0 ? std::sqrt(3.0 / fan_in) : 1.0;
    for (auto& v : buf) {
      double u = (static_cast<double>(rng() >> 11) / 9007199254740992.0) * 2.0 - 1.0;
      v = static_cast<float>(norm ? 1.0 + 0.1 * u : a * u);
    }
    ok = ok && std::fwrite(buf.data(), 4, buf.size(), f) == buf.size();
  };
  emit(lay.embedding, 1, false);
  emit(lay.rms_att, 0, true);
  emit(lay.wq, c.dim, false);
  emit(lay.wk, c.dim, false);
  emit(lay.wv, c.dim, false);
  emit(lay.wo, c.dim, false);
  emit(lay.rms_ffn, 0, true);
  emit(lay.w1, c.dim, false);
  emit(lay.w2, c.hidden_dim, false);
  emit(lay.w3, c.dim, false);
  emit(lay.rms_final, 0, true);
  emit(lay.rope_tables, 1, false);
  if (!c.shared_classifier) emit(lay.classifier, c.dim, false);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return Status::Error(path + ": write failed");
  return OkStatus();
}

Status ValidateIds(const std::vector<int>& ids, const ModelConfig& c, const std::string& what) {
  if (ids.empty()) return Status::Error(what + ": no token ids");
  if (static_cast<int64_t>(ids.size()) > c.seq_len)
    return Status::Error(what + ": " + std::to_string(ids.size()) +
                         " ids exceed the context seq_len=" + std::to_string(c.seq_len) + " (--ctx)");
  for (size_t i = 0; i < ids.size(); i++)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      return Status::Error(what + ": id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                           " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  return OkStatus();
}

}  // namespace verity

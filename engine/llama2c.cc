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

// Where each tensor's first layer starts in the mapping.
struct Llama2cTensors {
  const unsigned char *embedding, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *classifier;
};

// The tensors follow the header (byte 28, so f32-aligned in the mapping),
// each one layer after another.
Llama2cTensors LocateTensors(const unsigned char* data, const ModelConfig& c, const Llama2cLayout& lay) {
  const unsigned char* p = data + kLlama2cHeaderBytes;
  auto take = [&p](int64_t floats) {
    const unsigned char* r = p;
    p += floats * 4;
    return r;
  };
  Llama2cTensors t;
  t.embedding = take(lay.embedding);
  t.rms_att = take(lay.rms_att);
  t.wq = take(lay.wq);
  t.wk = take(lay.wk);
  t.wv = take(lay.wv);
  t.wo = take(lay.wo);
  t.rms_ffn = take(lay.rms_ffn);
  t.w1 = take(lay.w1);
  t.w2 = take(lay.w2);
  t.w3 = take(lay.w3);
  t.rms_final = take(lay.rms_final);
  take(lay.rope_tables);  // unused legacy tables: never read
  t.classifier = c.shared_classifier ? nullptr : take(lay.classifier);
  return t;
}

// A tensor's f32 values in the mapping: layer l's, of one stored `layer_floats` floats a layer (0, 0: the whole).
StoredTensor MappedF32(std::string name, const unsigned char* base, int64_t layer_floats, int64_t l) {
  return StoredTensor{std::move(name), TensorDType::kF32, base + l * layer_floats * 4, /*mapped=*/true};
}

Status PlaceLayers(const Llama2cTensors& t, const Llama2cLayout& lay, WeightPlacer& place, Model* model) {
  const ModelConfig& c = model->config;
  const int64_t L = c.n_layers;
  const int d = c.dim, kv = c.kv_dim(), hd = c.hidden_dim, ffn = model->ffn_dim;
  for (int64_t l = 0; l < L; l++) {
    LayerWeights w;
    const std::string at = "[layer " + std::to_string(l) + "]";
    VERITY_ASSIGN_OR_RETURN(w.rms_att,
                            place.Vector(MappedF32("rms_att_weight" + at, t.rms_att, lay.rms_att / L, l), d));
    VERITY_ASSIGN_OR_RETURN(w.wq, place.Matrix(MappedF32("wq" + at, t.wq, lay.wq / L, l), d, d));
    VERITY_ASSIGN_OR_RETURN(w.wk, place.Matrix(MappedF32("wk" + at, t.wk, lay.wk / L, l), kv, d));
    VERITY_ASSIGN_OR_RETURN(w.wv, place.Matrix(MappedF32("wv" + at, t.wv, lay.wv / L, l), kv, d));
    VERITY_ASSIGN_OR_RETURN(w.wo, place.Matrix(MappedF32("wo" + at, t.wo, lay.wo / L, l), d, d));
    VERITY_ASSIGN_OR_RETURN(w.rms_ffn,
                            place.Vector(MappedF32("rms_ffn_weight" + at, t.rms_ffn, lay.rms_ffn / L, l), d));
    VERITY_ASSIGN_OR_RETURN(w.w1, place.Matrix(MappedF32("w1" + at, t.w1, lay.w1 / L, l), hd, d, ffn, d));
    VERITY_ASSIGN_OR_RETURN(w.w2, place.Matrix(MappedF32("w2" + at, t.w2, lay.w2 / L, l), d, hd, d, ffn));
    VERITY_ASSIGN_OR_RETURN(w.w3, place.Matrix(MappedF32("w3" + at, t.w3, lay.w3 / L, l), hd, d, ffn, d));
    model->layers.push_back(std::move(w));
  }
  return OkStatus();
}

Status PlaceClassifier(const Llama2cTensors& t, WeightPlacer& place, Model* model) {
  const ModelConfig& c = model->config;
  const int d = c.dim;
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
    VERITY_ASSIGN_OR_RETURN(model->classifier, place.Matrix(MappedF32("wcls", t.classifier, 0, 0), c.vocab_size, d));
  }
  return OkStatus();
}

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
  const Llama2cTensors t = LocateTensors(file->data(), c, lay);
  WeightPlacer place(*model, path);
  const int d = c.dim, hd = c.hidden_dim, ffn = model->ffn_dim;
  VERITY_ASSIGN_OR_RETURN(model->token_embedding,
                          place.Vector(MappedF32("token_embedding_table", t.embedding, 0, 0), lay.embedding));
  VERITY_RETURN_IF_ERROR(PlaceLayers(t, lay, place, model.get()));
  VERITY_ASSIGN_OR_RETURN(model->rms_final, place.Vector(MappedF32("rms_final_weight", t.rms_final, 0, 0), d));
  VERITY_RETURN_IF_ERROR(PlaceClassifier(t, place, model.get()));
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

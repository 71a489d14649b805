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

#include "engine/engine.h"
#include "engine/load_hooks.h"
#include "engine/weights.h"

namespace verity {
namespace {

constexpr int kHeaderInts = 7;
const char* kFieldNames[kHeaderInts] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                        "n_kv_heads", "vocab_size", "seq_len"};

// Float counts of each tensor, in file order.
struct Layout {
  int64_t embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, rope_tables, classifier;
  int64_t total() const {
    return embedding + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + w3 + rms_final + rope_tables +
           classifier;
  }
};

Layout LayoutOf(const ModelConfig& c) {
  const int64_t L = c.n_layers, d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), V = c.vocab_size;
  Layout l;
  l.embedding = V * d;
  l.rms_att = L * d;
  l.wq = L * d * d;
  l.wk = L * d * kv;
  l.wv = L * d * kv;
  l.wo = L * d * d;
  l.rms_ffn = L * d;
  l.w1 = L * h * d;
  l.w2 = L * d * h;
  l.w3 = L * h * d;
  l.rms_final = d;
  l.rope_tables = 2 * static_cast<int64_t>(c.max_positions) * c.head_size() / 2;  // unused legacy tables
  l.classifier = c.shared_classifier ? 0 : V * d;
  return l;
}

}  // namespace

Status ValidateConfig(const ModelConfig& c, const std::string& where) {
  const std::pair<const char*, int> fields[] = {{"dim", c.dim},         {"hidden_dim", c.hidden_dim},
                                                {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
                                                {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
                                                {"vocab_size", c.vocab_size}, {"seq_len", c.seq_len},
                                                {"max_positions", c.max_positions}};
  for (const auto& [name, v] : fields)
    if (v <= 0) return Status::Error(where + ": " + name + " must be positive, got " + std::to_string(v));
  if (c.n_heads % c.n_kv_heads != 0)
    return Status::Error(where + ": n_heads (" + std::to_string(c.n_heads) +
                         ") is not divisible by n_kv_heads (" + std::to_string(c.n_kv_heads) + ")");
  if (c.head_dim % 2 != 0)
    return Status::Error(where + ": head_dim " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  if (static_cast<int64_t>(c.n_heads) * c.head_dim > INT32_MAX)
    return Status::Error(where + ": n_heads x head_dim overflows");
  if (c.seq_len > c.max_positions)
    return Status::Error(where + ": context " + std::to_string(c.seq_len) + " exceeds max_positions " +
                         std::to_string(c.max_positions));
  if (!(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta)) return Status::Error(where + ": rope_theta must be positive");
  if (!(c.norm_eps > 0.0f) || !std::isfinite(c.norm_eps)) return Status::Error(where + ": norm epsilon must be positive");
  const RopeScaling& s = c.rope_scaling;
  if (s.type != RopeScalingType::kNone && !(s.factor > 0.0 && std::isfinite(s.factor)))
    return Status::Error(where + ": rope_scaling factor must be a positive number");
  if (s.type == RopeScalingType::kLlama3 &&
      !(s.low_freq_factor > 0.0 && s.high_freq_factor > s.low_freq_factor && std::isfinite(s.high_freq_factor) &&
        s.original_max_positions > 0.0 && std::isfinite(s.original_max_positions)))
    return Status::Error(where + ": rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor and a positive "
                         "original_max_position_embeddings");
  if (!c.rope_freq_factors.empty()) {
    if (static_cast<int>(c.rope_freq_factors.size()) != c.head_dim / 2)
      return Status::Error(where + ": " + std::to_string(c.rope_freq_factors.size()) +
                           " RoPE frequency factors for head_dim " + std::to_string(c.head_dim) + " (needs head_dim/2)");
    for (float f : c.rope_freq_factors)
      if (!(f > 0.0f) || !std::isfinite(f)) return Status::Error(where + ": a RoPE frequency factor is not positive");
  }
  if (c.bos_id >= c.vocab_size)
    return Status::Error(where + ": bos_token_id " + std::to_string(c.bos_id) + " is outside the vocabulary [0, " +
                         std::to_string(c.vocab_size) + ")");
  for (int e : c.eos_ids)
    if (e < 0 || e >= c.vocab_size)
      return Status::Error(where + ": eos_token_id " + std::to_string(e) + " is outside the vocabulary [0, " +
                           std::to_string(c.vocab_size) + ")");
  return OkStatus();
}

Status CheckRegularFile(const std::string& path, const char* what) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return Status::Error(path + ": " + what + " does not exist");
  if (!std::filesystem::is_regular_file(st)) return Status::Error(path + ": " + what + " is not a regular file");
  return OkStatus();
}

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
  const int64_t file_size = static_cast<int64_t>(file->size());
  if (file_size < kHeaderInts * 4)
    return Status::Error(path + ": truncated header: " + std::to_string(file_size) +
                         " bytes, a llama2.c header needs 28");
  int32_t h[kHeaderInts];
  std::memcpy(h, file->data(), sizeof h);

  for (int i = 0; i < kHeaderInts; i++)
    if (h[i] == 0 || (h[i] < 0 && i != 5))
      return Status::Error(path + ": header field " + kFieldNames[i] + " must be positive, got " +
                           std::to_string(h[i]));
  auto model = std::make_unique<Model>();
  ModelConfig& c = model->config;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;  // negative vocab: unshared classifier follows
  if (h[5] == INT32_MIN) return Status::Error(path + ": header field vocab_size is out of range");
  c.vocab_size = h[5] > 0 ? h[5] : -h[5];
  c.seq_len = c.max_positions = h[6];  // the context is the file's unless --ctx sets it (SetContext)
  if (c.dim % c.n_heads != 0)  // the format has no head_dim: it is dim / n_heads
    return Status::Error(path + ": dim (" + std::to_string(c.dim) + ") is not divisible by n_heads (" +
                         std::to_string(c.n_heads) + ")");
  c.head_dim = c.dim / c.n_heads;
  c.rope_theta = hooks::Llama2cRopeTheta(Llama2cFormat::kRopeTheta);  // the format value: see load_hooks.h
  c.norm_eps = Llama2cFormat::kNormEps;
  c.rope_style = RopeStyle::kInterleaved;
  c.bos_id = Llama2cFormat::kBos;
  c.eos_ids = {Llama2cFormat::kEos};
  VERITY_RETURN_IF_ERROR(ValidateConfig(c, path));

  const Layout lay = LayoutOf(c);
  const int64_t want = kHeaderInts * 4 + lay.total() * 4;
  if (file_size != want)
    return Status::Error(path + ": file is " + std::to_string(file_size) + " bytes but the header (dim=" +
                         std::to_string(c.dim) + " hidden_dim=" + std::to_string(c.hidden_dim) +
                         " n_layers=" + std::to_string(c.n_layers) + " n_heads=" + std::to_string(c.n_heads) +
                         " n_kv_heads=" + std::to_string(c.n_kv_heads) + " vocab_size=" +
                         std::to_string(h[5]) + " seq_len=" + std::to_string(c.seq_len) + ") implies " +
                         std::to_string(want) + (file_size < want ? " (truncated)" : " (trailing bytes)"));

  model->source = path;
  model->dtype = dtype;
  model->ffn_dim = FfnDim(c, dtype);
  // The tensors follow the header (byte 28, so f32-aligned in the mapping),
  // each one layer after another.
  const unsigned char* p = file->data() + kHeaderInts * 4;
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
  VERITY_ASSIGN_OR_RETURN(model->token_embedding, place.Vector(tensor("token_embedding_table", embedding, 0, 0), lay.embedding));
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
  const Layout lay = LayoutOf(c);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::Error(path + ": cannot create (" + std::strerror(errno) + ")");
  if (c.head_dim * c.n_heads != c.dim)
    return Status::Error(path + ": a llama2.c file needs head_dim = dim / n_heads, got " + std::to_string(c.head_dim));
  int32_t h[kHeaderInts] = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                            c.shared_classifier ? c.vocab_size : -c.vocab_size, c.max_positions};
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
    return Status::Error(what + ": " + std::to_string(ids.size()) + " ids exceed the context seq_len=" +
                         std::to_string(c.seq_len) + " (--ctx)");
  for (size_t i = 0; i < ids.size(); i++)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      return Status::Error(what + ": id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                           " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  return OkStatus();
}

}  // namespace verity

// The inference engine: load a checkpoint and tokenizer, run the forward pass
// on a kernel backend, sample. Everything a caller needs is declared here.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/llama2c_tokenizer.h"
#include "formats/model_config.h"
#include "kernels/kernels.h"

namespace verity {

// The model's RoPE table: head_dim/2 inverse frequencies. The unscaled base is
// run.c's float arithmetic (RopeBaseInverseFrequencies, bit-identical to what
// the engine always computed; Hugging Face also computes it in float32); the
// scaling (rope_scaling, rope_freq_factors) is applied to those floats in
// double precision and rounded to float once.
std::vector<float> RopeInverseFrequencies(const ModelConfig& c);
// Gemma 3's windowed layers' table: base rope_local_theta, unscaled; empty
// when the config has none (every layer uses RopeInverseFrequencies).
std::vector<float> RopeLocalInverseFrequencies(const ModelConfig& c);

// A whole file mapped read-only (PROT_READ, MAP_PRIVATE), unmapped when
// destroyed. Weights stored in the model's dtype are used where they lie.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

struct ExpertWeights {
  kernels::Weights w1;  // [ffn x dim] gate
  kernels::Weights w2;  // [dim x ffn] down
  kernels::Weights w3;  // [ffn x dim] up
};

// Norms are f32 vectors; every matrix is a typed view (Model::dtype).
struct LayerWeights {
  const float* rms_att = nullptr;  // [dim]
  kernels::Weights wq;             // [q_dim x dim]    (rows = outputs)
  kernels::Weights wk;             // [kv_dim x dim]
  kernels::Weights wv;             // [kv_dim x dim]
  kernels::Weights wo;             // [dim x q_dim]
  // Qwen2 (ModelConfig::qkv_bias): added to q, k and v; null otherwise.
  const float* bq = nullptr;  // [q_dim]
  const float* bk = nullptr;  // [kv_dim]
  const float* bv = nullptr;  // [kv_dim]
  // Qwen3 (ModelConfig::qk_norm): each head's q, and k, RMS-normalised by
  // these before RoPE; every head shares its vector. Null otherwise.
  const float* q_norm = nullptr;   // [head_dim]
  const float* k_norm = nullptr;   // [head_dim]
  const float* rms_ffn = nullptr;  // [dim]
  // Gemma (ModelConfig::gemma): the norms of the attention's and the FFN's
  // outputs, before each residual add. Null otherwise.
  const float* post_att_norm = nullptr;  // [dim]
  const float* post_ffn_norm = nullptr;  // [dim]
  kernels::Weights w1;                   // [ffn x dim]   gate
  kernels::Weights w2;                   // [dim x ffn]   down
  kernels::Weights w3;                   // [ffn x dim]   up
  kernels::Weights router;               // MoE: [n_experts x dim]; then w1..w3 are unused
  std::vector<ExpertWeights> experts;    // MoE: n_experts entries
};

struct Model {
  ModelConfig config;
  std::string source;  // file or directory it was loaded from
  // The storage of every matrix (norms and the embedding table are always f32).
  kernels::DType dtype = kernels::DType::kF32;
  // The FFN width the matrices hold: config.hidden_dim, except for q8_0 with a
  // hidden_dim that is not a multiple of 32, where w1/w3 gain zero rows and w2
  // zero columns up to the next multiple (exact: the extra units output 0).
  int ffn_dim = 0;
  const float* token_embedding = nullptr;  // [vocab x dim], f32: one row is looked up per token
  // The embedding table when a GGUF file stores it block-quantized
  // (token_embd Q4_K, ...): token_embedding is then null and each looked-up
  // row is dequantized on its own (RankForward::Embed); with a shared
  // classifier this view is the classifier too. Otherwise empty.
  kernels::Weights embedding_blocks;
  // The first matrix held as a llama.cpp block quantization, as refusals name
  // it ("blk.0.attn_q.weight (Q4_K)"); empty when none. Tensor parallelism
  // refuses such a model by this name (a backend: first_of_each_block_type).
  std::string first_block_tensor;
  // Every block type the matrices hold ("Q4_K", "Q6_K"), sorted; empty when none.
  std::vector<std::string> block_types;
  // The first matrix of each block type, in load order, as a backend that
  // runs some types and not others (CUDA) names the one it refuses.
  struct BlockTensor {
    uint32_t ggml_type;
    std::string type;    // "Q6_K"
    std::string tensor;  // "output.weight"
  };
  std::vector<BlockTensor> first_of_each_block_type;
  std::vector<LayerWeights> layers;
  const float* rms_final = nullptr;  // [dim]
  // [vocab x dim]. With a shared classifier: the embedding table itself for
  // f32, a converted copy of it otherwise.
  kernels::Weights classifier;
  // What loading did that changes nothing numerically but is worth knowing
  // (an unaligned tensor copied, the FFN width padded); each also went to stderr.
  std::vector<std::string> notes;

  // The storage behind the views: file mappings (weights used in place) and
  // model-owned, 64-byte aligned, zero-initialized buffers (converted or copied).
  std::vector<std::unique_ptr<MappedFile>> mappings;
  void* Allocate(size_t bytes);
  // From now on, buffers up to 16 MB are packed into shared huge-page slabs
  // (for models large enough that a slab's unused tail, at most 2 MB
  // resident, is noise; the loaders decide, see WeightPlacer).
  void UseWeightArena();

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::vector<std::unique_ptr<void, Free>> buffers_;
  bool arena_on_ = false;
  unsigned char* slab_ = nullptr;  // the slab being filled (owned by buffers_)
  size_t slab_used_ = 0;
};

// Loads a llama2.c checkpoint (a file), validating every header field and the
// exact file size, a llama-architecture GGUF file (one that begins with
// "GGUF" or is named *.gguf; docs/gguf.md: F32/F16/BF16/Q8_0 tensors, interleaved RoPE), or a
// Hugging Face directory (config.json plus
// model.safetensors or shards with model.safetensors.index.json), where every
// required tensor must be present with its shape and nothing unexpected may
// be. Errors name the file and the field or tensor.
//
// Files are memory-mapped. Matrices are converted at load to `dtype` unless
// stored in it (f32 in a llama2.c file or an F32 safetensors tensor, BF16
// safetensors tensors for bf16), in which case they are used in place when
// 32-byte aligned (what the SIMD kernels' loads need to stay within cache lines)
// and otherwise copied once, with a note
// on stderr naming the tensor. q8_0 needs every matrix's columns to be a
// multiple of 32 (the FFN width is padded, see Model::ffn_dim); an error names
// the first tensor that is not.
// `ctx` other than kModelContext sets the context (SetContext: an error names
// --ctx unless it is in [1, max_positions]); kModelContext keeps the format's
// default (llama2.c: seq_len; HF and GGUF: min(max_positions, kDefaultContext)).
inline constexpr int kModelContext = INT32_MIN;
Result<std::unique_ptr<Model>> LoadModel(const std::string& path, kernels::DType dtype = kernels::DType::kF32,
                                         int ctx = kModelContext);
Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir, kernels::DType dtype = kernels::DType::kF32);

// The weights' dtype as bench and parity records name it: kernels::DTypeName
// of Model::dtype, or for a model with block-quantized matrices "block_" and
// their types, lower case ("block_q4_k_q6_k" for a Q4_K_M file), which is
// what its matrices compute in (the quantizer's recipe name is not).
std::string WeightsDTypeName(const Model& model);

// OK unless `model` holds a block type (Model::first_of_each_block_type)
// that `backend` has no kernel for, or a context past its sliding window
// that `backend` does not attend within: an error naming the file, what is
// missing and the backend (Transformer::Create, SlotDecoder::Create, each
// tensor-parallel rank).
Status CheckBackendRunsModel(const Model& model, const kernels::Backend& backend);

// What a model costs in memory traffic and residence, for bandwidth figures.
struct Footprint {
  // Bytes of weights read to decode one token: every matrix once (MoE: the
  // router and n_experts_per_tok experts, assumed alike), the norms, and one
  // embedding row.
  size_t weight_bytes_per_token = 0;
  // Bytes of every weight the model holds, mapped in place or owned (the
  // embedding table counted once when the classifier shares it).
  size_t resident_weight_bytes = 0;
  // A Transformer's K and V caches for `kv_positions` positions (f32).
  size_t kv_cache_bytes = 0;
};
// kv_positions = 0: the whole context (what a Transformer allocates).
Footprint FootprintOf(const Model& model, int kv_positions = 0);

// What a tensor is for; decides whether its absence may be tolerated.
enum class TensorKind { kEmbedding, kNorm, kAttention, kBias, kRouter, kExpert, kFfn, kHead };
const char* TensorKindName(TensorKind k);

struct ExpectedTensor {
  std::string name;  // Hugging Face name
  std::vector<int64_t> shape;
  TensorKind kind;
  // Where checkpoints hold it as rows of a fused tensor (Phi-3's
  // self_attn.qkv_proj and mlp.gate_up_proj): that tensor's name and shape,
  // and the row it starts at. Empty: stored under its own name.
  std::string fused;
  std::vector<int64_t> fused_shape;
  int64_t first_row = 0;
  const std::string& stored_name() const { return fused.empty() ? name : fused; }
  const std::vector<int64_t>& stored_shape() const { return fused.empty() ? shape : fused_shape; }
};

// Every tensor a config implies, in a fixed order, with HF names and shapes.
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c);

// A tensor as a checkpoint stores it: one expected tensor, or the rows of
// several fused (`parts`, indices into ExpectedTensors, in row order).
struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorKind kind;
  std::vector<size_t> parts;
};
// The stored tensors of `expected`, each once, in the order of its first part.
std::vector<CheckpointTensor> CheckpointTensors(const std::vector<ExpectedTensor>& expected);

// Reads config.json (and BOS/EOS from generation_config.json beside it, which
// wins): every key that changes the math is read or refused by name
// (docs/config-keys.md); MoE keys are required when model_type is "mixtral".
// The context is min(max_position_embeddings, kDefaultContext). Keys verity
// does not know are listed in `notes` when given.
Result<ModelConfig> ReadHfConfig(const std::string& dir, std::vector<std::string>* notes = nullptr);

// Writes `model` as a Hugging Face directory: config.json, `shards` safetensors
// files (model.safetensors when 1, else model-0000K-of-0000N.safetensors plus
// the index), in f32 or bf16. llama2.c models get their q/k rows permuted into
// the rotate-half layout, so the directory runs with RopeStyle::kHalves.
Status WriteHfCheckpoint(const Model& model, const std::string& dir, int shards, const std::string& dtype);

// Writes `model` as a llama-architecture GGUF v3 file (docs/gguf.md): the
// llama.* metadata, general.alignment 32, matrices as `dtype` (f32, f16, bf16,
// q8_0, or one of llama.cpp's block file types, q4_0 ... q6_k, each matrix
// taking the type llama.cpp's quantizer would give it: formats/quantize.h;
// norms stay F32), Hugging Face q/k rows permuted back into the
// interleaved layout llama.cpp expects. With `tokenizer` (a llama2.c
// tokenizer.bin), also the tokenizer.ggml.* keys.
Status WriteGgufCheckpoint(const Model& model, const std::string& path, const std::string& dtype,
                           const std::string& tokenizer);

// A synthetic MoE or dense model in memory (deterministic in seed).
Result<std::unique_ptr<Model>> SyntheticModel(const ModelConfig& c, uint64_t seed);

// Writes `model`-shaped random weights as a llama2.c checkpoint (deterministic
// in `seed`). vocab_size < 0 in the file iff !config.shared_classifier.
Status WriteSyntheticLlama2c(const ModelConfig& config, uint64_t seed, const std::string& path);

// llama2.c tokenizer.bin (formats/llama2c_tokenizer.h): what generate, probe
// and bench tokenize with.
using Tokenizer = Llama2cTokenizer;

// Prints `piece` as run.c's safe_printf does: skips empty pieces and single
// bytes that are neither printable nor whitespace. Returns what to print.
std::string SafePiece(const std::string& piece);

// Where the K (or V) vector of (layer, position) starts in a KV cache of
// `floats` floats: layer * layer_stride + position * pos_stride.
struct KvCacheLayout {
  long layer_stride = 0;
  long pos_stride = 0;
  size_t floats = 0;
};
// [layer][position][kv_dim], the whole context: what a Transformer uses.
KvCacheLayout StandardKvCacheLayout(const ModelConfig& c);

// What the generate loop, teacher forcing and the bench drive: a model's
// forward pass, one position or a block of prompt positions at a time.
// Transformer is the single-rank one; TpDecoder (engine/tp_forward.h) drives
// tensor-parallel ranks.
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual const float* Forward(int token, int pos) = 0;
  virtual const float* Prefill(const int* tokens, int T, int pos0) = 0;
  // Forward, then the greedy pick (the largest logit, ties to the lower
  // index: Sampler at temperature 0), without handing the logits over: a
  // device backend picks on the device. This default picks from Forward's.
  virtual int ForwardGreedy(int token, int pos);
  virtual const Model& model() const = 0;
  virtual const char* backend_name() const = 0;
  // The backend's work-sharing counters (kernels::Backend::pool_counters);
  // nullopt where it runs on one thread or the decoder does not say.
  virtual std::optional<kernels::Backend::PoolCounters> pool_counters() const { return std::nullopt; }
  // OK, or the first error a forward met (a failed device call); callers check it after each forward.
  [[nodiscard]] virtual Status status() const { return OkStatus(); }
};

// A model plus its KV cache and scratch buffers, on one backend.
class RankForward;

class Transformer : public Decoder {
 public:
  Transformer(const Model& model, std::unique_ptr<kernels::Backend> backend);
  // The same, for contexts that come from files or flags: a KV cache larger
  // than this machine's memory, or an allocation that fails, is an error
  // naming the context, never an abort.
  // Create refuses a model with block-quantized matrices of a type the
  // backend has no kernel for (CheckBackendRunsModel).
  [[nodiscard]] static Result<std::unique_ptr<Transformer>> Create(const Model& model,
                                                                   std::unique_ptr<kernels::Backend> backend);
  // Runs one position; returns vocab_size logits (valid until the next call).
  // Positions must be fed in order 0, 1, 2, ... (the KV cache holds the past).
  const float* Forward(int token, int pos) override;
  // Forward's greedy pick, made by the backend (only an int leaves a device).
  // After a backend failure the pick means nothing: check status().
  int ForwardGreedy(int token, int pos) override;
  // Runs positions pos0 .. pos0+T-1 (tokens[0..T)) in blocks of the backend's
  // prefill_block() positions (kPrefillBlock on the CPU backends) through
  // batched matmuls, writing the KV cache exactly where
  // Forward would; returns the logits of the last position only. Positions
  // before pos0 must already be in the cache. Agrees with T calls of Forward
  // to float rounding (bit for bit on the reference backend).
  const float* Prefill(const int* tokens, int T, int pos0) override;
  static constexpr int kPrefillBlock = 64;  // Backend::prefill_block()'s default
  // OK, or the backend's first error (a failed device call or launch). After
  // a failure every later Forward/Prefill returns NaN logits (never a stale
  // buffer); Generate and TeacherForcedLogits return the error.
  [[nodiscard]] Status status() const override { return backend_->status(); }
  const Model& model() const override { return model_; }
  const char* backend_name() const override { return backend_->name(); }
  std::optional<kernels::Backend::PoolCounters> pool_counters() const override { return backend_->pool_counters(); }
  ~Transformer() override;

 private:
  const Model& model_;
  std::unique_ptr<kernels::Backend> backend_;
  // The forward pass itself (engine/rank_forward.h): the same code a
  // tensor-parallel rank runs, here over every weight, reducing nothing.
  std::unique_ptr<RankForward> forward_;
  // The logits, NaN-filled when the backend has failed.
  const float* Checked();
};

// run.c's sampler: greedy at temperature 0, else softmax(logits / T) sampled
// in full or by top-p, from a seeded xorshift generator (same seed, same text).
class Sampler {
 public:
  Sampler(int vocab_size, float temperature, float topp, uint64_t seed);
  int Sample(float* logits);  // modifies logits in place

 private:
  float RandomF32();
  int vocab_size_;
  float temperature_, topp_;
  uint64_t state_;
  std::vector<std::pair<float, int>> candidates_;
};

struct GenerateOptions {
  std::string prompt;
  int steps = 0;  // positions including the prompt, as llama2.c's -n
  float temperature = 0.0f;
  float topp = 0.0f;
  uint64_t seed = 0;
};

struct GenerateResult {
  std::string text;      // exactly what run.c prints: pieces, then one newline
  std::vector<int> ids;  // every token after the first (BOS), one per printed piece
  int prompt_tokens = 0;
  int positions = 0;            // positions run (the prompt's, prefilled, then one per sampled token)
  double prompt_seconds = 0.0;  // time spent prefilling the prompt (all its positions)
  double sample_seconds = 0.0;  // time spent sampling and on the positions after the prompt
};

// Runs run.c's generate loop, the prompt as one Prefill. Errors name --steps
// or --prompt when they do not fit the model's context.
Result<GenerateResult> Generate(Decoder& t, const Tokenizer& tok, const GenerateOptions& opt);
// Any tokenizer (formats/tokenizer.h): a llama2.c one runs the loop above;
// otherwise the prompt gets the BOS/EOS its files ask for (BOS alone when the
// prompt is empty), EOS ends the sequence, and the text is the tokenizer's
// decoding of the ids after BOS (all of them when the prompt opens without one).
Result<GenerateResult> Generate(Decoder& t, const TextTokenizer& tok, const GenerateOptions& opt);

// Teacher-forced forward over `ids`: one row of vocab_size logits per position,
// or the decoder's error (Decoder::status()).
Result<std::vector<float>> TeacherForcedLogits(Decoder& t, const std::vector<int>& ids);

// Returns an error naming `path` unless it is an existing regular file.
Status CheckRegularFile(const std::string& path, const char* what);

// Parses integers separated by spaces, commas or newlines ("1 403 407",
// "1,64,512"). Errors name `what` and the offending token; each value must be
// >= min_value; an empty list is an error.
Result<std::vector<int>> ParseIntList(const std::string& text, const std::string& what, long min_value);

// Checks every id is in [0, vocab) and the count fits the context.
Status ValidateIds(const std::vector<int>& ids, const ModelConfig& c, const std::string& what);

}  // namespace verity

// Internal to engine/: placing stored tensors into a Model in the model's
// dtype, in place where the bytes already are what the kernels read, otherwise
// converted (or copied) once into model-owned storage.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "engine/engine.h"
#include "formats/safetensors.h"

namespace verity {

// A tensor as a file (or memory) holds it.
struct StoredTensor {
  std::string name;  // as errors and notes name it
  TensorDType type = TensorDType::kF32;
  const unsigned char* data = nullptr;
  // The bytes lie in a file mapping: once converted, their pages are handed
  // back to the kernel (they are never read again).
  bool mapped = false;
  // A llama.cpp block quantization (GGUF Q4_0 ... Q6_K; `type` is then
  // unused): kept as its blocks, where they lie (WeightPlacer::Matrix).
  const kernels::BlockFormat* block = nullptr;
};

// The kernels' view of ggml block type `type` (formats/quants' layout and
// dequantization); nullptr for a type formats/quants does not read.
const kernels::BlockFormat* BlockFormatOf(uint32_t type);

// The FFN width a model of config `c` holds in `dtype` (see Model::ffn_dim).
int FfnDim(const ModelConfig& c, kernels::DType dtype);

class WeightPlacer {
 public:
  // `where` (the file or directory) prefixes every error and note.
  // m.config and m.dtype must be set: a model whose matrices come to at
  // least 64 MB packs its converted matrices into huge-page slabs
  // (Model::UseWeightArena).
  WeightPlacer(Model& model, std::string where);

  // `count` f32 values (a norm or the embedding table).
  Result<const float*> Vector(const StoredTensor& t, int64_t count);
  // A stored [rows x cols] matrix in the model's dtype, zero-padded to
  // [out_rows x out_cols] (>= rows, cols). A block-quantized one stays in its
  // blocks where they lie (DType::kBlock), and cannot be padded.
  Result<kernels::Weights> Matrix(const StoredTensor& t, int rows, int cols, int out_rows, int out_cols);
  Result<kernels::Weights> Matrix(const StoredTensor& t, int rows, int cols) {
    return Matrix(t, rows, cols, rows, cols);
  }
  // Records `text` in Model::notes and prints it on stderr.
  void Note(const std::string& text);
  // Ends loading: counts the unaligned copies that were not named one by one.
  void Finish();

 private:
  Result<kernels::Weights> BlockMatrix(const StoredTensor& t, int rows, int cols, int out_rows, int out_cols);
  Model& m_;
  std::string where_;
  int copied_ = 0;  // unaligned tensors copied so far (the first few are named)
};

// Where one expected tensor binds: an f32 vector (norm, embedding) or a
// matrix, and whether its rows or columns are the FFN width (see Model::ffn_dim).
struct Slot {
  const float** vec = nullptr;
  kernels::Weights* mat = nullptr;
  bool ffn_rows = false, ffn_cols = false;
};

// `count` f32 values of a vector slot (`vec`, a Slot::vec of m) into out: the
// vector itself, or, for a block-quantized embedding table (token_embedding
// null), its rows dequantized from Model::embedding_blocks.
void ReadVector(const Model& m, const float* const* vec, int64_t count, float* out);

// Every expected tensor's slot, in ExpectedTensors order. Layers and experts
// must already be sized.
std::vector<Slot> Slots(Model& m);

// Sizes the model's layer/expert tables and binds every expected tensor
// (ExpectedTensors(m.config) order), `stored(i)` giving where tensor i's bytes
// are. Sets dtype and ffn_dim; m.config and m.source must be set.
Status Bind(Model& m, kernels::DType dtype, const std::vector<ExpectedTensor>& expected,
            const std::function<StoredTensor(size_t)>& stored);

// Gemma's RMSNorms are `1 + w` of the stored w (Hugging Face): every norm
// tensor of `expected` bound in m gets `offset` (1; a corruption's hook may
// say otherwise) added, into model-owned copies. GGUF files hold 1 + w already.
void AddGemmaNormOffset(Model& m, const std::vector<ExpectedTensor>& expected, float offset);

// Loads a llama-architecture GGUF file (engine/gguf_model.cc; LoadModel
// calls it for files that begin with "GGUF").
Result<std::unique_ptr<Model>> LoadGgufModel(const std::string& path, kernels::DType dtype);

// Before anything is sized by a Hugging Face config: its dimensions against
// the shapes the checkpoint's safetensors headers declare (`where`: tensor ->
// shard file in `dir`), each error naming the config.json key
// (num_hidden_layers, vocab_size, hidden_size, num_attention_heads x head_dim,
// num_key_value_heads x head_dim, intermediate_size, num_local_experts).
Status CheckConfigAgainstCheckpoint(const ModelConfig& c, const std::map<std::string, std::string>& where,
                                    const std::string& dir);

}  // namespace verity

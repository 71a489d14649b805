// Writing llama.cpp's block quantizations: f32 rows into the blocks that
// formats/quants.h reads, and the per-tensor type plan of llama.cpp's file
// types (Q4_K_M and the rest). Written from the block layouts and from what
// llama.cpp's quantizer is documented and observed to choose; no code of
// theirs. The quantizers are simpler than llama.cpp's (no importance matrix,
// a plain least-squares search); their error against the f32 weights beside
// llama.cpp's is in docs/gguf.md, measured by tests/quantize_test.cc.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace verity::quants {

// Whether Quantize writes `type` (a ggml id): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K and Q6_K. Q2_K and Q3_K are read (quants.h) but not written.
[[nodiscard]] bool CanQuantize(uint32_t type);

// Appends `n` weights (whole blocks of `type`) as blocks of `type` to out.
// Errors: a type CanQuantize refuses, n not whole blocks, a weight that is
// not finite (named by its index; `where` begins the message).
[[nodiscard]] Status Quantize(uint32_t type, const float* x, int64_t n, std::string* out, const std::string& where);

// One of llama.cpp's file types ("q4_k_m"): its llama_ftype number (the
// general.file_type key) and the type most matrices take.
struct FileType {
  const char* name;
  uint32_t ftype;
  uint32_t base;  // ggml id
};

// The file type named `name` among those written here; an error names the
// value and lists them (and says Q2_K/Q3_K files are read but not written).
[[nodiscard]] Result<FileType> FindFileType(const std::string& name);
// "q4_0, q4_1, ..., q6_k": what FindFileType accepts.
std::string FileTypeNames();

// Where a matrix sits in the model, as the type plan needs it.
struct TensorSite {
  std::string name;  // its GGUF name, "blk.3.ffn_down.weight"
  int layer = -1;    // its blk index; -1 outside the blocks
  int n_layers = 0;
  int n_experts = 0;            // the model's (0: dense)
  bool tied_embedding = false;  // token_embd.weight is also the classifier
  int64_t row_length = 0;       // innermost dimension
};

// The type llama.cpp's quantizer (no importance matrix) gives a matrix in
// file type `ft` for a model of the architectures verity writes (a phi3
// attn_qkv as an attn_v): the classifier Q6_K (Q8_0
// files keep Q8_0); in *_M files attn_v and ffn_down Q6_K on the layers
// llama.cpp spends more bits on (the first and last eighth, and every third
// between); in Q4_K_S attn_v Q5_K on the first 4 layers and ffn_down Q5_K on
// the first eighth; in 8-expert models attn_k and attn_v Q8_0 (and
// attn_output Q5_K in Q4_K files). A row that is not whole blocks of the
// chosen type falls back as llama.cpp's does (Q4_K to Q5_0, Q5_K to Q5_1,
// Q6_K to Q8_0), then to F16. A MoE router (ffn_gate_inp) stays F32, as in
// llama.cpp's files. Returns a ggml id (F32 is 0, F16 1).
[[nodiscard]] uint32_t PlannedType(const FileType& ft, const TensorSite& site);

}  // namespace verity::quants

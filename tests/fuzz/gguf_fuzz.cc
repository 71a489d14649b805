// libFuzzer target: the GGUF reader must reject any input cleanly (a Status),
// never crash, hang, over-allocate or read out of bounds; what it accepts
// must be self-consistent, and every tensor of a block type must pass
// formats/quants' checks and dequantize inside its bytes (or be refused).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/quants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = verity::gguf::Parse(data, size, "fuzz");
  if (!f.ok()) return 0;
  // Accepted files: every tensor's bytes inside the input, aligned.
  for (const auto& t : f->tensors) {
    if (f->data_start > size || t.offset > size - f->data_start || t.bytes > size - f->data_start - t.offset)
      __builtin_trap();
    if ((f->data_start + t.offset) % f->alignment != 0) __builtin_trap();
    if (f->FindTensor(t.name) != &t) __builtin_trap();
  }
  for (const auto& [key, v] : f->metadata)
    if (f->Find(key) != &v) __builtin_trap();
  // Block types: what the reader accepted, the quants checks accept too.
  for (const auto& t : f->tensors) {
    const verity::quants::Layout* l = verity::quants::FindLayout(t.type);
    if (!l) continue;
    const uint64_t row = t.dims.empty() ? 1 : t.dims[0], rows = row ? t.elements() / row : 0;
    if (row && !verity::quants::CheckTensor(t.type, row, rows, t.bytes, "fuzz").ok()) __builtin_trap();
    const int64_t blocks = static_cast<int64_t>(t.bytes) / l->block_bytes;
    const unsigned char* p = data + f->data_start + t.offset;
    if (!verity::quants::CheckScales(t.type, p, blocks, "fuzz").ok()) continue;
    std::vector<float> out(static_cast<size_t>(blocks * l->block_elems));
    if (!verity::quants::Dequantize(t.type, p, blocks, out.data(), "fuzz").ok()) __builtin_trap();
  }
  auto vocab = verity::gguf::ReadVocab(*f, "fuzz");
  if (vocab.ok() && vocab->has_value()) {
    const auto& v = **vocab;
    if (!v.scores.empty() && v.scores.size() != v.tokens.size()) __builtin_trap();
    if (v.bos >= static_cast<int>(v.tokens.size())) __builtin_trap();
  }
  // Typed reads of whatever keys there are must not crash either.
  for (const auto& [key, v] : f->metadata) {
    (void)verity::gguf::GetInt(*f, key, INT64_MIN, INT64_MAX, "fuzz");
    (void)verity::gguf::GetFloat(*f, key, "fuzz");
    (void)verity::gguf::GetString(*f, key, "fuzz");
  }
  return 0;
}

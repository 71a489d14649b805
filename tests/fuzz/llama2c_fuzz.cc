// libFuzzer target: the llama2.c header parser, fed whole files. Any input must
// be rejected with a Status naming the file, or accepted; an accepted header
// must be a config ValidateConfig accepts, equal to the header's fields, whose
// tensors end exactly at the end of the file.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "formats/checkpoint_config.h"

namespace {
const std::string kPath = "fuzz/model.bin";
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace verity;
  auto c = ParseLlama2cHeader(data, size, kPath);
  if (!c.ok()) {
    Check(c.status().message().rfind(kPath + ": ", 0) == 0);  // errors name the file
    return 0;
  }
  Check(ValidateConfig(*c, "accepted").ok());
  int32_t h[7];
  std::memcpy(h, data, sizeof h);
  Check(c->dim == h[0] && c->hidden_dim == h[1] && c->n_layers == h[2] && c->n_heads == h[3] && c->n_kv_heads == h[4] &&
        c->seq_len == h[6]);
  Check(h[5] != INT32_MIN && c->vocab_size == (h[5] > 0 ? h[5] : -h[5]) && c->shared_classifier == (h[5] > 0));
  Check(c->rope_theta == Llama2cFormat::kRopeTheta && c->norm_eps == Llama2cFormat::kNormEps &&
        c->rope_style == RopeStyle::kInterleaved && c->n_experts == 0);
  // Every tensor lies inside the file, and together they fill it exactly.
  auto lay = Llama2cLayoutOf(*c, kPath);
  Check(lay.ok());
  int64_t at = kLlama2cHeaderBytes;
  for (int64_t n : {lay->embedding, lay->rms_att, lay->wq, lay->wk, lay->wv, lay->wo, lay->rms_ffn, lay->w1, lay->w2,
                    lay->w3, lay->rms_final, lay->rope_tables, lay->classifier}) {
    Check(n >= 0 && n <= (static_cast<int64_t>(size) - at) / 4);
    at += n * 4;
  }
  Check(at == static_cast<int64_t>(size) && at == kLlama2cHeaderBytes + lay->total() * 4);
  return 0;
}

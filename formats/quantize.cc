// Quantizers for llama.cpp's block types, the inverse of quants.cc's
// readers (same byte offsets, same order of fields). Each writes one block.
//
// The 32-weight types take the rule their format implies (Q4_0: the weight
// of largest magnitude sets d so that it lands on -8; Q4_1: the block's min
// and max span 0..15). The k-quants search each sub-block's scale (and min)
// over a few candidate step sizes, fitting each candidate's integer codes by
// least squares, then round the sub-block scales to the super-block's 6 or
// 8 bits and re-code every weight against the scales as stored. The error
// is plain squared error: nothing weights one weight above another.
#include "formats/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"            // F16ToF32
#include "formats/gguf.h"         // TensorTypeName
#include "formats/quants.h"       // BlockType, FindLayout
#include "formats/safetensors.h"  // F32ToF16

namespace verity::quants {
namespace {

constexpr int kQK = 32;
constexpr int kQKK = 256;

void PutHalf(unsigned char* p, float v) {
  const uint16_t h = F32ToF16(v);
  p[0] = static_cast<unsigned char>(h & 0xFF);
  p[1] = static_cast<unsigned char>(h >> 8);
}

int Nearest(float v) { return static_cast<int>(std::nearbyint(v)); }
int Clamp(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

// The weight of largest magnitude, with its sign (0 for an all-zero block).
float SignedMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  return max;
}

// Q4_0 / Q5_0: d = max / -half, so the largest weight is code 0 and the
// codes 0 .. 2 * half - 1 cover [max, -max); value d * (q - half).
void SymmetricCodes(const float* x, int half, float* d, int* q) {
  const float max = SignedMax(x, kQK);
  *d = max / static_cast<float>(-half);
  const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
  for (int j = 0; j < kQK; j++) q[j] = Clamp(Nearest(x[j] * id) + half, 0, 2 * half - 1);
}

// Q4_1 / Q5_1: codes 0 .. top over [min, max]; value d * q + min.
void RangeCodes(const float* x, int top, float* d, float* m, int* q) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kQK; j++) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  *d = (hi - lo) / static_cast<float>(top);
  *m = lo;
  const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
  for (int j = 0; j < kQK; j++) q[j] = Clamp(Nearest((x[j] - lo) * id), 0, top);
}

// Nibbles as Q4_0 lays them out: byte j holds weight j low, j + 16 high.
void PackNibbles32(const int* q, unsigned char* qs) {
  for (int j = 0; j < kQK / 2; j++) qs[j] = static_cast<unsigned char>((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
}

uint32_t FifthBits(const int* q) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK; j++) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  return qh;
}

void Q4_0(const float* x, unsigned char* b) {
  float d;
  int q[kQK];
  SymmetricCodes(x, 8, &d, q);
  PutHalf(b, d);
  PackNibbles32(q, b + 2);
}

void Q4_1(const float* x, unsigned char* b) {
  float d, m;
  int q[kQK];
  RangeCodes(x, 15, &d, &m, q);
  PutHalf(b, d);
  PutHalf(b + 2, m);
  PackNibbles32(q, b + 4);
}

void Q5_0(const float* x, unsigned char* b) {
  float d;
  int q[kQK];
  SymmetricCodes(x, 16, &d, q);
  PutHalf(b, d);
  const uint32_t qh = FifthBits(q);
  std::memcpy(b + 2, &qh, 4);
  PackNibbles32(q, b + 6);
}

void Q5_1(const float* x, unsigned char* b) {
  float d, m;
  int q[kQK];
  RangeCodes(x, 31, &d, &m, q);
  PutHalf(b, d);
  PutHalf(b + 2, m);
  const uint32_t qh = FifthBits(q);
  std::memcpy(b + 4, &qh, 4);
  PackNibbles32(q, b + 8);
}

// Q8_0: d = max|x| / 127, q = round(x / d).
void Q8_0(const float* x, unsigned char* b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; j++) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  PutHalf(b, d);
  // Rounded half away from zero (lround), as verity's Q8_0 files always were.
  for (int j = 0; j < kQK; j++) b[2 + j] = static_cast<unsigned char>(static_cast<int8_t>(std::lround(x[j] * id)));
}

// ---- k-quants ----

// The step sizes tried per sub-block: the range split into `levels` steps,
// stretched or shrunk by up to 10% (clipping a rare outlier often pays).
constexpr int kSearch = 10;

// Best scale s for x ~ s * q over integer codes in [lo, hi] (Q6_K's
// sub-blocks). Returns s; `q` holds the codes at that s.
float FitSymmetric(const float* x, int n, int lo, int hi, int* q) {
  const float max = SignedMax(x, n);
  if (max == 0.0f) {
    std::fill(q, q + n, 0);
    return 0.0f;
  }
  float best_err = INFINITY, best_s = 0.0f;
  int codes[kQK];
  for (int k = 0; k < 2 * (2 * kSearch + 1); k++) {
    // The largest weight lands near one end of the range or the other (a
    // code of lo = -32 reaches one step further than hi = 31).
    const int end = k % 2 ? lo : hi, step = k / 2 - kSearch;
    const float id = (static_cast<float>(end) + 0.1f * static_cast<float>(step)) / max;
    double xq = 0, qq = 0;
    for (int j = 0; j < n; j++) {
      codes[j] = Clamp(Nearest(x[j] * id), lo, hi);
      xq += static_cast<double>(x[j]) * codes[j];
      qq += static_cast<double>(codes[j]) * codes[j];
    }
    if (qq == 0) continue;
    const float s = static_cast<float>(xq / qq);
    double err = 0;
    for (int j = 0; j < n; j++) err += std::pow(static_cast<double>(x[j]) - static_cast<double>(s) * codes[j], 2);
    if (err < best_err) best_err = static_cast<float>(err), best_s = s, std::copy(codes, codes + n, q);
  }
  return best_s;
}

// Best scale s >= 0 and min m >= 0 for x ~ s * q - m over codes 0 .. top
// (Q4_K/Q5_K's 32-weight sub-blocks). m >= 0 because the format stores the
// min unsigned and subtracts it: a sub-block of positive weights gets m = 0.
void FitAffine(const float* x, int n, int top, float* s_out, float* m_out) {
  float lo = 0.0f, hi = x[0];
  for (int j = 0; j < n; j++) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  *s_out = 0.0f, *m_out = -lo;
  if (hi <= lo) return;
  float best_err = INFINITY;
  for (int k = -kSearch; k <= kSearch; k++) {
    const float id = (static_cast<float>(top) + 0.1f * static_cast<float>(k)) / (hi - lo);
    double sx = 0, sq = 0, sqq = 0, sxq = 0;
    int codes[kQK];
    for (int j = 0; j < n; j++) {
      codes[j] = Clamp(Nearest((x[j] - lo) * id), 0, top);
      sx += x[j], sq += codes[j], sqq += static_cast<double>(codes[j]) * codes[j],
          sxq += static_cast<double>(x[j]) * codes[j];
    }
    // Least squares for x = s q + b, then b <= 0 enforced (b = -m).
    const double det = n * sqq - sq * sq;
    if (det <= 0) continue;
    double s = (n * sxq - sq * sx) / det, b = (sx - s * sq) / n;
    if (b > 0) b = 0, s = sqq > 0 ? sxq / sqq : 0;
    if (s <= 0) continue;
    double err = 0;
    for (int j = 0; j < n; j++) {
      // Re-code against this (s, b): the fit moved them.
      const int c = Clamp(Nearest(static_cast<float>((x[j] - b) / s)), 0, top);
      err += std::pow(x[j] - (s * c + b), 2);
    }
    if (err < best_err)
      best_err = static_cast<float>(err), *s_out = static_cast<float>(s), *m_out = static_cast<float>(-b);
  }
}

// Scales (or mins) of a super-block to `bits`-bit unsigned codes under one
// f16 factor: returns the factor as stored; codes in `c`.
float SuperScale(const float* v, int n, int bits, int* c) {
  float max = 0.0f;
  for (int i = 0; i < n; i++) max = std::max(max, v[i]);
  const int top = (1 << bits) - 1;
  const float d = F16ToF32(F32ToF16(max / static_cast<float>(top)));
  const float id = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; i++) c[i] = Clamp(Nearest(v[i] * id), 0, top);
  return d;
}

// Q4_K / Q5_K: eight sub-blocks of 32, codes 0 .. top; scales and mins in
// 12 bytes (quants.cc's KScaleMin read backwards). Fills the header (d,
// dmin, scales) at b and the codes in q.
void KAffine(const float* x, int top, unsigned char* b, int* q) {
  float s[8], m[8];
  for (int j = 0; j < 8; j++) FitAffine(x + 32 * j, 32, top, &s[j], &m[j]);
  int sc[8], mn[8];
  const float d = SuperScale(s, 8, 6, sc), dmin = SuperScale(m, 8, 6, mn);
  PutHalf(b, d);
  PutHalf(b + 2, dmin);
  unsigned char* k = b + 4;
  std::memset(k, 0, 12);
  for (int j = 0; j < 8; j++) {
    if (j < 4) {
      k[j] |= static_cast<unsigned char>(sc[j]);
      k[j + 4] |= static_cast<unsigned char>(mn[j]);
    } else {
      k[j + 4] = static_cast<unsigned char>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      k[j - 4] |= static_cast<unsigned char>((sc[j] >> 4) << 6);
      k[j] |= static_cast<unsigned char>((mn[j] >> 4) << 6);
    }
  }
  for (int e = 0; e < kQKK; e++) {
    const float dl = d * static_cast<float>(sc[e / 32]), ml = dmin * static_cast<float>(mn[e / 32]);
    q[e] = dl > 0.0f ? Clamp(Nearest((x[e] + ml) / dl), 0, top) : 0;
  }
}

// The 4-bit part of Q4_K/Q5_K weight e: group e / 64, low nibble for the
// first 32 of the group.
void PackKNibbles(const int* q, unsigned char* qs) {
  std::memset(qs, 0, kQKK / 2);
  for (int e = 0; e < kQKK; e++) {
    unsigned char& byte = qs[32 * (e / 64) + e % 32];
    byte |= static_cast<unsigned char>((e % 64) < 32 ? (q[e] & 0xF) : (q[e] & 0xF) << 4);
  }
}

void Q4_K(const float* x, unsigned char* b) {
  int q[kQKK];
  KAffine(x, 15, b, q);
  PackKNibbles(q, b + 16);
}

void Q5_K(const float* x, unsigned char* b) {
  int q[kQKK];
  KAffine(x, 31, b, q);
  unsigned char* qh = b + 16;
  std::memset(qh, 0, 32);
  for (int e = 0; e < kQKK; e++) qh[e % 32] |= static_cast<unsigned char>(((q[e] >> 4) & 1) << (e / 32));
  PackKNibbles(q, b + 48);
}

// Q6_K: sixteen sub-blocks of 16, codes -32 .. 31, int8 sub-block scales
// under one f16 d.
void Q6_K(const float* x, unsigned char* b) {
  float s[16];
  int q[kQKK];
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 16; i++) {
    s[i] = FitSymmetric(x + 16 * i, 16, -32, 31, q + 16 * i);
    if (std::fabs(s[i]) > amax) amax = std::fabs(s[i]), max = s[i];
  }
  // The largest scale lands on -128 when negative, else on 127.
  const float d = F16ToF32(F32ToF16(max / (max < 0 ? -128.0f : 127.0f)));
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sc[16];
  for (int i = 0; i < 16; i++) sc[i] = Clamp(Nearest(s[i] * id), -128, 127);
  for (int e = 0; e < kQKK; e++) {
    const float dl = d * static_cast<float>(sc[e / 16]);
    q[e] = (dl != 0.0f ? Clamp(Nearest(x[e] / dl), -32, 31) : 0) + 32;
  }
  unsigned char* ql = b;
  unsigned char* qh = b + 128;
  std::memset(b, 0, 192);
  for (int e = 0; e < kQKK; e++) {
    const int h = e / 128, r = e % 128;
    ql[64 * h + r % 64] |= static_cast<unsigned char>(r < 64 ? (q[e] & 0xF) : (q[e] & 0xF) << 4);
    qh[32 * h + r % 32] |= static_cast<unsigned char>(((q[e] >> 4) & 3) << (2 * (r / 32)));
  }
  for (int i = 0; i < 16; i++) b[192 + i] = static_cast<unsigned char>(static_cast<int8_t>(sc[i]));
  PutHalf(b + 208, d);
}

using BlockFn = void (*)(const float*, unsigned char*);

BlockFn Writer(uint32_t type) {
  switch (type) {
    case kQ4_0: return Q4_0;
    case kQ4_1: return Q4_1;
    case kQ5_0: return Q5_0;
    case kQ5_1: return Q5_1;
    case kQ8_0: return Q8_0;
    case kQ4_K: return Q4_K;
    case kQ5_K: return Q5_K;
    case kQ6_K: return Q6_K;
    default: return nullptr;
  }
}

// llama_ftype numbers (llama.h) of the file types written here.
const FileType kFileTypes[] = {
    {"q4_0", 2, kQ4_0},    {"q4_1", 3, kQ4_1},    {"q5_0", 8, kQ5_0},    {"q5_1", 9, kQ5_1},    {"q8_0", 7, kQ8_0},
    {"q4_k_s", 14, kQ4_K}, {"q4_k_m", 15, kQ4_K}, {"q5_k_s", 16, kQ5_K}, {"q5_k_m", 17, kQ5_K}, {"q6_k", 18, kQ6_K},
};

constexpr uint32_t kF32 = 0;
constexpr uint32_t kF16 = 1;

bool Is(const FileType& ft, const char* name) { return std::strcmp(ft.name, name) == 0; }

// llama.cpp spends more bits on these layers in its *_M files: the first and
// last eighth, and every third layer between.
bool MoreBits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

bool Has(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// The type before the row-length fallback.
uint32_t Chosen(const FileType& ft, const TensorSite& t) {
  const bool m_file = Is(ft, "q4_k_m") || Is(ft, "q5_k_m");
  if (t.name == "output.weight" || (t.tied_embedding && t.name == "token_embd.weight"))
    return ft.base == kQ8_0 ? kQ8_0 : kQ6_K;
  // Phi-3's fused attn_qkv takes attn_v's rules (llama.cpp's
  // category_is_attn_v counts it as one).
  if (Has(t.name, ".attn_v.") || Has(t.name, ".attn_k.") || Has(t.name, ".attn_qkv.")) {
    if (t.n_experts == 8) return kQ8_0;
    if (Has(t.name, ".attn_k.")) return ft.base;
    if (m_file && MoreBits(t.layer, t.n_layers)) return kQ6_K;
    if (Is(ft, "q4_k_s") && t.layer < 4) return kQ5_K;
    return ft.base;
  }
  if (Has(t.name, ".ffn_down")) {
    if (m_file && MoreBits(t.layer, t.n_layers)) return kQ6_K;
    if (Is(ft, "q4_k_s") && t.layer < t.n_layers / 8) return kQ5_K;
    return ft.base;
  }
  if (Has(t.name, ".attn_output.") && t.n_experts == 8 && ft.base == kQ4_K) return kQ5_K;
  return ft.base;
}

}  // namespace

bool CanQuantize(uint32_t type) { return Writer(type) != nullptr; }

Status Quantize(uint32_t type, const float* x, int64_t n, std::string* out, const std::string& where) {
  const BlockFn write = Writer(type);
  const Layout* l = FindLayout(type);
  if (!write || !l)
    return Status::Error(where + ": verity does not write " + gguf::TensorTypeName(type) +
                         " (it writes Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K)");
  if (n % l->block_elems != 0)
    return Status::Error(where + ": " + std::to_string(n) + " weights are not whole " + l->name + " blocks of " +
                         std::to_string(l->block_elems));
  for (int64_t i = 0; i < n; i++)
    if (!std::isfinite(x[i]))
      return Status::Error(where + ": weight " + std::to_string(i) + " is " + std::to_string(x[i]) +
                           ", which no block type holds");
  const size_t at = out->size();
  out->resize(at + static_cast<size_t>(n / l->block_elems * l->block_bytes));
  auto* dst = reinterpret_cast<unsigned char*>(out->data() + at);
  for (int64_t k = 0; k < n / l->block_elems; k++) write(x + k * l->block_elems, dst + k * l->block_bytes);
  return OkStatus();
}

Result<FileType> FindFileType(const std::string& name) {
  for (const FileType& ft : kFileTypes)
    if (name == ft.name) return ft;
  std::string why = "--dtype " + name + ": not a block file type verity writes (" + FileTypeNames() + ")";
  if (name.rfind("q2_k", 0) == 0 || name.rfind("q3_k", 0) == 0)
    why += "; Q2_K and Q3_K files are read but not written: llama.cpp's quantizer writes them";
  return Status::Error(why);
}

std::string FileTypeNames() {
  std::string s;
  for (const FileType& ft : kFileTypes) s += (s.empty() ? "" : ", ") + std::string(ft.name);
  return s;
}

uint32_t PlannedType(const FileType& ft, const TensorSite& site) {
  // A MoE router stays F32, as llama.cpp's quantizer leaves it (the 8-expert
  // synth of quantize_test found it: verity had written it in the base type).
  if (Has(site.name, ".ffn_gate_inp.")) return kF32;
  uint32_t type = Chosen(ft, site);
  // llama.cpp's fallbacks for a row that is not whole super-blocks.
  if (site.row_length % kQKK != 0) {
    if (type == kQ4_K) type = kQ5_0;
    else if (type == kQ5_K) type = kQ5_1;
    else if (type == kQ6_K) type = kQ8_0;
  }
  if (site.row_length % kQK != 0) type = kF16;
  return type;
}

}  // namespace verity::quants

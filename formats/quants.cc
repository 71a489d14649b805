// Reference dequantization of llama.cpp's block types. Each function reads
// one block; the byte offsets are the fields of ggml's block structs, in
// order. Every product here is exact in f32 (an f16 scale has 11 significant
// bits, a sub-block scale at most 7 and a quant at most 6, 24 in all), so a
// weight is its exact value rounded once, at the final add of a min: any
// correct implementation gets the same bits, whatever its order of products.
// -ffp-contract=off (formats/CMakeLists.txt) keeps a compiler from changing
// what is rounded, should a later edit add a product that is not exact.
#include "formats/quants.h"

#include <cmath>
#include <cstring>

#include "formats/gguf.h"         // TensorTypeName
#include "formats/safetensors.h"  // F16ToF32

namespace verity::quants {
namespace {

constexpr int kQK = 32;    // weights per block of the 32-element types
constexpr int kQKK = 256;  // weights per k-quant super-block (QK_K)

float Half(const unsigned char* p) { return F16ToF32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

uint32_t U32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian, as every GGUF field
  return v;
}

// Q4_0 (18 bytes): f16 d, 16 bytes of nibbles. Weight j < 16 is the low
// nibble of byte j, weight j + 16 its high nibble; value d * (q - 8).
void Q4_0(const unsigned char* b, float* y) {
  const float d = Half(b);
  const unsigned char* qs = b + 2;
  for (int j = 0; j < kQK / 2; j++) {
    y[j] = d * static_cast<float>((qs[j] & 0xF) - 8);
    y[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1 (20 bytes): f16 d, f16 m, nibbles as Q4_0; value d * q + m.
void Q4_1(const unsigned char* b, float* y) {
  const float d = Half(b), m = Half(b + 2);
  const unsigned char* qs = b + 4;
  for (int j = 0; j < kQK / 2; j++) {
    y[j] = d * static_cast<float>(qs[j] & 0xF) + m;
    y[j + kQK / 2] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// Weight j's fifth bit: bit j of the u32 qh (Q5_0, Q5_1).
int Bit5(uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1u) << 4; }

// Q5_0 (22 bytes): f16 d, u32 qh (fifth bits), nibbles as Q4_0; value d * (q - 16).
void Q5_0(const unsigned char* b, float* y) {
  const float d = Half(b);
  const uint32_t qh = U32(b + 2);
  const unsigned char* qs = b + 6;
  for (int j = 0; j < kQK / 2; j++) {
    y[j] = d * static_cast<float>(((qs[j] & 0xF) | Bit5(qh, j)) - 16);
    y[j + kQK / 2] = d * static_cast<float>(((qs[j] >> 4) | Bit5(qh, j + kQK / 2)) - 16);
  }
}

// Q5_1 (24 bytes): f16 d, f16 m, u32 qh, nibbles; value d * q + m.
void Q5_1(const unsigned char* b, float* y) {
  const float d = Half(b), m = Half(b + 2);
  const uint32_t qh = U32(b + 4);
  const unsigned char* qs = b + 8;
  for (int j = 0; j < kQK / 2; j++) {
    y[j] = d * static_cast<float>((qs[j] & 0xF) | Bit5(qh, j)) + m;
    y[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) | Bit5(qh, j + kQK / 2)) + m;
  }
}

// Q8_0 (34 bytes): f16 d, 32 int8; value d * q.
void Q8_0(const unsigned char* b, float* y) {
  const float d = Half(b);
  for (int j = 0; j < kQK; j++) y[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
}

// Q2_K (84 bytes): 16 scale bytes (low nibble: the scale, high nibble: the
// min, of a 16-weight sub-block), 64 bytes of 2-bit quants, f16 d, f16 dmin.
// Weight e (0..255) = half h = e / 128, shift s = (e % 128) / 32, lane l =
// e % 32: bits 2s..2s+1 of qs[32h + l]. Value (d * sc) * q - (dmin * min).
void Q2_K(const unsigned char* b, float* y) {
  const unsigned char* scales = b;
  const unsigned char* qs = b + 16;
  const float d = Half(b + 80), dmin = Half(b + 82);
  for (int e = 0; e < kQKK; e++) {
    const int sub = e / 16, h = e / 128, s = (e % 128) / 32, l = e % 32;
    const float dl = d * static_cast<float>(scales[sub] & 0xF);
    const float ml = dmin * static_cast<float>(scales[sub] >> 4);
    y[e] = dl * static_cast<float>((qs[32 * h + l] >> (2 * s)) & 3) - ml;
  }
}

// Q3_K's sixteen 6-bit scales in 12 bytes: scale i's low 4 bits are the
// low (i < 8) or high (i >= 8) nibble of byte i % 8; its high 2 bits are
// bits 2(i / 4)..+1 of byte 8 + i % 4. Stored offset by 32.
int Q3_KScale(const unsigned char* sc, int i) {
  const int low = (i < 8 ? sc[i] : sc[i - 8] >> 4) & 0xF;
  const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Q3_K (110 bytes): 32 bytes hmask, 64 bytes of 2-bit quants (placed as
// Q2_K's), 12 scale bytes, f16 d. Weight e's high bit is bit e / 32 of
// hmask[e % 32]; a CLEAR bit subtracts 4. Value (d * scale) * q.
void Q3_K(const unsigned char* b, float* y) {
  const unsigned char* hmask = b;
  const unsigned char* qs = b + 32;
  const unsigned char* sc = b + 96;
  const float d = Half(b + 108);
  for (int e = 0; e < kQKK; e++) {
    const int h = e / 128, s = (e % 128) / 32, l = e % 32;
    const int q2 = (qs[32 * h + l] >> (2 * s)) & 3;
    const int q = q2 - (((hmask[l] >> (e / 32)) & 1) ? 0 : 4);
    const float dl = d * static_cast<float>(Q3_KScale(sc, e / 16));
    y[e] = dl * static_cast<float>(q);
  }
}

// Q4_K/Q5_K's eight 6-bit scales and mins of 32-weight sub-blocks, packed in
// 12 bytes: for j < 4, scale = low 6 bits of byte j, min = low 6 bits of byte
// j + 4; for j >= 4, scale = low nibble of byte j + 4 with the top 2 bits of
// byte j - 4 above it, min = high nibble of byte j + 4 with the top 2 bits of
// byte j above it.
void KScaleMin(const unsigned char* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 4-bit part of Q4_K/Q5_K weight e: 32-byte group g = e / 64 of qs, low
// nibble for the first 32 weights of the group, high nibble for the next.
int KNibble(const unsigned char* qs, int e) {
  const unsigned char byte = qs[32 * (e / 64) + e % 32];
  return (e % 64) < 32 ? (byte & 0xF) : (byte >> 4);
}

// Q4_K (144 bytes): f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles.
// Value (d * scale) * q - (dmin * min), per 32-weight sub-block.
void Q4_K(const unsigned char* b, float* y) {
  const float d = Half(b), dmin = Half(b + 2);
  const unsigned char* sc = b + 4;
  const unsigned char* qs = b + 16;
  for (int e = 0; e < kQKK; e++) {
    int scale, min;
    KScaleMin(sc, e / 32, &scale, &min);
    const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
    y[e] = dl * static_cast<float>(KNibble(qs, e)) - ml;
  }
}

// Q5_K (176 bytes): as Q4_K with 32 bytes qh between the scales and the
// nibbles: weight e's fifth bit is bit e / 32 of qh[e % 32].
void Q5_K(const unsigned char* b, float* y) {
  const float d = Half(b), dmin = Half(b + 2);
  const unsigned char* sc = b + 4;
  const unsigned char* qh = b + 16;
  const unsigned char* qs = b + 48;
  for (int e = 0; e < kQKK; e++) {
    int scale, min;
    KScaleMin(sc, e / 32, &scale, &min);
    const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
    const int q = KNibble(qs, e) | (((qh[e % 32] >> (e / 32)) & 1) << 4);
    y[e] = dl * static_cast<float>(q) - ml;
  }
}

// Q6_K (210 bytes): 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits),
// 16 int8 scales of 16-weight sub-blocks, f16 d. In half h = e / 128 (r =
// e % 128): the low bits are the low (r < 64) or high nibble of ql[64h + r %
// 64], the high bits are bits 2(r / 32)..+1 of qh[32h + r % 32]. Value
// (d * scale) * (q - 32).
void Q6_K(const unsigned char* b, float* y) {
  const unsigned char* ql = b;
  const unsigned char* qh = b + 128;
  const unsigned char* sc = b + 192;
  const float d = Half(b + 208);
  for (int e = 0; e < kQKK; e++) {
    const int h = e / 128, r = e % 128;
    const unsigned char lo = ql[64 * h + r % 64];
    const int low = r < 64 ? (lo & 0xF) : (lo >> 4);
    const int high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
    const float dl = d * static_cast<float>(static_cast<int8_t>(sc[e / 16]));
    y[e] = dl * static_cast<float>((low | (high << 4)) - 32);
  }
}

using BlockFn = void (*)(const unsigned char*, float*);

struct Entry {
  Layout layout;
  BlockFn dequantize;
  int scale_offsets[2];  // byte offsets of the f16 scales in a block; -1: none
};

// ggml-common.h's block sizes; the static_asserts of ggml's structs agree.
const Entry kEntries[] = {
    {{kQ4_0, "Q4_0", 32, 18, 32}, Q4_0, {0, -1}},      {{kQ4_1, "Q4_1", 32, 20, 32}, Q4_1, {0, 2}},
    {{kQ5_0, "Q5_0", 32, 22, 32}, Q5_0, {0, -1}},      {{kQ5_1, "Q5_1", 32, 24, 32}, Q5_1, {0, 2}},
    {{kQ8_0, "Q8_0", 32, 34, 32}, Q8_0, {0, -1}},      {{kQ2_K, "Q2_K", 256, 84, 256}, Q2_K, {80, 82}},
    {{kQ3_K, "Q3_K", 256, 110, 256}, Q3_K, {108, -1}}, {{kQ4_K, "Q4_K", 256, 144, 256}, Q4_K, {0, 2}},
    {{kQ5_K, "Q5_K", 256, 176, 256}, Q5_K, {0, 2}},    {{kQ6_K, "Q6_K", 256, 210, 256}, Q6_K, {208, -1}},
};

const Entry* FindEntry(uint32_t type) {
  for (const Entry& e : kEntries)
    if (e.layout.type == type) return &e;
  return nullptr;
}

Status Refused(uint32_t type, const std::string& where) {
  return Status::Error(where + " has type " + gguf::TensorTypeName(type) + ", " + RefusalReason(type) +
                       ", which verity does not dequantize (it reads Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, "
                       "Q5_K and Q6_K)");
}

}  // namespace

const Layout* FindLayout(uint32_t type) {
  const Entry* e = FindEntry(type);
  return e ? &e->layout : nullptr;
}

std::string RefusalReason(uint32_t type) {
  if (FindEntry(type)) return "";
  switch (type) {
    case 16:
    case 17:
    case 18:
    case 19:
    case 20:
    case 21:
    case 22:
    case 23:
    case 29: return "an I-quant (lattice codebooks)";
    case 34:
    case 35: return "a ternary type";
    case 39: return "MXFP4 (4-bit floats, e8m0 scales)";
    case 9:
    case 15: return "an activation-only block type (never a weight in llama.cpp's files)";
    default: return "not a block quantization";
  }
}

Status CheckTensor(uint32_t type, uint64_t row_length, uint64_t rows, uint64_t bytes, const std::string& where) {
  const Layout* l = FindLayout(type);
  if (!l) return Refused(type, where);
  const uint64_t multiple = static_cast<uint64_t>(l->row_multiple);
  if (row_length % multiple != 0)
    return Status::Error(where + ": type " + l->name + " needs rows that are a multiple of " +
                         std::to_string(multiple) + " weights, but its row length (innermost dimension) is " +
                         std::to_string(row_length));
  const uint64_t blocks = row_length / static_cast<uint64_t>(l->block_elems);
  const uint64_t block_bytes = static_cast<uint64_t>(l->block_bytes);
  if (rows != 0 && (blocks > UINT64_MAX / block_bytes / rows || rows * blocks * block_bytes != bytes))
    return Status::Error(where + ": type " + l->name + ": " + std::to_string(rows) + " rows x " +
                         std::to_string(blocks) + " blocks x " + std::to_string(block_bytes) +
                         " bytes is not its size, " + std::to_string(bytes) + " bytes");
  if (rows == 0 && bytes != 0)
    return Status::Error(where + ": type " + l->name + ": 0 rows but " + std::to_string(bytes) + " bytes");
  return OkStatus();
}

Status CheckScales(uint32_t type, const unsigned char* data, int64_t n_blocks, const std::string& where) {
  const Entry* e = FindEntry(type);
  if (!e) return Refused(type, where);
  for (int64_t k = 0; k < n_blocks; k++) {
    const unsigned char* block = data + k * e->layout.block_bytes;
    for (int off : e->scale_offsets) {
      if (off < 0) continue;
      const float v = Half(block + off);
      if (!std::isfinite(v))
        return Status::Error(where + ": type " + e->layout.name + ": block " + std::to_string(k) + " has a " +
                             (off == e->scale_offsets[0] ? "scale" : "min scale") + " of " +
                             (std::isnan(v) ? "NaN"
                              : v > 0       ? "+inf"
                                            : "-inf"));
    }
  }
  return OkStatus();
}

Status Dequantize(uint32_t type, const unsigned char* data, int64_t n_blocks, float* out, const std::string& where) {
  const Entry* e = FindEntry(type);
  if (!e) return Refused(type, where);
  for (int64_t k = 0; k < n_blocks; k++)
    e->dequantize(data + k * e->layout.block_bytes, out + k * e->layout.block_elems);
  return OkStatus();
}

}  // namespace verity::quants

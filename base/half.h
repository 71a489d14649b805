// IEEE 754 binary16 ("half", F16) to f32, exactly: every half is a float.
// Header-only so that code which links nothing (the kernels) reads the block
// scales of llama.cpp's quantizations the way the loaders do.
#pragma once

#include <cstdint>
#include <cstring>

namespace verity {

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t m = mant;
      do {
        e++;
        m <<= 1;
      } while (!(m & 0x400));
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace verity

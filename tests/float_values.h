// Float helpers of the tests that compare kernels with a reference: normally
// distributed values from a fixed seed, and a float's bits (to compare bit
// for bit, NaN included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace verity {

inline std::vector<float> RandomNormal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
inline std::vector<uint32_t> FloatBits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); i++) b[i] = FloatBits(v[i]);
  return b;
}

}  // namespace verity

// Elementwise math the kernels share, in forms GCC vectorises without -ffast-math (which would
// also let it assume no inf or NaN: a diverged model's loss must stay NaN).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace sweeper_native {

// exp for float32 without a library call: Cephes' expf, range reduction by ln 2 and a degree-6
// polynomial; relative error below 1e-7 (float rounding is 6e-8). Rounding to the nearest
// integer by the 1.5 * 2^23 trick; the clamp keeps 2^n a normal float; below it the result is
// 0 (where exp is denormal: what flush-to-zero makes of it anyway), above it +inf (exp
// overflows float from 88.72; the last 0.72 overflow early), so that a +inf logit gives an
// infinite loss, not a finite one; NaN stays NaN.
inline float exp_vectorisable(float x_in) {
  const float x = x_in < -87.0f ? -87.0f : (x_in > 88.0f ? 88.0f : x_in);
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x_in < -87.0f ? 0.0f : (x_in > 88.0f ? INFINITY : p * scale);
}

inline float exp_fast(float x) { return exp_vectorisable(x); }
inline double exp_fast(double x) { return std::exp(x); }  // float64: exact (the tests' type)

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_vectorisable(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The index torch.argmax gives for a row of n > 0 values: the first largest, a NaN counting as
// the largest (the first NaN). The largest, and whether a NaN is there, in vector lanes; then
// the search for the first position that holds it, which mispredicts once, at its end.
template <typename T>
inline int64_t first_argmax(const T* __restrict__ row, int64_t n) {
  T best = -std::numeric_limits<T>::infinity();
  int nans = 0;
#pragma omp simd reduction(max : best) reduction(+ : nans)
  for (int64_t c = 0; c < n; ++c) {
    best = row[c] > best ? row[c] : best;
    nans += row[c] != row[c];
  }
  int64_t arg = 0;
  if (nans)
    while (row[arg] == row[arg]) ++arg;
  else
    while (row[arg] != best) ++arg;  // all -inf: 0
  return arg;
}

}  // namespace sweeper_native

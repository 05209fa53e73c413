// Small matrix products in registers, shared by the native kernels (recurrence.cpp, probes.cpp).
#pragma once

#include <cstdint>

namespace sweeper_native {

// The products the kernels need are tiny ([B, d] x [d, G d] per model and step in the
// recurrence, d = 32 at the calibrated scale): a library bmm call costs more in dispatch and in
// streaming its output through memory than in arithmetic. Here a block of R rows by two vectors
// of columns of the output is accumulated in registers (GCC's vector types: plain loops with
// sizes known only at run time are not kept in registers), the right-hand matrix (16 KB at
// d = 32) stays in L1, and the output lands in the buffer the next pass reads, while it is in
// cache.
constexpr int ROW_BLOCK = 4;
#ifdef __AVX512F__
constexpr int VEC_BYTES = 64;
#else
constexpr int VEC_BYTES = 32;
#endif

// GCC's vector types, unaligned and allowed to alias their scalars (loads and stores are
// casts of the buffers' pointers).
typedef float VecF __attribute__((vector_size(VEC_BYTES), aligned(4), may_alias));
typedef double VecD __attribute__((vector_size(VEC_BYTES), aligned(8), may_alias));
template <typename T>
struct VecOf;
template <>
struct VecOf<float> {
  using type = VecF;
};
template <>
struct VecOf<double> {
  using type = VecD;
};
template <typename T>
using Vec = typename VecOf<T>::type;
static_assert(sizeof(Vec<float>) == VEC_BYTES && sizeof(Vec<double>) == VEC_BYTES);

// n rounded up to whole vectors of T: the width the kernels pad a dimension to, so that every
// product and pass over it runs in whole vectors (a leftover scalar column is a dependency
// chain as long as the product's inner size: measured, most of the time).
template <typename T>
constexpr int64_t padded(int64_t n) {
  constexpr int64_t L = VEC_BYTES / sizeof(T);
  return (n + L - 1) / L * L;
}

template <typename T>
inline Vec<T> load(const T* p) {
  return *reinterpret_cast<const Vec<T>*>(p);
}

template <typename T>
inline void store(T* p, const Vec<T>& v) {
  *reinterpret_cast<Vec<T>*>(p) = v;
}

// out[r * ldo + c] = start_r[c] + sum_{j < n} x[r * xr + j * xj] * w[j * width + c], for
// r < R, c < width, where start_r is row r of `start` if given (the LSTM's input projections:
// table rows), else out's own row (out +=).
template <typename T, int R>
void gemm_block(const T* __restrict__ x, int64_t xr, int64_t xj, const T* __restrict__ w,
                int64_t n, int64_t width, T* __restrict__ out, int64_t ldo,
                const T* const* start) {
  constexpr int L = VEC_BYTES / sizeof(T), C = 2 * L;  // two vectors of columns a row
  int64_t c0 = 0;
  for (; c0 + C <= width; c0 += C) {
    Vec<T> acc[R][2];
    for (int r = 0; r < R; ++r) {
      const T* from = start ? start[r] : out + r * ldo;
      acc[r][0] = load(from + c0);
      acc[r][1] = load(from + c0 + L);
    }
    for (int64_t j = 0; j < n; ++j) {
      const Vec<T> w0 = load(w + j * width + c0), w1 = load(w + j * width + c0 + L);
      for (int r = 0; r < R; ++r) {
        const T xv = x[r * xr + j * xj];
        acc[r][0] += xv * w0;
        acc[r][1] += xv * w1;
      }
    }
    for (int r = 0; r < R; ++r) {
      store(out + r * ldo + c0, acc[r][0]);
      store(out + r * ldo + c0 + L, acc[r][1]);
    }
  }
  if (c0 + L <= width) {  // one vector of columns left
    Vec<T> acc[R];
    for (int r = 0; r < R; ++r) acc[r] = load(start ? start[r] + c0 : out + r * ldo + c0);
    for (int64_t j = 0; j < n; ++j) {
      const Vec<T> w0 = load(w + j * width + c0);
      for (int r = 0; r < R; ++r) acc[r] += x[r * xr + j * xj] * w0;
    }
    for (int r = 0; r < R; ++r) store(out + r * ldo + c0, acc[r]);
    c0 += L;
  }
  for (; c0 < width; ++c0) {  // columns left over when width is not a multiple of L
    for (int r = 0; r < R; ++r) {
      T s = start ? start[r][c0] : out[r * ldo + c0];
      for (int64_t j = 0; j < n; ++j) s += x[r * xr + j * xj] * w[j * width + c0];
      out[r * ldo + c0] = s;
    }
  }
}

// out [rows, width] (+)= x [rows, n] w [n, width]; x's element (r, j) is x[r * xr + j * xj];
// `start` (optional): a pointer per row to what the row starts from instead of out's own row.
template <typename T>
void gemm_acc(int64_t rows, const T* x, int64_t xr, int64_t xj, const T* w, int64_t n,
              int64_t width, T* out, int64_t ldo, const T* const* start = nullptr) {
  int64_t r = 0;
  for (; r + ROW_BLOCK <= rows; r += ROW_BLOCK)
    gemm_block<T, ROW_BLOCK>(x + r * xr, xr, xj, w, n, width, out + r * ldo, ldo,
                             start ? start + r : nullptr);
  for (; r < rows; ++r)
    gemm_block<T, 1>(x + r * xr, xr, xj, w, n, width, out + r * ldo, ldo,
                     start ? start + r : nullptr);
}

}  // namespace sweeper_native

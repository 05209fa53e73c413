// Multiplicative attention per sequence in one pass, forward and backward: the scores, their
// softmax and the mixture of the keys, for every query row of a sequence (the copy family's
// heads: rows (t, h) of a decoder's T steps by H heads). The reference is the three torch ops
// of sweeper/layers/attention.py (bmm, softmax, bmm, and autograd's backward of them), which
// tests/test_native_kernels.py checks this against in float64.
//
//   query [N, R, d], keys [N, S, d] (any strides but a contiguous last dim: the encoder's
//   states, batch-major from the native recurrence, a time-major view from the
//   reference's) -> attn [N, R, S] = softmax_l(query keys^T),
//   mixed [N, R, d] = attn keys.
//
// At the calibrated scale a sequence's products are 17 x 17 x 32 (R = 17 H): a library bmm
// call per op costs more in dispatch and in the [N, R, S] slabs it streams through memory than
// in arithmetic. Here one sequence's keys, scores and gradients stay in L1 from the first
// product to the last; sequences run in parallel over torch's threads (each sequence is
// independent, so the bits do not depend on the number of threads).
#include <torch/extension.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "fast_math.h"
#include "small_gemm.h"

namespace {

using sweeper_native::exp_fast;
using sweeper_native::gemm_acc;
using sweeper_native::padded;

// One sequence's keys copied into kc [S, d] (rows contiguous) and kt [d, Sp] (transposed; the
// padding columns stay 0).
template <typename T>
void gather_keys(const T* k, int64_t k_l, int64_t S, int64_t Sp, int64_t d, T* __restrict__ kc,
                 T* __restrict__ kt) {
  for (int64_t l = 0; l < S; ++l) {
    const T* row = k + l * k_l;
    std::copy(row, row + d, kc + l * d);
    for (int64_t j = 0; j < d; ++j) kt[j * Sp + l] = row[j];
  }
}

// Row-wise softmax over the first S of each Sp-wide row of a [R, Sp] block, in place, as torch
// computes it (the max subtracted; a row with a NaN gives NaN), the sums in vector lanes. The
// padding ends as 0.
template <typename T>
void softmax_rows(T* __restrict__ a, int64_t R, int64_t S, int64_t Sp) {
  for (int64_t i = 0; i < R; ++i) {
    T* row = a + i * Sp;
    T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t l = 0; l < S; ++l) m = row[l] > m ? row[l] : m;
    for (int64_t l = 0; l < Sp; ++l) row[l] = exp_fast(row[l] - m);
    std::fill(row + S, row + Sp, T(0));
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t l = 0; l < Sp; ++l) sum += row[l];
    const T inv = T(1) / sum;
    for (int64_t l = 0; l < Sp; ++l) row[l] *= inv;
  }
}

template <typename T>
void forward_impl(const at::Tensor& query, const at::Tensor& keys, at::Tensor& attn,
                  at::Tensor& mixed) {
  const int64_t N = query.size(0), R = query.size(1), d = query.size(2), S = keys.size(1);
  const int64_t k_n = keys.stride(0), k_l = keys.stride(1);
  const T *q = query.data_ptr<T>(), *k = keys.data_ptr<T>();
  T *a = attn.data_ptr<T>(), *mix = mixed.data_ptr<T>();
  const int64_t Sp = padded<T>(S);
  at::parallel_for(0, N, 8, [&](int64_t begin, int64_t end) {
    std::vector<T> kc(S * d), kt(d * Sp, T(0)), sc(R * Sp);
    for (int64_t n = begin; n < end; ++n) {
      gather_keys(k + n * k_n, k_l, S, Sp, d, kc.data(), kt.data());
      std::fill(sc.begin(), sc.end(), T(0));
      gemm_acc(R, q + n * R * d, d, 1, kt.data(), d, Sp, sc.data(), Sp);  // scores = q k^T
      softmax_rows(sc.data(), R, S, Sp);
      T* an = a + n * R * S;
      for (int64_t i = 0; i < R; ++i) std::copy(&sc[i * Sp], &sc[i * Sp + S], an + i * S);
      T* mn = mix + n * R * d;
      std::fill(mn, mn + R * d, T(0));
      gemm_acc(R, sc.data(), Sp, 1, kc.data(), S, d, mn, d);  // mixed = attn k
    }
  });
}

// Backward: given d_mixed (and optionally a gradient of attn itself),
//   d_attn  = d_mixed k^T (+ grad_attn)
//   d_score = attn * (d_attn - sum_l attn d_attn)        (softmax's backward, per row)
//   d_query = d_score k,   d_keys = d_score^T query + attn^T d_mixed.
template <typename T>
void backward_impl(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& attn,
                   const at::Tensor& d_mixed, const at::Tensor* grad_attn, at::Tensor& d_query,
                   at::Tensor& d_keys) {
  const int64_t N = query.size(0), R = query.size(1), d = query.size(2), S = keys.size(1);
  const int64_t k_n = keys.stride(0), k_l = keys.stride(1);
  const int64_t dk_n = d_keys.stride(0), dk_l = d_keys.stride(1);
  const T *q = query.data_ptr<T>(), *k = keys.data_ptr<T>(), *a = attn.data_ptr<T>();
  const T* dm = d_mixed.data_ptr<T>();
  const T* ga = grad_attn ? grad_attn->data_ptr<T>() : nullptr;
  T *dq = d_query.data_ptr<T>(), *dk = d_keys.data_ptr<T>();
  const int64_t Sp = padded<T>(S);
  at::parallel_for(0, N, 8, [&](int64_t begin, int64_t end) {
    std::vector<T> kc(S * d), kt(d * Sp, T(0)), ds(R * Sp, T(0)), dkn(S * d);
    for (int64_t n = begin; n < end; ++n) {
      gather_keys(k + n * k_n, k_l, S, Sp, d, kc.data(), kt.data());
      const T* an = a + n * R * S;
      const T* qn = q + n * R * d;
      const T* dmn = dm + n * R * d;
      for (int64_t i = 0; i < R; ++i) {
        T* di = ds.data() + i * Sp;
        if (ga)
          std::copy(ga + (n * R + i) * S, ga + (n * R + i + 1) * S, di);
        else
          std::fill(di, di + S, T(0));
        std::fill(di + S, di + Sp, T(0));
      }
      gemm_acc(R, dmn, d, 1, kt.data(), d, Sp, ds.data(), Sp);  // d_attn
      for (int64_t i = 0; i < R; ++i) {
        const T* ai = an + i * S;
        T* di = ds.data() + i * Sp;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t l = 0; l < S; ++l) dot += ai[l] * di[l];
        for (int64_t l = 0; l < S; ++l) di[l] = ai[l] * (di[l] - dot);
      }
      T* dqn = dq + n * R * d;
      std::fill(dqn, dqn + R * d, T(0));
      gemm_acc(R, ds.data(), Sp, 1, kc.data(), S, d, dqn, d);  // d_query = d_score k
      std::fill(dkn.begin(), dkn.end(), T(0));
      gemm_acc(S, ds.data(), 1, Sp, qn, R, d, dkn.data(), d);  // += d_score^T q
      gemm_acc(S, an, 1, S, dmn, R, d, dkn.data(), d);         // += attn^T d_mixed
      T* out = dk + n * dk_n;
      for (int64_t l = 0; l < S; ++l) std::copy(&dkn[l * d], &dkn[(l + 1) * d], out + l * dk_l);
    }
  });
}

void check_shapes(const at::Tensor& query, const at::Tensor& keys) {
  TORCH_CHECK(query.dim() == 3 && keys.dim() == 3, "attention: query [N, R, d] and keys "
              "[N, S, d] must be 3-d, got ", query.sizes(), " and ", keys.sizes());
  TORCH_CHECK(keys.size(0) == query.size(0) && keys.size(2) == query.size(2),
              "attention: keys ", keys.sizes(), " do not match query ", query.sizes());
  TORCH_CHECK(query.is_contiguous() && keys.stride(2) == 1, "attention: query must be "
              "contiguous and keys' last dim contiguous");
  TORCH_CHECK(query.scalar_type() == keys.scalar_type(), "attention: dtypes differ");
}

}  // namespace

std::vector<at::Tensor> attention_forward(at::Tensor query, at::Tensor keys) {
  check_shapes(query, keys);
  auto attn = at::empty({query.size(0), query.size(1), keys.size(1)}, query.options());
  auto mixed = at::empty_like(query);
  AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "attention_forward",
                             [&] { forward_impl<scalar_t>(query, keys, attn, mixed); });
  return {attn, mixed};
}

// d_keys is written into the caller's tensor (any strides with a contiguous last dim: the
// encoder's states' layout, so that the gradient reaches the recurrence without a copy).
at::Tensor attention_backward(at::Tensor query, at::Tensor keys, at::Tensor attn,
                              at::Tensor d_mixed, c10::optional<at::Tensor> grad_attn,
                              at::Tensor d_keys) {
  check_shapes(query, keys);
  TORCH_CHECK(attn.is_contiguous() && d_mixed.is_contiguous() && d_mixed.sizes() == query.sizes()
                  && attn.size(0) == query.size(0) && attn.size(1) == query.size(1)
                  && attn.size(2) == keys.size(1),
              "attention_backward: attn ", attn.sizes(), " or d_mixed ", d_mixed.sizes(),
              " do not match query ", query.sizes());
  TORCH_CHECK(d_keys.sizes() == keys.sizes() && d_keys.stride(2) == 1,
              "attention_backward: d_keys must be shaped as keys");
  if (grad_attn)
    TORCH_CHECK(grad_attn->is_contiguous() && grad_attn->sizes() == attn.sizes(),
                "attention_backward: grad_attn must be shaped as attn");
  auto d_query = at::empty_like(query);
  AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "attention_backward", [&] {
    backward_impl<scalar_t>(query, keys, attn, d_mixed, grad_attn ? &*grad_attn : nullptr,
                            d_query, d_keys);
  });
  return d_query;
}

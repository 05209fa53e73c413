// A sigmoid readout and its token loss in one pass per tile of rows, forward and backward:
//
//   u = sigmoid(pre)            pre [K, M, d]   (the copy family's readout: tanh a = 2 u - 1,
//   z = u W + b                 W [K, d, V], b [K, V]      the factors folded into W and b)
//   nll = logsumexp(z) - z[y]   y [K, M] -> nll [K, M]
//
// The reference is sweeper/layers/readout.py's three torch steps (sigmoid, baddbmm,
// metrics.token_nll) and autograd's backward of them; tests/test_native_kernels.py checks the
// two against each other in float64. The [K, M, V] logits are never written: a tile's rows of z
// live in L1 from the product to the loss, and the backward recomputes them from u (d V
// multiply-adds a row) rather than reading a saved [K, M, V] slab, as autograd's backward of
// logsumexp, gather and the bias add would (five passes). Models run in parallel over torch's
// threads, each model on one thread (its tiles share its dW and db), so the bits do not depend
// on the number of threads. `readout_scores` is an evaluation's forward: the loss and whether
// the argmax is the target, nothing saved. Columns past V (padding to whole vectors) have W = 0
// and b = -inf.
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fast_math.h"
#include "small_gemm.h"

namespace {

using sweeper_native::exp_fast;
using sweeper_native::gemm_acc;
using sweeper_native::sigmoid;

constexpr int64_t TILE = 32;

// A model's W and b padded to Vp columns (W: 0, b: -inf), and W^T [Vp, d].
template <typename T>
struct PaddedOutput {
  std::vector<T> w, wt, b;
  std::vector<const T*> start;  // every row of a tile starts from b
  PaddedOutput(const T* w_k, const T* b_k, int64_t d, int64_t V, int64_t Vp)
      : w(d * Vp, T(0)), wt(Vp * d, T(0)), b(Vp, -std::numeric_limits<T>::infinity()),
        start(TILE, nullptr) {
    for (int64_t j = 0; j < d; ++j)
      for (int64_t v = 0; v < V; ++v) {
        w[j * Vp + v] = w_k[j * V + v];
        wt[v * d + j] = w_k[j * V + v];
      }
    std::copy(b_k, b_k + V, b.begin());
    std::fill(start.begin(), start.end(), b.data());
  }
};

// z [n, Vp] = b + u W for a tile of n rows.
template <typename T>
void logits(const PaddedOutput<T>& out, const T* u, int64_t n, int64_t d, int64_t Vp, T* z) {
  gemm_acc(n, u, d, 1, out.w.data(), d, Vp, z, Vp, out.start.data());
}

// logsumexp of one row as torch computes it (an infinite max counts as 0).
template <typename T>
T logsumexp(const T* __restrict__ z, int64_t Vp) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t v = 0; v < Vp; ++v) m = z[v] > m ? z[v] : m;
  m = std::isinf(m) ? T(0) : m;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t v = 0; v < Vp; ++v) sum += exp_fast(z[v] - m);
  return std::log(sum) + m;
}

template <typename T>
void forward_impl(const at::Tensor& pre, const at::Tensor& w_out, const at::Tensor& b_out,
                  const at::Tensor& target, at::Tensor& nll, at::Tensor& u, at::Tensor& lse) {
  const int64_t K = pre.size(0), M = pre.size(1), d = pre.size(2), V = w_out.size(2);
  const int64_t Vp = sweeper_native::padded<T>(V);
  const T *p = pre.data_ptr<T>(), *w = w_out.data_ptr<T>(), *b = b_out.data_ptr<T>();
  const int64_t* y = target.data_ptr<int64_t>();
  T *nl = nll.data_ptr<T>(), *us = u.data_ptr<T>(), *ls = lse.data_ptr<T>();
  at::parallel_for(0, K, 1, [&](int64_t k_begin, int64_t k_end) {
    std::vector<T> z(TILE * Vp);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const PaddedOutput<T> out(w + k * d * V, b + k * V, d, V, Vp);
      for (int64_t r0 = k * M; r0 < (k + 1) * M; r0 += TILE) {
        const int64_t n = std::min(TILE, (k + 1) * M - r0);
        T* ut = us + r0 * d;
        const T* pt = p + r0 * d;
        for (int64_t i = 0; i < n * d; ++i) ut[i] = sigmoid(pt[i]);
        logits(out, ut, n, d, Vp, z.data());
        for (int64_t i = 0; i < n; ++i) {
          const T* zi = z.data() + i * Vp;
          ls[r0 + i] = logsumexp(zi, Vp);
          nl[r0 + i] = ls[r0 + i] - zi[y[r0 + i]];
        }
      }
    }
  });
}

// An evaluation's readout: nll as forward_impl, and whether the row's argmax is its target
// (torch's argmax: the first largest logit, a NaN counting as the largest), with u in a tile's
// scratch (no gradient: nothing is saved). The [K, M, V] logits are never written.
template <typename T>
void scores_impl(const at::Tensor& pre, const at::Tensor& w_out, const at::Tensor& b_out,
                 const at::Tensor& target, at::Tensor& nll, at::Tensor& hits) {
  const int64_t K = pre.size(0), M = pre.size(1), d = pre.size(2), V = w_out.size(2);
  const int64_t Vp = sweeper_native::padded<T>(V);
  const T *p = pre.data_ptr<T>(), *w = w_out.data_ptr<T>(), *b = b_out.data_ptr<T>();
  const int64_t* y = target.data_ptr<int64_t>();
  T* nl = nll.data_ptr<T>();
  bool* hit = hits.data_ptr<bool>();
  at::parallel_for(0, K, 1, [&](int64_t k_begin, int64_t k_end) {
    std::vector<T> z(TILE * Vp), ut(TILE * d);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const PaddedOutput<T> out(w + k * d * V, b + k * V, d, V, Vp);
      for (int64_t r0 = k * M; r0 < (k + 1) * M; r0 += TILE) {
        const int64_t n = std::min(TILE, (k + 1) * M - r0);
        const T* pt = p + r0 * d;
        for (int64_t i = 0; i < n * d; ++i) ut[i] = sigmoid(pt[i]);
        logits(out, ut.data(), n, d, Vp, z.data());
        for (int64_t i = 0; i < n; ++i) {
          const T* zi = z.data() + i * Vp;
          nl[r0 + i] = logsumexp(zi, Vp) - zi[y[r0 + i]];
          hit[r0 + i] = sweeper_native::first_argmax(zi, V) == y[r0 + i];
        }
      }
    }
  });
}

// dz = g (softmax(z) - onehot(y)); d_pre = (dz W^T) u (1 - u); dW += u^T dz; db += sum dz.
template <typename T>
void backward_impl(const at::Tensor& grad, const at::Tensor& u, const at::Tensor& lse,
                   const at::Tensor& w_out, const at::Tensor& b_out, const at::Tensor& target,
                   at::Tensor& d_pre, at::Tensor& d_w, at::Tensor& d_b) {
  const int64_t K = u.size(0), M = u.size(1), d = u.size(2), V = w_out.size(2);
  const int64_t Vp = sweeper_native::padded<T>(V);
  const T *g = grad.data_ptr<T>(), *us = u.data_ptr<T>(), *ls = lse.data_ptr<T>();
  const T *w = w_out.data_ptr<T>(), *b = b_out.data_ptr<T>();
  const int64_t* y = target.data_ptr<int64_t>();
  T *dp = d_pre.data_ptr<T>(), *dw = d_w.data_ptr<T>(), *db = d_b.data_ptr<T>();
  at::parallel_for(0, K, 1, [&](int64_t k_begin, int64_t k_end) {
    std::vector<T> z(TILE * Vp), dwk(d * Vp), dbk(Vp);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const PaddedOutput<T> out(w + k * d * V, b + k * V, d, V, Vp);
      std::fill(dwk.begin(), dwk.end(), T(0));
      std::fill(dbk.begin(), dbk.end(), T(0));
      for (int64_t r0 = k * M; r0 < (k + 1) * M; r0 += TILE) {
        const int64_t n = std::min(TILE, (k + 1) * M - r0);
        const T* ut = us + r0 * d;
        logits(out, ut, n, d, Vp, z.data());
        for (int64_t i = 0; i < n; ++i) {  // z -> dz in place
          T* zi = z.data() + i * Vp;
          const T gi = g[r0 + i], li = ls[r0 + i];
          for (int64_t v = 0; v < Vp; ++v) zi[v] = gi * exp_fast(zi[v] - li);
          zi[y[r0 + i]] -= gi;
          for (int64_t v = 0; v < Vp; ++v) dbk[v] += zi[v];
        }
        T* dpt = dp + r0 * d;
        std::fill(dpt, dpt + n * d, T(0));
        gemm_acc(n, z.data(), Vp, 1, out.wt.data(), Vp, d, dpt, d);  // du = dz W^T
        for (int64_t i = 0; i < n * d; ++i) dpt[i] *= ut[i] - ut[i] * ut[i];
        gemm_acc(d, ut, 1, d, z.data(), n, Vp, dwk.data(), Vp);  // dW += u^T dz
      }
      for (int64_t j = 0; j < d; ++j)
        std::copy(&dwk[j * Vp], &dwk[j * Vp] + V, dw + (k * d + j) * V);
      std::copy(dbk.begin(), dbk.begin() + V, db + k * V);
    }
  });
}

void check(const at::Tensor& pre, const at::Tensor& w_out, const at::Tensor& b_out,
           const at::Tensor& target) {
  TORCH_CHECK(pre.dim() == 3 && w_out.dim() == 3 && b_out.dim() == 2 && target.dim() == 2,
              "readout_nll: pre [K, M, d], w [K, d, V], b [K, V], target [K, M]; got ",
              pre.sizes(), w_out.sizes(), b_out.sizes(), target.sizes());
  const int64_t K = pre.size(0), V = w_out.size(2);
  TORCH_CHECK(w_out.size(0) == K && w_out.size(1) == pre.size(2) && b_out.size(0) == K
                  && b_out.size(1) == V && target.size(0) == K && target.size(1) == pre.size(1),
              "readout_nll: shapes do not match: pre ", pre.sizes(), " w ", w_out.sizes(),
              " b ", b_out.sizes(), " target ", target.sizes());
  TORCH_CHECK(pre.is_contiguous() && w_out.is_contiguous() && b_out.is_contiguous()
                  && target.is_contiguous() && target.scalar_type() == at::kLong,
              "readout_nll: contiguous inputs and an int64 target");
  TORCH_CHECK(w_out.scalar_type() == pre.scalar_type() && b_out.scalar_type() == pre.scalar_type(),
              "readout_nll: pre, w and b must have one dtype");
  TORCH_CHECK(target.numel() == 0
                  || (target.min().item<int64_t>() >= 0 && target.max().item<int64_t>() < V),
              "readout_nll: targets must lie in [0, V)");
}

}  // namespace

std::vector<at::Tensor> readout_nll_forward(at::Tensor pre, at::Tensor w_out, at::Tensor b_out,
                                            at::Tensor target) {
  check(pre, w_out, b_out, target);
  auto nll = at::empty({pre.size(0), pre.size(1)}, pre.options());
  auto u = at::empty_like(pre);
  auto lse = at::empty_like(nll);
  AT_DISPATCH_FLOATING_TYPES(pre.scalar_type(), "readout_nll_forward", [&] {
    forward_impl<scalar_t>(pre, w_out, b_out, target, nll, u, lse);
  });
  return {nll, u, lse};
}

std::vector<at::Tensor> readout_scores(at::Tensor pre, at::Tensor w_out, at::Tensor b_out,
                                       at::Tensor target) {
  check(pre, w_out, b_out, target);
  auto nll = at::empty({pre.size(0), pre.size(1)}, pre.options());
  auto hits = at::empty({pre.size(0), pre.size(1)}, pre.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(pre.scalar_type(), "readout_scores", [&] {
    scores_impl<scalar_t>(pre, w_out, b_out, target, nll, hits);
  });
  return {nll, hits};
}

std::vector<at::Tensor> readout_nll_backward(at::Tensor grad, at::Tensor u, at::Tensor lse,
                                             at::Tensor w_out, at::Tensor b_out,
                                             at::Tensor target) {
  check(u, w_out, b_out, target);
  TORCH_CHECK(grad.is_contiguous() && grad.sizes() == lse.sizes() && lse.is_contiguous(),
              "readout_nll_backward: grad and lse must be [K, M]");
  auto d_pre = at::empty_like(u);
  auto d_w = at::empty_like(w_out);
  auto d_b = at::empty_like(b_out);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "readout_nll_backward", [&] {
    backward_impl<scalar_t>(grad, u, lse, w_out, b_out, target, d_pre, d_w, d_b);
  });
  return {d_pre, d_w, d_b};
}

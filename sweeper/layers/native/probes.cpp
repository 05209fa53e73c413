// The KTIW probe of the copy family in one pass (sweeper/families/copy/experiment.py, the
// reference: Seq2Seq.one_hot_logits and metrics.ktiw_probe_hits, which document it).
//
// For decoder step t and source position l the probe reads the logits the readout would give
// with attention one-hot on l, z_tl = sigmoid(dp_t + cp_l) W + b, and the log-odds of the
// target token, z_tl[y] - logsumexp(z_tl without y); a hit is a step whose best l is t. The
// reference builds z for every (t, l) pair ([K, B, T, S, V]: 11 M values a model at the
// calibrated scale) and passes over it five times; here each step's S rows of z live in L1
// for as long as the step takes. Ties go to the first l, NaN wins (torch.argmax's rules).
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

// One decoder step's log-odds for every source position, from zt [V, Sp] (the logits with
// positions along the rows; Sp >= S): out[l] = z_l[y] - logsumexp(z_l without y), as
// torch.logsumexp computes it (an infinite max counts as 0). Every loop runs along l, so each is
// one vectorised pass; zt's row y is overwritten (-inf: exp(-inf) = 0 stands for the left-out
// target). m and sum are scratch of Sp values.
template <typename T>
void log_odds(T* __restrict__ zt, int64_t V, int64_t Sp, int64_t y, T* __restrict__ m,
              T* __restrict__ sum, T* __restrict__ out) {
  T* target = zt + y * Sp;  // not restrict: the loops below read this row again as z
  std::copy(target, target + Sp, out);
  std::fill(target, target + Sp, -std::numeric_limits<T>::infinity());
  std::fill(m, m + Sp, -std::numeric_limits<T>::infinity());
  for (int64_t v = 0; v < V; ++v) {
    const T* __restrict__ z = zt + v * Sp;
    for (int64_t l = 0; l < Sp; ++l) m[l] = z[l] > m[l] ? z[l] : m[l];
  }
  for (int64_t l = 0; l < Sp; ++l) m[l] = std::isinf(m[l]) ? T(0) : m[l];
  std::fill(sum, sum + Sp, T(0));
  for (int64_t v = 0; v < V; ++v) {
    const T* __restrict__ z = zt + v * Sp;
    for (int64_t l = 0; l < Sp; ++l) sum[l] += exp_fast(z[l] - m[l]);
  }
  for (int64_t l = 0; l < Sp; ++l) out[l] -= std::log(sum[l]) + m[l];
}

template <typename T>
void ktiw_hits_impl(const at::Tensor& dec_part, const at::Tensor& ctx_part,
                    const at::Tensor& w_out, const at::Tensor& b_out, const at::Tensor& target,
                    at::Tensor& hits) {
  const int64_t K = dec_part.size(0), B = dec_part.size(1), T_ = dec_part.size(2);
  const int64_t d = dec_part.size(3), S = ctx_part.size(2), V = w_out.size(2);
  const int64_t Sp = sweeper_native::padded<T>(S);  // source positions, whole vectors
  const T *dp = dec_part.data_ptr<T>(), *cp = ctx_part.data_ptr<T>();
  const T *w = w_out.data_ptr<T>(), *bias = b_out.data_ptr<T>();
  const int64_t* tgt = target.data_ptr<int64_t>();
  bool* hit = hits.data_ptr<bool>();
  at::parallel_for(0, K, 1, [&](int64_t k_begin, int64_t k_end) {
    // ct, ut [d, Sp]: the context part and the tanh units with positions along the rows;
    // zt [V, Sp] = W^T ut + b, the logits likewise
    std::vector<T> ct(d * Sp, T(0)), ut(d * Sp), zt(V * Sp), m(Sp), sum(Sp), odds(Sp);
    std::vector<const T*> start(V);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const T* wk = w + k * d * V;  // [d, V]: W^T's element (v, j) is wk[j * V + v]
      std::vector<std::vector<T>> rows(V, std::vector<T>(Sp));
      for (int64_t v = 0; v < V; ++v) {
        std::fill(rows[v].begin(), rows[v].end(), bias[k * V + v]);
        start[v] = rows[v].data();
      }
      for (int64_t b = 0; b < B; ++b) {
        const T* c = cp + (k * B + b) * S * d;  // [S, d]
        for (int64_t l = 0; l < S; ++l)
          for (int64_t j = 0; j < d; ++j) ct[j * Sp + l] = c[l * d + j];
        for (int64_t t = 0; t < T_; ++t) {
          const int64_t row = (k * B + b) * T_ + t;
          const T* q = dp + row * d;
          for (int64_t j = 0; j < d; ++j) {
            const T qj = q[j];
            const T* __restrict__ cj = ct.data() + j * Sp;
            T* __restrict__ uj = ut.data() + j * Sp;
            for (int64_t l = 0; l < Sp; ++l) uj[l] = sigmoid(qj + cj[l]);
          }
          gemm_acc<T>(V, wk, 1, V, ut.data(), d, Sp, zt.data(), Sp, start.data());
          log_odds(zt.data(), V, Sp, tgt[row], m.data(), sum.data(), odds.data());
          T best = 0;
          int64_t arg = -1;
          for (int64_t l = 0; l < S; ++l) {
            const T value = odds[l];
            const bool better = arg < 0 || (std::isnan(value) ? !std::isnan(best) : value > best);
            if (better) best = value, arg = l;
          }
          hit[row] = arg == t;
        }
      }
    }
  });
}

}  // namespace

at::Tensor ktiw_hits(at::Tensor dec_part, at::Tensor ctx_part, at::Tensor w_out, at::Tensor b_out,
                     at::Tensor target) {
  dec_part = dec_part.contiguous(), ctx_part = ctx_part.contiguous();
  w_out = w_out.contiguous(), b_out = b_out.contiguous(), target = target.contiguous();
  const int64_t K = dec_part.size(0), B = dec_part.size(1), T = dec_part.size(2);
  const int64_t d = dec_part.size(3), V = w_out.size(2);
  TORCH_CHECK(dec_part.dim() == 4 && ctx_part.dim() == 4 && ctx_part.size(0) == K &&
                  ctx_part.size(1) == B && ctx_part.size(3) == d && w_out.size(0) == K &&
                  w_out.size(1) == d && b_out.size(0) == K && b_out.size(1) == V &&
                  target.sizes() == at::IntArrayRef({K, B, T}) &&
                  target.scalar_type() == at::kLong,
              "ktiw_hits: p [K, B, T, d], q [K, B, S, d], W [K, d, V], b [K, V], target "
              "[K, B, T] (int64)");
  TORCH_CHECK(target.numel() == 0 ||
                  (target.min().item<int64_t>() >= 0 && target.max().item<int64_t>() < V),
              "ktiw_hits: targets must lie in [0, V)");
  at::Tensor hits = at::empty(target.sizes(), target.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(dec_part.scalar_type(), "ktiw_hits", [&] {
    ktiw_hits_impl<scalar_t>(dec_part, ctx_part, w_out, b_out, target, hits);
  });
  return hits;
}

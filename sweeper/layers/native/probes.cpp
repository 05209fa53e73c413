// The KTIW probe of the copy family in one pass (sweeper/families/copy/experiment.py, the
// reference: Seq2Seq.one_hot_logits and metrics.ktiw_probe_hits, which document it).
//
// For decoder step t and source position l the probe reads the logits the readout would give
// with attention one-hot on l, z_tl = sigmoid(dp_t + cp_l) W + b, and the log-odds of the
// target token, z_tl[y] - logsumexp(z_tl without y); a hit is a step whose best l is t. The
// reference builds z for every (t, l) pair ([K, B, T, S, V]: 11 M values a model at the
// calibrated scale) and passes over it five times; here a sequence's T S (t, l) pairs are
// columns, BLOCK at a time, whose units and logits live in L1 while the block is worked on
// (pairs along the vector lanes: S = 17 source positions padded to 32 lanes wasted 47% of the
// work on AVX-512). Ties go to the first l, NaN wins (torch.argmax's rules).
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "fast_math.h"
#include "small_gemm.h"

namespace {

using sweeper_native::exp_fast;
using sweeper_native::first_argmax;
using sweeper_native::gemm_acc;
using sweeper_native::sigmoid;

// The log-odds of a block of W (decoder step, source position) columns from their logits
// zt [V, W] (classes along the rows): out[c] = z_c[y_c] - logsumexp(z_c without y_c), as
// torch.logsumexp computes it (an infinite max counts as 0). Every loop but the first runs along
// the columns, so each is one vectorised pass; the target's entry of each column is overwritten
// (-inf: exp(-inf) = 0 stands for the left-out target). m and sum are scratch of W values.
template <typename T>
void log_odds(T* __restrict__ zt, int64_t V, int64_t W, const int64_t* __restrict__ y,
              T* __restrict__ m, T* __restrict__ sum, T* __restrict__ out) {
  for (int64_t c = 0; c < W; ++c) {
    out[c] = zt[y[c] * W + c];
    zt[y[c] * W + c] = -std::numeric_limits<T>::infinity();
  }
  std::fill(m, m + W, -std::numeric_limits<T>::infinity());
  for (int64_t v = 0; v < V; ++v) {
    const T* __restrict__ z = zt + v * W;
    for (int64_t c = 0; c < W; ++c) m[c] = z[c] > m[c] ? z[c] : m[c];
  }
  for (int64_t c = 0; c < W; ++c) m[c] = std::isinf(m[c]) ? T(0) : m[c];
  std::fill(sum, sum + W, T(0));
  for (int64_t v = 0; v < V; ++v) {
    const T* __restrict__ z = zt + v * W;
    for (int64_t c = 0; c < W; ++c) sum[c] += exp_fast(z[c] - m[c]);
  }
  for (int64_t c = 0; c < W; ++c) out[c] -= std::log(sum[c]) + m[c];
}

// The sigmoid of the pre-activations of columns c0 .. c0 + W - 1 (column c: decoder step c / S,
// source position c % S) into ut [d, W]: ut[j, c] = sigmoid(p[c / S, j] + qt[j, c % S]) with qt
// [d, S] the context parts transposed; columns past the T S real ones get sigmoid(0) (finite,
// ignored). The adds run over each step's contiguous stretch of columns, then one sigmoid pass
// over the block.
template <typename T>
void unit_block(const T* __restrict__ p, const T* __restrict__ qt, int64_t T_, int64_t S,
                int64_t d, int64_t c0, int64_t W, T* __restrict__ ut) {
  const int64_t end = std::min(c0 + W, T_ * S);
  for (int64_t j = 0; j < d; ++j) {
    T* __restrict__ u = ut + j * W;
    const T* __restrict__ q = qt + j * S;
    for (int64_t c = c0; c < end;) {
      const int64_t t = c / S, l0 = c - t * S, n = std::min(S - l0, end - c);
      const T pj = p[t * d + j];
      for (int64_t i = 0; i < n; ++i) u[c - c0 + i] = pj + q[l0 + i];
      c += n;
    }
    std::fill(u + (end - c0), u + W, T(0));
    for (int64_t c = 0; c < W; ++c) u[c] = sigmoid(u[c]);
  }
}

// Columns a block holds: whole vectors, so that every pass over a block runs in whole vectors;
// its ut [d, W] and zt [V, W] stay in L1 (8 KB each at d = V = 32, float).
constexpr int64_t BLOCK = 64;

template <typename T>
void ktiw_hits_impl(const at::Tensor& dec_part, const at::Tensor& ctx_part,
                    const at::Tensor& w_out, const at::Tensor& b_out, const at::Tensor& target,
                    at::Tensor& hits) {
  const int64_t K = dec_part.size(0), B = dec_part.size(1), T_ = dec_part.size(2);
  const int64_t d = dec_part.size(3), S = ctx_part.size(2), V = w_out.size(2);
  const int64_t columns = T_ * S, blocks = (columns + BLOCK - 1) / BLOCK;
  const T *dp = dec_part.data_ptr<T>(), *cp = ctx_part.data_ptr<T>();
  const T *w = w_out.data_ptr<T>(), *bias = b_out.data_ptr<T>();
  const int64_t* tgt = target.data_ptr<int64_t>();
  bool* hit = hits.data_ptr<bool>();
  at::parallel_for(0, K, 1, [&](int64_t k_begin, int64_t k_end) {
    // qt [d, S]: a sequence's context parts transposed; ut [d, BLOCK] the units' sigmoids and
    // zt [V, BLOCK] = W^T ut + b the logits of a block of columns; odds: every column's log-odds
    std::vector<T> qt(d * S), ut(d * BLOCK), zt(V * BLOCK), m(BLOCK), sum(BLOCK);
    std::vector<T> odds(blocks * BLOCK);
    std::vector<int64_t> y(BLOCK);
    std::vector<const T*> start(V);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const T* wk = w + k * d * V;  // [d, V]: W^T's element (v, j) is wk[j * V + v]
      std::vector<std::vector<T>> rows(V, std::vector<T>(BLOCK));
      for (int64_t v = 0; v < V; ++v) {
        std::fill(rows[v].begin(), rows[v].end(), bias[k * V + v]);
        start[v] = rows[v].data();
      }
      for (int64_t b = 0; b < B; ++b) {
        const int64_t seq = k * B + b;
        const T* c = cp + seq * S * d;  // [S, d]
        for (int64_t l = 0; l < S; ++l)
          for (int64_t j = 0; j < d; ++j) qt[j * S + l] = c[l * d + j];
        for (int64_t c0 = 0; c0 < columns; c0 += BLOCK) {
          unit_block(dp + seq * T_ * d, qt.data(), T_, S, d, c0, BLOCK, ut.data());
          for (int64_t i = 0; i < BLOCK; ++i)
            y[i] = c0 + i < columns ? tgt[seq * T_ + (c0 + i) / S] : 0;
          gemm_acc<T>(V, wk, 1, V, ut.data(), d, BLOCK, zt.data(), BLOCK, start.data());
          log_odds(zt.data(), V, BLOCK, y.data(), m.data(), sum.data(), odds.data() + c0);
        }
        for (int64_t t = 0; t < T_; ++t)
          hit[seq * T_ + t] = S > 0 && first_argmax(&odds[t * S], S) == t;
      }
    }
  });
}

// hit[n, r] = (argmax_c x[n, r, c] == index[r]), torch.argmax's rules (the first largest, a
// NaN the largest), reading x [N, R, C] at its strides (a contiguous last dim).
template <typename T>
void argmax_hits_impl(const at::Tensor& x, const int64_t* index, bool* hit) {
  const int64_t N = x.size(0), R = x.size(1), C = x.size(2);
  const int64_t sn = x.stride(0), sr = x.stride(1);
  const T* base = x.data_ptr<T>();
  at::parallel_for(0, N, 256, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n)
      for (int64_t r = 0; r < R; ++r) {
        hit[n * R + r] = first_argmax(base + n * sn + r * sr, C) == index[r];
      }
  });
}

}  // namespace

at::Tensor argmax_hits(at::Tensor x, at::Tensor index) {
  TORCH_CHECK(x.device().is_cpu() && x.dim() == 3 && x.size(2) > 0 && x.stride(2) == 1,
              "argmax_hits: x [N, R, C] on the CPU with a contiguous last dim, C > 0");
  TORCH_CHECK(index.device().is_cpu() && index.dim() == 1 && index.size(0) == x.size(1) &&
                  index.scalar_type() == at::kLong,
              "argmax_hits: index [R] (int64, on the CPU)");
  index = index.contiguous();
  at::Tensor hits = at::empty({x.size(0), x.size(1)}, x.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "argmax_hits", [&] {
    argmax_hits_impl<scalar_t>(x, index.data_ptr<int64_t>(), hits.data_ptr<bool>());
  });
  return hits;
}

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

// Fused LSTM and GRU recurrences for K packed models, forward and backward. The formulas,
// buffers and scaling are those of the reference path in sweeper/layers/recurrence.py
// (TorchScript loops of ~10 torch ops a step), which documents them;
// tests/test_native_kernels.py checks the two against each other in float64. Shapes: rows
// [S, K, B] (the input of step t, model k, sequence b is table[rows]), table [R, G d],
// w [K, d, G d], states [K, B, d], per-step buffers [S, K, B, ...].
//
// Each step of a tile of sequences is one pass: the product with W_hh accumulated in
// registers (gemm_block) straight into the gates, then the elementwise cell on them while they
// are in L1; backward, the gate gradients, the table's gradient (scattered in the same pass),
// dW_hh and dh_{t-1} likewise. A model's tiles run through all their time steps one after the
// other, models in parallel over torch's threads. tanh is 2 sigmoid(2x) - 1 with the factor 2
// folded into the weights by the caller, so every activation is one sigmoid.
#include <torch/extension.h>

#include <algorithm>
#include <vector>

#include "fast_math.h"
#include "small_gemm.h"

namespace {

using sweeper_native::gemm_acc;
using sweeper_native::sigmoid;

// ---------------------------------------------------------------------------------------------
// LSTM. acts = sigmoid of (i, f, 2g, o) pre-activations; c2s = 2 c; tcs = tanh c; hs = h.
//
// The elementwise pass of one step is a function of its own: GCC honours __restrict__ on
// function parameters, not on pointers declared in a loop body, and without it the loops run
// 3-4x slower (measured: 2.1 against 0.6 ns a gate element at K = 16, B = 128, d = 32).
template <typename T>
void lstm_step_backward(const T* __restrict__ a, const T* __restrict__ tc,
                        const T* __restrict__ c2_prev, const T* __restrict__ dhp,
                        T* __restrict__ dcp, T* __restrict__ dg, T* __restrict__ dt,
                        const int64_t* __restrict__ row_t, int64_t KB, int64_t G) {
  const int64_t d = G / 4;
  for (int64_t kb = 0; kb < KB; ++kb) {
    const T* g = a + kb * G;
    T* out = dg + kb * G;
    const int64_t o = kb * d;
    for (int64_t j = 0; j < d; ++j) {
      const T i = g[j], f = g[d + j], sg = g[2 * d + j], og = g[3 * d + j];
      const T tcv = tc[o + j], dhv = dhp[o + j];
      const T dcv = dcp[o + j] + dhv * (og - og * tcv * tcv);  // += dh o tanh'(c)
      out[j] = dcv * (T(2) * sg - T(1)) * (i - i * i);
      out[d + j] = dcv * c2_prev[o + j] * T(0.5) * (f - f * f);
      out[2 * d + j] = dcv * T(4) * i * (sg - sg * sg);
      out[3 * d + j] = dhv * tcv * (og - og * og);
      dcp[o + j] = dcv * f;
    }
    T* target = dt + row_t[kb] * G;
    for (int64_t j = 0; j < G; ++j) target[j] += out[j];
  }
}

// Sequences are independent and so are the models: the loops run model by model and tile by
// tile of TILE sequences, each tile through all its time steps, so that a tile's state, its
// model's weights and the step's gates stay in L1/L2 from one step to the next; each saved
// buffer is written once. Models are spread over torch's threads, each model on one thread (its
// tiles share its weight gradient and its rows of the table's gradient), so the result does
// not depend on the number of threads.
constexpr int64_t TILE = 32;

// body(k, first, n) for each tile: model k's sequences first - k B .. first - k B + n - 1, which
// are rows first .. first + n - 1 of a [K B] slab.
template <typename Body>
void for_each_tile(int64_t K, int64_t B, const Body& body) {
  at::parallel_for(0, K, 1, [&](int64_t k_begin, int64_t k_end) {
    for (int64_t k = k_begin; k < k_end; ++k)
      for (int64_t b0 = 0; b0 < B; b0 += TILE) body(k, k * B + b0, std::min(TILE, B - b0));
  });
}

// The states [S, K, B, d] and their gradient: time-major, or a permuted view of a batch-major
// [K, B, S, d] (the native path writes the states batch-major, the layout the attention and
// the readout read them in, so their products need no copy; the gradient comes back in the same
// layout). Row (t, kb = k B + b) lies at t * st + kb * skb wherever K and B merge into one
// index; a gradient in another layout is copied first (`state_rows`), a buffer for the states
// must be in one of these (`output_rows`).
struct StateRows {
  at::Tensor tensor;
  int64_t st, skb;
};

StateRows state_rows(const at::Tensor& g) {
  const bool rows_contiguous = g.stride(3) == 1 || g.size(3) == 1;
  const bool kb_merges = g.size(1) == 1 || g.size(2) == 1 || g.stride(1) == g.size(2) * g.stride(2);
  if (rows_contiguous && kb_merges)
    return {g, g.stride(0), g.size(2) == 1 ? g.stride(1) : g.stride(2)};
  at::Tensor c = g.contiguous();
  return {c, c.stride(0), c.stride(2)};
}

StateRows output_rows(const at::Tensor& hs, const at::Tensor& rows, int64_t d) {
  const StateRows out = state_rows(hs);
  TORCH_CHECK(hs.device().is_cpu() && hs.dim() == 4 &&
                  hs.sizes() == at::IntArrayRef({rows.size(0), rows.size(1), rows.size(2), d}) &&
                  hs.is_non_overlapping_and_dense() && out.tensor.is_same(hs),
              "the states' buffer must be a CPU tensor [S, K, B, d], time-major or a permuted "
              "batch-major [K, B, S, d], its elements apart");
  return out;
}

// Rows first..first+n-1 of step t of `g` (laid out as `state_rows` says) into out [n, d].
template <typename T>
void copy_state_rows(const T* g, int64_t st, int64_t skb, int64_t t, int64_t first, int64_t n,
                     int64_t d, T* __restrict__ out) {
  const T* from = g + t * st + first * skb;
  if (skb == d) {
    std::memcpy(out, from, n * d * sizeof(T));
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * d, from + i * skb, d * sizeof(T));
}

// The LSTM cell on n rows whose gate pre-activations (x W_ih + b + h W_hh) are in a [n, G];
// row r of h at h + r ldh.
template <typename T>
void lstm_cell_forward(T* __restrict__ a, const T* __restrict__ c2_prev, T* __restrict__ c2,
                       T* __restrict__ tc, T* __restrict__ h, int64_t ldh, int64_t n,
                       int64_t G) {
  const int64_t d = G / 4;
  for (int64_t r = 0; r < n; ++r) {
    T* g = a + r * G;
    for (int64_t j = 0; j < G; ++j) g[j] = sigmoid(g[j]);
    const int64_t o = r * d;
    for (int64_t j = 0; j < d; ++j) {
      const T i = g[j], f = g[d + j], sg = g[2 * d + j], og = g[3 * d + j];
      const T c = f * c2_prev[o + j] + T(4) * i * sg - T(2) * i;  // 2 c_t
      const T tanh_c = T(2) * sigmoid(c) - T(1);
      c2[o + j] = c;
      tc[o + j] = tanh_c;
      h[r * ldh + j] = og * tanh_c;
    }
  }
}

// `save`: write every step's activations into acts, c2s and tcs ([S, K, B, ...], for the
// backward); otherwise (`lstm_states`: no gradient wanted, an evaluation) they live in a tile's
// scratch, c2s is [K, B, d] and receives the last step's 2 c, tcs is unused, and only the states
// reach memory: a seventh of the bytes, the same arithmetic in the same order.
template <typename T>
void lstm_forward_impl(const at::Tensor& table2, const at::Tensor& rows, const at::Tensor& w2,
                       const at::Tensor& h0, const at::Tensor& c0, at::Tensor& acts,
                       at::Tensor& c2s, at::Tensor& tcs, const StateRows& hs, bool save) {
  const int64_t S = rows.size(0), K = rows.size(1), B = rows.size(2);
  const int64_t G = table2.size(1), d = G / 4, KB = K * B;
  const int64_t hst = hs.st, hskb = hs.skb;
  const T* table = table2.data_ptr<T>();
  const int64_t* row = rows.data_ptr<int64_t>();
  const T* w = w2.data_ptr<T>();
  const at::Tensor c2_start_t = c0 * 2;
  const T *h_start = h0.data_ptr<T>(), *c2_start = c2_start_t.data_ptr<T>();
  T *a = save ? acts.data_ptr<T>() : nullptr, *c2 = c2s.data_ptr<T>();
  T* tc = save ? tcs.data_ptr<T>() : nullptr;
  T* h = hs.tensor.data_ptr<T>();
  for_each_tile(K, B, [&](int64_t k, int64_t first, int64_t n) {
    const T* wk = w + k * d * G;  // [d, G d]
    const T* inputs[TILE];
    // without `save`: one step's gates and tanh c, and 2 c of this step and the one before
    std::vector<T> a_tile(save ? 0 : n * G), tc_tile(save ? 0 : n * d);
    std::vector<T> c2_tile(save ? 0 : 2 * n * d);
    for (int64_t t = 0; t < S; ++t) {
      const int64_t now = t * KB + first, before = (t - 1) * KB + first;
      T* at_ = save ? a + now * G : a_tile.data();
      for (int64_t r = 0; r < n; ++r) inputs[r] = table + row[now + r] * G;  // x W_ih + b
      const T* h_prev = t == 0 ? h_start + first * d : h + (t - 1) * hst + first * hskb;
      gemm_acc<T>(n, h_prev, t == 0 ? d : hskb, 1, wk, d, G, at_, G,
                  inputs);  // x W_ih + b + h_{t-1} W_hh
      const T* c2_prev = t == 0 ? c2_start + first * d
                                : (save ? c2 + before * d : c2_tile.data() + (t - 1) % 2 * n * d);
      T* c2_now = save ? c2 + now * d
                       : (t == S - 1 ? c2 + first * d : c2_tile.data() + t % 2 * n * d);
      lstm_cell_forward<T>(at_, c2_prev, c2_now, save ? tc + now * d : tc_tile.data(),
                           h + t * hst + first * hskb, hskb, n, G);
    }
  });
}

template <typename T>
std::vector<at::Tensor> lstm_backward_impl(const at::Tensor& rows, const at::Tensor& w_hh,
                                           const at::Tensor& h0, const at::Tensor& c0,
                                           const at::Tensor& acts, const at::Tensor& c2s,
                                           const at::Tensor& tcs, const StateRows& hs,
                                           const StateRows& grad_hs, const at::Tensor& dc_in,
                                           at::Tensor& d_table) {
  const int64_t S = rows.size(0), K = rows.size(1), B = rows.size(2);
  const int64_t G = acts.size(3), d = G / 4, KB = K * B;
  const at::Tensor w_t = w_hh.transpose(1, 2).contiguous();  // [K, G d, d]
  at::Tensor d_w = at::zeros_like(w_hh);
  at::Tensor dh0 = at::empty_like(h0);
  at::Tensor dc = dc_in.clone();
  const at::Tensor c2_start_t = c0 * 2;
  const int64_t* row = rows.data_ptr<int64_t>();
  const T *a = acts.data_ptr<T>(), *c2 = c2s.data_ptr<T>(), *tc = tcs.data_ptr<T>();
  const T *h = hs.tensor.data_ptr<T>(), *gh = grad_hs.tensor.data_ptr<T>();
  const T* wt = w_t.data_ptr<T>();
  const int64_t gst = grad_hs.st, gskb = grad_hs.skb, hst = hs.st, hskb = hs.skb;
  const T *h_start = h0.data_ptr<T>(), *c2_start = c2_start_t.data_ptr<T>();
  T *dt = d_table.data_ptr<T>(), *dw = d_w.data_ptr<T>(), *dcp = dc.data_ptr<T>();
  T* dh0p = dh0.data_ptr<T>();
  for_each_tile(K, B, [&](int64_t k, int64_t first, int64_t n) {
    const T* wtk = wt + k * G * d;  // [G d, d]
    T* dwk = dw + k * d * G;        // [d, G d]
    std::vector<T> dg(n * G), dh(n * d);
    copy_state_rows(gh, gst, gskb, S - 1, first, n, d, dh.data());
    for (int64_t t = S - 1; t >= 0; --t) {
      const int64_t now = t * KB + first, before = (t - 1) * KB + first;
      lstm_step_backward<T>(a + now * G, tc + now * d,
                            t == 0 ? c2_start + first * d : c2 + before * d, dh.data(),
                            dcp + first * d, dg.data(), dt, row + now, n, G);
      const T* h_prev = t == 0 ? h_start + first * d : h + (t - 1) * hst + first * hskb;
      gemm_acc<T>(d, h_prev, 1, t == 0 ? d : hskb, dg.data(), n, G, dwk,
                  G);  // dW_hh += h_{t-1}^T dg
      T* dh_prev = t == 0 ? dh0p + first * d : dh.data();
      if (t == 0) {
        std::memset(dh_prev, 0, n * d * sizeof(T));
      } else {
        copy_state_rows(gh, gst, gskb, t - 1, first, n, d, dh_prev);
      }
      gemm_acc<T>(n, dg.data(), G, 1, wtk, G, d, dh_prev, d);  // += dg W_hh^T
    }
  });
  return {d_w, dh0, dc};
}

// ---------------------------------------------------------------------------------------------
// GRU. hps = W_hh h + b_hh (n part doubled); rz = sigmoid(r, z); ns = n; hs = h. One step's
// elementwise pass is a function of its own, as the LSTM's (restrict on parameters).
template <typename T>
void gru_step_forward(const T* __restrict__ table, const int64_t* __restrict__ row_t,
                      const T* __restrict__ hp, const T* __restrict__ h_prev, int64_t ldp,
                      T* __restrict__ rzp, T* __restrict__ n, T* __restrict__ h, int64_t ldh,
                      int64_t KB, int64_t G) {
  const int64_t d = G / 3;
  for (int64_t kb = 0; kb < KB; ++kb) {
    const T* x = table + row_t[kb] * G;
    const T* p = hp + kb * G;
    T* gates = rzp + kb * 2 * d;
    for (int64_t j = 0; j < 2 * d; ++j) gates[j] = sigmoid(x[j] + p[j]);
    const int64_t o = kb * d;
    for (int64_t j = 0; j < d; ++j) {
      const T r = gates[j], z = gates[d + j];
      const T nv = T(2) * sigmoid(x[2 * d + j] + r * p[2 * d + j]) - T(1);  // tanh
      n[o + j] = nv;
      h[kb * ldh + j] = nv + z * (h_prev[kb * ldp + j] - nv);  // (1 - z) n + z h
    }
  }
}

template <typename T>
void gru_step_backward(const T* __restrict__ gates, const T* __restrict__ n,
                       const T* __restrict__ hp, const T* __restrict__ h_prev, int64_t ldp,
                       const T* __restrict__ g_prev, const T* __restrict__ dhv,
                       T* __restrict__ dhp, T* __restrict__ dt, T* __restrict__ db,
                       T* __restrict__ cr, const int64_t* __restrict__ row_t, int64_t KB,
                       int64_t G) {
  const int64_t d = G / 3;
  for (int64_t kb = 0; kb < KB; ++kb) {
    const T* gr = gates + kb * 2 * d;
    T* out = dhp + kb * G;
    T* target = dt + row_t[kb] * G;
    T* bias = db;  // one model's [G] (a tile lies within one model)
    const int64_t o = kb * d;
    for (int64_t j = 0; j < d; ++j) {
      const T r = gr[j], z = gr[d + j], nv = n[o + j], dhj = dhv[o + j];
      const T hn = hp[kb * G + 2 * d + j] * T(0.5);  // W_hn h + b_hn
      const T dn = dhj * (T(1) - z) * (T(1) - nv * nv);  // n's pre-activation
      const T dz = dhj * (h_prev[kb * ldp + j] - nv) * (z - z * z);
      const T dr = dn * hn * (r - r * r);
      out[j] = dr;
      out[d + j] = dz;
      out[2 * d + j] = dn * r;  // gradient of W_hh h + b_hh
      target[j] += dr;
      target[d + j] += dz;
      target[2 * d + j] += dn;
      bias[j] += dr;
      bias[d + j] += dz;
      bias[2 * d + j] += dn * r;
      cr[o + j] = (g_prev ? g_prev[o + j] : T(0)) + dhj * z;
    }
  }
}

template <typename T>
void gru_forward_impl(const at::Tensor& table2, const at::Tensor& rows, const at::Tensor& w2,
                      const at::Tensor& b2, const at::Tensor& h0, at::Tensor& hps,
                      at::Tensor& rz, at::Tensor& ns, const StateRows& hs) {
  const int64_t S = rows.size(0), K = rows.size(1), B = rows.size(2);
  const int64_t G = table2.size(1), d = G / 3, KB = K * B;
  const int64_t hst = hs.st, hskb = hs.skb;
  const at::Tensor bias_t = b2.reshape({K, G}).contiguous();
  const T *table = table2.data_ptr<T>(), *w = w2.data_ptr<T>(), *bias = bias_t.data_ptr<T>();
  const int64_t* row = rows.data_ptr<int64_t>();
  const T* h_start = h0.data_ptr<T>();
  T *hp = hps.data_ptr<T>(), *rzp = rz.data_ptr<T>(), *n_ = ns.data_ptr<T>();
  T* h = hs.tensor.data_ptr<T>();
  for_each_tile(K, B, [&](int64_t k, int64_t first, int64_t n) {
    const T* wk = w + k * d * G;  // [d, G d]
    const T* biases[TILE];
    std::fill(biases, biases + TILE, bias + k * G);
    for (int64_t t = 0; t < S; ++t) {
      const int64_t now = t * KB + first;
      T* hp_t = hp + now * G;
      const T* h_prev = t == 0 ? h_start + first * d : h + (t - 1) * hst + first * hskb;
      const int64_t ldp = t == 0 ? d : hskb;
      gemm_acc<T>(n, h_prev, ldp, 1, wk, d, G, hp_t, G, biases);  // b_hh + h_{t-1} W_hh
      gru_step_forward<T>(table, row + now, hp_t, h_prev, ldp, rzp + now * 2 * d,
                          n_ + now * d, h + t * hst + first * hskb, hskb, n, G);
    }
  });
}

template <typename T>
std::vector<at::Tensor> gru_backward_impl(const at::Tensor& rows, const at::Tensor& w_hh,
                                          const at::Tensor& h0, const at::Tensor& rz,
                                          const at::Tensor& ns, const at::Tensor& hps,
                                          const StateRows& hs, const StateRows& grad_hs,
                                          at::Tensor& d_table) {
  const int64_t S = rows.size(0), K = rows.size(1), B = rows.size(2);
  const int64_t d = hs.tensor.size(3), G = 3 * d, KB = K * B;
  const int64_t hst = hs.st, hskb = hs.skb;
  const at::Tensor w_t = w_hh.transpose(1, 2).contiguous();  // [K, 3d, d]
  at::Tensor d_w = at::zeros_like(w_hh);
  at::Tensor d_b = at::zeros({K, G}, hs.tensor.options());
  at::Tensor dh0 = at::empty_like(h0);
  const int64_t* row = rows.data_ptr<int64_t>();
  const T *rzp = rz.data_ptr<T>(), *n_ = ns.data_ptr<T>(), *hp = hps.data_ptr<T>();
  const T *h = hs.tensor.data_ptr<T>(), *gh = grad_hs.tensor.data_ptr<T>();
  const T* wt = w_t.data_ptr<T>();
  const int64_t gst = grad_hs.st, gskb = grad_hs.skb;
  const T* h_start = h0.data_ptr<T>();
  T *dt = d_table.data_ptr<T>(), *dw = d_w.data_ptr<T>(), *db = d_b.data_ptr<T>();
  T* dh0p = dh0.data_ptr<T>();
  for_each_tile(K, B, [&](int64_t k, int64_t first, int64_t n) {
    const T* wtk = wt + k * G * d;  // [3d, d]
    T* dwk = dw + k * d * G;        // [d, 3d]
    std::vector<T> dhp(n * G), dh(n * d), carry(n * d), g_prev(n * d);
    copy_state_rows(gh, gst, gskb, S - 1, first, n, d, dh.data());
    for (int64_t t = S - 1; t >= 0; --t) {
      const int64_t now = t * KB + first;
      const T* h_prev = t == 0 ? h_start + first * d : h + (t - 1) * hst + first * hskb;
      const int64_t ldp = t == 0 ? d : hskb;
      const T* g_before = nullptr;  // the step before's rows of the gradient, [n, d]
      if (t > 0 && gskb == d) {
        g_before = gh + (t - 1) * gst + first * d;  // already rows: read in place
      } else if (t > 0) {
        copy_state_rows(gh, gst, gskb, t - 1, first, n, d, g_prev.data());
        g_before = g_prev.data();
      }
      gru_step_backward<T>(rzp + now * 2 * d, n_ + now * d, hp + now * G, h_prev, ldp,
                           g_before, dh.data(), dhp.data(), dt,
                           db + k * G, carry.data(), row + now, n, G);
      gemm_acc<T>(d, h_prev, 1, ldp, dhp.data(), n, G, dwk, G);  // dW_hh += h_{t-1}^T dhp
      T* dh_prev = t == 0 ? dh0p + first * d : dh.data();
      std::memcpy(dh_prev, carry.data(), n * d * sizeof(T));
      gemm_acc<T>(n, dhp.data(), G, 1, wtk, G, d, dh_prev, d);  // += dhp W_hh^T
    }
  });
  return {d_w, d_b, dh0};
}

void check(const at::Tensor& x, const char* name) {
  TORCH_CHECK(x.device().is_cpu() && x.is_contiguous(), name, " must be a contiguous CPU tensor");
}

}  // namespace

void lstm_forward(at::Tensor table2, at::Tensor rows, at::Tensor w2, at::Tensor h0,
                  at::Tensor c0, at::Tensor acts, at::Tensor c2s, at::Tensor tcs, at::Tensor hs) {
  table2 = table2.contiguous(), rows = rows.contiguous(), w2 = w2.contiguous();
  h0 = h0.contiguous(), c0 = c0.contiguous();
  for (auto* x : {&acts, &c2s, &tcs}) check(*x, "a buffer");
  const StateRows states = output_rows(hs, rows, table2.size(1) / 4);
  AT_DISPATCH_FLOATING_TYPES(table2.scalar_type(), "lstm_forward", [&] {
    lstm_forward_impl<scalar_t>(table2, rows, w2, h0, c0, acts, c2s, tcs, states, true);
  });
}

at::Tensor lstm_states(at::Tensor table2, at::Tensor rows, at::Tensor w2, at::Tensor h0,
                       at::Tensor c0, at::Tensor hs) {
  table2 = table2.contiguous(), rows = rows.contiguous(), w2 = w2.contiguous();
  h0 = h0.contiguous(), c0 = c0.contiguous();
  const StateRows states = output_rows(hs, rows, table2.size(1) / 4);
  if (rows.size(0) == 0) return c0 * 2;  // no steps: the state it started from
  at::Tensor c2_last = at::empty({rows.size(1), rows.size(2), table2.size(1) / 4},
                                 table2.options());
  at::Tensor none;
  AT_DISPATCH_FLOATING_TYPES(table2.scalar_type(), "lstm_states", [&] {
    lstm_forward_impl<scalar_t>(table2, rows, w2, h0, c0, none, c2_last, none, states, false);
  });
  return c2_last;
}

std::vector<at::Tensor> lstm_backward(at::Tensor rows, at::Tensor w_hh, at::Tensor h0,
                                      at::Tensor c0, at::Tensor acts, at::Tensor c2s,
                                      at::Tensor tcs, at::Tensor hs, at::Tensor grad_hs,
                                      at::Tensor dc, at::Tensor d_table) {
  rows = rows.contiguous(), h0 = h0.contiguous(), c0 = c0.contiguous();
  dc = dc.contiguous();
  check(d_table, "d_table");
  const StateRows grad_rows = state_rows(grad_hs);
  std::vector<at::Tensor> out;
  AT_DISPATCH_FLOATING_TYPES(acts.scalar_type(), "lstm_backward", [&] {
    out = lstm_backward_impl<scalar_t>(rows, w_hh, h0, c0, acts, c2s, tcs, state_rows(hs),
                                       grad_rows, dc, d_table);
  });
  return out;
}

void gru_forward(at::Tensor table2, at::Tensor rows, at::Tensor w2, at::Tensor b2,
                 at::Tensor h0, at::Tensor hps, at::Tensor rz, at::Tensor ns, at::Tensor hs) {
  table2 = table2.contiguous(), rows = rows.contiguous(), w2 = w2.contiguous();
  h0 = h0.contiguous();
  for (auto* x : {&hps, &rz, &ns}) check(*x, "a buffer");
  const StateRows states = output_rows(hs, rows, table2.size(1) / 3);
  AT_DISPATCH_FLOATING_TYPES(table2.scalar_type(), "gru_forward", [&] {
    gru_forward_impl<scalar_t>(table2, rows, w2, b2, h0, hps, rz, ns, states);
  });
}

std::vector<at::Tensor> gru_backward(at::Tensor rows, at::Tensor w_hh, at::Tensor h0,
                                     at::Tensor rz, at::Tensor ns, at::Tensor hps, at::Tensor hs,
                                     at::Tensor grad_hs, at::Tensor d_table) {
  rows = rows.contiguous(), h0 = h0.contiguous();
  check(d_table, "d_table");
  const StateRows grad_rows = state_rows(grad_hs);
  std::vector<at::Tensor> out;
  AT_DISPATCH_FLOATING_TYPES(hs.scalar_type(), "gru_backward", [&] {
    out = gru_backward_impl<scalar_t>(rows, w_hh, h0, rz, ns, hps, state_rows(hs), grad_rows,
                                      d_table);
  });
  return out;
}

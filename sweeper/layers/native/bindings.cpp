// The Python module of the native kernels: the fused recurrences (recurrence.cpp), attention
// per sequence (attention.cpp), the sigmoid readout and its loss (readout.cpp) and the copy
// family's KTIW probe (probes.cpp).
#include <torch/extension.h>

#include <vector>

void lstm_forward(at::Tensor table2, at::Tensor rows, at::Tensor w2, at::Tensor h0,
                  at::Tensor c0, at::Tensor acts, at::Tensor c2s, at::Tensor tcs, at::Tensor hs);
at::Tensor lstm_states(at::Tensor table2, at::Tensor rows, at::Tensor w2, at::Tensor h0,
                       at::Tensor c0, at::Tensor hs);
std::vector<at::Tensor> lstm_backward(at::Tensor rows, at::Tensor w_hh, at::Tensor h0,
                                      at::Tensor c0, at::Tensor acts, at::Tensor c2s,
                                      at::Tensor tcs, at::Tensor hs, at::Tensor grad_hs,
                                      at::Tensor dc, at::Tensor d_table);
void gru_forward(at::Tensor table2, at::Tensor rows, at::Tensor w2, at::Tensor b2,
                 at::Tensor h0, at::Tensor hps, at::Tensor rz, at::Tensor ns, at::Tensor hs);
std::vector<at::Tensor> gru_backward(at::Tensor rows, at::Tensor w_hh, at::Tensor h0,
                                     at::Tensor rz, at::Tensor ns, at::Tensor hps, at::Tensor hs,
                                     at::Tensor grad_hs, at::Tensor d_table);
std::vector<at::Tensor> attention_forward(at::Tensor query, at::Tensor keys);
at::Tensor attention_backward(at::Tensor query, at::Tensor keys, at::Tensor attn,
                              at::Tensor d_mixed, c10::optional<at::Tensor> grad_attn,
                              at::Tensor d_keys);
std::vector<at::Tensor> readout_nll_forward(at::Tensor pre, at::Tensor w_out, at::Tensor b_out,
                                            at::Tensor target);
std::vector<at::Tensor> readout_scores(at::Tensor pre, at::Tensor w_out, at::Tensor b_out,
                                       at::Tensor target);
std::vector<at::Tensor> readout_nll_backward(at::Tensor grad, at::Tensor u, at::Tensor lse,
                                             at::Tensor w_out, at::Tensor b_out,
                                             at::Tensor target);
at::Tensor argmax_hits(at::Tensor x, at::Tensor index);
at::Tensor ktiw_hits(at::Tensor dec_part, at::Tensor ctx_part, at::Tensor w_out, at::Tensor b_out,
                     at::Tensor target);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("lstm_forward", &lstm_forward, "fused LSTM forward (writes the buffers)");
  m.def("lstm_states", &lstm_states, "fused LSTM forward, states only -> the last 2 c");
  m.def("lstm_backward", &lstm_backward, "fused LSTM backward -> d_w, dh0, dc0");
  m.def("gru_forward", &gru_forward, "fused GRU forward (writes the buffers)");
  m.def("attention_forward", &attention_forward, "softmax(q k^T) and its mixture of k");
  m.def("attention_backward", &attention_backward, "-> d_query (d_keys written in place)");
  m.def("readout_nll_forward", &readout_nll_forward, "-> nll, u, lse (readout.cpp)");
  m.def("readout_scores", &readout_scores, "-> nll, hits (argmax == target), no gradient");
  m.def("readout_nll_backward", &readout_nll_backward, "-> d_pre, d_w, d_b");
  m.def("ktiw_hits", &ktiw_hits, "KTIW probe hits [K, B, T] (probes.cpp)");
  m.def("argmax_hits", &argmax_hits, "argmax of x [N, R, C] over C == index [R] (probes.cpp)");
  m.def("gru_backward", &gru_backward, "fused GRU backward -> d_w, d_b, dh0");
}

"""LSTM and GRU recurrences for K packed models, with hand-written backward passes.

Two implementations of the same loops: the fused native ones (sweeper/layers/native, C++: each
step of a tile of sequences one pass, the W_hh product accumulated in registers into the gates
and the cell applied while they are in cache; built on first use) and the TorchScript ones
below, the reference path, used where the native ones cannot be built or with SWEEPER_NATIVE=0.

    states, c_last = lstm_rows(table, rows, w_hh, h0, c0)  # input (t, k, b): table[rows[t, k, b]]
    states = gru_rows(table, rows, w_hh, b_hh, h0)
    states, c_last = lstm(x, w_hh, h0, c0)                 # the same, inputs x [S, K, B, G d]

Time-major: rows [S, K, B], states [S, K, B, d] (from the native loops a view of batch-major
memory, [K, B, S, d] contiguous: `_states_buffer`). `table` holds the input projections
(x W_ih + b_ih, plus b_hh for LSTM): for a token input it is the projected embedding table, V
rows per model, so the projection of the B S inputs is a row lookup. The formulas are
torch.nn.LSTM's and nn.GRU's (gate order i, f, g, o and r, z, n); tests/test_models.py checks
them against those modules and tests/test_fast_paths.py checks the gradients against autograd.

Why a hand-written backward: a width-64 model spends its time on per-op dispatch and on memory
traffic, not on arithmetic. Autograd records ~10 nodes per step, concatenates the four gate
gradients per step (chunk's backward) and sums the small weight gradients step by step. Here:

- the forward loop runs without autograd, ~10 ops a step, writing each step's activations once;
- the backward loop works on one step's slab at a time ([K, B, G d], cache-resident for the pack
  sizes used on CPU), and accumulates there what full-sequence passes would otherwise stream
  through memory: the weight gradient (dW_hh += h_{t-1}^T dgates_t, one bmm) and the gradient
  of the input table (index_add of dgates_t at the step's rows). Measured on the 2-core dev
  machine (DRAM ~7 GB/s for one core): a pass over a [S, K, B, 4d] array costs about as much as
  the step's matmuls once it no longer fits in the 1 MB L2, so the code avoids such passes.

tanh(x) is computed as 2 sigmoid(2x) - 1 (the same function; rounding differs by about one unit
in the last place): torch's float32 tanh runs about 4x slower than its sigmoid on this machine's
AVX2 build. The factor 2 is folded into the g (LSTM) and n (GRU) columns of the weights and the
table, so one sigmoid call activates all gates of a step.
"""

from __future__ import annotations

import warnings

import torch

from sweeper.layers import native


def fast_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = 2 sigmoid(2x) - 1; differentiable (autograd)."""
    return torch.sigmoid(2 * x) * 2 - 1


def _gate_scale(like: torch.Tensor, gates: int, d: int) -> torch.Tensor:
    """[G d] column scale: 2 on the columns of the gate that goes through tanh (the third: g of
    LSTM's i, f, g, o and n of GRU's r, z, n), 1 elsewhere."""
    scale = like.new_ones(gates, d)
    scale[2] = 2.0
    return scale.view(-1)


# The loops are TorchScript functions: the interpreter dispatches each op with a fraction of
# eager Python's overhead (measured: a width-32 LSTM step 144 -> 81 us), which is most of the
# cost at small widths. If scripting fails (a torch without TorchScript) they run eagerly.
def _script(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch 2.13 marks torch.jit.script deprecated
            return torch.jit.script(fn)
    except Exception:  # noqa: BLE001
        return fn


def _lstm_forward(table2: torch.Tensor, rows: torch.Tensor, w2: torch.Tensor, h0: torch.Tensor,
                  c0: torch.Tensor, acts: torch.Tensor, c2s: torch.Tensor, tcs: torch.Tensor,
                  hs: torch.Tensor) -> None:
    # Inside, the cell state is kept doubled (c2 = 2c) and the gates as sigmoids with the g
    # column doubled, so tanh(g) = 2 sg - 1 and tanh(c) = 2 sigmoid(c2) - 1 need no scaling:
    #   c2_t = f c2_{t-1} + 2 i tanh(g) = f c2_{t-1} + 4 i sg - 2 i,  h_t = o (2 sigmoid(c2_t) - 1)
    S, K, B = rows.shape
    G = table2.shape[1]
    h = h0
    c2 = c0 * 2
    for t in range(S):
        a = torch.index_select(table2, 0, rows[t].reshape(-1), out=acts[t].view(K * B, G))
        a = a.view(K, B, G).baddbmm_(h, w2).sigmoid_()  # [K, B, 4d]: i, f, sg, o
        i, f, sg, o = a.chunk(4, dim=-1)
        c2 = torch.addcmul(f * c2, i, sg, value=4, out=c2s[t]).sub_(i, alpha=2)
        tc = torch.sigmoid(c2, out=tcs[t]).mul_(2).sub_(1)
        h = torch.mul(o, tc, out=hs[t])


def _lstm_backward(rows: torch.Tensor, w_hh: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
                   acts: torch.Tensor, c2s: torch.Tensor, tcs: torch.Tensor, hs: torch.Tensor,
                   grad_hs: torch.Tensor, dc: torch.Tensor,
                   d_table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    S, K, B, G = acts.shape
    d = G // 4
    w_t = w_hh.transpose(1, 2).contiguous()  # [K, 4d, d]
    d_w = torch.zeros_like(w_hh)
    dh = grad_hs[S - 1]
    dh0 = torch.zeros_like(h0)
    for t in range(S - 1, -1, -1):
        a, tc = acts[t], tcs[t]
        i, f, sg, o = a.chunk(4, dim=-1)
        c2_prev = c2s[t - 1] if t > 0 else c0 * 2  # 2 c_{t-1}
        h_prev = hs[t - 1] if t > 0 else h0
        dc = torch.addcmul(dc, dh, torch.addcmul(o, o, tc * tc, value=-1))  # += dh o tanh'(c)
        # gate pre-activation gradients: a (1 - a) * [dc tanh g, dc c_{t-1}, 4 dc i, dh tanh c]
        # (4 sg (1 - sg) is tanh'(g) for the doubled g column)
        factor = torch.cat([sg * 2 - 1, c2_prev * 0.5, i * 4, tc], dim=-1)
        factor.mul_(torch.addcmul(a, a, a, value=-1))
        dgates = factor.view(K, B, 4, d).mul_(torch.stack([dc, dc, dc, dh], dim=2)).view(K, B, G)
        dc = dc * f
        d_w.baddbmm_(h_prev.transpose(1, 2), dgates)  # dW_hh += h_{t-1}^T dgates_t
        d_table.index_add_(0, rows[t].reshape(-1), dgates.view(K * B, G))
        if t > 0:
            dh = torch.baddbmm(grad_hs[t - 1], dgates, w_t)
        else:
            dh0 = torch.bmm(dgates, w_t)
    return d_w, dh0, dc


def _gru_forward(table2: torch.Tensor, rows: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor,
                 h0: torch.Tensor, hps: torch.Tensor, rz: torch.Tensor, ns: torch.Tensor,
                 hs: torch.Tensor) -> None:
    S, K, B = rows.shape
    G = table2.shape[1]
    d = G // 3
    h = h0
    for t in range(S):
        x = table2.index_select(0, rows[t].reshape(-1)).view(K, B, G)
        hp = torch.baddbmm(b2, h, w2, out=hps[t])  # [K, B, 3d], n part doubled
        r, z = torch.add(x[:, :, :2 * d], hp[:, :, :2 * d], out=rz[t]).sigmoid_().chunk(2, -1)
        n = torch.addcmul(x[:, :, 2 * d:], r, hp[:, :, 2 * d:], out=ns[t])
        n.sigmoid_().mul_(2).sub_(1)  # tanh
        h = torch.addcmul(n, z, h - n, out=hs[t])  # (1 - z) n + z h


def _gru_backward(rows: torch.Tensor, w_hh: torch.Tensor, h0: torch.Tensor, rz: torch.Tensor,
                  ns: torch.Tensor, hps: torch.Tensor, hs: torch.Tensor, grad_hs: torch.Tensor,
                  d_table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    S, K, B, d = hs.shape
    w_t = w_hh.transpose(1, 2).contiguous()  # [K, 3d, d]
    d_w = torch.zeros_like(w_hh)
    d_b = hs.new_zeros(K, 3 * d)
    dh = grad_hs[S - 1]
    for t in range(S - 1, -1, -1):
        r, z = rz[t].chunk(2, dim=-1)
        n, hn = ns[t], hps[t][:, :, 2 * d:] * 0.5  # hn = W_hn h + b_hn
        h_prev = hs[t - 1] if t > 0 else h0
        dn = dh * (1 - z) * (1 - n * n)  # n pre-activation
        dz = dh * (h_prev - n) * torch.addcmul(z, z, z, value=-1)
        dr = dn * hn * torch.addcmul(r, r, r, value=-1)
        dhp = torch.cat([dr, dz, dn * r], dim=-1)  # gradient of W_hh h + b_hh
        d_w.baddbmm_(h_prev.transpose(1, 2), dhp)
        d_b += dhp.sum(dim=1)
        d_table.index_add_(0, rows[t].reshape(-1),
                           torch.cat([dr, dz, dn], dim=-1).view(K * B, 3 * d))
        carry = dh * z if t == 0 else torch.addcmul(grad_hs[t - 1], dh, z)
        dh = torch.baddbmm(carry, dhp, w_t)
    return d_w, d_b, dh


_lstm_forward, _lstm_backward = _script(_lstm_forward), _script(_lstm_backward)
_gru_forward, _gru_backward = _script(_gru_forward), _script(_gru_backward)


def _states_buffer(like: torch.Tensor, S: int, K: int, B: int, d: int,
                   native_loops: bool) -> torch.Tensor:
    """The states' buffer [S, K, B, d]: time-major for the TorchScript loops (they write
    hs[t]); for the native ones a permuted view of a batch-major [K, B, S, d], the layout the
    attention and the readout read the states in (`Seq2Seq._run` permutes them back: a
    contiguous tensor, so their products need no copy of it)."""
    if not native_loops:
        return like.new_empty(S, K, B, d)
    return like.new_empty(K, B, S, d).permute(2, 0, 1, 3)


def _loops(reference: bool):
    """The loops to run: the fused native ones (sweeper.layers.native) when they are built and
    the caller does not ask for the reference, else the TorchScript ones above. Both fill the
    same buffers with the same values (tests/test_native_kernels.py), the states' in the
    layout `_states_buffer` gives each."""
    ops = None if reference else native.ops()
    if ops is None:
        return _lstm_forward, _lstm_backward, _gru_forward, _gru_backward
    return ops.lstm_forward, ops.lstm_backward, ops.gru_forward, ops.gru_backward


class _LSTM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, rows, w_hh, h0, c0, reference=False):
        S, K, B = rows.shape
        G = table.shape[1]
        scale = _gate_scale(table, 4, G // 4)
        acts = table.new_empty(S, K, B, G)  # sigmoid(i), sigmoid(f), sigmoid(2 g), sigmoid(o)
        c2s, tcs = (table.new_empty(S, K, B, G // 4) for _ in range(2))  # 2c, tanh c
        ctx.loops = _loops(reference)
        hs = _states_buffer(table, S, K, B, G // 4, ctx.loops[0] is not _lstm_forward)
        ctx.loops[0](table * scale, rows, w_hh * scale, h0, c0, acts, c2s, tcs, hs)
        ctx.save_for_backward(rows, w_hh, h0, c0, acts, c2s, tcs, hs)
        ctx.table_shape = table.shape
        return hs, c2s[-1] * 0.5

    @staticmethod
    def backward(ctx, grad_hs, grad_c_last):
        rows, w_hh, h0, c0, acts, c2s, tcs, hs = ctx.saved_tensors
        grad_hs = grad_hs if grad_hs is not None else torch.zeros_like(hs)
        dc = grad_c_last if grad_c_last is not None else torch.zeros_like(c0)
        d_table = acts.new_zeros(ctx.table_shape)
        d_w, dh0, dc0 = ctx.loops[1](rows, w_hh, h0, c0, acts, c2s, tcs, hs, grad_hs, dc,
                                     d_table)
        return d_table, None, d_w, dh0, dc0, None


class _GRU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, rows, w_hh, b_hh, h0, reference=False):
        S, K, B = rows.shape
        G = table.shape[1]
        d = G // 3
        scale = _gate_scale(table, 3, d)
        hps = table.new_empty(S, K, B, G)  # W_hh h + b_hh (n part doubled)
        rz = table.new_empty(S, K, B, 2 * d)  # r, z
        ns = table.new_empty(S, K, B, d)  # n
        ctx.loops = _loops(reference)
        hs = _states_buffer(table, S, K, B, d, ctx.loops[2] is not _gru_forward)  # h
        ctx.loops[2](table * scale, rows, w_hh * scale, (b_hh * scale)[:, None], h0, hps, rz,
                     ns, hs)
        ctx.save_for_backward(rows, w_hh, h0, rz, ns, hps, hs)
        ctx.table_shape = table.shape
        return hs

    @staticmethod
    def backward(ctx, grad_hs):
        rows, w_hh, h0, rz, ns, hps, hs = ctx.saved_tensors
        d_table = hs.new_zeros(ctx.table_shape)
        d_w, d_b, dh0 = ctx.loops[3](rows, w_hh, h0, rz, ns, hps, hs, grad_hs, d_table)
        return d_table, None, d_w, d_b, dh0, None


def lstm_rows(table: torch.Tensor, rows: torch.Tensor, w_hh: torch.Tensor, h0: torch.Tensor,
              c0: torch.Tensor, reference: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """table [R, 4d] (input projections incl. b_ih + b_hh), rows [S, K, B] long, w_hh
    [K, d, 4d], h0, c0 [K, B, d] -> states [S, K, B, d] and the last cell state [K, B, d].
    Different models must read different rows of the table (the native backward accumulates
    each model's table gradient on its own thread). `reference`: the TorchScript loops even
    where the native ones are built. Where no gradient is wanted (an evaluation) the native
    loop keeps the activations only the backward reads in cache (`_lstm_states`)."""
    ops = None if reference else native.ops()
    wants_gradient = torch.is_grad_enabled() and any(
        x.requires_grad for x in (table, w_hh, h0, c0))
    if ops is not None and not wants_gradient:
        return _lstm_states(ops, table, rows, w_hh, h0, c0)
    return _LSTM.apply(table, rows, w_hh, h0, c0, reference)


def _lstm_states(ops, table: torch.Tensor, rows: torch.Tensor, w_hh: torch.Tensor,
                 h0: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`_LSTM.forward`'s values without its saved activations (`lstm_states` in
    recurrence.cpp): the same arithmetic, a seventh of the bytes written."""
    S, K, B = rows.shape
    d = table.shape[1] // 4
    scale = _gate_scale(table, 4, d)
    hs = _states_buffer(table, S, K, B, d, native_loops=True)
    return hs, ops.lstm_states(table * scale, rows, w_hh * scale, h0, c0, hs) * 0.5


def gru_rows(table: torch.Tensor, rows: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor,
             h0: torch.Tensor, reference: bool = False) -> torch.Tensor:
    """table [R, 3d] (input projections incl. b_ih), rows [S, K, B] long, w_hh [K, d, 3d],
    b_hh [K, 3d], h0 [K, B, d] -> states [S, K, B, d]. Different models must read different
    rows of the table (as `lstm_rows`)."""
    return _GRU.apply(table, rows, w_hh, b_hh, h0, reference)


def _identity_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    S, K, B, G = x.shape
    return x.reshape(S * K * B, G), torch.arange(S * K * B, device=x.device).view(S, K, B)


def lstm(x: torch.Tensor, w_hh: torch.Tensor, h0: torch.Tensor,
         c0: torch.Tensor, reference: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x [S, K, B, 4d] (x W_ih + b_ih + b_hh, time-major), w_hh [K, d, 4d], h0, c0 [K, B, d].

    Returns the states [S, K, B, d] and the last cell state [K, B, d].
    """
    return lstm_rows(*_identity_rows(x), w_hh, h0, c0, reference)


def gru(x: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor,
        h0: torch.Tensor, reference: bool = False) -> torch.Tensor:
    """x [S, K, B, 3d] (x W_ih + b_ih, time-major), w_hh [K, d, 3d], b_hh [K, 3d], h0 [K, B, d]
    -> the states [S, K, B, d]."""
    return gru_rows(*_identity_rows(x), w_hh, b_hh, h0, reference)

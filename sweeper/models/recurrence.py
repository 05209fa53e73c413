"""LSTM and GRU recurrences for K packed models, with hand-written backward passes.

    states, c_last = lstm(x, w_hh, h0, c0)        # x [K, B, S, 4d] = input projection + biases
    states = gru(x, w_hh, b_hh, h0)               # x [K, B, S, 3d] = input projection + b_ih

`states` is [K, B, S, d] (h_1 .. h_S). The formulas are torch.nn.LSTM's and nn.GRU's (gate order
i, f, g, o and r, z, n; tests/test_models.py checks them against those modules).

Why not let autograd record the loop: a width-64 model spends most of its time on per-op dispatch
and on what autograd does per step (a node per op, `chunk`'s backward concatenating the four gate
gradients, one small weight-gradient bmm per step summed step by step). Here the forward loop runs
without autograd (about ten ops a step) and the backward loop is five to seven ops a step:

- every factor of the gate derivatives that does not depend on the incoming gradient (sigmoid'
  and tanh' of the stored activations times the other factor of each product) is computed for all
  steps at once, before the loop;
- inside the loop only the truly sequential part remains: dh_t = grad_t + dgates_{t+1} W_hh^T,
  the cell-state chain, and the gate gradients;
- the weight gradient is one bmm over all steps: dW_hh = [h_0 .. h_{S-1}]^T [dgates_1 .. dgates_S].

tanh(x) is computed as 2 sigmoid(2 x) - 1 (the same function; rounding differs by about one unit
in the last place): torch's float32 tanh runs about 4x slower than its sigmoid on this machine's
AVX2 build, and the factor 2 is folded into the g (LSTM) and n (GRU) columns of the weights, so
one sigmoid call activates all gates of a step.
"""

from __future__ import annotations

import torch


def fast_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = 2 sigmoid(2x) - 1; differentiable (autograd)."""
    return torch.sigmoid(2 * x) * 2 - 1


def _gate_scale(x: torch.Tensor, gates: int, tanh_gate: int) -> torch.Tensor:
    """[G d] column scale: 2 on the columns of the gate that goes through tanh, else 1."""
    d = x.shape[-1] // gates
    scale = x.new_ones(gates, d)
    scale[tanh_gate] = 2.0
    return scale.view(-1)


def _shift_in(first: torch.Tensor, seq: torch.Tensor) -> torch.Tensor:
    """[K, B, d], [S, K, B, d] -> [first, seq_0, .., seq_{S-2}] (the previous step's value)."""
    return torch.cat([first[None], seq[:-1]])


# Storage is time-major, [S, K, B, .]: every step reads and writes whole contiguous slabs. (Ops
# with `out=` a strided view, e.g. [K, B, S, d][:, :, t], go through a temporary and a copy.)
class _LSTM(torch.autograd.Function):
    # Inside, the cell state is kept doubled (c2 = 2c) and the gates as sigmoids of the doubled g
    # column, so that tanh(g) = 2 sg - 1 and tanh(c) = 2 sigmoid(c2) - 1 need no extra scaling:
    #   c2_t = f c2_{t-1} + 2 i tanh(g) = f c2_{t-1} + 4 i sg - 2 i,   h_t = o (2 sigmoid(c2_t) - 1)
    @staticmethod
    def forward(ctx, x, w_hh, h0, c0):
        S, K, B, G = x.shape
        d = G // 4
        scale = _gate_scale(x, 4, 2)
        x2, w2 = (x * scale).contiguous(), w_hh * scale  # pre-activations, g columns doubled
        acts = torch.empty_like(x2)  # sigmoid(i), sigmoid(f), sigmoid(2 g), sigmoid(o)
        c2s, tcs, hs = (x.new_empty(S, K, B, d) for _ in range(3))  # 2 c_t, tanh(c_t), h_t
        h, c2 = h0, c0 * 2
        for t in range(S):
            a = torch.baddbmm(x2[t], h, w2, out=acts[t]).sigmoid_()  # [K, B, 4d]
            i, f, sg, o = a.chunk(4, dim=-1)
            c2 = torch.addcmul(f * c2, i, sg, value=4, out=c2s[t]).sub_(i, alpha=2)
            tc = torch.sigmoid(c2, out=tcs[t]).mul_(2).sub_(1)
            h = torch.mul(o, tc, out=hs[t])
        ctx.save_for_backward(w_hh, h0, c0, acts, c2s, tcs, hs)
        return hs, c2s[-1] * 0.5

    @staticmethod
    def backward(ctx, grad_hs, grad_c_last):
        w_hh, h0, c0, acts, c2s, tcs, hs = ctx.saved_tensors
        S, K, B, G = acts.shape
        d = G // 4
        i, f, sg, o = acts.chunk(4, dim=-1)  # each [S, K, B, d]
        # Step-independent factors, for all steps at once. With a = the stored sigmoids, the
        # gradient of the gate pre-activations is [dc, dc, dc, dh] * y,
        #   y = a (1 - a) * [tanh(g), c_{t-1}, i, tanh(c_t)] * [1, 1, 4, 1]
        # (tanh'(g) = 4 sg (1 - sg) for g = 2 sg - 1).
        y = torch.cat([sg * 2 - 1, _shift_in(c0 * 2, c2s) * 0.5, i * 4, tcs], dim=-1)
        y.mul_(torch.addcmul(acts, acts, acts, value=-1))
        y = y.view(S, K, B, 4, d)
        dc_from_h = torch.addcmul(o, o, tcs * tcs, value=-1)  # dc_t += dh_t o_t tanh'(c_t)
        dgates = torch.empty_like(acts)
        w_t = w_hh.transpose(1, 2).contiguous()  # [K, 4d, d]
        grad_hs = grad_hs.contiguous() if grad_hs is not None else torch.zeros_like(hs)
        dc = grad_c_last if grad_c_last is not None else torch.zeros_like(c0)
        dh = grad_hs[S - 1]
        for t in range(S - 1, -1, -1):
            dc = torch.addcmul(dc, dh, dc_from_h[t])
            torch.mul(torch.stack([dc, dc, dc, dh], dim=2), y[t],
                      out=dgates[t].view(K, B, 4, d))
            dc = dc * f[t]
            if t > 0:
                dh = torch.baddbmm(grad_hs[t - 1], dgates[t], w_t)
        dh0 = torch.bmm(dgates[0], w_t)
        # dW_hh = sum_t h_{t-1}^T dgates_t, one bmm per model over all steps and sequences
        h_prev = _shift_in(h0, hs).permute(1, 0, 2, 3).reshape(K, S * B, d)
        dw = torch.bmm(h_prev.transpose(1, 2), dgates.permute(1, 0, 2, 3).reshape(K, S * B, G))
        return dgates, dw, dh0, dc


class _GRU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_hh, b_hh, h0):
        S, K, B, G = x.shape
        d = G // 3
        scale = _gate_scale(x, 3, 2)
        x2, w2, b2 = (x * scale).contiguous(), w_hh * scale, (b_hh * scale)[:, None]  # n columns doubled
        hps = torch.empty_like(x2)  # W_hh h + b_hh (n part doubled)
        rz = x.new_empty(S, K, B, 2 * d)  # r, z
        ns, hs = x.new_empty(S, K, B, d), x.new_empty(S, K, B, d)  # n, h
        h = h0
        for t in range(S):
            hp = torch.baddbmm(b2, h, w2, out=hps[t])  # [K, B, 3d]
            r, z = torch.add(x2[t, ..., :2 * d], hp[..., :2 * d], out=rz[t]).sigmoid_().chunk(2, -1)
            n = torch.addcmul(x2[t, ..., 2 * d:], r, hp[..., 2 * d:], out=ns[t])
            n.sigmoid_().mul_(2).sub_(1)  # tanh
            h = torch.addcmul(n, z, h - n, out=hs[t])  # (1 - z) n + z h
        ctx.save_for_backward(w_hh, h0, rz, ns, hps, hs)
        return hs

    @staticmethod
    def backward(ctx, grad_hs):
        w_hh, h0, rz, ns, hps, hs = ctx.saved_tensors
        S, K, B, d = hs.shape
        r, z = rz.chunk(2, dim=-1)
        hn = hps[..., 2 * d:] * 0.5  # W_hn h + b_hn
        # Step-independent factors: (dr, dz, dn) pre-activation = (dh yr, dh yz, dh q);
        # the gradient of W_hh h + b_hh is (dr, dz, dn r).
        q = (1 - z) * (1 - ns * ns)
        yz = (_shift_in(h0, hs) - ns) * z * (1 - z)
        y = torch.cat([q * hn * r * (1 - r), yz, q * r], dim=-1).view(S, K, B, 3, d)
        dhp = torch.empty_like(hps)
        w_t = w_hh.transpose(1, 2).contiguous()  # [K, 3d, d]
        grad_hs = grad_hs.contiguous()
        dhs = torch.empty_like(hs)  # the total gradient of each h_t
        dhs[S - 1] = grad_hs[S - 1]
        for t in range(S - 1, -1, -1):
            torch.mul(dhs[t][:, :, None], y[t], out=dhp[t].view(K, B, 3, d))
            if t > 0:
                carry = torch.addcmul(grad_hs[t - 1], dhs[t], z[t])
                torch.baddbmm(carry, dhp[t], w_t, out=dhs[t - 1])
        dh0 = torch.baddbmm(dhs[0] * z[0], dhp[0], w_t)
        dx = torch.cat([dhp[..., :2 * d], dhs * q], dim=-1)
        h_prev = _shift_in(h0, hs).permute(1, 0, 2, 3).reshape(K, S * B, d)
        dw = torch.bmm(h_prev.transpose(1, 2), dhp.permute(1, 0, 2, 3).reshape(K, S * B, 3 * d))
        return dx, dw, dhp.sum(dim=(0, 2)), dh0


def lstm(x: torch.Tensor, w_hh: torch.Tensor, h0: torch.Tensor,
         c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [S, K, B, 4d] (x W_ih + b_ih + b_hh, time-major), w_hh [K, d, 4d], h0, c0 [K, B, d].

    Returns the states [S, K, B, d] and the last cell state [K, B, d].
    """
    return _LSTM.apply(x, w_hh, h0, c0)


def gru(x: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor,
        h0: torch.Tensor) -> torch.Tensor:
    """x [S, K, B, 3d] (x W_ih + b_ih, time-major), w_hh [K, d, 3d], b_hh [K, 3d], h0 [K, B, d]
    -> the states [S, K, B, d]."""
    return _GRU.apply(x, w_hh, b_hh, h0)

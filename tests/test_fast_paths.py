"""The hand-written fast paths (sweeper.models.recurrence, the topic bag sums) against autograd.

Owned by the throughput work (issue 4): each fast formulation must give the gradients of the
plain one it replaces.
"""

from __future__ import annotations

import pytest
import torch

from sweeper.models import recurrence as R

F64 = torch.float64


def _rand(*shape, gen):
    return torch.randn(*shape, dtype=F64, generator=gen, requires_grad=True)


def _plain_lstm(x, w_hh, h0, c0):
    h, c, out = h0, c0, []
    for t in range(x.shape[0]):
        i, f, g, o = (x[t] + h @ w_hh).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out.append(h)
    return torch.stack(out), c


def _plain_gru(x, w_hh, b_hh, h0):
    h, out = h0, []
    for t in range(x.shape[0]):
        x_r, x_z, x_n = x[t].chunk(3, dim=-1)
        h_r, h_z, h_n = (h @ w_hh + b_hh[:, None]).chunk(3, dim=-1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        h = (1 - z) * n + z * h
        out.append(h)
    return torch.stack(out)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrence_forward_and_gradients_match_autograd_of_the_plain_loop(cell):
    gen = torch.Generator().manual_seed(0)
    K, B, S, d = 2, 3, 5, 4
    G = 4 if cell == "lstm" else 3
    x, w = _rand(S, K, B, G * d, gen=gen), _rand(K, d, G * d, gen=gen)
    h0 = _rand(K, B, d, gen=gen)
    extra = [_rand(K, B, d, gen=gen)] if cell == "lstm" else [_rand(K, G * d, gen=gen)]
    inputs = [x, w, h0, extra[0]] if cell == "lstm" else [x, w, extra[0], h0]
    fast, plain = (R.lstm, _plain_lstm) if cell == "lstm" else (R.gru, _plain_gru)
    ours, theirs = fast(*inputs), plain(*inputs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    weights = [torch.randn(o.shape, dtype=F64, generator=gen) for o in theirs]
    for o, t in zip(ours, theirs):
        torch.testing.assert_close(o, t, rtol=1e-12, atol=1e-12)
    g_ours = torch.autograd.grad(sum((o * v).sum() for o, v in zip(ours, weights)), inputs)
    g_theirs = torch.autograd.grad(sum((o * v).sum() for o, v in zip(theirs, weights)), inputs)
    for a, b in zip(g_ours, g_theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrence_passes_gradcheck(cell):
    gen = torch.Generator().manual_seed(1)
    K, B, S, d = 2, 2, 3, 2
    G = 4 if cell == "lstm" else 3
    x, w = _rand(S, K, B, G * d, gen=gen), _rand(K, d, G * d, gen=gen)
    h0 = _rand(K, B, d, gen=gen)
    if cell == "lstm":
        assert torch.autograd.gradcheck(R.lstm, (x, w, h0, _rand(K, B, d, gen=gen)))
    else:
        assert torch.autograd.gradcheck(R.gru, (x, w, _rand(K, G * d, gen=gen), h0))


def test_fast_tanh_is_tanh():
    x = torch.linspace(-30, 30, 10001, dtype=F64)
    torch.testing.assert_close(R.fast_tanh(x), torch.tanh(x), rtol=0, atol=1e-15)
    x32 = x.float()
    torch.testing.assert_close(R.fast_tanh(x32), torch.tanh(x32), rtol=0, atol=2e-7)

"""The hand-written fast paths (sweeper.layers.recurrence, the topic bag sums) against autograd.

Owned by the throughput work (issue 4): each fast formulation must give the gradients of the
plain one it replaces.
"""

from __future__ import annotations

import functools

import pytest
import torch
from native_helpers import require_native

from sweeper.layers import recurrence as R

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


PATHS = ["native", "reference"]


def _recurrences(path: str):
    """R.lstm and R.gru on one path: the fused native loops or the TorchScript reference."""
    if path == "native":
        require_native()
    reference = path == "reference"
    return (functools.partial(R.lstm, reference=reference),
            functools.partial(R.gru, reference=reference))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrence_forward_and_gradients_match_autograd_of_the_plain_loop(cell, path):
    lstm, gru = _recurrences(path)
    gen = torch.Generator().manual_seed(0)
    K, B, S, d = 2, 3, 5, 4
    G = 4 if cell == "lstm" else 3
    x, w = _rand(S, K, B, G * d, gen=gen), _rand(K, d, G * d, gen=gen)
    h0 = _rand(K, B, d, gen=gen)
    extra = [_rand(K, B, d, gen=gen)] if cell == "lstm" else [_rand(K, G * d, gen=gen)]
    inputs = [x, w, h0, extra[0]] if cell == "lstm" else [x, w, extra[0], h0]
    fast, plain = (lstm, _plain_lstm) if cell == "lstm" else (gru, _plain_gru)
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


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrence_passes_gradcheck(cell, path):
    lstm, gru = _recurrences(path)
    gen = torch.Generator().manual_seed(1)
    K, B, S, d = 2, 2, 3, 2
    G = 4 if cell == "lstm" else 3
    x, w = _rand(S, K, B, G * d, gen=gen), _rand(K, d, G * d, gen=gen)
    h0 = _rand(K, B, d, gen=gen)
    if cell == "lstm":
        assert torch.autograd.gradcheck(lstm, (x, w, h0, _rand(K, B, d, gen=gen)))
    else:
        assert torch.autograd.gradcheck(gru, (x, w, _rand(K, G * d, gen=gen), h0))


def test_fast_tanh_is_tanh():
    x = torch.linspace(-30, 30, 10001, dtype=F64)
    torch.testing.assert_close(R.fast_tanh(x), torch.tanh(x), rtol=0, atol=1e-15)
    x32 = x.float()
    torch.testing.assert_close(R.fast_tanh(x32), torch.tanh(x32), rtol=0, atol=2e-7)


# -- kq-attention: bag sums against the softmax over positions ---------------------------------
def _kq_model(classifier, classes=3, seeds=(0, 1)):
    from sweeper.families.topic.config import KQConfig
    from sweeper.families.topic.model import KQAttention

    model = KQAttention(KQConfig(classifier=classifier, embedding_std=0.5), words=15,
                        classes=classes, seeds=list(seeds), dtype=F64)
    with torch.no_grad():
        model.keys.normal_(generator=torch.Generator().manual_seed(3))
    return model


@pytest.mark.parametrize("classifier,classes", [("fc", 3), ("tc", 3), ("tl", 3), ("tc", 12)])
def test_bag_forward_gives_the_positions_forward_and_its_gradients(classifier, classes):
    from sweeper.families.topic.model import Bags

    model = _kq_model(classifier, classes)
    words = torch.randint(15, (2, 7, 6), generator=torch.Generator().manual_seed(4))
    words[:, 0, 1] = words[:, 0, 0]  # a repeated word in a sentence counts twice
    weights = torch.randn(2, 7, classes, dtype=F64, generator=torch.Generator().manual_seed(5))
    params = [p for p in model.parameters() if p.requires_grad]

    def run(forward):
        logits, attn = forward()
        grads = torch.autograd.grad((logits * weights).sum(), params)
        return logits, attn, grads

    fast = run(lambda: model.forward_bags(Bags(words, 15)))
    plain = run(lambda: model._positions_forward(words))
    torch.testing.assert_close(fast[0], plain[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fast[1], plain[1], rtol=1e-12, atol=1e-12)
    for a, b in zip(fast[2], plain[2]):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_bag_forward_falls_back_when_a_sentence_denominator_underflows():
    model = _kq_model("fc")
    with torch.no_grad():
        model.keys.zero_()
        model.keys[:, 0] = 1e4 * model.query / model.query.norm(dim=-1, keepdim=True) ** 2
    words = torch.tensor([[[0, 1, 2], [3, 4, 5]]] * 2)  # sentence 2 lacks word 0 (score 1e4)
    logits, attn = model(words)
    plain_logits, plain_attn = model._positions_forward(words)
    assert torch.isfinite(logits).all()
    torch.testing.assert_close(logits, plain_logits)
    torch.testing.assert_close(attn, plain_attn)


def test_word_table_passes_gradcheck():
    from sweeper.families.topic.model import _WordTable

    gen = torch.Generator().manual_seed(6)
    embed, keys = _rand(2, 7, 4, gen=gen), _rand(2, 7, 4, gen=gen)
    P, query = _rand(2, 4, 3, gen=gen), torch.randn(2, 4, dtype=F64, generator=gen)
    counts = torch.rand(2, 5, 7, dtype=F64, generator=gen)  # bags: weighted sums over words

    def ratio(e, k, p):  # what the model uses; the table itself depends on the (detached) max
        table = _WordTable.apply(e, k, p, query)
        return (counts @ table[..., :-1]) / (counts @ table[..., -1:])

    assert torch.autograd.gradcheck(ratio, (embed, keys, P))


def test_packed_optimizer_keeps_the_parameters_in_place():
    from sweeper.optim import PackedOptimizer

    model = _kq_model("tl")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = {n: id(p) for n, p in model.named_parameters()}
    PackedOptimizer(list(model.parameters()), torch.ones(2, dtype=F64), "adam")
    for n, p in model.named_parameters():
        assert id(p) == ids[n] and torch.equal(p, before[n]) and p.is_contiguous()

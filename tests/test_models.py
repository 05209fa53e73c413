"""The packed models against torch's own modules and against hand computations."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from sweeper.families.copy.config import Seq2SeqConfig
from sweeper.families.copy.model import Seq2Seq
from sweeper.families.topic.config import KQConfig
from sweeper.families.topic.model import KQAttention
from sweeper.layers.packed import lookup

F64 = torch.float64


def _seq2seq(seeds=(0,), **cfg) -> Seq2Seq:
    return Seq2Seq(Seq2SeqConfig(**{"width": 6, **cfg}), symbols=9, seeds=list(seeds), dtype=F64)


def _torch_rnn(model: Seq2Seq, side: str, k: int) -> nn.Module:
    """An nn.LSTM / nn.GRU holding model k's weights for `side` (ours are stored transposed)."""
    d = model.cfg.width
    cls = nn.LSTM if model.cfg.cell == "lstm" else nn.GRU
    rnn = cls(d, d, batch_first=True, dtype=F64)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(getattr(model, f"{side}_w_ih")[k].T)  # [G d, d]
        rnn.weight_hh_l0.copy_(getattr(model, f"{side}_w_hh")[k].T)
        rnn.bias_ih_l0.copy_(getattr(model, f"{side}_b_ih")[k])
        rnn.bias_hh_l0.copy_(getattr(model, f"{side}_b_hh")[k])
    return rnn


# -- the recurrent cells -----------------------------------------------------------------------
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cell_matches_torch_rnn_from_zero_state(cell):
    model = _seq2seq(seeds=[4, 5], cell=cell)
    x = torch.randn(2, 3, 7, 6, dtype=F64, generator=torch.Generator().manual_seed(0))
    states, final = model._recur(x, "enc", None)
    for k in range(2):
        expected, hidden = _torch_rnn(model, "enc", k)(x[k])
        torch.testing.assert_close(states[k], expected, rtol=1e-12, atol=1e-12)
        if cell == "lstm":
            torch.testing.assert_close(final[0][k], hidden[0][0], rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(final[1][k], hidden[1][0], rtol=1e-12, atol=1e-12)
        else:
            torch.testing.assert_close(final[0][k], hidden[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cell_matches_torch_rnn_from_a_given_state(cell):
    model = _seq2seq(seeds=[1], cell=cell)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 4, 5, 6, dtype=F64, generator=gen)
    h0 = torch.randn(1, 4, 6, dtype=F64, generator=gen)
    c0 = torch.randn(1, 4, 6, dtype=F64, generator=gen)
    state = (h0, c0) if cell == "lstm" else (h0,)
    states, _ = model._recur(x, "dec", state)
    rnn = _torch_rnn(model, "dec", 0)
    expected, _ = rnn(x[0], (h0, c0)) if cell == "lstm" else rnn(x[0], h0)
    torch.testing.assert_close(states[0], expected, rtol=1e-12, atol=1e-12)


# -- the whole forward pass against a reference built from torch modules -----------------------
def _reference_forward(model: Seq2Seq, k: int, src: torch.Tensor, dec_in: torch.Tensor):
    """Model k's logits [B, T, V] and attention [H, B, T, S], written plainly from DESIGN 2.1."""
    cfg = model.cfg
    embed = model.embed[k]
    dec_embed = embed if cfg.shared_embedding else model.dec_embed[k]
    enc_rnn, dec_rnn = _torch_rnn(model, "enc", k), _torch_rnn(model, "dec", k)
    h, state = enc_rnn(embed[src])  # h [B, S, d]
    s, _ = dec_rnn(dec_embed[dec_in], state)  # s [B, T, d]
    attn, contexts = [], []
    for head in range(cfg.heads):
        b_q = model.b_q[k, head] if cfg.projection_bias else 0.0
        b_v = model.b_v[k, head] if cfg.projection_bias else 0.0
        query = s @ model.w_q[k, head] + b_q  # [B, T, d]
        scores = torch.einsum("btd,bsd->bts", query, h)
        if cfg.attention == "uniform":
            scores = torch.zeros_like(scores)
        a = torch.softmax(scores, dim=-1)
        attn.append(a)
        contexts.append(torch.einsum("bts,bsd->btd", a, h) @ model.w_v[k, head] + b_v)
    c = torch.stack(contexts).mean(dim=0)
    hidden = torch.tanh(torch.cat([s, c], dim=-1) @ model.w_c[k] + model.b_c[k])
    return hidden @ model.w_o[k] + model.b_o[k], torch.stack(attn)


@pytest.mark.parametrize("cfg", [
    {"heads": 1}, {"heads": 3}, {"heads": 2, "cell": "gru"}, {"shared_embedding": False},
    {"attention": "uniform", "heads": 2}, {"heads": 2, "projection_bias": False},
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_forward_matches_a_plain_reference_for_every_packed_model(cfg):
    model = _seq2seq(seeds=[0, 1, 2], **cfg)
    gen = torch.Generator().manual_seed(3)
    src = torch.randint(9, (3, 4, 5), generator=gen)
    dec_in = torch.randint(9, (3, 4, 5), generator=gen)
    out = model(src, dec_in)
    assert out.logits.shape == (3, 4, 5, 9)
    for k in range(3):
        logits, attn = _reference_forward(model, k, src[k], dec_in[k])
        torch.testing.assert_close(out.logits[k], logits, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(out.attn[k], attn, rtol=1e-10, atol=1e-10)


def test_packed_model_k_is_the_model_built_alone_from_seed_k():
    pack = _seq2seq(seeds=[7, 8, 9], heads=2)
    alone = _seq2seq(seeds=[8], heads=2)
    for (name, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
        assert torch.equal(p[1], q[0]), name
    src = torch.randint(9, (1, 2, 4), generator=torch.Generator().manual_seed(0))
    packed_out = pack(src.expand(3, -1, -1), src.expand(3, -1, -1))
    # float64 at 1e-12: a wrong model index or init differs at O(1); a batched and an unbatched
    # matmul may round differently (BLAS promises no bitwise equality; AVX-512 kernels do differ)
    torch.testing.assert_close(packed_out.logits[1], alone(src, src).logits[0], rtol=1e-12,
                               atol=1e-12)


def test_init_follows_pytorch_defaults():
    d = 64
    model = Seq2Seq(Seq2SeqConfig(width=d), symbols=50, seeds=[0], dtype=F64)
    assert model.embed.std().item() == pytest.approx(1.0, rel=0.05)  # nn.Embedding: N(0, 1)
    bound = 1 / math.sqrt(d)
    for name in ("enc_w_ih", "enc_w_hh", "dec_b_hh", "w_q", "w_v"):
        value = getattr(model, name)
        assert value.abs().max().item() <= bound
        assert value.abs().max().item() > 0.9 * bound
    assert model.w_c.abs().max().item() <= 1 / math.sqrt(2 * d)  # nn.Linear(2d, d)
    assert model.enc_w_ih.shape == (1, d, 4 * d)
    assert _seq2seq(cell="gru").enc_w_ih.shape == (1, 6, 18)


def test_separate_embeddings_are_used_by_the_decoder_only():
    model = _seq2seq(shared_embedding=False)
    src = torch.randint(9, (1, 2, 4), generator=torch.Generator().manual_seed(0))
    before = model(src, src)
    with torch.no_grad():
        model.dec_embed.add_(1.0)
    after = model(src, src)
    torch.testing.assert_close(after.enc_states, before.enc_states, rtol=0, atol=0)
    assert not torch.allclose(after.dec_states, before.dec_states)


def test_lookup_is_a_per_model_embedding():
    table = torch.randn(3, 5, 2)
    idx = torch.randint(5, (3, 4, 6))
    out = lookup(table, idx)
    for k in range(3):
        assert torch.equal(out[k], table[k][idx[k]])


# -- attention ---------------------------------------------------------------------------------
def test_attention_has_one_distribution_per_head_over_source_positions():
    K, H, B, L = 2, 3, 4, 5
    model = _seq2seq(seeds=range(K), heads=H)
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(9, (K, B, L + 1), generator=gen)
    dec_in = torch.randint(9, (K, B, L + 2), generator=gen)  # T may differ from S
    out = model(src, dec_in)
    assert out.attn.shape == (K, H, B, L + 2, L + 1)
    assert (out.attn >= 0).all()
    torch.testing.assert_close(out.attn.sum(dim=-1), torch.ones(K, H, B, L + 2, dtype=F64))
    assert not torch.allclose(out.attn[:, 0], out.attn[:, 1])  # the heads differ


def test_uniform_attention_is_exactly_one_over_s_everywhere():
    model = _seq2seq(seeds=[0, 1], heads=2, attention="uniform")
    src = torch.randint(9, (2, 3, 7), generator=torch.Generator().manual_seed(0))
    out = model(src, src)
    assert torch.equal(out.attn, torch.full_like(out.attn, 1 / 7))


def test_forcing_uniform_on_a_learned_model_gives_one_over_s_and_the_mean_context():
    model = _seq2seq(seeds=[0], heads=2)
    src = torch.randint(9, (1, 3, 6), generator=torch.Generator().manual_seed(0))
    out = model(src, src, uniform=True)
    assert torch.equal(out.attn, torch.full_like(out.attn, 1 / 6))
    _, ctx = model.attend(out.dec_states, out.enc_states, uniform=True)
    expected = (out.enc_states.mean(dim=2, keepdim=True) @ model.w_v.mean(dim=1)[:, None]
                + model.b_v.mean(dim=1)[:, None, None])
    torch.testing.assert_close(ctx, expected.expand_as(ctx))


def test_one_hot_logits_equal_readout_with_attention_one_hot_on_each_position():
    model = _seq2seq(seeds=[0, 1], heads=3)
    gen = torch.Generator().manual_seed(2)
    src = torch.randint(9, (2, 4, 5), generator=gen)
    out = model(src, torch.randint(9, (2, 4, 5), generator=gen))
    probe = model.one_hot_logits(out)  # [K, B, T, S, V]
    assert probe.shape == (2, 4, 5, 5, 9)
    for l in range(5):
        # every head attends to l alone: context_h = W_v^h h_l + b_v^h, averaged over heads
        per_head = torch.stack([out.enc_states[:, :, l] @ model.w_v[:, h] + model.b_v[:, h, None]
                                for h in range(3)]).mean(dim=0)  # [K, B, d]
        ctx = per_head[:, :, None].expand_as(out.dec_states)
        torch.testing.assert_close(probe[:, :, :, l], model.readout(out.dec_states, ctx))


# -- kq-attention ------------------------------------------------------------------------------
def _kq(seeds=(0,), words=12, classes=3, **cfg) -> KQAttention:
    return KQAttention(KQConfig(**cfg), words, classes, list(seeds), dtype=F64)


def test_kq_init_matches_the_paper():
    model = _kq(seeds=[0, 1], words=500, classes=4)
    assert model.query.shape == (2, 10) and "query" not in dict(model.named_parameters())
    assert torch.equal(model.keys, torch.zeros(2, 500, 10))
    assert model.embed.std().item() == pytest.approx(1e-6, rel=0.1)
    w = model.w_cls  # [K, D, C], fixed for fc
    assert not w.requires_grad
    assert torch.equal(w[:, range(4), range(4)], torch.ones(2, 4, dtype=F64))
    assert model.keys.requires_grad and model.embed.requires_grad
    frozen = _kq(words=500, train_keys=False, train_embeddings=False)
    assert not frozen.keys.requires_grad and not frozen.embed.requires_grad
    assert frozen.embed.std().item() == pytest.approx(0.1, rel=0.1)  # the EF ablation's init
    assert _kq(classifier="tc").w_cls.requires_grad
    tl = _kq(classifier="tl")
    assert {n for n, _ in tl.named_parameters()} == {"embed", "keys", "w_1", "b_1", "w_2", "b_2"}


def test_kq_forward_matches_a_hand_computation():
    model = _kq(seeds=[0, 1], words=12, classes=3, classifier="tl", embedding_std=0.5)
    with torch.no_grad():
        model.keys.normal_(generator=torch.Generator().manual_seed(0))
    words = torch.randint(12, (2, 4, 6), generator=torch.Generator().manual_seed(1))
    logits, attn = model(words)
    for k in range(2):
        for n in range(4):
            s = torch.stack([model.query[k] @ model.keys[k, w] for w in words[k, n]])
            a = torch.softmax(s, dim=0)
            ctx = (a[:, None] * model.embed[k, words[k, n]]).sum(dim=0)
            hidden = torch.relu(ctx @ model.w_1[k] + model.b_1[k])
            torch.testing.assert_close(attn[k, n], a)
            torch.testing.assert_close(logits[k, n], hidden @ model.w_2[k] + model.b_2[k])


def test_kq_zero_keys_give_exactly_uniform_attention_and_the_mean_embedding():
    model = _kq(words=30, classes=4, embedding_std=1.0)
    words = torch.randint(30, (1, 5, 21), generator=torch.Generator().manual_seed(0))
    logits, attn = model(words)
    assert torch.equal(model.scores(), torch.zeros(1, 30, dtype=F64))
    assert torch.equal(attn, torch.full_like(attn, 1 / 21))
    ctx = model.embed[0, words[0]].mean(dim=1)
    torch.testing.assert_close(logits[0], ctx @ model.w_cls[0])

"""`seq2seq`: a one-layer LSTM/GRU encoder-decoder with averaged multiplicative attention heads.

The model of Snell et al. 2021, written for K independent models at once: every parameter has a
leading model dim K, and every op is batched over it, so a pack of K trials is one computation
(K = 1 is a single trial). Shapes use K models, B sequences, S = L+1 source and T = L+1 target
positions, d width, H heads, V symbols, G gates (4 for LSTM, 3 for GRU).

    h_l            = encoder(embed(src))_l                    [K, B, S, d]
    s_t            = decoder(embed(dec_in), start = encoder's final state)  [K, B, T, d]
    a^h_tl         = softmax_l((W_q^h s_t) . h_l)             [K, H, B, T, S]
    c_t            = mean_h W_v^h (sum_l a^h_tl h_l)          [K, B, T, d]
    logits_t       = W_o tanh(W_c [s_t; c_t])                 [K, B, T, V]

`attention: uniform` zeroes the scores (a = 1/S): the KTIW-without-attention model. The cells
follow torch.nn.LSTM / nn.GRU exactly (gate order, two biases) and are tested against them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sweeper.models import MODELS
from sweeper.models import init as I
from sweeper.registry import Param
from sweeper.seeding import generator


@dataclass(frozen=True)
class Seq2SeqConfig:
    width: int = 64
    heads: int = 1
    cell: str = "lstm"
    attention: str = "learned"
    shared_embedding: bool = True

    family = "copy"

    def shape(self) -> tuple:
        return ("seq2seq", self.width, self.heads, self.cell, self.attention,
                self.shared_embedding)


MODELS.register(
    "seq2seq",
    Seq2SeqConfig,
    (
        Param("width", int, 64, "d, width of embeddings and states", low=1, high=8192),
        Param("heads", int, 1, "H, attention heads whose contexts are averaged", low=1, high=256),
        Param("cell", str, "lstm", "recurrent cell", choices=("lstm", "gru")),
        Param("attention", str, "learned", "learned, or uniform (scores zeroed)",
              choices=("learned", "uniform")),
        Param("shared_embedding", bool, True, "encoder and decoder share one embedding"),
    ),
    doc="LSTM/GRU encoder-decoder with H averaged attention heads (Snell et al. 2021).",
)


@dataclass
class Seq2SeqOutput:
    logits: torch.Tensor  # [K, B, T, V]
    attn: torch.Tensor  # [K, H, B, T, S]
    dec_states: torch.Tensor  # [K, B, T, d]
    enc_states: torch.Tensor  # [K, B, S, d]


def lookup(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Per-model embedding lookup: table [K, V, d], idx [K, ...] -> [K, ..., d]."""
    K, V, d = table.shape
    offsets = (torch.arange(K, device=idx.device) * V).view(K, *([1] * (idx.dim() - 1)))
    return F.embedding(idx + offsets, table.reshape(K * V, d))


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per-model x @ w: x [K, ..., i], w [K, i, o] -> [K, ..., o], as one bmm.

    (A broadcasting matmul over the extra dims would expand w per row and make the backward
    pass reduce over that copy: many times slower.)
    """
    K, i = x.shape[0], x.shape[-1]
    return torch.bmm(x.reshape(K, -1, i), w).view(*x.shape[:-1], w.shape[-1])


class Seq2Seq(nn.Module):
    def __init__(self, cfg: Seq2SeqConfig, symbols: int, seeds: list[int],
                 dtype: torch.dtype = torch.float32, device: str = "cpu"):
        super().__init__()
        self.cfg, self.symbols = cfg, symbols
        self.gates = 4 if cfg.cell == "lstm" else 3
        per_model = [self._init_one(generator(s, "init")) for s in seeds]
        for name, value in I.stack(per_model, dtype, device).items():
            self.register_parameter(name, nn.Parameter(value))

    def _init_one(self, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """One model's parameters, as PyTorch's modules would initialise them."""
        d, H, V, G = self.cfg.width, self.cfg.heads, self.symbols, self.gates
        rnn = 1 / math.sqrt(d)
        p = {"embed": I.normal((V, d), 1.0, gen)}
        if not self.cfg.shared_embedding:
            p["dec_embed"] = I.normal((V, d), 1.0, gen)
        for side in ("enc", "dec"):
            p[f"{side}_w_ih"] = I.uniform((d, G * d), rnn, gen)
            p[f"{side}_w_hh"] = I.uniform((d, G * d), rnn, gen)
            p[f"{side}_b_ih"] = I.uniform((G * d,), rnn, gen)
            p[f"{side}_b_hh"] = I.uniform((G * d,), rnn, gen)
        p["w_q"] = I.uniform((H, d, d), rnn, gen)
        p["w_v"] = I.uniform((H, d, d), rnn, gen)
        p["w_c"], p["b_c"] = I.linear(2 * d, d, gen)
        p["w_o"], p["b_o"] = I.linear(d, V, gen)
        return p

    # -- recurrence ------------------------------------------------------------------------
    def _recur(self, x: torch.Tensor, side: str, state: tuple | None) -> tuple:
        """Run one side's cell over x [K, B, S, d]; returns states [K, B, S, d] and final state."""
        K, B, S, d = x.shape
        w_ih, w_hh = getattr(self, f"{side}_w_ih"), getattr(self, f"{side}_w_hh")
        b_ih, b_hh = getattr(self, f"{side}_b_ih"), getattr(self, f"{side}_b_hh")
        x_proj = linear(x, w_ih) + b_ih[:, None, None]  # [K, B, S, G d], all steps at once
        if state is None:
            zeros = x.new_zeros(K, B, d)
            state = (zeros, zeros) if self.cfg.cell == "lstm" else (zeros,)
        outputs = []
        # unbind, not x_proj[:, :, t]: each slice's backward would zero-fill a full-size grad.
        for x_t in x_proj.unbind(dim=2):
            h_proj = torch.baddbmm(b_hh[:, None], state[0], w_hh)  # [K, B, G d]
            state = self._cell(x_t, h_proj, state)
            outputs.append(state[0])
        return torch.stack(outputs, dim=2), state

    def _cell(self, x_proj: torch.Tensor, h_proj: torch.Tensor, state: tuple) -> tuple:
        if self.cfg.cell == "lstm":
            i, f, g, o = (x_proj + h_proj).chunk(4, dim=-1)
            c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c
        x_r, x_z, x_n = x_proj.chunk(3, dim=-1)
        h_r, h_z, h_n = h_proj.chunk(3, dim=-1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        return ((1 - z) * n + z * state[0],)

    # -- attention and readout -------------------------------------------------------------
    def attend(self, dec: torch.Tensor, enc: torch.Tensor, uniform: bool = False) -> tuple:
        """Per-head attention [K, H, B, T, S] and the head-averaged context [K, B, T, d]."""
        K, B, T, d = dec.shape
        S, H = enc.shape[2], self.cfg.heads
        if uniform or self.cfg.attention == "uniform":
            attn = dec.new_full((K, H, B, T, S), 1.0 / S)
        else:
            query = dec.reshape(K, 1, B * T, d) @ self.w_q  # [K, H, B T, d]
            scores = query.view(K, H, B, T, d) @ enc[:, None].transpose(-1, -2)  # [K, H, B, T, S]
            attn = scores.softmax(dim=-1)
        mixed = attn @ enc[:, None]  # [K, H, B, T, d]
        ctx = (mixed.view(K, H, B * T, d) @ self.w_v).mean(dim=1)  # [K, B T, d]
        return attn, ctx.view(K, B, T, d)

    def readout(self, dec: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """W_o tanh(W_c [s; c]) for any leading shape [K, ..., d] -> [K, ..., V]."""
        d = self.cfg.width
        bias = (dec.shape[0],) + (1,) * (dec.dim() - 2)  # [K, 1, ..., 1]
        hidden = torch.tanh(linear(dec, self.w_c[:, :d]) + linear(ctx, self.w_c[:, d:])
                            + self.b_c.view(*bias, d))
        return linear(hidden, self.w_o) + self.b_o.view(*bias, -1)

    def forward(self, src: torch.Tensor, dec_in: torch.Tensor,
                uniform: bool = False) -> Seq2SeqOutput:
        """src [K, B, S], dec_in [K, B, T] (teacher forcing) -> logits and attention."""
        enc, state = self._recur(lookup(self.embed, src), "enc", None)  # [K, B, S, d]
        dec_table = self.embed if self.cfg.shared_embedding else self.dec_embed
        dec, _ = self._recur(lookup(dec_table, dec_in), "dec", state)  # [K, B, T, d]
        attn, ctx = self.attend(dec, enc, uniform)
        return Seq2SeqOutput(self.readout(dec, ctx), attn, dec, enc)

    def one_hot_logits(self, out: Seq2SeqOutput) -> torch.Tensor:
        """Logits [K, B, T, S, V] at each decoder step t if attention were one-hot on source l.

        With one-hot attention on l every head's context is W_v^h h_l, so the averaged context
        is (mean_h W_v^h) h_l. This is the KTIW probe's view of what each input word translates to.
        """
        w_v = self.w_v.mean(dim=1)  # [K, d, d]
        ctx = out.enc_states @ w_v[:, None]  # [K, B, S, d]
        return self.readout(out.dec_states[:, :, :, None, :], ctx[:, :, None, :, :])

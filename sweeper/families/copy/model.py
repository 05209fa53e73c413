"""`seq2seq`: a one-layer LSTM/GRU encoder-decoder with averaged multiplicative attention heads.

The model of Snell et al. 2021, written for K independent models at once: every parameter has a
leading model dim K, and every op is batched over it, so a pack of K trials is one computation
(K = 1 is a single trial). Shapes use K models, B sequences, S = L+1 source and T = L+1 target
positions, d width, H heads, V symbols, G gates (4 for LSTM, 3 for GRU).

    h_l            = encoder(embed(src))_l                    [K, B, S, d]
    s_t            = decoder(embed(dec_in), start = encoder's final state)  [K, B, T, d]
    a^h_tl         = softmax_l((W_q^h s_t + b_q^h) . h_l)     [K, H, B, T, S]
    c_t            = mean_h (W_v^h (sum_l a^h_tl h_l) + b_v^h)   [K, B, T, d]
                     (sum_h with `head_merge: sum`)
    logits_t       = W_o tanh(W_c [s_t; c_t] + b_c) + b_o     [K, B, T, V]

The query and value projections have biases as in the papers' code (nn.Linear;
`projection_bias: false` drops them). The output bias starts at the log of each class's target
frequency under the task (`output_bias: log_frequency`), so that classes the data never or
rarely asks for do not hold the initial probability (see `Seq2Seq._bias_at_log_frequency`).

Initialisation (`_init_one`). By default (`base_seed` and `head_seeds` null) one stream per
trial seed draws every parameter in a fixed order, heads between the RNNs and the readout, so a
one-head and a four-head model at one seed share the embeddings, RNNs and head 0's W_q but not
the rest. With either set, the base network (embeddings, RNNs, W_c, b_c, W_o, b_o) comes from
one stream, seeded by `base_seed` (or the trial seed when null), and each head's W_q, W_v, b_q,
b_v from a stream of its own: head seed s gives the same head in any H-head model, at any
position. With `head_seeds` null (and `base_seed` set) head h comes from the trial seed's own
stream for position h, so heads vary with the trial seed as the data do, and head h is the same
at every H > h. The trial seed always drives the data.

`attention: uniform` zeroes the scores (a = 1/S): the KTIW-without-attention model. The cells
follow torch.nn.LSTM / nn.GRU exactly (gate order, two biases) and are tested against them.

Where the computation differs from the formulas above, for speed (docs/performance.md), with the
same values up to rounding:
- the input projection is applied to the V-row embedding table, not to the B S looked-up rows
  (`_embed_recur`);
- the recurrence is sweeper.layers.recurrence: a TorchScript loop with a hand-written backward;
- the heads are laid out next to the decoder steps so that all heads' scores are one product
  per sequence (`attend`: sweeper.layers.attention, one native pass per sequence), and the
  mean over heads is folded into W_v; biases are the products' starting values (`linear`);
- tanh is 2 sigmoid(2x) - 1, with the factor 2 folded into the small weights (`readout`);
- training computes its loss without the logits (`token_nll`: sweeper.layers.readout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sweeper.families.copy.config import Seq2SeqConfig
from sweeper.layers import init as I
from sweeper.layers import native
from sweeper.layers import recurrence as R
from sweeper.layers.attention import attention
from sweeper.layers.packed import linear
from sweeper.layers.readout import sigmoid_readout_nll, sigmoid_readout_scores
from sweeper.seeding import generator


@dataclass
class Seq2SeqOutput:
    logits: torch.Tensor | None  # [K, B, T, V]; None where only states are wanted (a probe)
    attn: torch.Tensor  # [K, H, B, T, S]
    dec_states: torch.Tensor  # [K, B, T, d]
    enc_states: torch.Tensor  # [K, B, S, d]


NEVER_TARGET = 1e-4  # the frequency a class that is never a target starts at


class Seq2Seq(nn.Module):
    def __init__(self, cfg: Seq2SeqConfig, symbols: int | list[int], seeds: list[int],
                 dtype: torch.dtype = torch.float32, device: str = "cpu",
                 target_frequencies: torch.Tensor | None = None,
                 inits: list[Seq2SeqConfig] | None = None):
        """`symbols`: the vocabulary size V, or one per model (V_k) when a pack mixes them.
        `target_frequencies` [K, V]: each output class's share of the targets under each
        model's task, for `output_bias: log_frequency` (without them, nn.Linear's init).
        `inits`: each model's own config when a pack's differ in values that are not shapes
        (`base_seed`, `head_seeds`; default: `cfg` for every model)."""
        super().__init__()
        per_symbols = symbols if isinstance(symbols, list) else [symbols] * len(seeds)
        self.cfg, self.symbols = cfg, max(per_symbols)
        self.gates = 4 if cfg.cell == "lstm" else 3
        inits = inits or [cfg] * len(seeds)
        per_model = [self._pad(self._init_one(s, v, c), v)
                     for s, v, c in zip(seeds, per_symbols, inits)]
        for name, value in I.stack(per_model, dtype, device).items():
            self.register_parameter(name, nn.Parameter(value))
        # 0 for each model's own symbols, -inf past them: a padded symbol is never predicted,
        # its softmax weight is exactly 0, so its rows and columns get no gradient and stay 0.
        mask = torch.zeros(len(seeds), self.symbols, dtype=dtype, device=device)
        for k, v in enumerate(per_symbols):
            mask[k, v:] = float("-inf")
        self.register_buffer("logit_mask", mask if min(per_symbols) < self.symbols else None)
        if cfg.output_bias == "log_frequency" and target_frequencies is not None:
            self._bias_at_log_frequency(target_frequencies, per_symbols)

    @torch.no_grad()
    def _bias_at_log_frequency(self, freq: torch.Tensor, per_symbols: list[int]) -> None:
        """b_o = log of each class's target frequency (never-targets at log NEVER_TARGET).

        With nn.Linear's init, classes the data never asks for hold most of the probability
        at the start, and Adam removes it through the shared tanh layer before the bias moves,
        saturating it and starving attention of gradient (the hardness artefact: c = 1, h = 1
        learned 0/16 against 11/16 at c = 0 on the same data). Starting at the data's class
        prior removes it (docs/results.md).
        """
        for k, v in enumerate(per_symbols):
            prior = freq[k, :v].to(self.b_o).clamp(min=NEVER_TARGET)
            self.b_o[k, :v] = prior.log()

    def _pad(self, p: dict[str, torch.Tensor], symbols: int) -> dict[str, torch.Tensor]:
        """One model's parameters padded with zeros from its V_k symbols to the pack's V."""
        extra = self.symbols - symbols
        if extra:
            for name in ("embed", "dec_embed"):
                if name in p:
                    p[name] = F.pad(p[name], (0, 0, 0, extra))
            p["w_o"], p["b_o"] = F.pad(p["w_o"], (0, extra)), F.pad(p["b_o"], (0, extra))
        return p

    def _init_one(self, seed: int, V: int, cfg: Seq2SeqConfig) -> dict[str, torch.Tensor]:
        """One model's parameters, as PyTorch's modules would initialise them: today's single
        stream per trial seed, or (base_seed or head_seeds set) a base stream and one stream
        per head (module docstring)."""
        if not cfg.seeded_init:
            gen = generator(seed, "init")
            p = self._init_base(gen, V)
            p.update(self._init_heads(gen, self.cfg.heads))
            return {**p, **self._init_readout(gen, V)}
        base = generator(seed if cfg.base_seed is None else cfg.base_seed, "init")
        p, readout = self._init_base(base, V), self._init_readout(base, V)
        heads = ([generator(s, "head") for s in cfg.head_seeds] if cfg.head_seeds is not None
                 else [generator(seed, f"head{h}") for h in range(self.cfg.heads)])
        per_head = [self._init_heads(gen, 1) for gen in heads]  # each [1, d, d] or [1, d]
        p.update({k: torch.cat([h[k] for h in per_head]) for k in per_head[0]})  # [H, ...]
        return {**p, **readout}  # today's key order: the parameters' order in a pack

    def _init_base(self, gen: torch.Generator, V: int) -> dict[str, torch.Tensor]:
        """Embeddings and both RNNs (nn.Embedding, nn.LSTM / nn.GRU), in today's order."""
        d, G = self.cfg.width, self.gates
        rnn = 1 / math.sqrt(d)
        p = {"embed": I.normal((V, d), 1.0, gen)}
        if not self.cfg.shared_embedding:
            p["dec_embed"] = I.normal((V, d), 1.0, gen)
        for side in ("enc", "dec"):
            p[f"{side}_w_ih"] = I.uniform((d, G * d), rnn, gen)
            p[f"{side}_w_hh"] = I.uniform((d, G * d), rnn, gen)
            p[f"{side}_b_ih"] = I.uniform((G * d,), rnn, gen)
            p[f"{side}_b_hh"] = I.uniform((G * d,), rnn, gen)
        return p

    def _init_heads(self, gen: torch.Generator, H: int) -> dict[str, torch.Tensor]:
        """H heads' projections from one stream: all W_q, then all W_v, then the biases."""
        d = self.cfg.width
        rnn = 1 / math.sqrt(d)
        p = {"w_q": I.uniform((H, d, d), rnn, gen), "w_v": I.uniform((H, d, d), rnn, gen)}
        if self.cfg.projection_bias:  # nn.Linear(d, d) per head: bias U(-1/sqrt d, 1/sqrt d)
            p["b_q"] = I.uniform((H, d), rnn, gen)
            p["b_v"] = I.uniform((H, d), rnn, gen)
        return p

    def _init_readout(self, gen: torch.Generator, V: int) -> dict[str, torch.Tensor]:
        """W_c, b_c (nn.Linear(2d, d)) and W_o, b_o (nn.Linear(d, V))."""
        d = self.cfg.width
        p = {}
        p["w_c"], p["b_c"] = I.linear(2 * d, d, gen)
        p["w_o"], p["b_o"] = I.linear(d, V, gen)
        return p

    # -- recurrence ------------------------------------------------------------------------
    def _recur(self, x: torch.Tensor, side: str, state: tuple | None) -> tuple:
        """Run one side's cell over inputs x [K, B, S, d]; returns states [K, B, S, d] and the
        final state ((h, c) for LSTM, (h,) for GRU)."""
        w_ih = getattr(self, f"{side}_w_ih")
        x_proj = linear(x, w_ih) + self._input_bias(side)[:, None, None]  # [K, B, S, G d]
        K, B, S, G = x_proj.shape
        rows = torch.arange(K * B * S, device=x.device).view(K, B, S).permute(2, 0, 1)
        return self._run(x_proj.reshape(K * B * S, G), rows, side, state)

    def _input_bias(self, side: str) -> torch.Tensor:
        """[K, G d]: what is added to x W_ih. LSTM adds both biases there (b_hh enters the gates
        unscaled); GRU's b_hh stays inside the recurrence (r multiplies its n part)."""
        b_ih = getattr(self, f"{side}_b_ih")
        return b_ih + getattr(self, f"{side}_b_hh") if self.cfg.cell == "lstm" else b_ih

    def _embed_recur(self, tokens: torch.Tensor, table: torch.Tensor, side: str,
                     state: tuple | None) -> tuple:
        """_recur(lookup(table, tokens)) with the input projection applied to the table.

        lookup(E, x) W_ih = lookup(E W_ih, x): projecting the V rows of the table instead of
        the B S looked-up rows removes the input projection's cost (V = N + 2 is 12-62 here,
        B S is 700-5000); the recurrence looks its inputs up in the projected table.
        """
        K, V, _ = table.shape
        w_ih = getattr(self, f"{side}_w_ih")
        projected = torch.baddbmm(self._input_bias(side)[:, None], table, w_ih)  # [K, V, G d]
        rows = tokens.permute(2, 0, 1) + torch.arange(K, device=tokens.device)[:, None] * V
        return self._run(projected.reshape(K * V, -1), rows, side, state)  # rows [S, K, B]

    def _run(self, table: torch.Tensor, rows: torch.Tensor, side: str,
             state: tuple | None) -> tuple:
        """The recurrence; the input of step t, model k, sequence b is table[rows[t, k, b]].

        Returns states [K, B, S, d] and the final state. sweeper.layers.recurrence holds the
        loop and its hand-written backward (time-major inside; the native loops write the
        states batch-major, so the [K, B, S, d] states are contiguous for the products that
        read them).
        """
        _, K, B = rows.shape
        d = self.cfg.width
        w_hh = getattr(self, f"{side}_w_hh")
        if state is None:
            zeros = table.new_zeros(K, B, d)
            state = (zeros, zeros) if self.cfg.cell == "lstm" else (zeros,)
        if self.cfg.cell == "lstm":
            states, c_last = R.lstm_rows(table, rows, w_hh, state[0], state[1])  # [S, K, B, d]
            return self._batch_major(states), (self._last(states), c_last)
        states = R.gru_rows(table, rows, w_hh, getattr(self, f"{side}_b_hh"), state[0])
        return self._batch_major(states), (self._last(states),)

    @staticmethod
    def _batch_major(states: torch.Tensor) -> torch.Tensor:
        return states.permute(1, 2, 0, 3)  # [S, K, B, d] -> [K, B, S, d]

    @staticmethod
    def _last(states: torch.Tensor) -> torch.Tensor:
        """The final state [K, B, d], selected from the states in their memory's own order:
        autograd sums its gradient with the other consumers' in the layout of the tensor it was
        selected from, and the recurrence reads a gradient in the states' layout in place (a
        time-major sum over batch-major states would cost a transposing pass a step)."""
        batch_major = Seq2Seq._batch_major(states)
        return batch_major[:, :, -1] if batch_major.is_contiguous() else states[-1]

    # -- attention and readout -------------------------------------------------------------
    def attend(self, dec: torch.Tensor, enc: torch.Tensor, uniform: bool = False) -> tuple:
        """Per-head attention [K, H, B, T, S] and the head-averaged context [K, B, T, d].

        The heads sit next to the decoder steps ([K, B, T H, d]) so that every head's scores and
        mixture come from one bmm per sequence without copying the encoder states per head; the
        average over heads is folded into W_v (one bmm over the concatenated heads).
        """
        K, B, T, d = dec.shape
        S, H = enc.shape[2], self.cfg.heads
        if uniform or self.cfg.attention == "uniform":
            attn = dec.new_full((K, H, B, T, S), 1.0 / S)
            ctx = (linear(enc.mean(dim=2), self.w_v.sum(dim=1) / self.cfg.head_divisor)
                   + self._value_bias()[:, None])
            return attn, ctx[:, :, None].expand(K, B, T, d)
        attn, mixed = self._mix(dec, enc)
        w_v = self.w_v.reshape(K, H * d, d) / self.cfg.head_divisor  # H: the mean over heads
        ctx = linear(mixed, w_v, self._value_bias())  # [K, B, T, d]
        return attn, ctx

    def _mix(self, dec: torch.Tensor, enc: torch.Tensor) -> tuple:
        """Per-head attention [K, H, B, T, S] and each head's mixture of the encoder states
        [K, B, T, H d] (before W_v)."""
        K, B, T, d = dec.shape
        S, H = enc.shape[2], self.cfg.heads
        w_q = self.w_q.transpose(1, 2).reshape(K, d, H * d)  # [K, d, H d]
        b_q = self.b_q.reshape(K, H * d) if self.cfg.projection_bias else None
        query = linear(dec, w_q, b_q).view(K * B, T * H, d)  # rows (t, h)
        keys = enc.reshape(K * B, S, d)  # a view (time-major states on the reference path)
        attn, mixed = attention(query, keys)  # [K B, T H, S], [K B, T H, d]
        return attn.view(K, B, T, H, S).permute(0, 3, 1, 2, 4), mixed.view(K, B, T, H * d)

    def _value_bias(self) -> torch.Tensor:
        """[K, d]: the heads' value biases merged (as their contexts are); 0 without them."""
        if not self.cfg.projection_bias:
            return self.w_v.new_zeros(self.w_v.shape[0], self.cfg.width)
        return self.b_v.sum(dim=1) / self.cfg.head_divisor

    def readout(self, dec: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """W_o tanh(W_c [s; c] + b_c) + b_o for any leading shape [K, ..., d] -> [K, ..., V].

        dec and ctx may broadcast against each other (the KTIW probe pairs every decoder step
        with every source position: [K, B, T, 1, d] and [K, B, 1, S, d]). Computed as
        sigmoid(2 a) (2 W_o) + (b_o - 1^T W_o) with a = W_c [s; c] + b_c, which is the same
        function (tanh a = 2 sigmoid(2 a) - 1) in one elementwise pass over the broadcast
        tensor instead of three: the factor 2 goes into the small weights.
        """
        u = torch.sigmoid(self.readout_preactivation(dec, ctx, scale=2.0))
        w_out, b_out = self._readout_output()
        return linear(u, w_out, b_out)

    def _readout_output(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The output layer on sigmoid(2 a) (`readout`): 2 W_o [K, d, V] and b_o - 1^T W_o
        [K, V], with -inf past each model's own symbols when a pack mixes vocabularies."""
        out_bias = self.b_o - self.w_o.sum(dim=1)  # [K, V]
        if self.logit_mask is not None:
            out_bias = out_bias + self.logit_mask
        return self.w_o * 2, out_bias

    def readout_preactivation(self, dec: torch.Tensor, ctx: torch.Tensor,
                              scale: float = 1.0) -> torch.Tensor:
        """scale * (W_c [s; c] + b_c) [K, ..., d]: what the readout's tanh units see
        (broadcasting as `readout`; the scale goes into the small weights). |tanh a| near 1 is
        a saturated unit, which passes almost no gradient."""
        dec_part, ctx_part = self._preactivation_parts(dec, ctx, scale)
        return dec_part + ctx_part

    def _preactivation_parts(self, dec: torch.Tensor, ctx: torch.Tensor,
                             scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        """scale (W_c[:d] s + b_c) and scale W_c[d:] c, each over its own leading shape."""
        d = self.cfg.width
        w_c = self.w_c * scale if scale != 1.0 else self.w_c
        return linear(dec, w_c[:, :d], self.b_c * scale), linear(ctx, w_c[:, d:])

    # -- the model -------------------------------------------------------------------------
    def states(self, src: torch.Tensor, dec_in: torch.Tensor) -> tuple:
        """Encoder states [K, B, S, d] and decoder states [K, B, T, d] (teacher forcing).

        They do not depend on the attention (no input feeding), so one pass serves the learned
        and the uniform-attention readouts.
        """
        enc, state = self._embed_recur(src, self.embed, "enc", None)
        dec_table = self.embed if self.cfg.shared_embedding else self.dec_embed
        dec, _ = self._embed_recur(dec_in, dec_table, "dec", state)
        return enc, dec

    def output(self, enc: torch.Tensor, dec: torch.Tensor, uniform: bool = False) -> Seq2SeqOutput:
        """Attention and logits on top of given states."""
        attn, ctx = self.attend(dec, enc, uniform)
        return Seq2SeqOutput(self.readout(dec, ctx), attn, dec, enc)

    def forward(self, src: torch.Tensor, dec_in: torch.Tensor,
                uniform: bool = False) -> Seq2SeqOutput:
        """src [K, B, S], dec_in [K, B, T] (teacher forcing) -> logits and attention."""
        return self.output(*self.states(src, dec_in), uniform)

    def token_nll(self, src: torch.Tensor, dec_in: torch.Tensor,
                  target: torch.Tensor) -> torch.Tensor:
        """The training loss: -log p(target) at every step [K, B, T], without the logits.

        The same values as metrics.token_nll(forward(src, dec_in).logits, target): the readout
        and the loss are sweeper.layers.readout's one pass (the [K, B, T, V] logits are never
        written, forward or backward).
        """
        enc, dec = self.states(src, dec_in)
        pre = self._scored_preactivation(dec, enc)[1]
        return sigmoid_readout_nll(pre, *self._readout_output(), target)

    def token_scores(self, enc: torch.Tensor, dec: torch.Tensor, target: torch.Tensor,
                     uniform: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """An evaluation's token NLL and hits [K, B, T] (the argmax is the target) and the
        attention [K, H, B, T, S] on given states: what `output` gives metrics.token_nll and
        token_hits, without writing the logits (sweeper.layers.readout.sigmoid_readout_scores)
        and, as `token_nll`, without the context where the kernels run."""
        attn, pre = self._scored_preactivation(dec, enc, uniform)
        nll, hits = sigmoid_readout_scores(pre, *self._readout_output(), target)
        return nll, hits, attn

    def _scored_preactivation(self, dec: torch.Tensor, enc: torch.Tensor,
                              uniform: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention and 2 (W_c [s; c] + b_c), what the training loss and an evaluation's
        scores read: with the context folded into W_c where the kernels may run (no context
        product), else (the reference path, uniform attention) the context, then W_c."""
        if native.enabled() and self.cfg.attention != "uniform" and not uniform:
            attn, mixed = self._mix(dec, enc)
            return attn, self._folded_preactivation(dec, mixed, scale=2.0)
        attn, ctx = self.attend(dec, enc, uniform)
        return attn, self.readout_preactivation(dec, ctx, scale=2.0)

    def _folded_preactivation(self, dec: torch.Tensor, mixed: torch.Tensor,
                              scale: float) -> torch.Tensor:
        """`readout_preactivation(dec, ctx)` from the heads' mixtures [K, B, T, H d] without
        the context: W_c[d:] c = W_c[d:] (W_v mixed / H + b_v) = (W_v / H W_c[d:]) mixed +
        W_c[d:] b_v, the [H d, d] product of the two small weights formed once a step. The
        training loss needs no context, so this saves the context's product, forward and
        backward (three [B T, d] x [d, d] products a step), and the add of the two parts."""
        K, d, H = dec.shape[0], self.cfg.width, self.cfg.heads
        w_c = self.w_c * scale  # [K, 2 d, d]
        w_v = self.w_v.reshape(K, H * d, d) / self.cfg.head_divisor
        through = torch.bmm(w_v, w_c[:, d:])  # [K, H d, d]
        bias = torch.baddbmm((self.b_c * scale)[:, None], self._value_bias()[:, None],
                             w_c[:, d:])  # [K, 1, d]
        pre = torch.baddbmm(bias, dec.reshape(K, -1, d), w_c[:, :d])  # [K, B T, d]
        # added into pre in place (pre itself, not a view of it, or autograd would copy the
        # gradient back): nothing saved pre, baddbmm's backward keeps only its factors, and a
        # new [K, B T, d] result would be one more pass over memory
        return pre.baddbmm_(mixed.reshape(K, -1, H * d), through).view(dec.shape)

    def one_hot_logits(self, out: Seq2SeqOutput) -> torch.Tensor:
        """Logits [K, B, T, S, V] at each decoder step t if attention were one-hot on source l.

        With one-hot attention on l every head's context is W_v^h h_l + b_v^h, so the averaged
        context is (mean_h W_v^h) h_l + mean_h b_v^h. This is the KTIW probe's view of what each
        input word translates to.
        """
        ctx = self._one_hot_context(out)  # [K, B, S, d]
        return self.readout(out.dec_states[:, :, :, None, :], ctx[:, :, None, :, :])

    def one_hot_readout_parts(self, out: Seq2SeqOutput) -> tuple[torch.Tensor, ...]:
        """`one_hot_logits` in pieces: p [K, B, T, d], q [K, B, S, d], W [K, d, V], b [K, V]
        with logits[:, :, t, l] = sigmoid(p_t + q_l) W + b, for a kernel that reads the probe
        without building the [K, B, T, S, V] logits (sweeper.layers.native's ktiw_hits)."""
        dec_part, ctx_part = self._preactivation_parts(out.dec_states, self._one_hot_context(out),
                                                       scale=2.0)
        return (dec_part, ctx_part, *self._readout_output())

    def _one_hot_context(self, out: Seq2SeqOutput) -> torch.Tensor:
        """[K, B, S, d]: the averaged context with attention one-hot on each source position."""
        w_v = self.w_v.sum(dim=1) / self.cfg.head_divisor  # [K, d, d]
        return linear(out.enc_states, w_v) + self._value_bias()[:, None, None]

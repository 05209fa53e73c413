"""`kq-attention`: the key-query attention classifier of Lu, Mao, Nayak (ICLR 2021).

K independent models at once (leading model dim K). Shapes: K models, N sentences, M = m+1 words
per sentence, W words in the vocabulary, D = `dim` (10 in the paper), C classes.

    v_w, k_w       per-word embedding and key                 [K, W, D] each
    s_w            = q . k_w, q ~ N(0, 0.3^2) fixed per model    (no scaling)
    a              = softmax of the scores over the sentence  [K, N, M]
    context        = sum_positions a v                        [K, N, D]
    logits         = classifier(context)                      [K, N, C]

classifier: `fc` fixed linear (N(0,1) entries, first C diagonal entries set to 1), `tc` a
trainable linear layer without bias (initialised as nn.Linear), `tl` Linear(D, D) -> ReLU ->
Linear(D, C), trainable. Keys start at zero; the
embeddings start at N(0, (1e-6)^2), or at N(0, 0.1^2) when frozen ("EF" ablation).

How it is computed (`forward_bags`): the model sees no positions, so a sentence is a bag of words
and its softmax over positions is a count-weighted softmax over words. With e_w = exp(s_w - max_w
s_w) (one shift per model; any shift cancels in the ratio):

    context_n = sum_{w in n} e_w v_w / sum_{w in n} e_w       (sums over the sentence's words)

so one table [K, W, D+1] = [e v, e] summed over each sentence's words gives both numerator and
denominator, and the backward pass is the same kind of sum over each word's sentences
(`Bags`, `_BagSum`): no [K, N, M, D] tensor, no scatter. A linear classifier (fc, tc) commutes
with the sum, so v is projected to the C < D logits first and the table is [K, W, C+1].
`_positions_forward` is the direct formulation, kept as the reference and as the fallback when a
sentence's denominator underflows (scores spread by more than ~60 within a model).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sweeper.families.topic.config import KQConfig
from sweeper.layers import init as I
from sweeper.layers.packed import lookup
from sweeper.seeding import generator


class Bags:
    """K models' sentences as bags of words, in the two index layouts the bag sums need.

    words [K, N, M] (word ids) ->
        rows     [K N, M]   word ids offset by k W: sentence n of model k is row k N + n
        by_word  [K N M]    the row of every word occurrence, grouped by word id
        offsets  [K W + 1]  where each word's occurrences start in by_word
    Built once per fixed data split (the full-batch training set), or per minibatch.
    """

    def __init__(self, words: torch.Tensor, vocab: int):
        K, N, M = words.shape
        self.words, self.shape = words, (K, N)
        offsets = torch.arange(K, device=words.device)[:, None, None] * vocab
        self.rows = (words + offsets).reshape(K * N, M)
        flat = self.rows.reshape(-1)
        self.by_word = torch.argsort(flat, stable=True) // M
        counts = torch.bincount(flat, minlength=K * vocab)
        self.offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)])


class _BagSum(torch.autograd.Function):
    """out [K N, c] = sum over each sentence's words of table [K W, c] (with repetition).

    The gradient of the table is the sum over each word's occurrences of the output gradient:
    the same operation on the transposed bags, so both directions are embedding_bag gathers.
    """

    @staticmethod
    def forward(ctx, table: torch.Tensor, bags: Bags) -> torch.Tensor:
        ctx.bags = bags
        return F.embedding_bag(bags.rows, table, mode="sum")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        bags = ctx.bags
        return F.embedding_bag(bags.by_word, grad.contiguous(), bags.offsets, mode="sum",
                               include_last_offset=True), None


class _WordTable(torch.autograd.Function):
    """The per-word table the bag sums add up: [e_w (v_w P), e_w] with e_w = exp(s_w - max s).

    embed [K, W, D], keys [K, W, D], P [K, D, c] (the linear classifier, or the identity for
    tl), query [K, D] -> table [K, W, c+1]. Written by hand for one reason: MKL multiplies a
    tall thin [W, D] by a tiny [D, c] several times slower than the transposed product
    [c, D] @ [D, W] (measured 5-8x at W = 5000, D = 10, c = 1-4), so every product here is
    computed word-dim last and transposed once at the end.
    """

    @staticmethod
    def forward(ctx, embed, keys, P, query):
        s = torch.bmm(query[:, None, :], keys.transpose(1, 2))  # [K, 1, W]
        e = torch.exp(s - s.amax(dim=2, keepdim=True))  # [K, 1, W], the largest is 1
        value_t = torch.bmm(P.transpose(1, 2), embed.transpose(1, 2))  # [K, c, W]
        ctx.save_for_backward(embed, P, query, e, value_t)
        return torch.cat([value_t * e, e], dim=1).transpose(1, 2).contiguous()  # [K, W, c+1]

    @staticmethod
    def backward(ctx, grad):
        embed, P, query, e, value_t = ctx.saved_tensors
        c = P.shape[2]
        grad_t = grad.transpose(1, 2).contiguous()  # [K, c+1, W]
        d_value_t = grad_t[:, :c] * e  # [K, c, W]
        d_s = (grad_t[:, c:] + (grad_t[:, :c] * value_t).sum(dim=1, keepdim=True)) * e
        d_embed = d_keys = d_P = None
        if ctx.needs_input_grad[0]:
            d_embed = torch.bmm(P, d_value_t).transpose(1, 2).contiguous()  # [K, W, D]
        if ctx.needs_input_grad[1]:
            d_keys = d_s.transpose(1, 2) * query[:, None, :]  # [K, W, D]
        if ctx.needs_input_grad[2]:
            d_P = torch.bmm(d_value_t, embed).transpose(1, 2)  # [K, D, c]
        return d_embed, d_keys, d_P, None


class KQAttention(nn.Module):
    def __init__(self, cfg: KQConfig, words: int, classes: int, seeds: list[int],
                 dtype: torch.dtype = torch.float32, device: str = "cpu",
                 configs: list[KQConfig] | None = None):
        """`configs`: one config per model when they differ in what `shape()` leaves out
        (query_std, embedding_std: the initialisation); default `cfg` for all."""
        super().__init__()
        self.cfg, self.classes, self.vocab = cfg, classes, words
        configs = configs or [cfg] * len(seeds)
        per_model = [self._init_one(c, words, generator(s, "init"))
                     for c, s in zip(configs, seeds)]
        trainable = {"embed": cfg.train_embeddings, "keys": cfg.train_keys,
                     "w_cls": cfg.classifier != "fc"}
        for name, value in I.stack(per_model, dtype, device).items():
            if name == "query":
                self.register_buffer(name, value)
            else:
                grad = trainable.get(name, True)
                self.register_parameter(name, nn.Parameter(value, requires_grad=grad))

    def _init_one(self, cfg: KQConfig, words: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        D, C = cfg.dim, self.classes
        p = {"query": I.normal((D,), cfg.query_std, gen),
             "embed": I.normal((words, D), cfg.init_std, gen),
             "keys": torch.zeros(words, D, dtype=torch.float64)}
        if cfg.classifier == "tl":
            p["w_1"], p["b_1"] = I.linear(D, D, gen)
            p["w_2"], p["b_2"] = I.linear(D, C, gen)
        elif cfg.classifier == "tc":  # nn.Linear(D, C, bias=False) as PyTorch initialises it
            p["w_cls"] = I.linear(D, C, gen)[0]  # [D, C]
        else:  # fc: N(0, 1) entries, first C diagonal entries 1, never trained
            w = I.normal((C, D), 1.0, gen)
            w[range(min(C, D)), range(min(C, D))] = 1.0
            p["w_cls"] = w.T.contiguous()  # [D, C]
        return p

    def scores(self) -> torch.Tensor:
        """s_w = q . k_w for every word: [K, W]."""
        # as q^T K^T: MKL is much faster with the word dim last (see _WordTable)
        return torch.bmm(self.query[:, None, :], self.keys.transpose(1, 2)).squeeze(1)

    def forward(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """words [K, N, M] -> logits [K, N, C], attention [K, N, M]."""
        return self.forward_bags(Bags(words, self.vocab))

    def forward_bags(self, bags: Bags, attention: bool = True) -> tuple:
        """Logits [K, N, C] and, if asked, the attention [K, N, M] (else None) of `bags`."""
        K, N = bags.shape
        project = self.cfg.classifier != "tl" and self.classes < self.cfg.dim
        P = self.w_cls if project else torch.eye(self.cfg.dim, dtype=self.embed.dtype,
                                                 device=self.embed.device).expand(K, -1, -1)
        table = _WordTable.apply(self.embed, self.keys, P, self.query)  # [K, W, c+1]
        cols = table.shape[-1]
        sums = _BagSum.apply(table.view(K * self.vocab, cols), bags).view(K, N, cols)
        den = sums[..., -1:]  # [K, N, 1]: sum of e over the sentence
        if bool((den < torch.finfo(den.dtype).tiny * 2.0 ** 30).any()):
            logits, attn = self._positions_forward(bags.words)
            return logits, attn if attention else None
        mixed = sums[..., :-1] / den  # [K, N, c]
        logits = mixed if project else self.classify(mixed)
        if not attention:
            return logits, None
        M = bags.words.shape[-1]
        e = table[..., -1]  # [K, W]
        attn = torch.gather(e, 1, bags.words.view(K, N * M)).view(K, N, M) / den
        return logits, attn

    def _positions_forward(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The direct formulation: words [K, N, M] -> logits [K, N, C], attention [K, N, M]."""
        v = lookup(self.embed, words)  # [K, N, M, D]
        s = lookup(self.scores()[..., None], words).squeeze(-1)  # [K, N, M]
        attn = s.softmax(dim=-1)
        ctx = (attn[..., None] * v).sum(dim=-2)  # [K, N, D]
        return self.classify(ctx), attn

    def classify(self, ctx: torch.Tensor) -> torch.Tensor:
        if self.cfg.classifier == "tl":
            hidden = torch.relu(ctx @ self.w_1 + self.b_1[:, None])
            return hidden @ self.w_2 + self.b_2[:, None]
        return ctx @ self.w_cls

"""`kq-attention`: the key-query attention classifier of Lu, Mao, Nayak (ICLR 2021).

K independent models at once (leading model dim K). Shapes: K models, N sentences, M = m+1 words
per sentence, W words in the vocabulary, D = `dim` (10 in the paper), C classes.

    v_w, k_w       per-word embedding and key                 [K, W, D] each
    s_w            = q . k_w, q ~ N(0, 0.3^2) fixed per model    (no scaling)
    a              = softmax of the scores over the sentence  [K, N, M]
    context        = sum_positions a v                        [K, N, D]
    logits         = classifier(context)                      [K, N, C]

classifier: `fc` fixed linear (N(0,1) entries, first C diagonal entries set to 1), `tc` the same
but trainable, `tl` Linear(D, D) -> ReLU -> Linear(D, C), trainable. Keys start at zero; the
embeddings start at N(0, (1e-6)^2), or at N(0, 0.1^2) when frozen ("EF" ablation).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from sweeper.models import MODELS
from sweeper.models import init as I
from sweeper.models.seq2seq import lookup
from sweeper.registry import Param
from sweeper.seeding import generator


@dataclass(frozen=True)
class KQConfig:
    classifier: str = "fc"
    dim: int = 10
    train_keys: bool = True
    train_embeddings: bool = True
    query_std: float = 0.3
    embedding_std: float | None = None  # None: 1e-6 when trained, 0.1 when frozen

    family = "topic"

    @property
    def init_std(self) -> float:
        if self.embedding_std is not None:
            return self.embedding_std
        return 1e-6 if self.train_embeddings else 0.1

    def shape(self) -> tuple:
        return ("kq-attention", self.classifier, self.dim, self.train_keys,
                self.train_embeddings)


MODELS.register(
    "kq-attention",
    KQConfig,
    (
        Param("classifier", str, "fc", "fc fixed linear, tc trainable linear, tl two layers",
              choices=("fc", "tc", "tl")),
        Param("dim", int, 10, "D, embedding and key width", low=1, high=4096),
        Param("train_keys", bool, True, "false: keys frozen at zero (KF, uniform attention)"),
        Param("train_embeddings", bool, True, "false: embeddings frozen (EF)"),
        Param("query_std", float, 0.3, "std of the fixed query", low=0, high=100),
        Param("embedding_std", float, None, "embedding init std (default 1e-6, EF 0.1)", low=0,
              high=100, nullable=True),
    ),
    doc="Key-query attention over a bag of words with a fc/tc/tl classifier (Lu et al. 2021).",
)


class KQAttention(nn.Module):
    def __init__(self, cfg: KQConfig, words: int, classes: int, seeds: list[int],
                 dtype: torch.dtype = torch.float32, device: str = "cpu"):
        super().__init__()
        self.cfg, self.classes = cfg, classes
        per_model = [self._init_one(words, generator(s, "init")) for s in seeds]
        trainable = {"embed": cfg.train_embeddings, "keys": cfg.train_keys,
                     "w_cls": cfg.classifier != "fc"}
        for name, value in I.stack(per_model, dtype, device).items():
            if name == "query":
                self.register_buffer(name, value)
            else:
                grad = trainable.get(name, True)
                self.register_parameter(name, nn.Parameter(value, requires_grad=grad))

    def _init_one(self, words: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        D, C = self.cfg.dim, self.classes
        p = {"query": I.normal((D,), self.cfg.query_std, gen),
             "embed": I.normal((words, D), self.cfg.init_std, gen),
             "keys": torch.zeros(words, D, dtype=torch.float64)}
        if self.cfg.classifier == "tl":
            p["w_1"], p["b_1"] = I.linear(D, D, gen)
            p["w_2"], p["b_2"] = I.linear(D, C, gen)
        else:
            w = I.normal((C, D), 1.0, gen)
            w[range(min(C, D)), range(min(C, D))] = 1.0
            p["w_cls"] = w.T.contiguous()  # [D, C]
        return p

    def scores(self) -> torch.Tensor:
        """s_w = q . k_w for every word: [K, W]."""
        return (self.keys @ self.query[:, :, None]).squeeze(-1)

    def forward(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """words [K, N, M] -> logits [K, N, C], attention [K, N, M]."""
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

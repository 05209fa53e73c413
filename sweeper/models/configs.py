"""The models' declarations: each model's config and parameters, registered without torch.

Listing, validating and planning read these; the modules that train (`seq2seq`,
`kq_attention`) import torch and build an `nn.Module` from a config.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.models import MODELS
from sweeper.registry import Param


@dataclass(frozen=True)
class Seq2SeqConfig:
    width: int = 64
    heads: int = 1
    cell: str = "lstm"
    attention: str = "learned"
    shared_embedding: bool = True
    projection_bias: bool = True
    output_bias: str = "log_frequency"

    family = "copy"

    def shape(self) -> tuple:
        return ("seq2seq", self.width, self.heads, self.cell, self.attention,
                self.shared_embedding, self.projection_bias, self.output_bias)


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
        Param("projection_bias", bool, True, "bias on the query and value projections (as the "
              "papers' code, nn.Linear)"),
        Param("output_bias", str, "log_frequency", "output bias at init: log_frequency (log of "
              "each class's target frequency under the task; never-targets at log 1e-4) or "
              "default (nn.Linear's)", choices=("log_frequency", "default")),
    ),
    doc="LSTM/GRU encoder-decoder with H averaged attention heads (Snell et al. 2021).",
)


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

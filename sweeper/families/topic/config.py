"""The kq-attention model's config and parameters (torch-free: listing and validating read
these; `model.py` builds the `nn.Module` from a config)."""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.registry import Entry, Param


@dataclass(frozen=True)
class KQConfig:
    classifier: str = "fc"
    dim: int = 10
    train_keys: bool = True
    train_embeddings: bool = True
    query_std: float = 0.3
    embedding_std: float | None = None  # None: 1e-6 when trained, 0.1 when frozen

    @property
    def init_std(self) -> float:
        if self.embedding_std is not None:
            return self.embedding_std
        return 1e-6 if self.train_embeddings else 0.1

    def shape(self) -> tuple:
        return ("kq-attention", self.classifier, self.dim, self.train_keys,
                self.train_embeddings)


PARAMS = (
    Param("classifier", str, "fc", "fc fixed linear, tc trainable linear, tl two layers",
          choices=("fc", "tc", "tl"), label="classifier"),
    Param("dim", int, 10, "D, embedding and key width", low=1, high=4096,
          label="embedding dimension"),
    Param("train_keys", bool, True, "false: keys frozen at zero (KF, uniform attention)"),
    Param("train_embeddings", bool, True, "false: embeddings frozen (EF)"),
    Param("query_std", float, 0.3, "std of the fixed query", low=0, high=100),
    Param("embedding_std", float, None, "embedding init std (default 1e-6, EF 0.1)", low=0,
          high=100, nullable=True),
)
MODEL = Entry("kq-attention", KQConfig, PARAMS,
              doc="Key-query attention over a bag of words with a fc/tc/tl classifier "
                  "(Lu et al. 2021).")

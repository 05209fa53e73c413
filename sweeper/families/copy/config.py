"""The seq2seq model's config and parameters (torch-free: listing and validating read these;
`model.py` builds the `nn.Module` from a config)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweeper.errors import ParameterError
from sweeper.numbers import MAX_SEED
from sweeper.registry import Entry, Param


@dataclass(frozen=True)
class Seq2SeqConfig:
    width: int = 64
    heads: int = 1
    cell: str = "lstm"
    attention: str = "learned"
    shared_embedding: bool = True
    projection_bias: bool = True
    output_bias: str = "log_frequency"
    base_seed: int | None = None  # seeds are values, not shapes: left out of shape()
    head_seeds: list[int] | None = None
    head_merge: str | None = None  # null: mean (the papers' model; trial ids of before)

    def shape(self) -> tuple:
        return ("seq2seq", self.width, self.heads, self.cell, self.attention,
                self.shared_embedding, self.projection_bias, self.output_bias, self.head_divisor)

    @property
    def head_divisor(self) -> int:
        """What the heads' summed contexts are divided by: H (mean) or 1 (sum)."""
        return 1 if self.head_merge == "sum" else self.heads

    @property
    def seeded_init(self) -> bool:
        """Whether the base and the heads come from their own streams (else today's single
        stream per trial seed: see `Seq2Seq._init_one`)."""
        return self.base_seed is not None or self.head_seeds is not None


PARAMS = (
    Param("width", int, 64, "d, width of embeddings and states", low=1, high=8192,
          label="width d", symbol="d"),
    Param("heads", int, 1, "H, attention heads whose contexts are averaged", low=1, high=256,
          label="heads H", symbol="H"),
    Param("cell", str, "lstm", "recurrent cell", choices=("lstm", "gru"), label="cell"),
    Param("attention", str, "learned", "learned, or uniform (scores zeroed)",
          choices=("learned", "uniform"), label="attention"),
    Param("shared_embedding", bool, True, "encoder and decoder share one embedding"),
    Param("projection_bias", bool, True, "bias on the query and value projections (as the "
          "papers' code, nn.Linear)"),
    Param("output_bias", str, "log_frequency", "output bias at init: log_frequency (log of "
          "each class's target frequency under the task; never-targets at log 1e-4) or "
          "default (nn.Linear's)", choices=("log_frequency", "default")),
    Param("base_seed", int, None, "seed of the base network's init (embeddings, RNNs, "
          "readout; null: the trial seed)", low=0, high=MAX_SEED, nullable=True),
    Param("head_seeds", list, None, "one init seed per head, H distinct (null: heads from the "
          "trial seed)", low=0, high=MAX_SEED, nullable=True),
    Param("head_merge", str, None, "how the heads' contexts merge: mean (null, the papers') or "
          "sum (each head's context at full weight: the head experiment's mechanism test)",
          choices=("mean", "sum"), nullable=True),
)


def check_seeds(params: dict[str, Any], where: str) -> None:
    """head_seeds, when set, holds one distinct seed per head: a head is its seed."""
    seeds, heads = params["head_seeds"], params["heads"]
    prefix = f"{where}." if where else ""
    if seeds is None:
        return
    if len(seeds) != heads:
        raise ParameterError(f"{prefix}head_seeds: got {len(seeds)} seeds {seeds} for "
                             f"{prefix}heads = {heads}; allowed: {heads} distinct integers >= 0 "
                             "(one per head) or null")
    repeated = [s for i, s in enumerate(seeds) if s in seeds[:i]]
    if repeated:
        raise ParameterError(f"{prefix}head_seeds: got {seeds} ({repeated[0]} twice); allowed: "
                             f"{heads} distinct integers >= 0 (one per head) or null")


def canonical(params: dict[str, Any]) -> dict[str, Any]:
    """One model, one id: `head_merge: mean` is the default (null), stored and hashed as null."""
    return {**params, "head_merge": None} if params["head_merge"] == "mean" else params


MODEL = Entry("seq2seq", Seq2SeqConfig, PARAMS,
              doc="LSTM/GRU encoder-decoder with H averaged attention heads (Snell et al. 2021).",
              check=check_seeds, optional=("base_seed", "head_seeds", "head_merge"),
              canonical=canonical)

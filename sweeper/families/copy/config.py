"""The seq2seq model's config and parameters (torch-free: listing and validating read these;
`model.py` builds the `nn.Module` from a config)."""

from __future__ import annotations

from dataclasses import dataclass

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

    def shape(self) -> tuple:
        return ("seq2seq", self.width, self.heads, self.cell, self.attention,
                self.shared_embedding, self.projection_bias, self.output_bias)


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
)
MODEL = Entry("seq2seq", Seq2SeqConfig, PARAMS,
              doc="LSTM/GRU encoder-decoder with H averaged attention heads (Snell et al. 2021).")

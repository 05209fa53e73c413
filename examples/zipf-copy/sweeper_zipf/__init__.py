"""zipf-copy: copying when token frequencies follow a Zipf law (a sweeper task family plugin).

Snell et al.'s copy task draws the L source tokens uniformly from N; here token i (0-based
rank) is drawn with weight (i + 1)^-s, L distinct tokens per sequence, in random order. At s = 0
this is copy-v1's open component (h = 0). As s grows, the frequent tokens co-occur with each
other in almost every sequence while rare ones appear seldom and with a changing company, so
the co-occurrence signal (knowing which words are in the sequence) is strong for the head of
the distribution and weak for its tail: where does attention learning fail as s grows, and do
more heads rescue the rare tokens?

The declaration below is torch-free (sweeper lists and validates families without torch); the
batches and the experiment are in `data.py`, loaded when a trial trains. The model is sweeper's
own `seq2seq`, declared by the built-in copy family.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.errors import ParameterError
from sweeper.families import Family
from sweeper.families.copy import COPY_OUTCOMES, copy_metrics
from sweeper.families.copy.task import CopyTokens
from sweeper.registry import Entry, Param
from sweeper.results import OutcomeRule


@dataclass(frozen=True)
class ZipfCopyTask(CopyTokens):  # sweeper's copy token layout: EOS = N, SOS = N + 1
    length: int  # L
    content_tokens: int  # N
    exponent: float  # s

    def shape(self) -> tuple:
        """What tasks must share to train in one pack (the exponent and N may differ)."""
        return ("zipf-copy", self.length, 1 << (self.symbols - 1).bit_length())

    def derived(self) -> dict[str, float | int]:
        return {"content_tokens": self.content_tokens}


def make_task(length: int, vocab: int | None, exponent: float) -> ZipfCopyTask:
    return ZipfCopyTask(length, vocab if vocab is not None else 2 * length, exponent)


def check(params: dict, where: str) -> None:
    prefix = f"{where}." if where else ""
    if params["vocab"] is not None and params["vocab"] < params["length"]:
        raise ParameterError(f"{prefix}vocab: got {params['vocab']}; allowed: >= length "
                             f"({params['length']}), each sequence holds L distinct tokens")


TASK = Entry(
    "zipf-copy-v1", make_task,
    (Param("length", int, 10, "L, content tokens per sequence", low=2, high=512,
           label="sequence length L", symbol="L"),
     Param("vocab", int, None, "N content tokens (default 2 L)", low=2, high=100_000,
           nullable=True, label="vocabulary N", symbol="N"),
     Param("exponent", float, 1.0, "s: token i is drawn with weight (i + 1)^-s; 0 = uniform",
           low=0, high=4, label="Zipf exponent s", symbol="s")),
    doc="Copy L distinct tokens drawn with Zipf(s) frequencies from N.",
    check=check,
)

# An outcome of its own, declared as data and evaluated by sweeper's results package (stored
# with each trial, recomputed by `analysis` at other thresholds): the first step at which the
# best head puts at least `mass` (a threshold of this family's, default 0.5) of its attention
# on the aligned source token.
MASS_ONSET = OutcomeRule("mass_onset", "first_step", "attn_mass", "mass", default=0.5)

FAMILY = Family(
    name="zipf-copy",
    doc="Copying with Zipf-distributed token frequencies (a plugin).",
    tasks=(TASK,),
    models=("seq2seq",),  # sweeper's own model, declared by the copy family
    experiment="sweeper_zipf.data:ZipfCopyExperiment",
    metrics=copy_metrics(components=()),
    phase_outcome="attention_learned",
    outcomes=(*COPY_OUTCOMES, MASS_ONSET),  # copy's (attention learned, onsets), and its own
    derived=("task.content_tokens",),
    summary_columns=("loss", "accuracy", "attn_acc", "ktiw_acc", "uniform_acc"),
    labels={"task.content_tokens": "content tokens N"},
    small={"task": {"length": 5, "exponent": 1.0}, "model": {"width": 8},
           "train": {"batch_size": 8, "eval_size": 8, "steps": 6, "eval_every": 3}},
)

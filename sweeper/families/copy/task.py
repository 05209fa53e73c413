"""`copy-v1`: copying with controlled co-occurrence (Snell, Zhong, Klein, Steinhardt 2021).

The source is L content tokens then EOS; the target is the same tokens (or their images under a
fixed permutation, `mapping: permutation`) then EOS, decoded with teacher forcing from SOS.
Content tokens are 0..N-1, EOS is N, SOS is N+1.

- co-occurrence c sets N = L + round(c L): c = 0 is the paper's hard distribution (every source is
  a permutation of the same L tokens, so the bag of words carries no signal), c = 0.5 its easy one.
- hardness h: each sequence is, with probability h, a permutation of the fixed block of tokens
  0..L-1 ("block" component), and otherwise L distinct tokens of all N ("open" component).

`CopySampler` draws batches for K tasks of one shape at once: each model draws its own noise from
its own generator, then the batch is built by batched ops with per-model hardness and mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.errors import ParameterError
from sweeper.registry import Entry, Param

COMPONENTS = ("block", "open")


class CopyTokens:
    """The token layout of a copy task, for any task with `length` (L) and `content_tokens`
    (N): content tokens 0..N-1, EOS = N, SOS = N+1. A new distribution for seq2seq
    (examples/zipf-copy) inherits it, and the seq2seq model and copy experiment rely on it."""

    length: int
    content_tokens: int

    @property
    def eos(self) -> int:
        return self.content_tokens

    @property
    def sos(self) -> int:
        return self.content_tokens + 1

    @property
    def symbols(self) -> int:
        """Vocabulary size of the model: N content tokens, EOS, SOS."""
        return self.content_tokens + 2

    @property
    def seq_len(self) -> int:
        return self.length + 1


@dataclass(frozen=True)
class CopyTask(CopyTokens):
    length: int  # L
    content_tokens: int  # N
    cooccurrence: float
    hardness: float
    mapping: str  # "identity" or "permutation"
    repeat: bool  # sample tokens with repetition

    @property
    def lift(self) -> float:
        """(N-1)/(L-1): how much more often a token pair co-occurs than under the hard case."""
        return (self.content_tokens - 1) / (self.length - 1)

    def shape(self) -> tuple:
        """What tasks must share to train in one pack: L and repeat. The vocabulary may differ
        (a pack pads it to its largest, see `CopySampler` and `Seq2Seq`), within a factor of
        two (the power-of-two bucket of N + 2) so that padding never more than doubles it."""
        return ("copy", self.length, self.repeat, vocab_bucket(self.symbols))

    def derived(self) -> dict[str, float | int]:
        return {"content_tokens": self.content_tokens, "lift": self.lift}


def vocab_bucket(symbols: int) -> int:
    """The smallest power of two >= symbols."""
    return 1 << max(0, symbols - 1).bit_length()


def make_copy(length: int, cooccurrence: float, hardness: float, vocab: int | None,
              mapping: str, repeat: bool) -> CopyTask:
    n = vocab if vocab is not None else length + round(cooccurrence * length)
    return CopyTask(length, n, max(0.0, (n - length) / length), hardness, mapping, repeat)


def canonical(params: dict) -> dict:
    """vocab and cooccurrence as the effective pair: N = vocab if given, else
    L + round(c L), and c = (N - L) / L (0 when N < L, with repeat). The same task given
    either way then has the same config, columns and trial id."""
    task = make_copy(**params)
    return {**params, "vocab": task.content_tokens, "cooccurrence": task.cooccurrence}


def steps(params: dict) -> dict[str, float]:
    """c is trained in steps of 1/L (N = L + round(c L) content tokens), unless vocab sets N."""
    return {} if params.get("vocab") is not None else {"cooccurrence": 1 / params["length"]}


def ineffective(params: dict) -> tuple[str, ...]:
    """hardness changes nothing when the block is the whole vocabulary (N <= L: c = 0, or a
    small vocab with repeat): both components then draw from the same tokens with the same noise,
    so the batches, the model and its trajectory are the same at every h
    (tests/test_shared_trainings.py)."""
    return ("hardness",) if params["vocab"] <= params["length"] else ()


def check(params: dict, where: str) -> None:
    prefix = f"{where}." if where else ""
    vocab, length = params["vocab"], params["length"]
    if vocab is not None and vocab < length and not params["repeat"]:
        raise ParameterError(f"{prefix}vocab: got {vocab}; allowed: >= length ({length}) "
                             "unless repeat is true")


PARAMS = (
    Param("length", int, 10, "L, content tokens per sequence", low=2, high=512,
          label="sequence length L", symbol="L"),
    Param("cooccurrence", float, 0.5, "c: N = L + round(c L); 0 = hard, 0.5 = easy", low=0,
          high=100, label="co-occurrence strength c", symbol="c"),
    Param("hardness", float, 0.0, "h: share of sequences that permute the fixed block",
          low=0, high=1, label="hardness h", symbol="h"),
    Param("vocab", int, None, "N directly (overrides cooccurrence)", low=1, high=100_000,
          nullable=True, label="vocabulary N", symbol="N"),
    Param("mapping", str, "identity", "identity (copy) or a fixed random permutation",
          choices=("identity", "permutation")),
    Param("repeat", bool, False, "sample tokens with repetition"),
)
TASK = Entry("copy-v1", make_copy, PARAMS,
             doc="Copy L tokens through a seq2seq model (Snell et al. 2021).",
             check=check, canonical=canonical, ineffective=ineffective, steps=steps)

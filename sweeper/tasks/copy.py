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

import torch
import torch.nn.functional as F

from sweeper.errors import ParameterError
from sweeper.registry import Param
from sweeper.seeding import generator
from sweeper.tasks import TASKS

COMPONENTS = ("block", "open")


@dataclass(frozen=True)
class CopyTask:
    length: int  # L
    content_tokens: int  # N
    cooccurrence: float
    hardness: float
    mapping: str  # "identity" or "permutation"
    repeat: bool  # sample tokens with repetition

    family = "copy"

    @property
    def lift(self) -> float:
        """(N-1)/(L-1): how much more often a token pair co-occurs than under the hard case."""
        return (self.content_tokens - 1) / (self.length - 1)

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
    if vocab is not None:
        cooccurrence = (vocab - length) / length
    return CopyTask(length, n, cooccurrence, hardness, mapping, repeat)


def _check(params: dict, where: str) -> None:
    prefix = f"{where}." if where else ""
    vocab, length = params["vocab"], params["length"]
    if vocab is not None and vocab < length and not params["repeat"]:
        raise ParameterError(f"{prefix}vocab: got {vocab}; allowed: >= length ({length}) "
                             "unless repeat is true")


TASKS.register(
    "copy-v1",
    make_copy,
    (
        Param("length", int, 10, "L, content tokens per sequence", low=2, high=512),
        Param("cooccurrence", float, 0.5, "c: N = L + round(c L); 0 = hard, 0.5 = easy", low=0,
              high=100),
        Param("hardness", float, 0.0, "h: share of sequences that permute the fixed block",
              low=0, high=1),
        Param("vocab", int, None, "N directly (overrides cooccurrence)", low=1, high=100_000,
              nullable=True),
        Param("mapping", str, "identity", "identity (copy) or a fixed random permutation",
              choices=("identity", "permutation")),
        Param("repeat", bool, False, "sample tokens with repetition"),
    ),
    doc="Copy L tokens through a seq2seq model (Snell et al. 2021).",
    check=_check,
)


@dataclass
class CopyBatch:
    src: torch.Tensor  # [K, B, S] long, S = L + 1 (EOS last)
    dec_in: torch.Tensor  # [K, B, T] long, SOS then the target shifted right, T = L + 1
    tgt: torch.Tensor  # [K, B, T] long, mapped tokens then EOS
    is_block: torch.Tensor  # [K, B] bool, the sequence belongs to the fixed-block component


class CopySampler:
    """Fresh batches for K copy tasks of one shape, each from its own seeded stream.

    The K tasks may have different vocabularies N_k: each model keeps its own token ids
    (EOS = N_k, SOS = N_k + 1) and draws exactly the noise it would draw alone; the pack's
    tensors are padded to V = max N_k + 2 symbols (`symbols`), ids above a model's own unused.
    """

    def __init__(self, tasks: list[CopyTask], seeds: list[int], device: str = "cpu"):
        if len({t.shape() for t in tasks}) != 1:
            raise ValueError("a CopySampler needs tasks of one shape")
        self.tasks, self.device = tasks, device
        self.L, self.repeat = tasks[0].length, tasks[0].repeat
        self.n = [t.content_tokens for t in tasks]  # N_k
        self.symbols = max(t.symbols for t in tasks)  # V
        # columns of order noise each model draws: its N (and L when repeating with N < L)
        self.columns = [max(n, self.L) if self.repeat else n for n in self.n]
        self.hardness = torch.tensor([t.hardness for t in tasks], device=device)  # [K]
        self.eos = torch.tensor(self.n, device=device)[:, None, None]  # [K, 1, 1]
        self.train_gens = [generator(s, "data", device) for s in seeds]
        self.eval_gens = [generator(s, "eval", device) for s in seeds]
        self.mapping = torch.stack([self._mapping(t, s) for t, s in zip(tasks, seeds)])  # [K, V]

    def _mapping(self, task: CopyTask, seed: int) -> torch.Tensor:
        table = torch.arange(self.symbols)  # ids past this task's SOS map to themselves (unused)
        if task.mapping == "permutation":
            table[: task.content_tokens] = torch.randperm(task.content_tokens,
                                                          generator=generator(seed, "task"))
        return table.to(self.device)

    def _noise(self, gens: list[torch.Generator], batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Each model's noise from its own stream, as alone: order [K, B, C] (padded with 2.0,
        which sorts after every draw) and the component draw mix [K, B]."""
        width = max(self.columns)
        orders, mixes = [], []
        for g, cols in zip(gens, self.columns):
            noise = torch.rand(batch, cols + 1, generator=g, device=self.device)
            order = noise[:, :cols]
            orders.append(order if cols == width else F.pad(order, (0, width - cols), value=2.0))
            mixes.append(noise[:, cols])
        return torch.stack(orders), torch.stack(mixes)

    def sample(self, batch: int, eval: bool = False, component: str | None = None) -> CopyBatch:
        """One batch per model; `component` forces "block" or "open" (None: the mixture)."""
        gens = self.eval_gens if eval else self.train_gens
        K, L = len(gens), self.L
        order, mix = self._noise(gens, batch)  # [K, B, C], [K, B]
        if self.repeat:
            n = self.eos  # [K, 1, 1]: N_k
            open_seq = torch.minimum((order[..., :L] * n).long(), n - 1)  # [K, B, L]
            block = n.clamp(max=L)  # the fixed block is tokens 0..min(L, N)-1
            block_seq = torch.minimum((order[..., :L] * block).long(), block - 1)
        else:
            open_seq = order.argsort(dim=-1)[..., :L]  # a random ordered L-subset of N_k
            block_seq = order[..., :L].argsort(dim=-1)  # a random permutation of 0..L-1
        if component is None:
            is_block = mix < self.hardness[:, None]  # [K, B]
        else:
            is_block = torch.full((K, batch), component == "block", device=self.device)
        content = torch.where(is_block[..., None], block_seq, open_seq)  # [K, B, L]
        eos = self.eos.expand(K, batch, 1)
        src = torch.cat([content, eos], dim=-1)  # [K, B, L+1]
        tgt = torch.gather(self.mapping[:, None, :].expand(K, batch, -1), 2, src)
        sos = eos + 1
        dec_in = torch.cat([sos, tgt[..., :-1]], dim=-1)
        return CopyBatch(src, dec_in, tgt, is_block)

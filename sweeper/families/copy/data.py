"""Batches of the copy task, sampled with torch (the task's declaration is in copy.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from sweeper.families.copy.task import COMPONENTS, CopyTask
from sweeper.seeding import generator


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

    components = COMPONENTS  # what sample(component=...) takes; each gets its own metrics

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

    def keep(self, index: list[int]) -> None:
        """Keep the streams of models `index` (each goes on drawing what it would alone); the
        pack's padded width `symbols` stays, as the models' tensors do."""
        self.tasks = [self.tasks[k] for k in index]
        self.n = [self.n[k] for k in index]
        self.columns = [self.columns[k] for k in index]
        self.train_gens = [self.train_gens[k] for k in index]
        self.eval_gens = [self.eval_gens[k] for k in index]
        rows = torch.tensor(index, dtype=torch.long, device=self.hardness.device)
        self.hardness = self.hardness.index_select(0, rows)
        self.eos = self.eos.index_select(0, rows)
        self.mapping = self.mapping.index_select(0, rows)

    def target_frequencies(self) -> torch.Tensor:
        """[K, V] float64: each output class's share of the targets under each model's task.

        Of the L+1 targets of a sequence one is EOS; a content target is mapping[j] for a
        source token j drawn uniformly from the open component's N tokens (probability 1 - h)
        or from the fixed block's min(L, N) tokens (probability h). SOS is never a target.
        """
        K, V, L = len(self.tasks), self.symbols, self.L
        freq = torch.zeros(K, V, dtype=torch.float64)
        for k, (task, n) in enumerate(zip(self.tasks, self.n)):
            block = min(L, n)
            source = torch.full((n,), (1 - task.hardness) / n, dtype=torch.float64)
            if block < n:  # else the two components are one: 1/n whatever h (not 1 ulp off)
                source[:block] += task.hardness / block
            else:
                source.fill_(1 / n)
            freq[k].index_add_(0, self.mapping[k, :n].cpu(), source * L / (L + 1))
            freq[k, n] = 1 / (L + 1)  # EOS
        return freq

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

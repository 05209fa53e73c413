"""Batches of zipf-copy-v1 (torch), and the experiment: the copy experiment with this sampler."""

from __future__ import annotations

import torch

from sweeper.families.copy.data import CopyBatch
from sweeper.families.copy.experiment import CopyExperiment
from sweeper.seeding import generator

FREQUENCY_SAMPLES = 8192  # sequences drawn to measure the target frequencies (the output prior)


class ZipfSampler:
    """Fresh batches for K zipf-copy tasks of one shape, each model from its own stream.

    A weighted sample of L distinct tokens without replacement: the L largest keys
    u_i^(1 / w_i) (Efraimidis and Spirakis 2006), u uniform, w_i = (i + 1)^-s; then put in a
    random order. Each model keeps its own token ids (EOS = N_k, SOS = N_k + 1); the pack's
    tensors are padded to its largest vocabulary, as sweeper's CopySampler does.
    """

    components: tuple[str, ...] = ()  # no components: the metrics are the mixture's

    def __init__(self, tasks: list, seeds: list[int], device: str = "cpu"):
        self.tasks, self.device, self.L = tasks, device, tasks[0].length
        self.symbols = max(t.symbols for t in tasks)
        self.log_weights = [-t.exponent * torch.arange(1, t.content_tokens + 1,
                                                       dtype=torch.float64).log()
                            for t in tasks]
        self.train_gens = [generator(s, "data", device) for s in seeds]
        self.eval_gens = [generator(s, "eval", device) for s in seeds]

    def keep(self, index: list[int]) -> None:
        """Keep the streams of models `index` (a pack whose decided models left it); without
        this method a decided model would stay in the pack, masked."""
        self.tasks = [self.tasks[k] for k in index]
        self.log_weights = [self.log_weights[k] for k in index]
        self.train_gens = [self.train_gens[k] for k in index]
        self.eval_gens = [self.eval_gens[k] for k in index]

    def _content(self, k: int, batch: int, gen: torch.Generator) -> torch.Tensor:
        """[B, L] distinct tokens of model k, Zipf-weighted, in random order."""
        u = torch.rand(batch, self.tasks[k].content_tokens, generator=gen, dtype=torch.float64,
                       device=self.device)
        keys = u.log() / self.log_weights[k].exp().to(self.device)  # log(u^(1/w)) = log(u) / w
        chosen = keys.topk(self.L, dim=1).indices  # [B, L], most frequent first
        order = torch.rand(batch, self.L, generator=gen, device=self.device).argsort(dim=1)
        return torch.gather(chosen, 1, order)

    def sample(self, batch: int, eval: bool = False, component: str | None = None) -> CopyBatch:
        gens = self.eval_gens if eval else self.train_gens
        content = torch.stack([self._content(k, batch, g) for k, g in enumerate(gens)])
        eos = torch.tensor([t.eos for t in self.tasks], device=self.device)
        eos = eos[:, None, None].expand(len(gens), batch, 1)
        src = torch.cat([content, eos], dim=-1)  # [K, B, L+1]
        dec_in = torch.cat([eos + 1, src[..., :-1]], dim=-1)  # SOS, then the target shifted
        is_block = torch.zeros(len(gens), batch, dtype=torch.bool, device=self.device)
        return CopyBatch(src, dec_in, src, is_block)

    def target_frequencies(self) -> torch.Tensor:
        """[K, V]: each class's share of the targets, measured on FREQUENCY_SAMPLES sequences
        of a fixed stream per task (a token's inclusion probability has no closed form here)."""
        freq = torch.zeros(len(self.tasks), self.symbols, dtype=torch.float64)
        for k, task in enumerate(self.tasks):
            gen = torch.Generator(device=self.device).manual_seed(0)  # as the task alone
            tokens = self._content(k, FREQUENCY_SAMPLES, gen).flatten().cpu()
            counts = torch.bincount(tokens, minlength=task.content_tokens).double()
            freq[k, :task.content_tokens] = counts / counts.sum() * self.L / (self.L + 1)
            freq[k, task.eos] = 1 / (self.L + 1)
        return freq


class ZipfCopyExperiment(CopyExperiment):
    """sweeper's copy experiment (loss, accuracy, attention accuracy per head, KTIW probe,
    uniform-attention readout) on Zipf batches."""

    Sampler = ZipfSampler

"""Adam and SGD for packed parameters: per-model learning rates and a per-model "alive" mask.

Each parameter has a leading model dim K; `lr` is [K]. The update of model k depends only on
model k's gradient and state, so a pack trains exactly as its models would alone. The formulas
follow torch.optim.Adam / SGD (defaults, no weight decay) and are tested against them.

All trainable parameters live in one flat buffer (each parameter is a contiguous view of its
block, [K, ...]), and so do Adam's gradient copy and moments: an Adam step is about ten ops over
that buffer whatever the number of parameters, instead of ten per parameter (a width-64 seq2seq
has 14 parameter tensors; at a few microseconds of dispatch per op that was ~1 ms a step). SGD
has no state and takes one fused op per parameter. While every model is alive (the usual case)
the masking ops are skipped: they are the identity then.
"""

from __future__ import annotations

import math

import torch


class PackedOptimizer:
    def __init__(self, params: list[torch.nn.Parameter], lr: torch.Tensor, name: str,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.name, self.betas, self.eps = lr, name, betas, eps
        self.t = 0
        K = lr.shape[0]
        sizes = [p.numel() for p in self.params]
        if self.params:
            self.flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        else:
            self.flat = lr.new_zeros(0)
        self.grad = torch.zeros_like(self.flat)
        self._blocks = []  # (start, stop) of each parameter in the flat buffer
        start = 0
        for p, n in zip(self.params, sizes):
            self._blocks.append((start, start + n))
            p.data = self.flat[start:start + n].view_as(p)  # the parameter now lives in `flat`
            start += n
        # Per element of the flat buffer: its model's learning rate (blocks are [K, n/K]).
        self.lr_flat = self._per_element(lr.to(self.flat.dtype), K)
        self._alive: torch.Tensor | None = None  # the mask `_keep` was built for
        self._keep: torch.Tensor | None = None  # alive, per element of the flat buffer
        if name == "adam":
            self.m_flat, self.v_flat = torch.zeros_like(self.flat), torch.zeros_like(self.flat)
            self.m = [self.m_flat[a:b].view_as(p) for (a, b), p in zip(self._blocks, self.params)]
            self.v = [self.v_flat[a:b].view_as(p) for (a, b), p in zip(self._blocks, self.params)]

    @torch.no_grad()
    def keep(self, params: list[torch.nn.Parameter], index: list[int]) -> PackedOptimizer:
        """This optimiser for models `index` of the pack, over `params` (the kept models' new
        parameters, in the order of this one's: `sweeper.layers.packed.keep_models`): each
        kept model's learning rate, moments and step count carried over, so its next update
        is the one it would have had in the whole pack."""
        rows = torch.tensor(index, dtype=torch.long, device=self.lr.device)
        kept = PackedOptimizer(params, self.lr.index_select(0, rows), self.name, self.betas,
                               self.eps)
        kept.t = self.t
        if self.name == "adam":
            K = self.lr.shape[0]
            for old, new in ((self.m, kept.m), (self.v, kept.v)):
                for before, after in zip(old, new):
                    after.copy_(before.reshape(K, -1).index_select(0, rows).view_as(after))
        return kept

    def _per_element(self, values: torch.Tensor, K: int) -> torch.Tensor:
        """A [K] tensor spread over the flat buffer: each element gets its model's value."""
        parts = [values[:, None].expand(K, (b - a) // K).reshape(-1) for a, b in self._blocks]
        return torch.cat(parts) if parts else values.new_zeros(0)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, alive: torch.Tensor) -> None:
        """One update for models where `alive` [K] is true; the others stay as they are.

        A parameter without a gradient (unused in this step) is left alone, state included.
        """
        self.t += 1
        if not self.params:
            return
        all_alive = bool(alive.all())
        if self.name == "sgd":
            # No state: one fused op per parameter, p -= lr_k grad (the dead masked out).
            for p in self.params:
                if p.grad is None:
                    continue
                lr = self.lr.view((-1,) + (1,) * (p.dim() - 1))
                grad = p.grad if all_alive else torch.where(alive.view(lr.shape), p.grad, 0.0)
                p.addcmul_(lr, grad, value=-1)
            return
        missing = []
        for i, p in enumerate(self.params):
            a, b = self._blocks[i]
            if p.grad is None:
                missing.append(i)
                self.grad[a:b].zero_()
            else:
                self.grad[a:b].view_as(p).copy_(p.grad)
        saved = [self._slices(i) for i in missing]
        grad = self.grad
        if not all_alive:
            if self._alive is None or not torch.equal(alive, self._alive):
                self._alive = alive.clone()
                self._keep = self._per_element(alive, alive.shape[0])
            grad = torch.where(self._keep, grad, 0.0)
        b1, b2 = self.betas
        self.m_flat.lerp_(grad, 1 - b1)
        self.v_flat.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (self.v_flat.sqrt() / math.sqrt(1 - b2 ** self.t)).add_(self.eps)
        update = (self.lr_flat / (1 - b1 ** self.t)) * self.m_flat / denom
        self.flat.sub_(update if all_alive else torch.where(self._keep, update, 0.0))
        for i, values in zip(missing, saved):
            a, b = self._blocks[i]
            for buffer, value in zip(self._buffers(), values):
                buffer[a:b] = value

    def _buffers(self) -> list[torch.Tensor]:
        return [self.flat, self.m_flat, self.v_flat] if self.name == "adam" else [self.flat]

    def _slices(self, i: int) -> list[torch.Tensor]:
        a, b = self._blocks[i]
        return [buffer[a:b].clone() for buffer in self._buffers()]

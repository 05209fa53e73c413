"""Adam and SGD for packed parameters: per-model learning rates and a per-model "alive" mask.

Each parameter has a leading model dim K; `lr` is [K]. The update of model k depends only on
model k's gradient and state, so a pack trains exactly as its models would alone. The formulas
follow torch.optim.Adam / SGD (defaults, no weight decay) and are tested against them.
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
        if name == "adam":
            self.m = [torch.zeros_like(p) for p in self.params]
            self.v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, alive: torch.Tensor) -> None:
        """One update for models where `alive` [K] is true; the others stay as they are."""
        self.t += 1
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            shape = (-1,) + (1,) * (p.dim() - 1)
            keep = alive.view(shape)
            grad = torch.where(keep, p.grad, 0.0)
            lr = self.lr.view(shape)
            if self.name == "sgd":
                update = lr * grad
            else:
                b1, b2 = self.betas
                self.m[i].lerp_(grad, 1 - b1)
                self.v[i].mul_(b2).addcmul_(grad, grad, value=1 - b2)
                denom = (self.v[i].sqrt() / math.sqrt(1 - b2 ** self.t)).add_(self.eps)
                update = (lr / (1 - b1 ** self.t)) * self.m[i] / denom
            p.sub_(torch.where(keep, update, 0.0))

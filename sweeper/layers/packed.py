"""Per-model operations on a leading model dim K: a pack of K models as one computation."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def lookup(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Per-model embedding lookup: table [K, V, d], idx [K, ...] -> [K, ..., d]."""
    K, V, d = table.shape
    offsets = (torch.arange(K, device=idx.device) * V).view(K, *([1] * (idx.dim() - 1)))
    return F.embedding(idx + offsets, table.reshape(K * V, d))


def linear(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Per-model x @ w (+ bias): x [K, ..., i], w [K, i, o], bias [K, o] -> [K, ..., o], as one
    bmm (baddbmm with a bias: the bias is the product's starting value, not a pass of its own).

    (A broadcasting matmul over the extra dims would expand w per row and make the backward
    pass reduce over that copy: many times slower.)
    """
    K, i = x.shape[0], x.shape[-1]
    rows = x.reshape(K, -1, i)
    out = torch.bmm(rows, w) if bias is None else torch.baddbmm(bias[:, None], rows, w)
    return out.view(*x.shape[:-1], w.shape[-1])


@torch.no_grad()
def keep_models(module: torch.nn.Module, index: list[int]) -> None:
    """Keep models `index` of a pack's module (every parameter and buffer [K, ...] -> [k, ...],
    each kept model's values unchanged), so that what follows runs on k models, not K masked.
    Parameters are new tensors: an optimiser over the old ones is rebuilt
    (`sweeper.optim.PackedOptimizer.keep`)."""
    rows = torch.tensor(index, dtype=torch.long)
    for sub in module.modules():
        for name, param in list(sub._parameters.items()):
            if param is not None:
                kept = param.detach().index_select(0, rows.to(param.device)).clone()
                sub._parameters[name] = torch.nn.Parameter(kept, param.requires_grad)
        for name, buffer in list(sub._buffers.items()):
            if buffer is not None:
                sub._buffers[name] = buffer.index_select(0, rows.to(buffer.device)).clone()

"""Per-model operations on a leading model dim K: a pack of K models as one computation."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def lookup(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Per-model embedding lookup: table [K, V, d], idx [K, ...] -> [K, ..., d]."""
    K, V, d = table.shape
    offsets = (torch.arange(K, device=idx.device) * V).view(K, *([1] * (idx.dim() - 1)))
    return F.embedding(idx + offsets, table.reshape(K * V, d))


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Per-model x @ w: x [K, ..., i], w [K, i, o] -> [K, ..., o], as one bmm.

    (A broadcasting matmul over the extra dims would expand w per row and make the backward
    pass reduce over that copy: many times slower.)
    """
    K, i = x.shape[0], x.shape[-1]
    return torch.bmm(x.reshape(K, -1, i), w).view(*x.shape[:-1], w.shape[-1])

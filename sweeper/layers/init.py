"""Initialisers that mirror PyTorch's module defaults but draw from a given generator."""

from __future__ import annotations

import math

import torch


def uniform(shape: tuple[int, ...], bound: float, gen: torch.Generator) -> torch.Tensor:
    return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * bound


def normal(shape: tuple[int, ...], std: float, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float64) * std


def linear(fan_in: int, fan_out: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """nn.Linear's default: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); weight [in, out]."""
    bound = 1 / math.sqrt(fan_in)
    return uniform((fan_in, fan_out), bound, gen), uniform((fan_out,), bound, gen)


def stack(per_model: list[dict[str, torch.Tensor]], dtype: torch.dtype,
          device: str | torch.device) -> dict[str, torch.Tensor]:
    """Stack K models' parameter dicts into one dict of [K, ...] tensors."""
    return {name: torch.stack([m[name] for m in per_model]).to(dtype=dtype, device=device)
            for name in per_model[0]}

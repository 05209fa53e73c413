"""Multiplicative attention per sequence: scores, softmax and the mixture of the keys.

    attn, mixed = attention(query, keys)   # query [N, R, d], keys [N, S, d]
    # attn [N, R, S] = softmax_l(query keys^T), mixed [N, R, d] = attn keys

Two implementations of the same function: the native one (sweeper/layers/native/attention.cpp:
one pass per sequence forward and backward, its keys, scores and gradients in L1) and the
reference below, three torch ops and autograd's backward of them, used where the native kernels
are not built, with SWEEPER_NATIVE=0, off the CPU, or with `reference=True`.
tests/test_native_kernels.py checks the two against each other in float64, forward and
gradients. `keys` may be any view whose last dim is contiguous (the encoder's states are a
time-major view); the native path reads it in place and writes its gradient in the same layout,
so the gradient reaches the recurrence without a copy.
"""

from __future__ import annotations

import torch

from sweeper.layers import native


def attention_reference(query: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
    """The reference path: bmm, softmax, bmm."""
    attn = torch.bmm(query, keys.transpose(1, 2)).softmax(dim=-1)  # [N, R, S]
    return attn, torch.bmm(attn, keys)  # [N, R, d]


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, keys):
        query = query.contiguous()
        attn, mixed = native.ops().attention_forward(query, keys)
        ctx.save_for_backward(query, keys, attn)
        return attn, mixed

    @staticmethod
    def backward(ctx, grad_attn, grad_mixed):
        query, keys, attn = ctx.saved_tensors
        if grad_mixed is None:
            grad_mixed = torch.zeros_like(query)
        grad_attn = grad_attn.contiguous() if grad_attn is not None else None
        d_keys = torch.empty_strided(keys.shape, keys.stride(), dtype=keys.dtype,
                                     device=keys.device)  # the keys' own layout
        d_query = native.ops().attention_backward(query, keys, attn, grad_mixed.contiguous(),
                                                  grad_attn, d_keys)
        return d_query, d_keys


def attention(query: torch.Tensor, keys: torch.Tensor,
              reference: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """query [N, R, d], keys [N, S, d] -> attn [N, R, S], mixed [N, R, d] (module docstring)."""
    if reference or query.device.type != "cpu" or keys.stride(-1) != 1 or native.ops() is None:
        return attention_reference(query, keys)
    return _Attention.apply(query, keys)

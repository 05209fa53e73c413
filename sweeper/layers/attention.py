"""Multiplicative attention per sequence: scores, softmax and the mixture of the keys.

    attn, mixed = attention(query, keys)   # query [N, R, d], keys [N, S, d]
    # attn [N, R, S] = softmax_l(query keys^T), mixed [N, R, d] = attn keys

Two implementations of the same function: the native one (sweeper/layers/native/attention.cpp:
one pass per sequence forward and backward, its keys, scores and gradients in L1) and the
reference below, three torch ops and autograd's backward of them, used where the native kernels
are not built, with SWEEPER_NATIVE=0, off the CPU, or with `reference=True`. On AVX-512 the
native path runs the reference's forward (MKL's bmm is the faster there) and its own backward
(`_forward_in_torch`). tests/test_native_kernels.py checks the two against each other in
float64, forward and gradients. `keys` may be any view whose last dim is contiguous (the
encoder's states: batch-major from the native recurrence, a time-major view from the
reference's); the native path reads it in place and writes its gradient in the same layout, so
the gradient reaches the recurrence without a copy.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from sweeper.layers import native

NATIVE_DTYPES = (torch.float32, torch.float64)  # what the kernels are compiled for


def attention_reference(query: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
    """The reference path: bmm, softmax, bmm."""
    attn = torch.bmm(query, keys.transpose(1, 2)).softmax(dim=-1)  # [N, R, S]
    return attn, torch.bmm(attn, keys)  # [N, R, d]


def _forward_in_torch() -> bool:
    """Whether the forward is torch's three ops even where the kernels are built (the backward
    stays native): with AVX-512, MKL's bmm and torch's softmax beat the native forward (K = 16,
    N = 2,048 sequences on an AVX-512 EPYC, caches flushed between calls: 4.7 against 6.1 ms
    with one head, 16.6 against 19.5 with four; docs/performance.md, "Layouts and the
    attention's forward"), while on AVX2 the native forward is the faster ("The head in one
    pass" there)."""
    return native.instruction_set()[0] == "avx512"


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, keys, ops):
        query = query.contiguous()
        if _forward_in_torch():
            attn, mixed = attention_reference(query, keys)
        else:
            attn, mixed = ops.attention_forward(query, keys)
        ctx.save_for_backward(query, keys, attn)
        ctx.ops = ops  # the module that ran forward runs backward (whatever SWEEPER_NATIVE says)
        ctx.set_materialize_grads(False)  # no [N, R, S] zeros when attn is not in the loss
        return attn, mixed

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_attn, grad_mixed):
        query, keys, attn = ctx.saved_tensors
        if grad_attn is None and grad_mixed is None:
            return None, None, None
        if grad_mixed is None:
            grad_mixed = torch.zeros_like(query)
        grad_attn = grad_attn.contiguous() if grad_attn is not None else None
        d_keys = _like_layout(keys)
        d_query = ctx.ops.attention_backward(query, keys, attn, grad_mixed.contiguous(),
                                             grad_attn, d_keys)
        return d_query, d_keys, None


def _like_layout(t: torch.Tensor) -> torch.Tensor:
    """An empty tensor shaped as t, in t's own memory layout where that layout is a permutation
    of a dense one (the encoder's states, batch-major or time-major: their gradient
    reaches the recurrence without a copy), else contiguous (an expanded or overlapping view:
    its elements must not share memory, or the sequences' gradients would overwrite each
    other)."""
    order = sorted(range(t.dim()), key=lambda i: t.stride(i), reverse=True)
    expected = 1
    for i in reversed(order):
        if t.size(i) != 1 and t.stride(i) != expected:
            return torch.empty(t.shape, dtype=t.dtype, device=t.device)
        expected *= t.size(i)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)


def attention(query: torch.Tensor, keys: torch.Tensor,
              reference: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """query [N, R, d], keys [N, S, d] -> attn [N, R, S], mixed [N, R, d] (module docstring)."""
    ops = None if reference else native.ops()
    if (ops is None or query.device.type != "cpu" or keys.stride(-1) != 1
            or query.dtype not in NATIVE_DTYPES or keys.dtype != query.dtype):
        return attention_reference(query, keys)
    return _Attention.apply(query, keys, ops)

"""A sigmoid readout and its token loss: -log softmax(sigmoid(pre) W + b)[target], per row.

    nll = sigmoid_readout_nll(pre, w, b, target)  # pre [K, ..., d], w [K, d, V], b [K, V],
                                                  # target [K, ...] -> nll [K, ...]
    nll, hits = sigmoid_readout_scores(pre, w, b, target)  # an evaluation's: no gradient,
                                                  # hits: the argmax is the target

The copy family's training loss (its readout W_o tanh(a) + b_o is sigmoid(2 a) (2 W_o) +
(b_o - 1^T W_o): Seq2Seq.readout). Two implementations of the same function: the native one
(sweeper/layers/native/readout.cpp: one pass per tile of rows forward and backward, the
[K, ..., V] logits never written) and the reference below (sigmoid, baddbmm and
metrics.token_nll, autograd's backward), used where the native kernels are not built, with
SWEEPER_NATIVE=0, off the CPU, or with `reference=True`. tests/test_native_kernels.py checks
the two against each other in float64, values and gradients. A bias of -inf (a class a model of
a mixed-vocabulary pack does not have) gives that class probability 0 on both.
`sigmoid_readout_scores` is the same pass for an evaluation, with the argmax's hits (torch's
argmax: the first largest logit); in float32 the two paths' hits can differ at near-ties only.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from sweeper import metrics as M
from sweeper.layers import native
from sweeper.layers.attention import NATIVE_DTYPES
from sweeper.layers.packed import linear


def sigmoid_readout_nll_reference(pre: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                                  target: torch.Tensor) -> torch.Tensor:
    """The reference path: the logits [K, ..., V], then their token NLL."""
    return M.token_nll(linear(torch.sigmoid(pre), w, b), target)


class _SigmoidReadoutNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pre, w, b, target, ops):
        nll, u, lse = ops.readout_nll_forward(pre, w, b, target)
        ctx.save_for_backward(u, lse, w, b, target)
        ctx.ops = ops  # the module that ran forward runs backward (whatever SWEEPER_NATIVE says)
        return nll

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        u, lse, w, b, target = ctx.saved_tensors
        d_pre, d_w, d_b = ctx.ops.readout_nll_backward(grad.contiguous(), u, lse, w, b, target)
        return d_pre, d_w, d_b, None, None


def _native(pre: torch.Tensor, w: torch.Tensor, b: torch.Tensor, reference: bool):
    """The kernels' module where they can run this readout, else None."""
    ops = None if reference else native.ops()
    if (ops is None or pre.device.type != "cpu" or pre.dtype not in NATIVE_DTYPES
            or not w.dtype == b.dtype == pre.dtype):
        return None
    return ops


def sigmoid_readout_scores(pre: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                           target: torch.Tensor, reference: bool = False
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """An evaluation's readout: the token NLL [K, ...] and whether the argmax is the target
    (bool [K, ...]), without the logits where the kernels run; no gradient."""
    ops = _native(pre, w, b, reference)
    with torch.no_grad():
        if ops is None:
            logits = linear(torch.sigmoid(pre), w, b)
            return M.token_nll(logits, target), M.token_hits(logits, target)
        K, d = pre.shape[0], pre.shape[-1]
        nll, hits = ops.readout_scores(pre.reshape(K, -1, d).contiguous(), w.contiguous(),
                                       b.contiguous(), target.reshape(K, -1).contiguous())
    return nll.view(target.shape), hits.view(target.shape)


def sigmoid_readout_nll(pre: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                        target: torch.Tensor, reference: bool = False) -> torch.Tensor:
    """-log softmax(sigmoid(pre) W + b)[target] for every row (module docstring)."""
    ops = _native(pre, w, b, reference)
    if ops is None:
        return sigmoid_readout_nll_reference(pre, w, b, target)
    K, d = pre.shape[0], pre.shape[-1]
    nll = _SigmoidReadoutNLL.apply(pre.reshape(K, -1, d).contiguous(), w.contiguous(),
                                   b.contiguous(), target.reshape(K, -1).contiguous(), ops)
    return nll.view(target.shape)

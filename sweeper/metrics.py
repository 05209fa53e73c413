"""Measurements of attention learning, as pure tensor functions (tested on hand-built cases).

Every function keeps the leading dims it is given and reduces only the trailing ones it names, so
the same code serves one model, K packed models and per-head views.
"""

from __future__ import annotations

import torch


def token_hits(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[..., T, V], [..., T] -> bool [..., T]: the argmax is the target."""
    return logits.argmax(dim=-1) == target


def token_nll(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[..., T, V], [..., T] -> [..., T] negative log-likelihood of each target."""
    # logsumexp - z_target: the same value as -log_softmax[target], without materialising the
    # log-probabilities (torch's log_softmax is slow over a short last dim, e.g. 4 classes).
    return torch.logsumexp(logits, dim=-1) - logits.gather(-1, target[..., None]).squeeze(-1)


def aligned_hits(attn: torch.Tensor) -> torch.Tensor:
    """[..., T, S] -> bool [..., T]: decoder step t's argmax attention is source position t.

    In copying and in translation by a fixed permutation, target position t aligns with source
    position t (EOS with EOS).
    """
    T = attn.shape[-2]
    return attn.argmax(dim=-1) == torch.arange(T, device=attn.device)


def aligned_mass(attn: torch.Tensor) -> torch.Tensor:
    """[..., T, S] -> [..., T]: attention on the aligned position."""
    return attn.diagonal(dim1=-2, dim2=-1)


def content_steps(attn: torch.Tensor) -> torch.Tensor:
    """[..., T, S] -> [..., T - 1, S]: the decoder steps that emit a content token.

    The last step emits EOS, and attends to the source's EOS, the encoder's final state, which
    the decoder starts from: aligning there says nothing about learning to attend (the papers'
    multi-head code leaves it out too).
    """
    return attn[..., :-1, :]


def head_attention_accuracy(attn: torch.Tensor) -> torch.Tensor:
    """Per-head attention [K, H, B, T, S] -> [K, H]: the share of content steps whose argmax
    attention is the aligned source position."""
    return mean_keep(aligned_hits(content_steps(attn)), keep=2)


def head_aligned_mass(attn: torch.Tensor) -> torch.Tensor:
    """Per-head attention [K, H, B, T, S] -> [K, H]: mean attention on the aligned position
    over content steps."""
    return mean_keep(aligned_mass(content_steps(attn)), keep=2)


def log_odds_of_target(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[..., V] logits and [...] targets -> [...] log p / (1 - p) of the target.

    Computed as z_target - logsumexp(other logits), which stays exact for confident predictions
    (log p - log(1 - p) from the probabilities saturates once 1 - p rounds to 0).
    """
    target = target[..., None]
    z_target = logits.gather(-1, target).squeeze(-1)
    others = logits.scatter(-1, target, float("-inf"))
    return z_target - torch.logsumexp(others, dim=-1)


def ktiw_probe_hits(one_hot_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """KTIW probe: [..., T, S, V] logits if attention were one-hot on l, targets [..., T].

    For decoder step t and source position l, the log-odds of the correct token with attention
    one-hot on l; a hit is a step whose best position is the aligned one (argmax_l = t).
    """
    S = one_hot_logits.shape[-2]
    log_odds = log_odds_of_target(one_hot_logits,
                                  target[..., None].expand(*target.shape, S))  # [..., T, S]
    return aligned_hits(log_odds)


def mean_keep(x: torch.Tensor, keep: int = 1) -> torch.Tensor:
    """Mean over every dim after the first `keep` ones (float64 stays float64; bools count)."""
    x = x if x.is_floating_point() else x.float()
    return x.flatten(keep).mean(dim=-1) if x.dim() > keep else x


# -- Lu et al.: the conserved quantity -----------------------------------------------------
def lu_identity(score: torch.Tensor, embed_sq_norm: torch.Tensor, query_sq_norm: torch.Tensor,
                distractors: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The two sides of |q|^2 |v_t|^2 = 2 s_t + (2/m)(exp(s_t) - 1), and the relative residual.

    score, embed_sq_norm [..., n]; query_sq_norm broadcastable. The residual is relative to the
    larger side, floored at 1e-3: at initialisation both sides are ~1e-12 and their ratio is
    noise (the identity assumes v_t = 0 at the start while the init has |v_t| ~ 1e-6).
    """
    lhs = query_sq_norm * embed_sq_norm
    m = max(distractors, 1)
    rhs = 2 * score + (2 / m) * torch.expm1(score)
    scale = torch.maximum(lhs.abs(), rhs.abs()).clamp(min=1e-3)
    return lhs, rhs, (lhs - rhs).abs() / scale

"""Measurements of attention learning, as pure tensor functions (tested on hand-built cases).

Every function keeps the leading dims it is given and reduces only the trailing ones it names, so
the same code serves one model, K packed models and per-head views. One reduction has a native
pass where the process has the kernels (`argmax_is`), with torch's values.
"""

from __future__ import annotations

import torch

from sweeper.layers import native
from sweeper.layers.attention import NATIVE_DTYPES


def token_hits(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[..., T, V], [..., T] -> bool [..., T]: the argmax is the target."""
    return logits.argmax(dim=-1) == target


def token_nll(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[..., T, V], [..., T] -> [..., T] negative log-likelihood of each target."""
    # logsumexp - z_target: the same value as -log_softmax[target], without materialising the
    # log-probabilities (torch's log_softmax is slow over a short last dim, e.g. 4 classes).
    return torch.logsumexp(logits, dim=-1) - logits.gather(-1, target[..., None]).squeeze(-1)


def aligned_positions(steps: int, device: torch.device | str | None = None) -> torch.Tensor:
    """[T]: the source position each decoder step aligns with: the alignment rule, in one place.

    In copying and in translation by a fixed permutation, target position t aligns with source
    position t (EOS with EOS).
    """
    return torch.arange(steps, device=device)


def aligned_hits(attn: torch.Tensor) -> torch.Tensor:
    """[..., T, S] -> bool [..., T]: decoder step t's argmax attention is its aligned source
    position (`aligned_positions`)."""
    return argmax_is(attn, aligned_positions(attn.shape[-2], attn.device))


def argmax_is(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """[..., R, C] and int64 [R] -> bool [..., R]: whether row r's argmax over C (torch's: the
    first largest, a NaN the largest) is index[r]. In one native pass where this process has
    the kernels (`argmax_hits`; torch's argmax over a last dim as short as S = 17 was a tenth
    of an evaluation with four heads), else torch's argmax."""
    ops = native.loaded()
    if (ops is None or x.device.type != "cpu" or x.dtype not in NATIVE_DTYPES
            or x.dim() < 2 or x.numel() == 0 or x.stride(-1) != 1
            or index.shape != x.shape[-2:-1] or index.device != x.device
            or index.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8,
                                   torch.uint8)):
        return x.argmax(dim=-1) == index
    # a view where the leading dims merge (one head's attention and its content steps); a copy
    # where they do not (several heads: [K, H, B] is laid out as K, B, H)
    rows = x.reshape(-1, *x.shape[-2:])
    return ops.argmax_hits(rows, index.to(torch.long)).view(x.shape[:-1])


def aligned_mass(attn: torch.Tensor) -> torch.Tensor:
    """[..., T, S] -> [..., T]: attention on the aligned position."""
    return offset_mass(attn, 0)


def offset_mass(attn: torch.Tensor, offset: int) -> torch.Tensor:
    """[..., T, S] -> [..., T]: attention on the source position `offset` after the aligned
    one (before it when negative); 0 at steps where that position does not exist."""
    T, S = attn.shape[-2:]
    source = aligned_positions(T, attn.device) + offset
    inside = (source >= 0) & (source < S)
    index = source.clamp(0, S - 1).expand(*attn.shape[:-1])[..., None]
    return attn.gather(-1, index).squeeze(-1) * inside


def offsets(attn: torch.Tensor) -> torch.Tensor:
    """[O]: every relative offset (source position minus aligned position) of [..., T, S]
    attention, -(T - 1) .. S - 1, in the order `offset_profile` reports them."""
    T, S = attn.shape[-2:]
    return torch.arange(-(T - 1), S, device=attn.device)


def offset_profile(attn: torch.Tensor) -> torch.Tensor:
    """[..., T, S] -> [..., O]: per relative offset (`offsets`), the attention mass at that
    offset averaged over the T steps. Steps for which the offset falls outside the source count
    as 0, so the profile sums to 1: a head that always looks at one fixed position (the EOS
    state) spreads its mass over many offsets instead of peaking at a far one. Offset 0 is the
    mean aligned mass."""
    T, S = attn.shape[-2:]
    return torch.stack([offset_mass(attn, o).mean(dim=-1) for o in range(-(T - 1), S)], dim=-1)


def peak_offset(profile: torch.Tensor, offset_values: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., O] profile over `offset_values` [O] -> (offset [...], mass [...]) of its peak.

    Ties go to the offset nearest 0 (then the earlier one): uniform attention over the L + 1
    source positions peaks at offset 0 with mass exactly 1/(L + 1).
    """
    values = offset_values.tolist()
    nearest_first = sorted(range(len(values)), key=lambda i: (abs(values[i]), values[i]))
    order = torch.tensor(nearest_first, device=profile.device)
    mass, i = profile[..., order].max(dim=-1)
    return offset_values[order][i], mass


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


def head_offset_profile(attn: torch.Tensor) -> torch.Tensor:
    """Per-head attention [K, H, B, T, S] -> [K, H, O]: each head's `offset_profile` over
    content steps, averaged over the batch."""
    return offset_profile(content_steps(attn).mean(dim=2))


def best_head_peak(attn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head attention [K, H, B, T, S] -> (offset [K], mass [K]): where the attention of
    each model's best head peaks relative to the aligned position, and its mass there.

    The best head is the one with the highest aligned mass over content steps (the head of
    `attn_mass`; a continuous score, where attention accuracy ties at 0 among heads that never
    align). Offset 0 with a mass above uniform's 1/S: aligned; a nonzero offset with a
    concentrated peak: the head attends a fixed distance away from the aligned word.
    """
    best = head_aligned_mass(attn).argmax(dim=1)  # [K]
    profile = head_offset_profile(attn)  # [K, H, O]
    chosen = profile[torch.arange(profile.shape[0], device=attn.device), best]  # [K, O]
    return peak_offset(chosen, offsets(content_steps(attn)))


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

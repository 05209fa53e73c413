"""Packs: trial specs that share tensor shapes, trained together as one batched model.

Which specs share a pack (`TrialSpec.pack_key`), how many packs a group is cut into for the
workers, the per-device and memory caps, and the order packs are handed out (longest first).
Shared by every strategy and by `sweeper plan`; knows nothing of search types.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from sweeper.spec import TrialSpec

# Measured on the 2-core dev machine (benchmarks/throughput.py, docs/performance.md): per-model
# throughput on CPU stops rising at K = 4-16 (copy d = 64: 54 model-steps/s at K = 4 and 16, 48
# at 64; topic: 402, 432, 428 at K = 4, 16, 64), because a pack's per-step tensors then outgrow
# the 1 MB L2 cache. Larger packs only cost memory and load balance across workers.
MAX_CPU_PACK = 16
MAX_GPU_PACK = 1024

def pack_counts(group_sizes: list[int], workers: int, cap: int | list[int]) -> list[int]:
    """How many packs to cut each group into: as few as the cap (one, or one per group)
    allows, then more (splitting the group with the largest packs) only while there are fewer
    packs than workers.

    A sweep with more shape groups than workers keeps its groups whole (up to the cap): packs
    only gain from size, and splitting them further would just add rounds of fixed cost.
    """
    caps = cap if isinstance(cap, list) else [cap] * len(group_sizes)
    counts = [math.ceil(n / c) for n, c in zip(group_sizes, caps)]
    while sum(counts) < workers:
        splittable = [i for i, n in enumerate(group_sizes) if counts[i] < n]
        if not splittable:
            break
        i = max(splittable, key=lambda j: group_sizes[j] / counts[j])
        counts[i] += 1
    return counts


def _memory_cap(group: list[TrialSpec], pack_bytes: int, cap: int) -> int:
    """The most trials of `group` one pack of `pack_bytes` holds (at least 1; `cap` when the
    family has no memory estimate)."""
    need = max(s.memory_bytes() for s in group)
    return cap if need <= 0 else max(1, min(cap, pack_bytes // need))


def _cut(group: list[TrialSpec], parts: int) -> list[list[TrialSpec]]:
    """`parts` packs of near-equal size, in order."""
    size, extra = divmod(len(group), parts)
    bounds = [i * size + min(i, extra) for i in range(parts + 1)]
    return [group[a:b] for a, b in zip(bounds, bounds[1:])]


def form_packs(specs: Iterable[TrialSpec], pack_size: int | None,
               workers: int = 1, pack_bytes: int | None = None) -> list[list[TrialSpec]]:
    """Group specs by pack key (first-seen order), then cut each group into packs: of
    `pack_size` when given, else as `pack_counts` says, capped per device and, with
    `pack_bytes` (the memory one pack may use), at what fits in it (`TrialSpec.memory_bytes`:
    a pack's memory grows with its models)."""
    groups: dict[tuple, list[TrialSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.pack_key(), []).append(spec)
    if not groups:
        return []
    members = list(groups.values())
    if pack_size:
        return longest_first([g[i:i + pack_size] for g in members
                              for i in range(0, len(g), pack_size)])
    cap = MAX_GPU_PACK if members[0][0].device.startswith("cuda") else MAX_CPU_PACK
    caps = [cap if pack_bytes is None else _memory_cap(g, pack_bytes, cap) for g in members]
    counts = pack_counts([len(g) for g in members], max(1, workers), caps)
    return longest_first([pack for g, n in zip(members, counts) for pack in _cut(g, n)])


def pack_cost(pack: list[TrialSpec]) -> float:
    """A pack's relative cost, for ordering only: models x steps x the family's memory
    estimate of one step (activations grow with the same shapes as the work: length, width,
    heads, vocabulary, batch)."""
    spec = pack[0]
    return len(pack) * spec.train["steps"] * max(1, spec.memory_bytes())


def longest_first(packs: list[list[TrialSpec]]) -> list[list[TrialSpec]]:
    """Packs in decreasing cost (ties keep their order): handed out in this order, the slowest
    pack starts first and no worker idles at the end while another trains it."""
    return sorted(packs, key=pack_cost, reverse=True)

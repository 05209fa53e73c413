"""What to run: expand a sweep file into trial specs, drop those already stored, form packs.

Pure and deterministic (no Ray, no clock): the same file always gives the same specs in the same
order. Grid search takes the product of the axes in file order, then the seeds; random search
draws `trials` cells from a generator seeded by `search.seed` (`sweeper.strategies`). Optuna's
cells are chosen while the sweep runs, so `cell_specs` builds the specs of one proposed cell. A
boundary search's candidates are the grid's specs; which of them train is decided as it runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sweeper.errors import SweeperInputError
from sweeper.search_space import SweepFile, SweepFileError
from sweeper.spec import TrialSpec, make_spec

# Measured on the 2-core dev machine (benchmarks/throughput.py, docs/performance.md): per-model
# throughput on CPU stops rising at K = 4-16 (copy d = 64: 54 model-steps/s at K = 4 and 16, 48
# at 64; topic: 402, 432, 428 at K = 4, 16, 64), because a pack's per-step tensors then outgrow
# the 1 MB L2 cache. Larger packs only cost memory and load balance across workers.
MAX_CPU_PACK = 16
MAX_GPU_PACK = 1024

Cell = dict[str, Any]  # axis path ("task.hardness") -> value


def cells(sweep: SweepFile) -> list[Cell]:
    """The distribution points of a grid or random search, in a fixed order (the strategies
    `sweeper.strategies.grid` and `.random` draw them)."""
    if sweep.search.type in ("grid", "boundary"):
        from sweeper.strategies.grid import grid_cells

        return grid_cells(sweep)
    if sweep.search.type == "random":
        from sweeper.strategies.random import random_cells

        return random_cells(sweep)
    raise SweeperInputError(f"search.type: got {sweep.search.type!r}; cells are known in "
                            "advance only for grid, random and boundary")


def cell_specs(sweep: SweepFile, cell: Mapping[str, Any]) -> list[TrialSpec]:
    """The specs of one cell: the fixed values, the cell's axis values, one spec per seed."""
    groups: dict[str, dict[str, Any]] = {g: dict(v) for g, v in sweep.fixed.items()}
    for path, value in cell.items():
        group, name = path.split(".", 1)
        groups[group][name] = value
    try:
        return [make_spec(sweep.task, sweep.model, groups["task"], groups["model"],
                          groups["train"], seed, sweep.device) for seed in sweep.seeds]
    except SweeperInputError as exc:
        where = ", ".join(f"{k}={v!r}" for k, v in cell.items())
        raise SweepFileError(f"axes (cell {where}): {exc}") from None


def expand(sweep: SweepFile) -> list[TrialSpec]:
    """Every spec of a grid or random sweep, duplicates (same trial id) dropped.

    Two grid cells that are the same trials (e.g. co-occurrences that round to one vocabulary
    at a length) are refused, naming both: a grid's cells must differ.
    """
    seen: dict[str, dict] = {}
    specs = []
    for cell in cells(sweep):
        for spec in cell_specs(sweep, cell):
            if spec.trial_id not in seen:
                seen[spec.trial_id] = cell
                specs.append(spec)
            elif sweep.search.type != "random" and seen[spec.trial_id] != cell:
                raise SweepFileError(
                    f"axes: the cells {seen[spec.trial_id]} and {cell} are the same trials "
                    f"(their effective task is {dict(spec.task_params)}); allowed: grid values "
                    "that give different tasks")
    return specs


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


@dataclass(frozen=True)
class Sharing:
    """Which pending trials train, and which take the result of an equivalent one.

    Trials with one training id (`TrialSpec.training_id`: they differ only in parameters that
    change nothing, such as copy's hardness at c = 0) train one model: the first of them in the
    plan's order trains (or the one already stored), the others are stored as rows of their own
    that name it in `shared_with` and carry its outcomes; its trajectory is stored once.
    """

    trainings: list[TrialSpec]  # pending trials that train, in the plan's order
    shares: dict[str, list[TrialSpec]]  # a training's trial id -> pending trials sharing it
    shares_stored: dict[str, list[TrialSpec]]  # a stored trial's id -> pending trials sharing it

    @property
    def saved(self) -> int:
        """Trainings this plan does not run: pending trials that share another's."""
        return sum(map(len, self.shares.values())) + sum(map(len, self.shares_stored.values()))


def share_trainings(specs: list[TrialSpec], stored: set[str]) -> Sharing:
    """Group the pending specs by training id (see `Sharing`); `stored`: trial ids stored."""
    trains: dict[str, TrialSpec] = {}  # training id -> the trial that trains it
    for spec in specs:
        if spec.trial_id in stored:
            trains.setdefault(spec.training_id, spec)
    stored_trainings = set(trains)
    trainings: list[TrialSpec] = []
    shares: dict[str, list[TrialSpec]] = {}
    shares_stored: dict[str, list[TrialSpec]] = {}
    for spec in specs:
        if spec.trial_id in stored:
            continue
        key = spec.training_id
        if key not in trains:
            trains[key] = spec
            trainings.append(spec)
            continue
        into = shares_stored if key in stored_trainings else shares
        into.setdefault(trains[key].trial_id, []).append(spec)
    return Sharing(trainings, shares, shares_stored)


@dataclass
class Plan:
    sweep: SweepFile
    specs: list[TrialSpec]  # everything the file expands to (grid/random; boundary: its
    # candidates, cell by cell in grid order, each cell's seeds in file order); [] for optuna
    stored: set[str]  # trial ids already in the store

    @property
    def pending(self) -> list[TrialSpec]:
        return [s for s in self.specs if s.trial_id not in self.stored]

    @cached_property
    def sharing(self) -> Sharing:
        """The pending trials that train and those that share an equivalent training (grid and
        random search; an adaptive search trains what it proposes)."""
        if self.adaptive:
            return Sharing(self.pending, {}, {})
        return share_trainings(self.specs, self.stored)

    @property
    def adaptive(self) -> bool:
        """Whether what trains is decided while the sweep runs (optuna, boundary)."""
        return self.sweep.search.type in ("optuna", "boundary")

    @property
    def budget(self) -> int:
        """The most trials the sweep stores (the manifest's trials_expanded): every spec of a
        grid or random search, the search's budget of an adaptive one."""
        search = self.sweep.search
        if search.type == "optuna":
            return search.trials * len(self.sweep.seeds)
        if search.type == "boundary":
            return min(search.trials, len(self.specs))
        return len(self.specs)


def make_plan(sweep: SweepFile, stored: set[str]) -> Plan:
    return Plan(sweep, [] if sweep.search.type == "optuna" else expand(sweep), stored)

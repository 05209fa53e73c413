"""Random search: `search.trials` cells drawn from the axes by a generator seeded with
`search.seed`, so the same file always draws the same cells."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.strategies.base import PlannedPacks, drawn_cells, read_trials
from sweeper.sweep_fields import Axis, Search, int_at

if TYPE_CHECKING:
    from sweeper.families import Family
    from sweeper.sweep_fields import Sweep


def random_cells(sweep: Sweep) -> list[dict[str, Any]]:
    rng = np.random.default_rng(sweep.search.seed)
    return [{axis.path: draw(axis, rng) for axis in sweep.axes}
            for _ in range(sweep.search.trials)]


def draw(axis: Axis, rng: np.random.Generator) -> Any:
    """One value of an axis: uniform over grid/choice values and int ranges, uniform or
    log-uniform over float ranges."""
    if axis.kind in ("grid", "choice"):
        return axis.values[int(rng.integers(len(axis.values)))]
    low, high = axis.values
    if axis.kind == "int":
        return int(rng.integers(low, high + 1))
    if axis.kind == "loguniform":
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))
    return float(rng.uniform(low, high))


class RandomStrategy(PlannedPacks):
    """Every pending spec of the drawn cells (`plan.expand`), packed up front."""

    distinct_cells = False  # two draws may be one cell
    draws_cells = True
    section_keys = ("type", "trials", "seed")
    samples_ranges = True

    @classmethod
    def read_search(cls, raw: dict, axes: tuple[Axis, ...], family: Family,
                    seeds: tuple[int, ...]) -> Search:
        trials = read_trials(raw)
        return Search("random", trials, seed=int_at(raw.get("seed", 0), "search.seed", 0))

    @classmethod
    def cells_to_plan(cls, axes: tuple[Axis, ...], search: Search) -> tuple[int, str]:
        return drawn_cells(search)

    @classmethod
    def cells(cls, sweep: Sweep) -> list[dict[str, Any]]:
        return random_cells(sweep)

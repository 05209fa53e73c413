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
    from sweeper.cells import trained_step

    rng = np.random.default_rng(sweep.search.seed)
    steps = {axis.path: trained_step(sweep, axis, ("uniform", "loguniform"))
             for axis in sweep.axes}
    return [{axis.path: draw(axis, rng, steps[axis.path]) for axis in sweep.axes}
            for _ in range(sweep.search.trials)]


def draw(axis: Axis, rng: np.random.Generator, step: float | None = None) -> Any:
    """One value of an axis: uniform over grid/choice values and int ranges, uniform or
    log-uniform over float ranges; a uniform range of a parameter the task trains on a grid
    (`step`: `sweeper.cells.trained_step`) uniformly over that grid's values inside it, so
    that what is drawn is what trains, never a value outside the range."""
    if axis.kind in ("grid", "choice"):
        return axis.values[int(rng.integers(len(axis.values)))]
    low, high = axis.values
    if axis.kind == "int":
        return int(rng.integers(low, high + 1))
    if step is not None:  # the grid's values in the range: uniformly, or log-uniformly rounded
        from sweeper.cells import grid_range

        first, last = grid_range(low, high, step)
        if axis.kind == "loguniform":
            value = math.exp(rng.uniform(math.log(low), math.log(high)))
            return float(min(last, max(first, round(value / step))) * step)
        return float(int(rng.integers(first, last + 1)) * step)
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

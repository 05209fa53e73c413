"""A cell's trial specs: the sweep's fixed values, one value per axis, one spec per seed.

What every strategy builds its trials from, whether its cells are known up front (grid,
random, boundary: `sweeper.plan`) or proposed while it runs (optuna).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sweeper.errors import SweeperInputError
from sweeper.numbers import MAX_SEED, check_int
from sweeper.spec import TrialSpec, make_spec
from sweeper.sweep_fields import SweepFileError

if TYPE_CHECKING:
    from sweeper.sweep_fields import Sweep

Cell = dict[str, Any]  # axis path ("task.hardness") -> value


def cell_specs(sweep: Sweep, cell: Mapping[str, Any]) -> list[TrialSpec]:
    """The specs of one cell: the fixed values, the cell's axis values, one spec per seed."""
    groups: dict[str, dict[str, Any]] = {g: dict(v) for g, v in sweep.fixed.items()}
    for path, value in cell.items():
        group, name = path.split(".", 1)
        groups[group][name] = value
    try:
        if not sweep.seeds:
            return []
        first = make_spec(sweep.task, sweep.model, groups["task"], groups["model"],
                          groups["train"], sweep.seeds[0], sweep.device)
        # the seeds differ in the seed alone: the cell is validated and resolved once
        return [first, *(first.with_seed(check_int(seed, "seed", 0, MAX_SEED))
                         for seed in sweep.seeds[1:])]
    except SweeperInputError as exc:
        where = ", ".join(f"{k}={v!r}" for k, v in cell.items())
        raise SweepFileError(f"axes (cell {where}): {exc}") from None

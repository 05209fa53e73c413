"""Grid search: every combination of the axes' values, in file order, each with every seed."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from sweeper.strategies.base import PlannedPacks

if TYPE_CHECKING:
    from sweeper.sweep_fields import Sweep


def grid_cells(sweep: Sweep) -> list[dict[str, Any]]:
    """The product of the axes' values, in file order (the first axis varies slowest)."""
    paths = [axis.path for axis in sweep.axes]
    return [dict(zip(paths, combo)) for combo in itertools.product(*(a.values for a in sweep.axes))]


class GridStrategy(PlannedPacks):
    """Every pending spec of the grid (`plan.expand`), packed up front."""

    @classmethod
    def cells(cls, sweep: Sweep) -> list[dict[str, Any]]:
        return grid_cells(sweep)

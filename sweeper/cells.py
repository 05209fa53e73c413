"""A cell's trial specs: the sweep's fixed values, one value per axis, one spec per seed.

What every strategy builds its trials from, whether its cells are known up front (grid,
random, boundary: `sweeper.plan`) or proposed while it runs (optuna).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, replace
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
        first = replace(first, requested=realised(groups, first))
        # the seeds differ in the seed alone: the cell is validated and resolved once
        return [first, *(first.with_seed(check_int(seed, "seed", 0, MAX_SEED))
                         for seed in sweep.seeds[1:])]
    except SweeperInputError as exc:
        where = ", ".join(f"{k}={v!r}" for k, v in cell.items())
        raise SweepFileError(f"axes (cell {where}): {exc}") from None


def realised(requested: Mapping[str, Mapping[str, Any]], spec: TrialSpec
             ) -> tuple[tuple[str, Any], ...]:
    """The numbers asked for (`requested`: group -> name -> value, the sweep's fixed values and
    a cell's) that `spec` trains as other numbers, as (path, requested value) pairs: a task
    that realises a parameter on a grid (`Entry.steps`: copy's c in steps of 1/L) or in
    one form (`Entry.canonical`). Values that are not numbers are left out (a canonical null
    for a default such as head_merge `mean` means the same setting)."""
    return tuple((f"{group}.{name}", value)
                 for group, params in requested.items() for name, value in params.items()
                 if _is_number(value) and _is_number(spec.value(f"{group}.{name}"))
                 and not math.isclose(value, spec.value(f"{group}.{name}"), rel_tol=1e-12))
    # (relative: an Optuna step's k * (1/L) is k/L to the last digit or two)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Realised:
    """A value asked for that trains as another (see `realised`)."""

    path: str
    requested: Any
    trained: Any
    step: float | None  # the spacing the task trains it at (`Entry.steps`), if declared

    def line(self) -> str:
        return (f"note: {self.path} = {_g(self.requested)} trains as {_g(self.trained)}"
                f"{self._how()}; the trials store {_g(self.trained)} and keep "
                f"{_g(self.requested)} in their requested column (--strict refuses)")

    def refusal(self) -> str:
        return (f"{self.path}: got {_g(self.requested)}, which trains as {_g(self.trained)}"
                f"{self._how()}; allowed with --strict: values that train as given, such as "
                f"{_g(self.trained)}")

    def _how(self) -> str:
        if self.step is None:
            return ""
        return f" (the task trains it in steps of {step_text(self.step)} here)"


def step_text(step: float) -> str:
    """1/6 for a step of 1/6; else the number."""
    parts = 1 / step
    return f"1/{round(parts)}" if abs(parts - round(parts)) < 1e-9 else _g(step)


def _g(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def realised_values(specs: list[TrialSpec], sweep: Sweep) -> list[Realised]:
    """Every distinct value of `specs` asked for that trains as another, in plan order."""
    from sweeper.families import TASKS

    seen: dict[tuple[str, Any, Any], Realised] = {}
    for spec in specs:
        for path, value in spec.requested:
            group, name = path.split(".", 1)
            trained = spec.value(path)
            key = (path, value, trained)
            if key not in seen:
                steps = (TASKS.get(sweep.task).realisation_steps(_asked(sweep, spec))
                         if group == "task" else {})
                seen[key] = Realised(path, value, trained, steps.get(name))
    return list(seen.values())


def _asked(sweep: Sweep, spec: TrialSpec) -> dict[str, Any]:
    """The task parameters the sweep asked for at this spec: its fixed ones, its task axes'
    values, with the requested values put back where they trained as others."""
    axes = {a.name for a in sweep.axes if a.group == "task"}
    asked = {**sweep.fixed.get("task", {}), **{n: spec.task_params[n] for n in axes}}
    asked.update({p.split(".", 1)[1]: v for p, v in spec.requested if p.startswith("task.")})
    return asked


def grid_range(low: float, high: float, step: float) -> tuple[int, int]:
    """The first and last multiples k of `step` with low <= k step <= high (last < first:
    none)."""
    return math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)


def check_trainable_ranges(sweep: Sweep) -> None:
    """A range axis of a parameter the task trains on a grid (`trained_step`) must hold a
    value of that grid: else every value drawn from it would train outside it."""
    for axis in sweep.axes:
        step = trained_step(sweep, axis, ("uniform", "loguniform"))
        if step is None:
            continue
        first, last = grid_range(*axis.values, step)
        if last < first:
            raise SweepFileError(
                f"axes.{axis.path}.{axis.kind}: got {list(axis.values)}, which holds no value "
                f"the task trains at (it trains {axis.path} in steps of {step_text(step)} "
                f"here); allowed: a range holding a multiple of {step_text(step)}")


def trained_step(sweep: Sweep, axis: Any, kinds: tuple[str, ...] = ("uniform",)
                 ) -> float | None:
    """The spacing at which the task trains a float range axis (`Entry.steps`), when it is the
    same at every value the sweep's other task axes take (their grid values or range ends);
    None where none is declared, or where it depends on another axis (copy's c when L is an
    axis too). A search that proposes on this grid trains what it proposes."""
    from sweeper.families import TASKS

    if axis.group != "task" or axis.kind not in kinds:
        return None
    others = [a for a in sweep.axes if a.group == "task" and a.path != axis.path]
    entry = TASKS.get(sweep.task)
    found = set()
    for values in itertools.islice(itertools.product(*(a.values for a in others)), 64):
        asked = {**sweep.fixed.get("task", {}), **{a.name: v for a, v in zip(others, values)}}
        found.add(entry.realisation_steps(asked).get(axis.name))
    return found.pop() if len(found) == 1 else None

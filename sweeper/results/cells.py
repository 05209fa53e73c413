"""Cell statistics: the one definition of "success of a cell", used by every summary.

A cell is a group of trials with equal values of some axes (a grid point); its seeds are the
trials in it. The run summary, the phase diagram, the report, the Optuna warm start and any
sampler count successes here and nowhere else:

- A trial is *counted* when its status is in `COUNTED_STATUSES` and its outcome is known: a
  diverged run is a failure to learn; a `failed` run (the code raised) and a `stopped` one (an
  early-stopping scheduler cut it) say nothing about learning, and are not counted.
- A trial that shares the training of another trial of the same cell (`shared_with`) is one
  seed with it: not counted again (`shares_within_cell`).
- n_trials: every trial of the cell (any status); n: the counted ones; successes: counted
  trials whose outcome is true; p = successes / n; p_low, p_high: the Wilson score interval at
  `confidence`; median_steps: the median of the outcome's step column over the successes.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
import pandas as pd

from sweeper.results.errors import ResultsInputError
from sweeper.results.words import count

COUNTED_STATUSES = ("ok", "diverged")
CELL_COLUMNS = ("n_trials", "n", "successes", "p", "p_low", "p_high", "median_steps",
                "failed")


def wilson_interval(successes, n, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval for k successes out of n; NaN where n = 0."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denom = 1 + z**2 / n
        center = (p + z**2 / (2 * n)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    low = np.where(k == 0, 0.0, np.clip(center - half, 0, 1))  # exact at the ends: no 1e-17
    high = np.where(k == n, 1.0, np.clip(center + half, 0, 1))
    empty = n == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def counted(trials: pd.DataFrame, outcome: str = "learned",
            statuses: Sequence[str] = COUNTED_STATUSES) -> pd.Series:
    """Which trials count as seeds of their cell (see the module's docstring)."""
    ok = (trials["status"].isin(statuses) if "status" in trials.columns
          else pd.Series(True, index=trials.index))
    return ok & trials[outcome].astype("boolean").notna()


def cell_stats(trials: pd.DataFrame, axes: Sequence[str], outcome: str = "learned",
               steps: str | None = "auto", *,
               statuses: Sequence[str] = COUNTED_STATUSES,
               confidence: float = 0.95) -> pd.DataFrame:
    """One row per cell (the distinct values of `axes` present), sorted by the axes, with
    CELL_COLUMNS. `outcome` is a boolean column; `steps` the step column whose median over the
    successes is reported ("auto": the outcome's own, steps_to_learn for learned and
    attention_steps for attention_learned; None: no median)."""
    if steps == "auto":
        from sweeper.results.rules import SUCCESS_OUTCOMES

        steps = SUCCESS_OUTCOMES.get(outcome)
    for column in [*axes, outcome]:
        if column not in trials.columns:
            raise ResultsInputError(f"unknown column {column!r} for cell statistics; available: "
                                    + ", ".join(sorted(map(str, trials.columns))))
    axes = list(axes)
    is_counted = counted(trials, outcome, statuses) & ~shares_within_cell(trials, axes)
    success = is_counted & trials[outcome].astype("boolean").fillna(False)
    work = pd.DataFrame({
        "counted": is_counted.astype(int), "success": success.astype(int),
        "failed": (trials["status"] == "failed").astype(int) if "status" in trials.columns
        else 0,
        "steps": (pd.to_numeric(trials[steps], errors="coerce").astype(float).where(success)
                  if steps is not None and steps in trials.columns else np.nan),
    }, index=trials.index)
    if not axes:
        work["_all"] = "all"
        keys = ["_all"]
    else:
        work[axes] = trials[axes]
        keys = axes
    grouped = work.groupby(keys, sort=True, dropna=False)
    cells = pd.DataFrame({
        "n_trials": grouped.size(), "n": grouped["counted"].sum(),
        "successes": grouped["success"].sum(), "median_steps": grouped["steps"].median(),
        "failed": grouped["failed"].sum(),
    }).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        cells["p"] = np.where(cells["n"] > 0, cells["successes"] / cells["n"].clip(lower=1),
                              np.nan)
    cells["p_low"], cells["p_high"] = wilson_interval(cells["successes"], cells["n"], confidence)
    return cells[[*([] if not axes else axes), *CELL_COLUMNS]]


def category_cells(trials: pd.DataFrame, axes: Sequence[str], column: str,
                   values: Sequence[str] = (), *,
                   statuses: Sequence[str] = COUNTED_STATUSES) -> pd.DataFrame:
    """How a cell's seeds split over the names of a category outcome (copy's `regime`): one
    row per cell (the distinct values of `axes` present), sorted by the axes, with n (counted
    trials whose `column` is known: counted as `cell_stats` counts, one seed per shared
    training), a count column per name (`values` in their order, then any other seen), top
    (the most common name; a tie goes to the earlier one; None where n = 0) and top_count."""
    for name in [*axes, column]:
        if name not in trials.columns:
            raise ResultsInputError(f"unknown column {name!r} for cell statistics; available: "
                                    + ", ".join(sorted(map(str, trials.columns))))
    axes = list(axes)
    ok = (trials["status"].isin(statuses) if "status" in trials.columns
          else pd.Series(True, index=trials.index))
    known = ok & trials[column].notna() & ~shares_within_cell(trials, axes)
    names = trials[column].astype(object).where(known)
    seen = sorted(set(names.dropna()) - set(values))
    order = [*values, *seen]
    keys = [trials[a] for a in axes] if axes else [pd.Series("all", index=trials.index)]
    counts = (pd.get_dummies(names).reindex(columns=order, fill_value=0).astype(int)
              .groupby(keys, sort=True, dropna=False).sum())
    cells = counts.reset_index(drop=not axes)
    cells.insert(len(axes), "n", counts.sum(axis=1).to_numpy())
    table = counts.to_numpy()
    top = np.asarray(order, dtype=object)[table.argmax(axis=1)] if order else []
    cells["top"] = np.where(cells["n"].to_numpy() > 0, top, None) if order else None
    cells["top_count"] = table.max(axis=1) if order else 0
    return cells


def shares_within_cell(trials: pd.DataFrame, axes: Sequence[str]) -> pd.Series:
    """Which trials share the training of another trial of their own cell (`shared_with`: an
    equivalent config trained once): one seed with it, not two. A cell that pools over the
    parameter that made them equivalent (copy's hardness at c = 0) would count it twice."""
    if "shared_with" not in trials.columns or "trial_id" not in trials.columns:
        return pd.Series(False, index=trials.index)
    shared = trials["shared_with"]
    if not shared.notna().any():
        return pd.Series(False, index=trials.index)
    cell = (trials[list(axes)].astype(str).agg("\x1f".join, axis=1) if axes
            else pd.Series("", index=trials.index))
    cell_of = dict(zip(trials["trial_id"], cell))
    return pd.Series([isinstance(s, str) and cell_of.get(s) == c for s, c in zip(shared, cell)],
                     index=trials.index)


def seeds_to_resolve(level: float = 0.5, confidence: float = 0.95) -> int:
    """The fewest seeds with which a cell can be called learned or failed at all: all of
    them succeeding (or none) puts the Wilson interval above (below) `level` (4 at 0.5, 95%)."""
    n = 1
    while n < 10_000:
        low, _ = wilson_interval(n, n, confidence)
        _, high = wilson_interval(0, n, confidence)
        if float(low) > level and float(high) < level:
            return n
        n += 1
    return n


def resolution_warning(seeds: int, level: float = 0.5, confidence: float = 0.95,
                       min_seeds: int = 3) -> str | None:
    """A warning when `seeds` per cell can never resolve a cell under the phase rule (Wilson
    interval at `confidence` against `level`, at least `min_seeds` seeds); else None."""
    needed = max(seeds_to_resolve(level, confidence), min_seeds)
    if seeds >= needed:
        return None
    return (f"warning: {count(seeds, 'seed')} per cell cannot resolve a cell: with "
            f"{confidence:.0%} Wilson intervals around p = {level:g} a cell needs at least "
            f"{needed} seeds to be called learned or failed, so every cell will show as "
            f"unreliable or insufficient; use seeds: {needed} or more (in the file, or "
            f"--set seeds={needed}); `sweeper phase --min-seeds N` only moves where a cell "
            f"shows as insufficient (default {min_seeds})")

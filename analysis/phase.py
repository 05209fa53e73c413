"""Phase diagrams as plain data: where attention learning succeeds, fails, or heads recover it.

`compute_phase` turns trials (with outcomes) into a `PhaseDiagram`: per cell of two axes,
faceted by a third, the success probability over seeds with a Wilson interval, medians of
steps to learn and attention onset, a state, the recovery map and the p = 0.5 boundary.
Nothing here draws; `analysis.plots` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sweeper.numbers import shown
from sweeper.results import (
    COUNTED_STATUSES,
    DEFAULT_THRESHOLDS,
    SUCCESS_OUTCOMES,
    OutcomeRule,
    Thresholds,
    cell_stats,
    counted,
    success_outcomes,
    wilson_interval,
)
from sweeper.results.cells import category_cells, shares_within_cell
from sweeper.results.errors import python_arguments
from sweeper.results.reading import search_facts
from sweeper.results.stats import (
    ALPHA,
    compare_lottery,
    compare_rates,
    counts_heads,
    lottery_rate,
)
from sweeper.results.words import count

from .errors import AnalysisInputError, unknown_column
from .outcomes import (
    derived_columns,
    outcome_metrics,
    outcome_rules,
    outcome_threshold,
    with_outcomes,
)
from .swept import declared_axes, swept_columns

STATES = ("learned", "failed", "unreliable", "insufficient", "missing")
CONFIG_PREFIXES = ("task.", "model.", "optim.", "train.")
_FACET = "_facet"
LOTTERY_COLUMNS = ["heads_base", "ix", "iy", "n_base", "p_base", "base_low", "base_high",
                   "p_lottery", "lottery_low", "lottery_high", "n", "p", "p_low", "p_high",
                   "excess", "p_value", "power", "needed", "verdict", "beyond_lottery",
                   "below_lottery"]


@dataclass
class PhaseDiagram:
    """Everything a phase diagram shows, computed once and drawn or tabulated from here.

    cells: one row per (facet value, x, y) of the full grid of sampled axis values, with
    ix, iy (grid indices), n_trials (any status), n (seeds counted), successes, p, p_low,
    p_high, median_steps_to_learn, median_attention_onset, state, recovered, and n_shared:
    trials whose training is another cell's (an equivalent config, trained once: copy's
    hardness at c = 0), so that nobody takes those cells' seeds for independent ones.
    recovery: per facet value other than `base` and (x, y): p, p_base, delta = p - p_base
    (NaN unless both cells have at least min_seeds seeds), recovered; and the cell against its
    base cell by Fisher's exact test (sweeper.results.stats.compare_rates): p_value, power
    against a difference of 0.2, needed (seeds a cell, where it cannot tell) and verdict
    ("more learn", "fewer learn", "no difference" only with the power to have seen one, else
    "cannot tell").
    boundary: segments of the p = level boundary, one per pair of grid-adjacent cells with
    enough seeds whose p lie strictly on opposite sides of level; edge_* are the coordinates
    of the shared cell edge in grid-index units (cell centres at integer ix, iy).
    lottery: when the facet counts heads (`is_head_axis`), per head count H other than the
    reference count (one head when sampled) and (x, y): the rate H independent heads would
    reach from the reference cell's rate, p_lottery = 1 - (1 - p_base)^(H / base_heads), with
    lottery_low, lottery_high (the reference cell's Wilson bounds through the same map), beside
    the observed p, p_low, p_high; excess = p - p_lottery (NaN unless both cells have
    min_seeds seeds); the exact unconditional lottery test (sweeper.results.stats.
    compare_lottery): p_value, power against a difference of 0.2, needed (seeds a cell for
    that power, where it cannot tell) and verdict ("beyond lottery", "below lottery", "as
    lottery" only with the power to have seen otherwise, else "cannot tell: needs >= N
    seeds"); computed when first asked for; beyond_lottery and
    below_lottery: the test rejected, in that direction (false unless both cells have
    min_seeds seeds). Empty (no rows) for any other facet, or none.
    trial_regimes: which solution the seeds of each cell found, from the category outcome the
    trials' family declares (`regime_column`: copy's `regime`, aligned / offset / diffuse ...),
    not to be confused with a cell's `state` above (learned / failed, from its success rate):
    one row per cell of the grid (its facet, x, y, ix, iy) with n (counted seeds with a known
    regime), a count column per regime in the rule's order (`regime_codes`: regime -> the
    short code a map writes), top (the most common; None where n = 0), top_count and label
    (each regime's code and count, most common first, e.g. "O 9, D 5, A 2"). Empty when the
    trials carry no category outcome (a topic sweep, a cell summary).
    bins: per binned axis column (a continuous axis of a random or Optuna sweep), its
    `AxisBins`: the edges, and the interval labels ("[0.1, 0.3)") its cells carry in place of
    the sampled values (x_values / y_values are then the labels, in order).
    """

    x: str
    y: str
    facet: str | None
    x_values: list
    y_values: list
    facet_values: list
    base: object
    cells: pd.DataFrame
    recovery: pd.DataFrame
    boundary: pd.DataFrame
    level: float = 0.5
    confidence: float = 0.95
    min_seeds: int = 3
    accuracy_threshold: float | None = None
    outcome: str = "learned"
    pooled: list[str] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)
    sampling: Sampling | None = None  # a boundary search's view (`phase_from_results`)
    # the lottery table, or how to compute it (`lottery`)
    _lottery: pd.DataFrame | Callable[[], pd.DataFrame] | None = field(default=None, repr=False)
    trial_regimes: pd.DataFrame = field(default_factory=pd.DataFrame)
    regime_column: str | None = None
    regime_codes: dict[str, str] = field(default_factory=dict)
    bins: dict[str, AxisBins] = field(default_factory=dict)

    @property
    def lottery(self) -> pd.DataFrame:
        """The lottery table (the class doc), computed when first asked: its exact tests cost
        seconds where cells hold hundreds of seeds, and most views never show it."""
        if self._lottery is None:
            self._lottery = pd.DataFrame(columns=LOTTERY_COLUMNS)
        elif callable(self._lottery):
            self._lottery = self._lottery()
        return self._lottery

    def success_text(self) -> str:
        """What counts as success here, e.g. "attention learned: best head's attention
        accuracy ≥ 0.9"."""
        rules = {r.column: r for r in outcome_rules()}
        rule = rules.get(self.outcome, rules["learned"])
        t = self.accuracy_threshold
        below = getattr(rules.get(rule.steps), "kind", "") == "first_below"
        return rule.words + (f" {'<' if below else '≥'} {t:g}" if t is not None else " (stored)")

    def __repr__(self) -> str:
        facet = (f", facet {self.facet} in {self.facet_values}" if self.facet else "")
        states = self.cells["state"].value_counts()
        counts = ", ".join(f"{r} {int(states.get(r, 0))}" for r in STATES if states.get(r))
        excluded = (", excluded: " + ", ".join(f"{n} {why}" for why, n in self.excluded.items())
                    if self.excluded else "")
        return (f"<PhaseDiagram of {self.outcome}: {self.x} x {self.y}{facet}: "
                f"{len(self.x_values)} x "
                f"{len(self.y_values)} cells per facet; states: {counts}; "
                f"{count(len(self.boundary), 'boundary edge')} at p = {self.level}{excluded}>")

    def facet_cells(self, value: object) -> pd.DataFrame:
        """The cells of one facet value (all cells when there is no facet)."""
        if self.facet is None:
            return self.cells
        return self.cells[self.cells[self.facet] == value]

    def grid(self, column: str, value: object = None, frame: pd.DataFrame | None = None
             ) -> np.ndarray:
        """A (len(y_values), len(x_values)) array of one cells column for one facet value."""
        cells = self.facet_cells(value) if frame is None else frame
        out = np.full((len(self.y_values), len(self.x_values)), np.nan, dtype=object)
        out[cells["iy"].to_numpy(), cells["ix"].to_numpy()] = cells[column].to_numpy()
        return out

    def state_counts(self) -> pd.DataFrame:
        """Cells per state and facet value (a column per state)."""
        by = [self.facet] if self.facet else []
        counts = self.cells.groupby([*by, "state"], observed=False).size().unstack(
            "state", fill_value=0) if by else self.cells["state"].value_counts().to_frame().T
        return counts.reindex(columns=list(STATES), fill_value=0)


# ---------------------------------------------------------------- inputs

def _check_axes(trials: pd.DataFrame, axes: Sequence[str | None],
                outcome: str = "learned") -> None:
    named = [a for a in axes if a is not None]
    for a in named:
        if a not in trials.columns:
            raise unknown_column(a, trials.columns, "phase axes")
    if len(set(named)) != len(named):
        raise AnalysisInputError(f"phase axes must differ, got {', '.join(named)}")
    allowed = success_outcomes(outcome_rules(trials))
    if outcome not in allowed:
        raise AnalysisInputError(f"outcome: got {shown(outcome)}; allowed: "
                                 f"{', '.join(allowed)}")
    for column in (outcome,):
        if column not in trials.columns:
            raise AnalysisInputError(f"trials have no {column!r} column: load them with "
                                     "outcomes, or pass trajectories to recompute them")


def _sorted_unique(values: pd.Series) -> list:
    unique = pd.unique(values.dropna())
    try:
        return sorted(unique.tolist())
    except TypeError:
        return sorted(unique.tolist(), key=str)


def _counted(trials: pd.DataFrame, axes: list[str], statuses: Sequence[str]
             ) -> tuple[pd.DataFrame, dict[str, int]]:
    """The trials with axis values, and how many were left out and why."""
    excluded = {}
    missing_axis = trials[axes].isna().any(axis=1)
    if missing_axis.any():
        excluded["no axis value"] = int(missing_axis.sum())
    frame = trials[~missing_axis]
    if "status" in frame.columns:
        for status, count in frame.loc[~frame["status"].isin(statuses), "status"].value_counts(
                ).items():
            excluded[f"status {status}"] = int(count)
    return frame, excluded


def _pooled(frame: pd.DataFrame, keys: list[str]) -> list[str]:
    """Config columns that vary inside a cell: the cell pools over them (not the columns the
    families derive from others: task.lift varies in a binned cell with its co-occurrence)."""
    derived = set(derived_columns())
    config = [c for c in frame.columns if c.startswith(CONFIG_PREFIXES) and c not in keys
              and c not in derived]
    if not config or frame.empty:
        return []
    hashable = [c for c in config if frame[c].dtype != object]  # lists are not comparable
    varying = frame.groupby(keys, dropna=False)[hashable].nunique(dropna=False).max()
    return sorted(varying[varying > 1].index)


# ---------------------------------------------------------------- cells

def _cell_stats(frame: pd.DataFrame, keys: list[str], statuses: Sequence[str],
                outcome: str) -> pd.DataFrame:
    """n_trials, n, successes and medians per sampled cell: `sweeper.results.cell_stats`, the
    one definition of a cell's success, plus the median attention onset of counted seeds.
    median_steps_to_learn is the median step of success of `outcome` (steps_to_learn for
    learned, attention_steps for attention_learned)."""
    steps = success_outcomes(outcome_rules(frame))[outcome]
    cells = cell_stats(frame, keys, outcome, steps, statuses=statuses)
    onset = _float(frame, "attention_onset").where(counted(frame, outcome, statuses))
    onsets = onset.groupby([frame[k] for k in keys], sort=True, dropna=False).median()
    cells = cells.merge(onsets.rename("median_attention_onset").reset_index(), on=keys,
                        how="left")
    if "shared_with" in frame.columns:  # trials that share an equivalent trial's training
        shared = frame["shared_with"].notna().groupby([frame[k] for k in keys], sort=True,
                                                      dropna=False).sum()
        cells = cells.merge(shared.rename("n_shared").reset_index(), on=keys, how="left")
    return cells.rename(columns={"median_steps": "median_steps_to_learn"}).set_index(keys)[
        ["n_trials", "n", "successes", "median_steps_to_learn", "median_attention_onset",
         *[c for c in ("n_shared",) if c in cells.columns]]]


def _float(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame.columns:
        return pd.Series(np.nan, index=frame.index)
    return pd.to_numeric(frame[column], errors="coerce").astype(float)


def _full_grid(keys: list[str], values: list[list]) -> pd.DataFrame:
    """Every (facet, x, y) combination, with grid indices ix, iy."""
    index = pd.MultiIndex.from_product(values, names=keys)
    grid = index.to_frame(index=False)
    grid["ix"] = grid[keys[1]].map({v: i for i, v in enumerate(values[1])}).astype(int)
    grid["iy"] = grid[keys[2]].map({v: i for i, v in enumerate(values[2])}).astype(int)
    return grid


def _states(cells: pd.DataFrame, level: float, min_seeds: int) -> np.ndarray:
    conditions = [cells["n_trials"] == 0, cells["n"] < min_seeds,
                  cells["p_low"] > level, cells["p_high"] < level]
    return np.select(conditions, ["missing", "insufficient", "learned", "failed"], "unreliable")


def _grid_cells(stats: pd.DataFrame, keys: list[str], values: list[list], level: float,
                confidence: float, min_seeds: int) -> pd.DataFrame:
    """The full grid with each sampled cell's counts (`stats`, indexed by keys), p, Wilson
    interval and state."""
    cells = _full_grid(keys, values).merge(stats.reset_index(), on=keys, how="left")
    if "n_shared" not in cells.columns:  # a cell summary, or a store from before sharing
        cells["n_shared"] = 0
    for column in ("n_trials", "n", "successes", "n_shared"):
        cells[column] = cells[column].fillna(0).astype(int)
    with np.errstate(divide="ignore", invalid="ignore"):
        cells["p"] = np.where(cells["n"] > 0, cells["successes"] / cells["n"], np.nan)
    cells["p_low"], cells["p_high"] = wilson_interval(cells["successes"], cells["n"], confidence)
    cells["state"] = _states(cells, level, min_seeds)
    return cells


# ---------------------------------------------------------------- recovery and boundary

def _recovery(cells: pd.DataFrame, base: object, min_seeds: int) -> pd.DataFrame:
    """p(H) - p(base) per facet value H != base, where both cells have enough seeds."""
    columns = [_FACET, "x", "y", "ix", "iy", "p", "n", "successes", "state"]
    base_cells = cells.loc[cells[_FACET] == base, ["ix", "iy", "p", "n", "successes",
                                                   "state"]].rename(
        columns={"p": "p_base", "n": "n_base", "successes": "successes_base",
                 "state": "state_base"})
    other = cells.loc[cells[_FACET] != base, columns].merge(base_cells, on=["ix", "iy"],
                                                            how="left")
    enough = (other["n"] >= min_seeds) & (other["n_base"] >= min_seeds)
    other["delta"] = (other["p"] - other["p_base"]).where(enough)
    other["recovered"] = (other["state"] == "learned") & (other["state_base"] == "failed")
    tests = [_rates_test(*v) for v in zip(other["successes"], other["n"],
                                          other["successes_base"], other["n_base"])]
    for column in ("p_value", "power", "needed", "verdict"):
        other[column] = [t[column] for t in tests]
    other.loc[~enough, "verdict"] = f"insufficient: fewer than {min_seeds} seeds"
    return other


def _rates_test(k: float, n: float, k_base: float, n_base: float) -> dict:
    """A cell against its base cell: Fisher's exact test and its power (`PhaseDiagram`)."""
    if not (n > 0 and n_base > 0):
        return {"p_value": np.nan, "power": np.nan, "needed": None, "verdict": "no seeds"}
    test = compare_rates(int(k), int(n), int(k_base), int(n_base), higher="more learn",
                         lower="fewer learn", same="no difference")
    return {"p_value": test.p_value, "power": test.power, "needed": _needed(test),
            "verdict": test.verdict}


def _needed(test) -> int | None:
    """The seeds a cell needs, where its verdict cannot tell (the search for it enumerates
    larger designs: asked of every cell, it would cost a diagram of many seeds minutes)."""
    return test.needed if test.verdict.startswith("cannot tell") else None


def is_head_axis(column: str | None, values: Sequence = ()) -> bool:
    """Whether a facet counts heads (`model.heads`, or any `*.heads`/`n_heads`): only then is
    "independent heads" a baseline at all. Its values must be positive integers."""
    if not counts_heads(column):
        return False
    try:
        return all(float(v) == int(v) and int(v) >= 1 for v in values)
    except (TypeError, ValueError):
        return False


def _lottery(cells: pd.DataFrame, values: list, min_seeds: int) -> pd.DataFrame:
    """Observed rate at H heads beside the lottery from the reference head count (one head
    if sampled, else the fewest), per (x, y); see `PhaseDiagram.lottery`."""
    ref = 1 if 1 in values else min(values)
    base = cells.loc[cells[_FACET] == ref, ["ix", "iy", "n", "p", "p_low", "p_high"]].rename(
        columns={"n": "n_base", "p": "p_base", "p_low": "base_low", "p_high": "base_high"})
    other = cells.loc[cells[_FACET] != ref, [_FACET, "x", "y", "ix", "iy", "n", "p", "p_low",
                                             "p_high"]].merge(base, on=["ix", "iy"], how="left")
    heads = other[_FACET].astype(float)
    other["heads_base"] = ref
    other["p_lottery"] = lottery_rate(other["p_base"], heads, ref)
    other["lottery_low"] = lottery_rate(other["base_low"], heads, ref)
    other["lottery_high"] = lottery_rate(other["base_high"], heads, ref)
    enough = (other["n"] >= min_seeds) & (other["n_base"] >= min_seeds)
    other["excess"] = (other["p"] - other["p_lottery"]).where(enough)
    tests = [_lottery_test(*values, ref) for values in zip(
        other["p"], other["n"], other["p_base"], other["n_base"], heads)]
    for column in ("p_value", "power", "needed", "verdict"):
        other[column] = [t[column] for t in tests]
    other.loc[~enough, "verdict"] = f"insufficient: fewer than {min_seeds} seeds"
    significant = enough & (other["p_value"] <= ALPHA)
    other["beyond_lottery"] = significant & (other["excess"] > 0)
    other["below_lottery"] = significant & (other["excess"] < 0)
    return other[[_FACET, "x", "y", *LOTTERY_COLUMNS]].reset_index(drop=True)


def lottery_summary(lottery: pd.DataFrame) -> str:
    """One sentence over a lottery table: how many cells beyond, below, as the lottery with the
    power to tell, and how many cannot tell (the shortfall in seeds of the neediest)."""
    verdicts = lottery["verdict"].astype(str)
    unsure = verdicts.str.startswith("cannot tell")
    needed = pd.to_numeric(lottery.loc[unsure, "needed"], errors="coerce")
    most = (f" (up to {int(needed.max())} seeds a cell needed)" if needed.notna().any()
            else "")
    return (f"{int(lottery['beyond_lottery'].sum())} of {count(len(lottery), 'cell')} beyond "
            f"the lottery, {int(lottery['below_lottery'].sum())} below it, "
            f"{int((verdicts == 'as lottery').sum())} as it with the power to tell, "
            f"{int(unsure.sum())} cannot tell at 0.2{most}")


def _lottery_test(p: float, n: float, p_base: float, n_base: float, heads: float,
                  ref: object) -> dict:
    """The exact lottery test of one cell against its reference cell (counts from p and n)."""
    if not (n > 0 and n_base > 0):
        return {"p_value": np.nan, "power": np.nan, "needed": None, "verdict": "no seeds"}
    test = compare_lottery(round(p_base * n_base), int(n_base), round(p * n), int(n),
                           float(heads), float(ref))
    return {"p_value": test.p_value, "power": test.power, "needed": _needed(test),
            "verdict": test.verdict}


def _no_lottery(facet: str | None) -> pd.DataFrame:
    """The empty lottery table of a diagram whose facet does not count heads."""
    return pd.DataFrame(columns=[_FACET, "x", "y", *LOTTERY_COLUMNS]).astype(
        {"beyond_lottery": bool, "below_lottery": bool})


def heads_aligned(trials: pd.DataFrame, axes: Sequence[str], *, column: str = "attention_heads",
                  statuses: Sequence[str] = COUNTED_STATUSES) -> pd.DataFrame:
    """How many heads aligned per trial, counted per cell: one row per cell of `axes` with n
    (seeds with a known count) and a column per count 0, 1, 2, ... (trials whose `column`,
    copy's `attention_heads`, equals it). Whether averaged heads win by one lucky head or by
    several is what tells a lottery from changed dynamics; a rate alone cannot."""
    for name in [*axes, column]:
        if name not in trials.columns:
            raise unknown_column(name, trials.columns, "heads aligned")
    axes = list(axes)
    ok = trials["status"].isin(statuses) if "status" in trials.columns else True
    keep = trials[ok & trials[column].notna() & ~shares_within_cell(trials, axes)]
    if keep.empty:
        return pd.DataFrame(columns=[*axes, "n"])
    aligned = pd.to_numeric(keep[column]).astype(int).rename("_aligned")
    keys = [keep[a] for a in axes] if axes else [pd.Series("all", index=keep.index)]
    table = aligned.groupby([*keys, aligned]).size().unstack("_aligned", fill_value=0)
    table = table.reindex(columns=range(int(aligned.max()) + 1), fill_value=0)
    table.columns.name = None
    table.insert(0, "n", table.sum(axis=1))
    return table.reset_index(drop=not axes)


def _boundary(cells: pd.DataFrame, level: float, min_seeds: int) -> pd.DataFrame:
    """Edges between grid-adjacent cells with enough seeds whose p straddle the level."""
    usable = cells[cells["n"] >= min_seeds]
    keep = [_FACET, "ix", "iy", "x", "y", "p"]
    segments = []
    for dx, dy in ((1, 0), (0, 1)):
        nxt = usable[keep].assign(ix=usable["ix"] - dx, iy=usable["iy"] - dy)
        pairs = usable[keep].merge(nxt, on=[_FACET, "ix", "iy"], suffixes=("_a", "_b"))
        side_a, side_b = pairs["p_a"] - level, pairs["p_b"] - level
        pairs = pairs[side_a * side_b < 0].copy()
        pairs["ix_b"], pairs["iy_b"] = pairs["ix"] + dx, pairs["iy"] + dy
        ex, ey = pairs["ix"] + dx / 2, pairs["iy"] + dy / 2
        pairs["edge_x0"], pairs["edge_y0"] = ex - dy / 2, ey - dx / 2
        pairs["edge_x1"], pairs["edge_y1"] = ex + dy / 2, ey + dx / 2
        segments.append(pairs.rename(columns={"ix": "ix_a", "iy": "iy_a"}))
    columns = [_FACET, "x_a", "y_a", "x_b", "y_b", "ix_a", "iy_a", "ix_b", "iy_b", "p_a", "p_b",
               "edge_x0", "edge_y0", "edge_x1", "edge_y1"]
    return pd.concat(segments, ignore_index=True)[columns]


def _default_base(facet_values: list) -> object:
    """The facet value the recovery map compares with: the smallest (one head, the fewest
    distractors, keys frozen); name another with `base`."""
    return facet_values[0] if facet_values else None


def _rename(frame: pd.DataFrame, x: str, y: str, facet: str | None) -> pd.DataFrame:
    """Internal names (x, y, _facet, x_a...) back to the columns' own names."""
    names = {"x": x, "y": y, "x_a": f"{x}_a", "x_b": f"{x}_b", "y_a": f"{y}_a", "y_b": f"{y}_b"}
    if facet is None:
        return frame.drop(columns=[_FACET]).rename(columns=names)
    return frame.rename(columns={**names, _FACET: facet})



# ---------------------------------------------------------------- bins of continuous axes

DEFAULT_BINS = 5  # per continuous axis of a random or Optuna sweep, unless told otherwise
MAX_BINS = 1000
BIN_METHODS = ("quantile", "width")


@dataclass(frozen=True)
class AxisBins:
    """The bins of one continuous axis: edges (ascending, len(labels) + 1 of them) and the
    label of each bin, its interval "[low, high)" (the last one closed, "[low, high]").
    method: quantile (about as many trials per bin) or width (equal widths, in log space on
    a log axis)."""

    column: str
    method: str
    edges: list[float]
    labels: list[str]

    def index(self, values: pd.Series) -> np.ndarray:
        """Each value's bin number: [edges[i], edges[i + 1]), the last bin closed (values
        outside go to the nearest end bin; read it only where the value is not missing)."""
        v = pd.to_numeric(values, errors="coerce").to_numpy(float)
        return np.clip(np.searchsorted(self.edges, v, side="right") - 1, 0, len(self.labels) - 1)

    def assign(self, values: pd.Series) -> pd.Series:
        """Each value's bin label (None where the value is missing)."""
        out = np.asarray(self.labels, dtype=object)[self.index(values)]
        out[pd.to_numeric(values, errors="coerce").isna().to_numpy()] = None
        return pd.Series(out, index=values.index, dtype=object)

    def describe(self) -> str:
        """'task.hardness in 5 quantile bins: edges 0, 0.2, ..., 1'."""
        edges = ", ".join(_edge_texts(self.edges))
        return f"{self.column} in {len(self.labels)} {self.method} bins: edges {edges}"


def _edge_texts(edges: Sequence[float]) -> list[str]:
    """Edges as short numbers, with as many significant digits as keep them distinct."""
    for digits in range(3, 16):
        texts = [f"{e:.{digits}g}" for e in edges]
        if len(set(texts)) == len(texts):
            return texts
    return [repr(float(e)) for e in edges]


def axis_bins(column: str, values: pd.Series, count: int, method: str = "quantile",
              log: bool = False) -> AxisBins | None:
    """`count` bins of a numeric column's values, or None when it has no more than `count`
    distinct values (each value is then its own cell) or is not numeric."""
    if method not in BIN_METHODS:
        raise AnalysisInputError(f"bins method: got {shown(method)}; allowed: "
                                 f"{', '.join(BIN_METHODS)}")
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        return None
    v = pd.to_numeric(values, errors="coerce").dropna().to_numpy(float)
    v = v[np.isfinite(v)]
    if len(np.unique(v)) <= count:
        return None
    if method == "quantile":
        edges = np.quantile(v, np.linspace(0, 1, count + 1))
    elif log and v.min() > 0:
        edges = np.exp(np.linspace(math.log(v.min()), math.log(v.max()), count + 1))
    else:
        edges = np.linspace(v.min(), v.max(), count + 1)
    edges = np.unique(edges)
    edges[0], edges[-1] = v.min(), v.max()  # exactly the sampled range, not a rounding off
    texts = _edge_texts(edges)
    labels = [f"[{a}, {b}{']' if i == len(edges) - 2 else ')'}"
              for i, (a, b) in enumerate(zip(texts[:-1], texts[1:]))]
    return AxisBins(column, method, [float(e) for e in edges], labels)


def bin_counts(bins: int | Mapping[str, int] | None, x: str, y: str) -> dict[str, int]:
    """{column: count} from `bins`: one count for both axes, or a mapping whose keys are
    "x", "y" or the axes' columns (0 leaves an axis unbinned)."""
    if bins is None:
        return {}
    if not isinstance(bins, Mapping):
        bins = {"x": bins, "y": bins}
    counts = {}
    for key, n in bins.items():
        column = {"x": x, "y": y}.get(key, key)
        if column not in (x, y):
            raise AnalysisInputError(f"bins: got axis {shown(key)}; allowed: x, y, {x}, {y}")
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or not (
                n == 0 or 2 <= n <= MAX_BINS):
            raise AnalysisInputError(f"bins: got {shown(n)} for {key}; allowed: an integer "
                                     f"from 2 to {MAX_BINS}, or 0 for no bins")
        if n:
            counts[column] = int(n)
    return counts


def with_bins(trials: pd.DataFrame, bins: Mapping[str, AxisBins]) -> pd.DataFrame:
    """The trials with each binned axis column replaced by its bin label, so that a cell of a
    binned diagram ({column: label}) selects its trials as an unbinned cell does."""
    if not bins:
        return trials
    return trials.assign(**{c: b.assign(trials[c]) for c, b in bins.items() if c in trials})


def _binned(frame: pd.DataFrame, counts: Mapping[str, int], method: str,
            scales: Mapping[str, str] | None) -> dict[str, AxisBins]:
    scales = scales or {}
    found = {}
    for column, n in counts.items():
        made = axis_bins(column, frame[column], n, method, scales.get(column) == "log")
        if made is not None:
            found[column] = made
    return found

# ---------------------------------------------------------------- entry points

def compute_phase(trials: pd.DataFrame, x: str, y: str, facet: str | None = None, *,
                  min_seeds: int = 3, level: float = 0.5, confidence: float = 0.95,
                  base: object = None, statuses: Sequence[str] = COUNTED_STATUSES,
                  accuracy_threshold: float | None = None,
                  outcome: str = "learned", grid: Mapping[str, Sequence] | None = None,
                  bins: int | Mapping[str, int] | None = None, bins_method: str = "quantile",
                  scales: Mapping[str, str] | None = None) -> PhaseDiagram:
    """The phase diagram of trials that carry the `outcome` column (stored or recomputed):
    `learned` (token accuracy) or `attention_learned` (the best head's attention accuracy).

    A seed counts when its status is in `statuses` (a diverged run is a failure to learn; a
    `failed` run is an infrastructure failure and says nothing) and its `learned` is known.
    States: missing (no trial at that grid point), insufficient (fewer than min_seeds seeds
    counted), learned (Wilson lower bound > level), failed (upper bound < level), else
    unreliable. recovered: learned at a facet value whose `base` cell (one head) failed.

    bins: bin the x and y axes' sampled values (a random or Optuna sweep's continuous axes)
    into this many bins, or per axis {"x": 5, "y": 4} (keys "x", "y" or the columns); an axis
    with no more distinct values than its count, or not numeric, keeps its values.
    bins_method: quantile (about as many trials per bin) or width (equal widths; in log space
    where `scales` names the column "log"). The edges are `PhaseDiagram.bins`.
    """
    _check_axes(trials, [x, y, facet], outcome)
    counts = bin_counts(bins, x, y)
    if bins_method not in BIN_METHODS:
        raise AnalysisInputError(f"bins method: got {shown(bins_method)}; allowed: "
                                 f"{', '.join(BIN_METHODS)}")
    if min_seeds < 1 or not 0 < level < 1 or not 0 < confidence < 1:
        raise AnalysisInputError(
            f"min_seeds {min_seeds} must be >= 1, level {level} and confidence {confidence} "
            "in (0, 1)")
    frame, excluded = _counted(trials, [a for a in (x, y, facet) if a], statuses)
    if frame.empty:
        raise AnalysisInputError(f"no trials with values of {x}, {y} to draw a phase diagram of")
    axes_bins = _binned(frame, {c: n for c, n in counts.items() if c not in (grid or {})},
                        bins_method, scales)
    frame = with_bins(frame, axes_bins).assign(**{_FACET: frame[facet] if facet else "all"})
    keys = [_FACET, x, y]
    values = [_sorted_unique(frame[k]) for k in keys]
    for i, column in enumerate([facet, x, y]):  # grid: a sweep's values, sampled or not
        if grid and column in grid:
            values[i] = _sorted_unique(pd.Series([*values[i], *grid[column]]))
        if column in axes_bins:  # every bin, in order (an empty one is a missing cell)
            values[i] = list(axes_bins[column].labels)
    stats = _cell_stats(frame, keys, statuses, outcome)
    phase = _assemble(stats, keys, values, x, y, facet, min_seeds=min_seeds, level=level,
                      confidence=confidence, base=base, accuracy_threshold=accuracy_threshold,
                      outcome=outcome,
                      pooled=_pooled(frame, keys[1:] + ([facet] if facet else [])),
                      excluded=excluded)
    phase.bins = axes_bins
    rule = _category_rule(frame)
    if rule is not None:
        phase.regime_column, phase.regime_codes = rule.column, regime_codes(rule.values)
        phase.trial_regimes = _trial_regimes(frame, keys, values, statuses, rule, facet)
    return phase


def _category_rule(trials: pd.DataFrame) -> OutcomeRule | None:
    """The first category outcome (`OutcomeRule.is_category`) of the trials' families that
    the trials carry, or None."""
    return next((r for r in outcome_rules(trials)
                 if r.is_category and r.column in trials.columns), None)


def regime_codes(names: Sequence[str]) -> dict[str, str]:
    """A short code per regime for a map's cells: the initials of its words (not_copying: NC),
    or the names themselves when two would share a code."""
    codes = {n: "".join(w[0] for w in n.split("_") if w).upper() for n in names}
    return codes if len(set(codes.values())) == len(codes) else {n: n for n in names}


def _trial_regimes(frame: pd.DataFrame, keys: list[str], values: list[list],
                   statuses: Sequence[str], rule: OutcomeRule, facet: str | None
                   ) -> pd.DataFrame:
    """`PhaseDiagram.trial_regimes`: `category_cells` on the full grid, with labels."""
    counts = category_cells(frame, keys, rule.column, rule.values, statuses=statuses)
    names = [c for c in counts.columns if c not in (*keys, "n", "top", "top_count")]
    grid = _full_grid(keys, values).merge(counts, on=keys, how="left")
    for column in ("n", "top_count", *names):
        grid[column] = grid[column].fillna(0).astype(int)
    grid["top"] = grid["top"].astype(object).where(grid["n"] > 0, None)
    codes = {**{n: n for n in names}, **regime_codes(rule.values)}
    grid["label"] = [", ".join(f"{codes[n]} {row[n]}" for n in sorted(
        (n for n in names if row[n]), key=lambda n: -row[n])) for _, row in grid.iterrows()]
    return grid.drop(columns=[_FACET]) if facet is None else grid.rename(columns={_FACET: facet})


def _assemble(stats: pd.DataFrame, keys: list[str], values: list[list], x: str, y: str,
              facet: str | None, *, min_seeds: int, level: float, confidence: float,
              base: object, accuracy_threshold: float | None, outcome: str,
              pooled: list[str], excluded: dict[str, int]) -> PhaseDiagram:
    """Grid, states, recovery and boundary from per-cell counts: one code path for trials
    (`compute_phase`) and for a sweep's cell summary (`phase_from_summary`)."""
    cells = _grid_cells(stats, keys, values, level, confidence, min_seeds)
    cells = cells.rename(columns={x: "x", y: "y"})
    base = _default_base(values[0]) if base is None else base
    if facet is not None and base not in values[0]:
        raise AnalysisInputError(f"base {base!r} is not a value of {facet}: {values[0]}")
    recovery = _recovery(cells, base, min_seeds) if facet else pd.DataFrame(
        columns=[_FACET, "x", "y", "ix", "iy", "p", "p_base", "delta", "recovered"])
    cells["recovered"] = False
    if facet:
        hit = recovery.loc[recovery["recovered"], [_FACET, "ix", "iy"]]
        marks = cells[[_FACET, "ix", "iy"]].merge(hit.assign(_hit=True), how="left")["_hit"]
        cells["recovered"] = marks.fillna(False).astype(bool).to_numpy()
    boundary = _boundary(cells, level, min_seeds)
    def lottery() -> pd.DataFrame:
        table = (_lottery(cells, values[0], min_seeds)
                 if facet and is_head_axis(facet, values[0]) and len(values[0]) > 1
                 else _no_lottery(facet))
        return _rename(table, x, y, facet)

    return PhaseDiagram(
        x=x, y=y, facet=facet, x_values=values[1], y_values=values[2],
        facet_values=values[0] if facet else [None], base=base if facet else None,
        cells=_rename(cells, x, y, facet), recovery=_rename(recovery, x, y, facet),
        boundary=_rename(boundary, x, y, facet), level=level, confidence=confidence,
        min_seeds=min_seeds, accuracy_threshold=accuracy_threshold, outcome=outcome,
        pooled=pooled, excluded=excluded, _lottery=lottery)


def phase_from_summary(summary: pd.DataFrame, x: str, y: str, facet: str | None = None, *,
                       outcome: str = "learned", min_seeds: int = 3, level: float = 0.5,
                       confidence: float = 0.95, base: object = None,
                       accuracy_threshold: float | None = None) -> PhaseDiagram:
    """The phase diagram from a sweep's cell summary (`sweeper.results.summary`,
    RESULTS/SWEEP/cells.parquet: one row of counts per configuration), without reading a
    trial: the cells, states, recovery and boundary `compute_phase` gives for the stored
    outcomes (the trainer's default thresholds). median_steps_to_learn is the mean step of
    success here (medians do not add up over configurations); median_attention_onset is NaN.
    """
    from sweeper.results.summary import outcome_columns, summary_cells

    for a in (x, y, facet):
        if a is not None and a not in summary.columns:
            raise unknown_column(a, [c for c in summary.columns
                                     if c.startswith(CONFIG_PREFIXES)], "phase axes")
    named = [a for a in (x, y, facet) if a is not None]
    if len(set(named)) != len(named):
        raise AnalysisInputError(f"phase axes must differ, got {', '.join(named)}")
    if outcome not in SUCCESS_OUTCOMES or outcome_columns(outcome)[0] not in summary.columns:
        raise AnalysisInputError(f"outcome: got {shown(outcome)}; allowed: " + ", ".join(
            o for o in SUCCESS_OUTCOMES if outcome_columns(o)[0] in summary.columns))
    axes = named
    missing_axis = summary[axes].isna().any(axis=1)
    excluded = {}
    if missing_axis.any():
        excluded["no axis value"] = int(summary.loc[missing_axis, "n_trials"].sum())
    frame = summary[~missing_axis]
    for status in ("failed", "stopped"):
        if status in frame.columns and int(frame[status].sum()):
            excluded[f"status {status}"] = int(frame[status].sum())
    if frame.empty:
        raise AnalysisInputError(f"no trials with values of {x}, {y} to draw a phase diagram of")
    frame = frame.assign(**{_FACET: frame[facet] if facet else "all"})
    keys = [_FACET, x, y]
    values = [_sorted_unique(frame[k]) for k in keys]
    stats = summary_cells(frame, keys, outcome, confidence).rename(
        columns={"median_steps": "median_steps_to_learn"})
    stats["median_attention_onset"] = np.nan
    stats = stats.set_index(keys)[["n_trials", "n", "successes", "median_steps_to_learn",
                                   "median_attention_onset", "n_shared"]]
    return _assemble(stats, keys, values, x, y, facet, min_seeds=min_seeds, level=level,
                     confidence=confidence, base=base, accuracy_threshold=accuracy_threshold,
                     outcome=outcome, pooled=_pooled(frame, keys[1:] + ([facet] if facet else [])),
                     excluded=excluded)


PREFERRED_AXES = ("task.cooccurrence", "task.hardness", "task.distractors", "task.length",
                  "task.vocab", "task.classes", "task.topic_words",
                  "task.samples", "train.lr", "model.width", "model.dim", "train.batch_size",
                  "train.steps")
PREFERRED_FACETS = ("model.heads", "model.classifier", "model.attention", "model.cell",
                    "model.train_keys", "model.train_embeddings")


def default_axes(trials: pd.DataFrame, manifests: Mapping[str, Mapping] | None = None
                 ) -> tuple[str, str, str | None]:
    """x, y and facet for a sweep: the swept columns (`analysis.swept`: not the ones derived
    from them, such as copy's task.vocab in a sweep over c), in the order a researcher expects
    (co-occurrence, then hardness or distractors; heads or classifier as the facet)."""
    config = [c for c in trials.columns if c.startswith(CONFIG_PREFIXES)
              and trials[c].dtype != object]
    # the sweep's declared axes count from its first pack on (a live sweep's first cells may
    # vary in one of them only: its axes must not change as packs land)
    declared = set().union(*(declared_axes(m) or () for m in (manifests or {}).values()))
    swept = set(swept_columns(trials, manifests)) | declared
    varying = [c for c in config if c in swept]
    facet = next((c for c in PREFERRED_FACETS if c in varying), None)
    swept = [c for c in PREFERRED_AXES if c in varying and c != facet]
    swept += [c for c in varying if c not in swept and c != facet]
    fixed = [c for c in PREFERRED_AXES if c in config and c not in varying]
    axes = swept + fixed
    if len(axes) < 2:
        raise AnalysisInputError(
            f"cannot choose phase axes: give x and y (columns: {', '.join(config)})")
    return axes[0], axes[1], facet


def representative_cells(phase: PhaseDiagram, limit: int = 4) -> list[dict]:
    """Cells worth showing trajectories of, each {column: value}, all distinct.

    Where an axis or the facet counts heads (`is_head_axis`): one task cell at the reference
    head count (one head when sampled) and at the other head counts sampled there, the task
    cell where more heads help most (a recovered cell first, then the largest difference in p
    between cells with enough seeds, then in p at all); never a cell whose trials all share
    another cell's training (copy's hardness at c = 0). Otherwise one learned, one failed and
    one unreliable cell, or distinct sampled cells spread over the grid.
    """
    keys = [k for k in (phase.facet, phase.x, phase.y) if k]
    cells = phase.cells[phase.cells["n"] > 0]
    cells = cells[~((cells["n_shared"] > 0) & (cells["n_shared"] >= cells["n_trials"]))]
    head = next((k for k in keys if is_head_axis(k, cells[k].unique())), None)
    compared = head or phase.facet  # else the facet's values against its base
    if compared:
        values = sorted(cells[compared].unique().tolist(), key=_order)
        ref = (1 if 1 in values else values[0] if values else None) if head else phase.base
        chosen = _comparison(phase, cells, keys, compared, ref, limit)
        if len(chosen) > 1:
            return chosen
    chosen = []
    for state in ("learned", "failed", "unreliable"):
        match = cells[cells["state"] == state]
        if len(match) and len(chosen) < limit:
            row = match.iloc[len(match) // 2]
            chosen.append({k: row[k] for k in keys})
    if len(chosen) < 2 and len(cells):  # spread over the grid, never the first rows alone
        spread = np.unique(np.linspace(0, len(cells) - 1, min(limit, len(cells))).round())
        for i in spread.astype(int):
            cell = {k: cells.iloc[i][k] for k in keys}
            if cell not in chosen and len(chosen) < limit:
                chosen.append(cell)
    return chosen


def _order(value: object) -> tuple:
    """Numbers by value, anything else by its text, numbers first."""
    return (0, value, "") if isinstance(value, int | float | np.number) else (1, 0, str(value))


def _comparison(phase: PhaseDiagram, cells: pd.DataFrame, keys: list[str], head: str,
                ref: object, limit: int) -> list[dict]:
    """The same task cell at `ref` (one head, or the facet's base) and at the other values of
    `head` sampled there (`representative_cells`)."""
    if cells[head].nunique() < 2 or ref is None:
        return []
    task = [k for k in keys if k != head]
    best, best_score = None, -np.inf
    for _, group in cells.groupby(task, sort=True) if task else [((), cells)]:
        base = group[group[head] == ref]
        others = group[group[head] != ref]
        if base.empty or others.empty:
            continue
        gain = others["p"] - float(base["p"].iloc[0])
        enough = (others["n"] >= phase.min_seeds) & (int(base["n"].iloc[0]) >= phase.min_seeds)
        score = (10.0 * bool(others["recovered"].any()) + 5.0 * bool(enough.any())
                 + float(gain[enough].max() if enough.any() else gain.max()))
        if score > best_score:
            best, best_score = group, score
    if best is None:
        return []
    rows = best.iloc[sorted(range(len(best)), key=lambda i: _order(best[head].iloc[i]))]
    rows = pd.concat([rows[rows[head] == ref], rows[rows[head] != ref].tail(limit - 1)])
    return [{k: (row[k].item() if isinstance(row[k], np.generic) else row[k]) for k in keys}
            for _, row in rows.iterrows()]


@python_arguments
def phase_from_results(results, x: str, y: str, facet: str | None = None, *,
                       thresholds: Thresholds = DEFAULT_THRESHOLDS, outcome: str | None = None,
                       bins: int | Mapping[str, int] | None | str = "auto",
                       **kwargs) -> PhaseDiagram:
    """Recompute outcomes from the trajectories at `thresholds`, then `compute_phase` of
    `outcome` (default: the one the sweep's family names in its manifest).

    bins: as `compute_phase`'s; "auto" (the default): DEFAULT_BINS per continuous axis when the
    sweep draws its cells at random (a random or Optuna search, `default_bins`), none for a
    grid, whose values are its cells. Log-uniform axes are binned in log space by width.
    x, y and facet may be short names, as on the command line (`heads` for model.heads)."""
    from sweeper.results.schema import resolve_column

    columns = list(results.trials.columns)
    x, y = (resolve_column(a, columns, f, error=AnalysisInputError)
            for a, f in ((x, "x"), (y, "y")))
    facet = None if facet is None else resolve_column(facet, columns, "facet",
                                                      error=AnalysisInputError)
    outcome = outcome or default_outcome(results)
    if isinstance(bins, str):
        if bins != "auto":
            raise AnalysisInputError(f"bins: got {shown(bins)}; allowed: auto, an integer, "
                                     "a mapping of axis to integer, or None")
        bins = default_bins(results)
    kwargs.setdefault("scales", _search_scales(results))
    trials = results.trials
    if not stored_outcomes_current(results, thresholds):
        trials = with_outcomes(trials, outcome_trajectories(results), thresholds)
    threshold = outcome_threshold(trials, outcome, thresholds)
    search = boundary_search(results, outcome, [a for a in (facet, x, y) if a])
    phase = compute_phase(trials, x, y, facet, accuracy_threshold=threshold, outcome=outcome,
                          grid=search["grid"] if search else None, bins=bins, **kwargs)
    if search is not None:  # a boundary sweep: what it sampled and what its posterior says
        phase.sampling = sampling_view(phase, search["target"], search["margin"],
                                       search["model"])
    return phase


def draws_cells(results) -> bool:
    """Whether the loaded sweeps sampled their cells at random (a random or Optuna search: the
    manifest's search facts), not on a grid; a boundary search samples a grid's cells."""
    return manifests_draw_cells(list(getattr(results, "manifests", {}).values()))


def manifests_draw_cells(manifests: Sequence[Mapping]) -> bool:
    """`draws_cells` of the sweeps these manifests describe (the dashboard's one)."""
    if not manifests:
        return False
    facts = [search_facts(m) for m in manifests]
    return all(f["search_draws_cells"] and not f["search_samples_level_set"] for f in facts)


def default_bins(results) -> int | None:
    """DEFAULT_BINS for a sweep that drew its cells at random, None (its values) for a grid."""
    return DEFAULT_BINS if draws_cells(results) else None


def _search_scales(results) -> dict[str, str]:
    """'log' for the axes a sweep file draws log-uniform (`SearchInfo.scales`)."""
    from .search import search_info

    scales: dict[str, str] = {}
    for manifest in getattr(results, "manifests", {}).values():
        scales.update(search_info(manifest).scales())
    return scales


@dataclass
class Sampling:
    """A boundary search's view of the diagram's grid: which cells it sampled and what the
    posterior it proposes from (`sweeper.results.levelset`, fed the diagram's counts) says of
    every cell, sampled or not.

    cells: one row per cell of `PhaseDiagram.cells` (its facet, x, y, ix, iy) with sampled (the
    cell has trials), share (the posterior median of the success share), share_low,
    share_high (its interval at `confidence`), decided (the interval clears target +- margin),
    above (share >= target) and band (the interval contains the target: the boundary's
    confidence band).
    boundary: edges between grid-adjacent cells whose posterior medians lie on opposite sides
    of the target, columns as `PhaseDiagram.boundary` (p_a, p_b: the medians).
    """

    target: float
    margin: float
    model: str
    confidence: float
    cells: pd.DataFrame
    boundary: pd.DataFrame


def sampling_view(phase: PhaseDiagram, target: float = 0.5, margin: float = 0.1,
                  model: str = "gp") -> Sampling:
    """The boundary search's posterior over the diagram's cells (facet x x x y as its grid)."""
    from sweeper.results.levelset import CONFIDENCE, share_posterior

    cells = phase.cells
    nf, nx, ny = len(phase.facet_values), len(phase.x_values), len(phase.y_values)
    fi = (cells[phase.facet].map({v: i for i, v in enumerate(phase.facet_values)}).to_numpy()
          if phase.facet else np.zeros(len(cells), dtype=int))
    flat = (fi.astype(int) * nx + cells["ix"].to_numpy()) * ny + cells["iy"].to_numpy()
    k, n = np.zeros(nf * nx * ny), np.zeros(nf * nx * ny)
    k[flat], n[flat] = cells["successes"].to_numpy(), cells["n"].to_numpy()
    post = share_posterior((nf, nx, ny), k, n, target=target, model=model,
                           confidence=CONFIDENCE)
    keys = [c for c in (phase.facet, phase.x, phase.y) if c] + ["ix", "iy"]
    view = cells[keys].copy()
    view["sampled"] = (cells["n_trials"] > 0).to_numpy()
    view["share"], view["share_low"] = post.median[flat], post.low[flat]
    view["share_high"] = post.high[flat]
    view["decided"] = post.decided(target, margin)[flat]
    view["above"] = view["share"] >= target
    view["band"] = (view["share_low"] <= target) & (view["share_high"] >= target)
    edges = view.rename(columns={phase.x: "x", phase.y: "y", "share": "p"})
    edges = edges.rename(columns={phase.facet: _FACET}) if phase.facet else edges.assign(
        **{_FACET: "all"})
    boundary = _rename(_boundary(edges.assign(n=np.inf), target, 0), phase.x, phase.y,
                       phase.facet)
    return Sampling(target, margin, model, CONFIDENCE, view.reset_index(drop=True), boundary)


def boundary_search(results, outcome: str, axes: Sequence[str]) -> dict | None:
    """target, margin, model and grid (column -> values) of the one boundary sweep in
    `results` (a sweep whose manifest says it samples a level set, `search_facts`), from the
    sweep file its manifest keeps; None for any other sweep, several sweeps, a search of
    another outcome, or a diagram whose axes are not the sweep's."""
    manifests = list(getattr(results, "manifests", {}).values())
    if len(manifests) != 1 or not search_facts(manifests[0])["search_samples_level_set"]:
        return None
    try:
        import yaml

        data = yaml.safe_load(manifests[0]["sweep_file"])
        search = data.get("search") or {}
        grid = {f"{group}.{name}": [_number(v) for v in (spec.get("grid") or spec.get("choice"))]
                for group, params in (data.get("axes") or {}).items()
                for name, spec in params.items()}
        found = {"target": float(search.get("target", 0.5)),
                 "margin": float(search.get("margin", 0.1)),
                 "model": str(search.get("model", "gp")), "grid": grid}
        searched = search.get("outcome", manifests[0].get("outcome"))
    except Exception:  # noqa: BLE001 - a view of the file, never a failure
        return None
    return found if searched == outcome and set(grid) == set(axes) else None


def _number(value: object) -> object:
    """A sweep file's `1e-4` (a string to YAML 1.1) as the number the sweep read."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def default_outcome(results) -> str:
    """The outcome the sweeps' family draws by default (its manifest's `outcome`: copy's is
    attention_learned), else learned."""
    named = {m.get("outcome") for m in results.manifests.values()} - {None}
    return named.pop() if len(named) == 1 else "learned"


def stored_outcomes_current(results, thresholds: Thresholds) -> bool:
    """Whether the stored outcomes are what recomputing them would give: the default
    thresholds, and every sweep's trials files stamped with the rules its family has here
    (`sweeper.results.outcomes.rules_stamp`). Then no trajectory is read for them."""
    from sweeper.families import outcome_rules as family_rules
    from sweeper.results.outcomes import rules_stamp
    from sweeper.results.rules import outcome_columns as rule_columns

    if thresholds != DEFAULT_THRESHOLDS or not results.sweeps:
        return False
    trials = results.trials
    if any(c not in trials.columns for c in rule_columns(outcome_rules(trials))):
        return False  # a load that left some out
    for sweep in results.sweeps:
        tasks = trials.loc[trials["sweep"] == sweep.name, "task.id"].dropna().unique() \
            if "task.id" in trials.columns else []
        if len(tasks) != 1 or sweep.outcomes_stamp != rules_stamp(family_rules(list(tasks))):
            return False
        # a damaged trajectories file: recomputed as before, its trials' outcomes unknown
        # (the footers only are read; a damaged file is warned of once)
        if len(sweep.readable(sweep.files["trajectories"])) != len(sweep.files["trajectories"]):
            return False
    return True


def outcome_trajectories(results) -> pd.DataFrame:
    """Just the trajectory columns that outcomes need (a projected scan, not the whole table)."""
    have = set(results.trajectory_columns)
    wanted = [c for c in outcome_metrics(results.trials) if c in have]
    if "accuracy" not in wanted:
        raise AnalysisInputError("the trajectories have no 'accuracy' column; available "
                                 f"columns: {', '.join(sorted(have))}")
    return results.read_trajectories(columns=wanted)

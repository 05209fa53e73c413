"""Axes that fit their parameters, and the words for columns: shared by the matplotlib figures
(`analysis.plots`), the report and the dashboard (which must not import matplotlib).

A phase axis is *categorical* (strings, booleans: cells at 0, 1, 2, ...), *linear* (numbers:
cells centred on their values, edges halfway between) or *log* (positive numbers that are
log-spaced, or an axis the sweep file draws `loguniform`: centres and edges in log space).
`AxisScale.pos` maps the phase diagram's grid-index coordinates (cell centres at integers,
edges at half-integers, as `PhaseDiagram.boundary` gives them) to data coordinates.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sweeper.results.words import count

# Words for the columns every sweep has; a family's task and model columns take theirs from
# its declaration (`Param.label`, `Param.symbol`, `Family.labels`: sweeper.families).
LABELS = {"train.lr": "learning rate", "train.batch_size": "batch size",
          "train.steps": "step budget", "step": "step", "seed": "seed"}
SYMBOLS = {"train.lr": "lr"}
METRIC_LABELS = {
    "accuracy": "token accuracy", "attn_acc": "attention accuracy",
    "ktiw_acc": "KTIW-probe accuracy", "uniform_acc": "uniform-attention accuracy",
    "topic_attention": "attention on the topic word", "loss": "loss",
    "val_accuracy": "validation accuracy", "attn_mass": "attention mass on the target",
}
BOOLEAN_WORDS = {"model.train_keys": ("keys frozen", "keys trained"),
                 "model.train_embeddings": ("embeddings frozen", "embeddings trained"),
                 "model.shared_embedding": ("separate embeddings", "shared embedding"),
                 "task.repeat": ("no repetition", "repetition")}


def axis_label(column: str | None) -> str:
    """Words for a column, the one mapping every figure, the report and the dashboard label
    with: 'co-occurrence strength c' for task.cooccurrence (the families' declarations),
    'attention accuracy' for attn_acc, 'final token accuracy' for final_accuracy
    (`METRIC_LABELS`); a column without words keeps its name."""
    if column is None:
        return ""
    from sweeper.families import column_label

    return LABELS.get(column) or column_label(column) or metric_label(column) or column


def metric_label(column: str) -> str | None:
    """'attention accuracy' for attn_acc, 'best loss' for best_loss; None without words."""
    if column in METRIC_LABELS:
        return METRIC_LABELS[column]
    for prefix in ("final_", "best_"):
        if column.startswith(prefix) and column[len(prefix):] in METRIC_LABELS:
            return f"{prefix[:-1]} {METRIC_LABELS[column[len(prefix):]]}"
    return None


def symbol(column: str | None) -> str | None:
    """The paper's symbol for a column ('c' for task.cooccurrence), if it has one."""
    if column is None:
        return None
    from sweeper.families import column_symbol

    return SYMBOLS.get(column) or column_symbol(column)


def tick(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def value_label(column: str | None, value: object) -> str:
    """'H = 4' for (model.heads, 4); 'classifier tc' where no symbol exists."""
    if column in BOOLEAN_WORDS and isinstance(value, bool | np.bool_):
        return BOOLEAN_WORDS[column][int(value)]
    text = tick(value)
    if symbol(column):
        return f"{symbol(column)} = {text}"
    return f"{axis_label(column)} {text}"


def short_value(column: str | None, value: object) -> str:
    """'H = 4' where the column has a symbol, else just the value ('tc')."""
    return value_label(column, value) if symbol(column) else tick(value)


# ---------------------------------------------------------------- scales

def is_numeric(values: Sequence) -> bool:
    """Numbers (not booleans), none missing."""
    return bool(len(values)) and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)
        and not (isinstance(v, float) and math.isnan(v)) for v in values)


def is_log_spaced(values: Sequence) -> bool:
    """Positive numbers spanning at least a factor 10 whose steps are more even in log space
    than in linear space (1e-4, 3e-4, 1e-3, ...; 5, 10, 20, 50), at least 3 of them."""
    if not is_numeric(values) or len(values) < 3:
        return False
    v = np.sort(np.asarray(values, dtype=float))
    if v[0] <= 0 or v[-1] / v[0] < 10:
        return False

    def spread(d: np.ndarray) -> float:
        return float(np.std(d) / np.mean(d)) if np.mean(d) > 0 else math.inf

    return spread(np.diff(np.log(v))) < spread(np.diff(v))


@dataclass
class AxisScale:
    """Where a phase axis's cells sit: kind 'category', 'linear' or 'log'."""

    column: str | None
    values: list
    kind: str
    centers: np.ndarray
    edges: np.ndarray

    @property
    def numeric(self) -> bool:
        return self.kind != "category"

    def pos(self, index) -> np.ndarray | float:
        """Grid-index coordinates (cell k's centre at k, its edges at k -/+ 0.5) to data."""
        index = np.asarray(index, dtype=float)
        if not self.numeric:
            return index if index.ndim else float(index)
        n = len(self.centers)
        knots = np.arange(2 * n + 1) / 2 - 0.5
        points = np.empty(2 * n + 1)
        points[0::2], points[1::2] = self.edges, self.centers
        if self.kind == "log":
            out = np.exp(np.interp(index, knots, np.log(points)))
        else:
            out = np.interp(index, knots, points)
        return out if out.ndim else float(out)

    def ticks(self, limit: int = 8) -> tuple[list, list[str]] | None:
        """Tick positions and labels at the values when there are few; None: the plotting
        library's own ticks (a numeric axis with many values)."""
        if self.numeric and len(self.values) > limit:
            return None
        return list(self.centers), [tick(v) for v in self.values]


def category_scale(column: str | None, values: Sequence) -> AxisScale:
    """An axis whose cells sit evenly spaced, one per value (cell k at k), labelled by the
    values: categories, and a grid's numeric values where the dashboard draws the grid as the
    grid it is."""
    n = len(values)
    return AxisScale(column, list(values), "category", np.arange(n, dtype=float),
                     np.arange(n + 1) - 0.5)


def axis_scale(column: str | None, values: Sequence, log: bool | None = None) -> AxisScale:
    """The scale of an axis with these (sorted, distinct) values; `log` forces or forbids a
    log scale (a `loguniform` axis), None decides from the spacing."""
    values = list(values)
    n = len(values)
    if not is_numeric(values):
        return category_scale(column, values)
    v = np.asarray(values, dtype=float)
    kind = "log" if (is_log_spaced(values) if log is None else log and v.min() > 0) else "linear"
    t = np.log(v) if kind == "log" else v
    if n == 1:
        half = 0.5 * math.log(10) if kind == "log" else (0.5 * abs(t[0]) or 0.5)
        edges = np.array([t[0] - half, t[0] + half])
    else:
        mid = (t[1:] + t[:-1]) / 2
        edges = np.r_[t[0] - (mid[0] - t[0]), mid, t[-1] + (t[-1] - mid[-1])]
    if kind == "log":
        edges = np.exp(edges)
    return AxisScale(column, values, kind, v, edges)


def phase_title(phase) -> str:
    """What the figure shows, from its outcome and axes: 'p(attention learned) over
    co-occurrence strength c × hardness h, by heads H', then how cells are judged."""
    by = f", by {axis_label(phase.facet)}" if phase.facet else ""
    pooled = f"; pooled over {', '.join(phase.pooled)}" if phase.pooled else ""
    bins = getattr(phase, "bins", {})
    binned = "; " + ", ".join(f"{symbol(c) or axis_label(c)} in {len(b.labels)} {b.method} bins"
                              for c, b in bins.items()) if bins else ""
    return (f"p({phase.success_text()}) over {axis_label(phase.x)} × {axis_label(phase.y)}"
            f"{by}\nboundary at p = {phase.level:g}; {phase.confidence:.0%} Wilson intervals; "
            f"cells need ≥ {count(phase.min_seeds, 'seed')}{binned}{pooled}")

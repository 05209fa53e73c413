"""Drawing only: figures from a PhaseDiagram, trials and trajectories. No numbers are made here.

Figures are built as `matplotlib.figure.Figure` on the Agg canvas, never through pyplot, so
importing this module changes no global backend and drawing works on a headless machine.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from sweeper.results import COUNTED_STATUSES
from sweeper.results.files import write_whole_file
from sweeper.results.words import count

from .axes import (  # noqa: F401 - the words for columns, re-exported for callers
    BOOLEAN_WORDS,
    LABELS,
    METRIC_LABELS,
    SYMBOLS,
    AxisScale,
    axis_label,
    axis_scale,
    phase_title,
    short_value,
    symbol,
    value_label,
)
from .axes import tick as _tick
from .errors import AnalysisInputError
from .phase import PhaseDiagram, _sorted_unique
from .seeds import metric_thresholds, outcome_class  # noqa: F401 - how seeds are coloured

COPY_METRICS = ("accuracy", "attn_acc", "ktiw_acc", "uniform_acc")
FORMATS = (".png", ".svg", ".pdf")
_MISSING_COLOR, _INSUFFICIENT_COLOR = "#ffffff", "#d9d9d9"
_UNRELIABLE_COLOR, _RECOVERED_COLOR = "#ff7f00", "#00a000"
_FAILED_COLOR = "#d73027"
OUTCOME_COLORS = {"success": "#1a9850", "failure": "#d73027", "diverged": "#7b3294",
                  "other": "#999999"}


def short_number(value: float) -> str:
    """3 significant figures, but whole numbers from 100 up (a step: 1,050, not 1.05e+03)."""
    if np.isnan(value):
        return ""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


class InlineFigure(Figure):
    """A Figure that shows itself in a notebook as a PNG (IPython's `_repr_png_`): drawn on the
    Agg canvas, never through pyplot, IPython's matplotlib support never sees it, so without
    a figure as a cell's last line would show only `<Figure size ...>`."""

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png")
        return buffer.getvalue()


@dataclass(frozen=True)
class _Layout:
    """Panels placed by fixed margins in inches: several times faster than a layout engine
    (text extents are never measured), and a figure's size never depends on its labels."""

    rows: int
    cols: int
    panel: tuple[float, float]  # one axes box, width and height in inches
    left: float = 0.9
    right: float = 0.3
    top: float = 0.8
    bottom: float = 0.7
    wgap: float = 0.9
    hgap: float = 0.9

    @property
    def size(self) -> tuple[float, float]:
        width = self.left + self.cols * self.panel[0] + (self.cols - 1) * self.wgap + self.right
        height = self.top + self.rows * self.panel[1] + (self.rows - 1) * self.hgap + self.bottom
        return width, height

    def figure(self) -> Figure:
        fig = InlineFigure(figsize=self.size)
        FigureCanvasAgg(fig)
        return fig

    def _box(self, row: int, x: float, width: float) -> list[float]:
        fig_w, fig_h = self.size
        y = fig_h - self.top - (row + 1) * self.panel[1] - row * self.hgap
        return [x / fig_w, y / fig_h, width / fig_w, self.panel[1] / fig_h]

    def axes(self, fig: Figure, row: int, col: int):
        x = self.left + col * (self.panel[0] + self.wgap)
        return fig.add_axes(self._box(row, x, self.panel[0]))

    def colorbar_axes(self, fig: Figure, row: int):
        """A thin axes in the right margin, beside a row."""
        x = self.size[0] - self.right + 0.2
        return fig.add_axes(self._box(row, x, 0.16))

    def title(self, fig: Figure, text: str) -> None:
        fig.suptitle(wrap_title(text, self.size[0]), y=1 - 0.08 / self.size[1], va="top")

    def legend(self, fig: Figure, handles: list, ncols: int) -> None:
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=ncols,
                   fontsize="small", frameon=False)

    def fitted(self, size: tuple[float, float], smallest: float = 0.5) -> _Layout:
        """The same margins, the panels grown or shrunk so that the figure is `size` inches."""
        width, height = size
        panel = ((width - self.left - self.right - (self.cols - 1) * self.wgap) / self.cols,
                 (height - self.top - self.bottom - (self.rows - 1) * self.hgap) / self.rows)
        if min(panel) < smallest:
            need = replace(self, panel=(smallest, smallest)).size
            raise AnalysisInputError(
                f"size: got {width:g},{height:g}; allowed: at least {math.ceil(need[0])},"
                f"{math.ceil(need[1])} inches for {self.rows} x {self.cols} panels")
        return replace(self, panel=panel)

    def widened(self, width: float) -> _Layout:
        """The same panels in a figure at least `width` inches wide (margins grow evenly), so
        that a title and a legend wider than one panel are not cut off."""
        extra = max(0.0, width - self.size[0])
        return replace(self, left=self.left + extra / 2, right=self.right + extra / 2)


TITLE_CHARS_PER_INCH = 9.5  # suptitle ("large") characters per inch, conservatively
LEGEND_ITEM_WIDTH = 2.3  # inches per legend entry of a phase figure ("small" text)


def wrap_title(text: str, width: float) -> str:
    """Each line of a title wrapped to the figure's width."""
    import textwrap

    chars = max(20, int(width * TITLE_CHARS_PER_INCH))
    return "\n".join(textwrap.fill(line, chars, break_long_words=False, break_on_hyphens=False)
                     for line in text.split("\n"))


def save(fig: Figure, path: str | os.PathLike, dpi: int = 100) -> Path:
    """Write a figure; the format follows the extension (.png, .svg, .pdf)."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise AnalysisInputError(
            f"cannot save a figure as {path.name!r}: use one of {', '.join(FORMATS)}")
    buffer = io.BytesIO()  # drawn first: a full disk or a read-only folder leaves no half file
    fig.savefig(buffer, dpi=dpi, format=path.suffix.lower()[1:])
    return write_whole_file(path, buffer.getvalue())


# ---------------------------------------------------------------- phase diagram

ANNOTATE_CELLS = 64  # above this many cells per panel, numbers would crowd (and slow) a panel


def phase_scales(phase: PhaseDiagram, scales: Mapping[str, str] | None = None
                 ) -> tuple[AxisScale, AxisScale]:
    """The x and y scales of a phase diagram: numeric axes at their values (log when
    log-spaced, or when `scales` says "log" for the column), other axes as categories."""
    scales = scales or {}

    def one(column, values):
        named = scales.get(column)
        return axis_scale(column, values, None if named is None else named == "log")

    return one(phase.x, phase.x_values), one(phase.y, phase.y_values)


def phase_figure(phase: PhaseDiagram, *, recovery: bool = True, annotate: bool | None = None,
                 scales: Mapping[str, str] | None = None, title: str | None = None,
                 size: tuple[float, float] | None = None) -> Figure:
    """One success-probability panel per facet value, then a recovery-map panel per facet
    value other than the base; boundary at p = level, unsampled and unreliable cells marked.
    Numeric axes are drawn at their values (log-spaced ones on a log scale; `scales` may name
    "log" or "linear" per column), other axes as categories.

    annotate: write k/n (and p differences) in the cells; by default when a panel has at most
    ANNOTATE_CELLS cells. The cells table has the numbers either way.
    title: the figure's title (default `phase_title`: outcome, axes, bins, how cells are
    judged), wrapped at words to the figure's width. size: (width, height) in inches instead
    of the size the panels need (the panels stretch or shrink to it).
    """
    if annotate is None:
        annotate = len(phase.x_values) * len(phase.y_values) <= ANNOTATE_CELLS
    gx, gy = phase_scales(phase, scales)
    others = [v for v in phase.facet_values if v != phase.base] if phase.facet else []
    show_recovery = recovery and bool(others)
    legend = _phase_legend(phase)
    title = phase_title(phase) if title is None else title
    layout = _phase_layout(phase, rows=2 if show_recovery else 1, legend=len(legend),
                           title=title, size=None if size is None else check_size(size))
    fig = layout.figure()
    fig.phase_panels = []  # (facet value, axes, x scale, y scale): the report maps cells
    for i, value in enumerate(phase.facet_values):
        ax = layout.axes(fig, 0, i)
        image = _probability_panel(ax, phase, value, annotate, gx, gy)
        fig.phase_panels.append((value, ax, gx, gy))
    fig.colorbar(image, cax=layout.colorbar_axes(fig, 0), label="success probability p")
    if show_recovery:  # each recovery map sits under its own facet's panel
        for value in others:
            ax = layout.axes(fig, 1, phase.facet_values.index(value))
            delta_image = _recovery_panel(ax, phase, value, annotate, gx, gy)
        fig.colorbar(delta_image, cax=layout.colorbar_axes(fig, 1), label="p difference")
    if size is not None:  # exactly, whatever the sums of margins round to
        fig.set_size_inches(*check_size(size))
    layout.title(fig, title)
    layout.legend(fig, legend, ncols=layout.legend_cols)
    return fig


MAX_FIGURE_INCHES = 100.0


def check_size(size: Sequence[float] | str) -> tuple[float, float]:
    """A figure size (width, height) in inches, or its text "W,H": two finite numbers from 1
    to 100."""
    try:
        width, height = (float(v) for v in (size.split(",") if isinstance(size, str) else size))
    except (TypeError, ValueError):
        raise AnalysisInputError(f"size: got {size!r}; allowed: width,height in inches, "
                                 "e.g. 8,5") from None
    if not all(math.isfinite(v) and 1 <= v <= MAX_FIGURE_INCHES for v in (width, height)):
        raise AnalysisInputError(f"size: got {width:g},{height:g}; allowed: width and height "
                                 f"in inches from 1 to {MAX_FIGURE_INCHES:g}, e.g. 8,5")
    return width, height


@dataclass(frozen=True)
class _PhaseLayout(_Layout):
    legend_cols: int = 4


def _phase_layout(phase: PhaseDiagram, rows: int, legend: int, cols: int | None = None,
                  title: str | None = None, size: tuple[float, float] | None = None
                  ) -> _PhaseLayout:
    """Panels of a phase figure (a panel per facet value unless `cols`); at least wide enough
    for two legend entries a row and the title's longest words; the legend takes as many rows
    as its entries need. With `size` (inches), the figure is that size, its panels fitted."""
    nx, ny = len(phase.x_values), len(phase.y_values)
    cell = min(0.6, 4.0 / max(nx, ny, 1))
    panel = (max(2.4, cell * nx), max(2.0, cell * ny))
    cols = len(phase.facet_values) if cols is None else cols
    x_room = 0.6 if phase.x in phase.bins else 0.0  # slanted interval labels under a panel
    y_room = 0.8 if phase.y in phase.bins else 0.0  # interval labels beside one
    layout = _PhaseLayout(rows=rows, cols=cols, panel=panel, left=0.9 + y_room,
                          right=1.2, top=1.0, bottom=0.75 + x_room, wgap=0.9 + y_room,
                          hgap=0.9 + x_room)
    if size is None:
        layout = layout.widened(2 * LEGEND_ITEM_WIDTH + 0.6)
    width = layout.size[0] if size is None else size[0]
    cols = max(1, min(legend, int((width - 0.4) // LEGEND_ITEM_WIDTH)))
    legend_rows = math.ceil(legend / cols) if legend else 0
    title = phase_title(phase) if title is None else title
    title_lines = wrap_title(title, width).count("\n") + 1
    layout = replace(layout, legend_cols=cols, bottom=0.75 + x_room + 0.25 * legend_rows,
                     top=0.3 + 0.25 * title_lines)
    return layout if size is None else layout.fitted(size)


def _phase_legend(phase: PhaseDiagram) -> list:
    return [Line2D([], [], color="black", lw=2.5, label=f"boundary p = {phase.level:g}"),
            Patch(facecolor=_INSUFFICIENT_COLOR, hatch="///", edgecolor="grey",
                  label=f"fewer than {count(phase.min_seeds, 'seed')}"),
            Patch(facecolor=_MISSING_COLOR, hatch="xx", edgecolor="grey", label="no trials"),
            Patch(facecolor="none", edgecolor=_UNRELIABLE_COLOR, lw=1.5, ls="--",
                  label=f"unreliable (interval spans {phase.level:g})"),
            Patch(facecolor="none", edgecolor=_RECOVERED_COLOR, lw=2.5,
                  label=f"recovered (failed at {short_value(phase.facet, phase.base)})"
                  if phase.facet else "recovered")] + _sampling_legend(phase) + (
        [Patch(facecolor="none", edgecolor="none", label="* seeds shared with an equivalent "
               "cell")] if phase.cells["n_shared"].any() else [])


def _setup_grid_axes(ax, phase: PhaseDiagram, title: str, gx: AxisScale, gy: AxisScale
                     ) -> None:
    for scale, set_scale, set_lim, set_ticks in (
            (gx, ax.set_xscale, ax.set_xlim, ax.set_xticks),
            (gy, ax.set_yscale, ax.set_ylim, ax.set_yticks)):
        if scale.kind == "log":
            set_scale("log")
        set_lim(scale.edges[0], scale.edges[-1])
        ticks = scale.ticks()
        if ticks is not None:
            set_ticks(*ticks)
            if scale.kind == "log":  # no minor-tick labels between the values
                (ax.xaxis if scale is gx else ax.yaxis).set_minor_formatter("")
    ax.set_xlabel(axis_label(phase.x))
    ax.set_ylabel(axis_label(phase.y))
    ax.set_title(title)
    crowded = gx.ticks() is not None and len(gx.values) > 6 and gx.numeric
    binned = phase.x in phase.bins  # interval labels, "[0.22, 0.458)", are wide
    ax.tick_params(axis="x", labelrotation=45 if len(phase.x_values) > 8 or crowded or binned
                   else 0)
    if binned:
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


def _mesh(ax, values: np.ndarray, gx: AxisScale, gy: AxisScale, **kwargs):
    return ax.pcolormesh(gx.edges, gy.edges, np.ma.masked_invalid(values.astype(float)),
                         **kwargs)


def _cell_box(gx: AxisScale, gy: AxisScale, ix: int, iy: int, inset: float = 0.0):
    """(x, y, width, height) of a cell in data coordinates, `inset` grid units inside."""
    x0, x1 = gx.pos(ix - 0.5 + inset), gx.pos(ix + 0.5 - inset)
    y0, y1 = gy.pos(iy - 0.5 + inset), gy.pos(iy + 0.5 - inset)
    return (x0, y0), x1 - x0, y1 - y0


def _mark_unsampled(ax, cells: pd.DataFrame, annotate: bool, gx: AxisScale, gy: AxisScale
                    ) -> None:
    """Hatch cells with too few seeds (their n shown) and cross out cells with no trials."""
    for row in cells.itertuples(index=False):
        state = row.state
        if state not in ("missing", "insufficient"):
            continue
        missing = state == "missing"
        ax.add_patch(Rectangle(*_cell_box(gx, gy, row.ix, row.iy), linewidth=0.5,
                               facecolor=_MISSING_COLOR if missing else _INSUFFICIENT_COLOR,
                               edgecolor="grey", hatch="xx" if missing else "///"))
        if annotate and not missing:
            ax.text(gx.centers[row.ix], gy.centers[row.iy], f"n={row.n}", ha="center",
                    va="center", fontsize=7)


def _probability_panel(ax, phase: PhaseDiagram, value: object, annotate: bool,
                       gx: AxisScale, gy: AxisScale):
    cells = phase.facet_cells(value)
    counted = cells.assign(p=cells["p"].where(cells["n"] >= phase.min_seeds))
    image = _mesh(ax, phase.grid("p", frame=counted), gx, gy, cmap="viridis", vmin=0, vmax=1)
    _mark_unsampled(ax, cells, annotate, gx, gy)
    if annotate:
        for row in counted[counted["p"].notna()].itertuples(index=False):
            shared = "*" if row.n_shared else ""  # seeds another cell trained (_phase_legend)
            ax.text(gx.centers[row.ix], gy.centers[row.iy], f"{row.successes}/{row.n}{shared}",
                    ha="center", va="center", fontsize=7,
                    color="white" if row.p < 0.6 else "black")
    _draw_boundary(ax, phase, value, gx, gy)
    if phase.sampling is not None:
        _draw_sampling(ax, phase, value, annotate, gx, gy)
    _outline(ax, cells[cells["state"] == "unreliable"], gx, gy, _UNRELIABLE_COLOR, 1.5, "--",
             inset=0.08)
    _outline(ax, cells[cells["recovered"]], gx, gy, _RECOVERED_COLOR, 2.5, "-", inset=0.05)
    title = value_label(phase.facet, value) if phase.facet else "all trials"
    _setup_grid_axes(ax, phase, f"p(success), {title}", gx, gy)
    return image


def _recovery_panel(ax, phase: PhaseDiagram, value: object, annotate: bool,
                    gx: AxisScale, gy: AxisScale):
    rec = phase.recovery[phase.recovery[phase.facet] == value]
    image = _mesh(ax, phase.grid("delta", frame=rec), gx, gy, cmap="RdBu", vmin=-1, vmax=1)
    either_missing = (rec["state"] == "missing") | (rec["state_base"] == "missing")
    marks = np.where(either_missing, "missing", np.where(rec["delta"].isna(), "insufficient", ""))
    _mark_unsampled(ax, rec.assign(state=marks), False, gx, gy)
    if annotate:
        for row in rec[rec["delta"].notna()].itertuples(index=False):
            ax.text(gx.centers[row.ix], gy.centers[row.iy], f"{row.delta:+.2f}", ha="center",
                    va="center", fontsize=7,
                    color="white" if abs(row.delta) > 0.6 else "black")
    _outline(ax, rec[rec["recovered"]], gx, gy, _RECOVERED_COLOR, 2.5, "-", inset=0.05)
    base = short_value(phase.facet, phase.base)
    _setup_grid_axes(ax, phase, f"recovery: p({short_value(phase.facet, value)}) − p({base})",
                     gx, gy)
    return image


def _draw_boundary(ax, phase: PhaseDiagram, value: object, gx: AxisScale, gy: AxisScale
                   ) -> None:
    segments = phase.boundary
    if phase.facet is not None:
        segments = segments[segments[phase.facet] == value]
    for row in segments.itertuples(index=False):
        ax.plot([gx.pos(row.edge_x0), gx.pos(row.edge_x1)],
                [gy.pos(row.edge_y0), gy.pos(row.edge_y1)], color="black", lw=2.5,
                solid_capstyle="round")


def _draw_sampling(ax, phase: PhaseDiagram, value: object, annotate: bool, gx: AxisScale,
                   gy: AxisScale) -> None:
    """A boundary search's view (`phase.sampling`): unsampled cells in the faded colour of
    their posterior median, the band of cells whose interval contains the target (dotted),
    the posterior's boundary (dashed), and each cell's interval under its counts."""
    from matplotlib import colormaps

    sampling, viridis = phase.sampling, colormaps["viridis"]
    view, segments = sampling.cells, sampling.boundary
    if phase.facet is not None:
        view = view[view[phase.facet] == value]
        segments = segments[segments[phase.facet] == value]
    for row in view.itertuples(index=False):
        box = _cell_box(gx, gy, row.ix, row.iy)
        if not row.sampled:
            ax.add_patch(Rectangle(*box, facecolor=viridis(row.share), alpha=0.55,
                                   edgecolor="white", linewidth=0.5))
        if row.band:
            ax.add_patch(Rectangle(*box, fill=False, hatch="..", edgecolor="#444444",
                                   linewidth=0))
        if annotate:
            ax.text(gx.centers[row.ix], gy.pos(row.iy - 0.32),
                    f"{row.share_low:.2f}-{row.share_high:.2f}", ha="center", va="center",
                    fontsize=5.5, color="white" if row.share < 0.6 else "black")
    for row in segments.itertuples(index=False):
        ax.plot([gx.pos(row.edge_x0), gx.pos(row.edge_x1)],
                [gy.pos(row.edge_y0), gy.pos(row.edge_y1)], color="#ff00ff", lw=1.8,
                linestyle="--")


def _sampling_legend(phase: PhaseDiagram) -> list:
    """The entries of a boundary search's view; none for other sweeps."""
    s = phase.sampling
    if s is None:
        return []
    return [Line2D([], [], color="#ff00ff", lw=1.8, linestyle="--",
                   label=f"posterior boundary at {s.target:g} ({s.model})"),
            Patch(facecolor="none", hatch="..", edgecolor="#444444",
                  label=f"band: {s.confidence:.0%} interval spans {s.target:g}"),
            Patch(facecolor="#21918c", alpha=0.55, edgecolor="white",
                  label="not sampled: posterior median")]


def _outline(ax, cells: pd.DataFrame, gx: AxisScale, gy: AxisScale, color: str, width: float,
             style: str, inset: float) -> None:
    for row in cells.itertuples(index=False):
        ax.add_patch(Rectangle(*_cell_box(gx, gy, row.ix, row.iy, inset), fill=False,
                               edgecolor=color, linewidth=width, linestyle=style))


def lottery_figure(phase: PhaseDiagram, *, annotate: bool | None = None,
                   scales: Mapping[str, str] | None = None) -> Figure:
    """Recovery beyond the lottery: per head count H other than the reference, the observed
    p(H) minus what H independent heads give from the reference rate (`phase.lottery`),
    cells whose interval lies above the lottery's outlined green, below it dashed red."""
    if phase.lottery.empty:
        raise AnalysisInputError(f"no lottery baseline: the facet ({phase.facet or 'none'}) "
                                 "does not count heads, or has one head count only; allowed: "
                                 "a facet over two or more head counts, e.g. model.heads")
    if annotate is None:
        annotate = len(phase.x_values) * len(phase.y_values) <= ANNOTATE_CELLS
    gx, gy = phase_scales(phase, scales)
    values = list(pd.unique(phase.lottery[phase.facet]))
    legend = _lottery_legend(phase)
    title = "recovery beyond the lottery: " + phase_title(phase)
    layout = _phase_layout(phase, rows=1, legend=len(legend), cols=len(values), title=title)
    fig = layout.figure()
    for i, value in enumerate(values):
        image = _lottery_panel(layout.axes(fig, 0, i), phase, value, annotate, gx, gy)
    fig.colorbar(image, cax=layout.colorbar_axes(fig, 0), label="p − p(lottery)")
    layout.title(fig, title)
    layout.legend(fig, legend, ncols=layout.legend_cols)
    return fig


def _lottery_panel(ax, phase: PhaseDiagram, value: object, annotate: bool,
                   gx: AxisScale, gy: AxisScale):
    lot = phase.lottery[phase.lottery[phase.facet] == value]
    image = _mesh(ax, phase.grid("excess", frame=lot), gx, gy, cmap="RdBu", vmin=-1, vmax=1)
    missing = lot["n"].eq(0) | lot["n_base"].isna() | lot["n_base"].eq(0)
    marks = np.where(missing, "missing", np.where(lot["excess"].isna(), "insufficient", ""))
    _mark_unsampled(ax, lot.assign(state=marks), False, gx, gy)
    if annotate:
        for row in lot[lot["excess"].notna()].itertuples(index=False):
            text = f"{row.p:.2f}\n({row.p_lottery:.2f})"
            ax.text(gx.centers[row.ix], gy.centers[row.iy], text, ha="center",
                    va="center", fontsize=6.5, color="white" if abs(row.excess) > 0.6 else "black")
    _outline(ax, lot[lot["beyond_lottery"]], gx, gy, _RECOVERED_COLOR, 2.5, "-", inset=0.05)
    _outline(ax, lot[lot["below_lottery"]], gx, gy, _FAILED_COLOR, 2.0, "--", inset=0.05)
    base = short_value(phase.facet, lot["heads_base"].iloc[0]) if len(lot) else ""
    _setup_grid_axes(ax, phase, f"{short_value(phase.facet, value)}: p − lottery from {base}",
                     gx, gy)
    return image


def _lottery_legend(phase: PhaseDiagram) -> list:
    return [Patch(facecolor="none", edgecolor=_RECOVERED_COLOR, lw=2.5,
                  label="beyond the lottery (exact test, p <= 0.05)"),
            Patch(facecolor="none", edgecolor=_FAILED_COLOR, lw=2.0, ls="--",
                  label="below the lottery"),
            Patch(facecolor=_INSUFFICIENT_COLOR, hatch="///", edgecolor="grey",
                  label=f"fewer than {count(phase.min_seeds, 'seed')}"),
            Patch(facecolor="none", edgecolor="none", label="p (lottery p) in each cell")]


def state_figure(phase: PhaseDiagram, scales: Mapping[str, str] | None = None) -> Figure:
    """The state of every cell, one panel per facet value (a categorical map)."""
    states = ["learned", "unreliable", "failed", "insufficient", "missing"]
    colors = ["#1a9850", "#fee08b", "#d73027", _INSUFFICIENT_COLOR, _MISSING_COLOR]
    cmap, norm = ListedColormap(colors), BoundaryNorm(np.arange(6) - 0.5, 5)
    gx, gy = phase_scales(phase, scales)
    layout = _phase_layout(phase, rows=1, legend=len(states))
    layout = replace(layout, top=0.5, bottom=0.75 + 0.25 * math.ceil(5 / layout.legend_cols))
    fig = layout.figure()
    for i, value in enumerate(phase.facet_values):
        ax = layout.axes(fig, 0, i)
        cells = phase.facet_cells(value)
        codes = cells.assign(code=cells["state"].map({r: i for i, r in enumerate(states)}))
        _mesh(ax, phase.grid("code", frame=codes), gx, gy, cmap=cmap, norm=norm)
        _outline(ax, cells[cells["recovered"]], gx, gy, _RECOVERED_COLOR, 2.5, "-", inset=0.05)
        _draw_boundary(ax, phase, value, gx, gy)
        label = value_label(phase.facet, value) if phase.facet else "all trials"
        _setup_grid_axes(ax, phase, f"state, {label}", gx, gy)
    layout.legend(fig, [Patch(facecolor=c, edgecolor="grey", label=r)
                        for r, c in zip(states, colors, strict=True)], ncols=layout.legend_cols)
    return fig


# Colours of a category outcome's names (copy's regime); others take the fallback palette.
REGIME_COLORS = {"aligned": "#1a9850", "partly_aligned": "#a6d96a", "offset": "#fdae61",
                 "diffuse": "#abd9e9", "not_copying": "#bababa"}
_FALLBACK_COLORS = ("#8073ac", "#e08214", "#5aae61", "#de77ae", "#4393c3", "#b35806")


def regime_colors(names: Sequence[str]) -> dict[str, str]:
    """A colour per regime name: `REGIME_COLORS`, then the fallback palette in order."""
    spare = iter(_FALLBACK_COLORS * (len(names) // len(_FALLBACK_COLORS) + 1))
    return {n: REGIME_COLORS.get(n) or next(spare) for n in names}


def trial_regime_figure(phase: PhaseDiagram, *, annotate: bool | None = None,
                        scales: Mapping[str, str] | None = None) -> Figure:
    """Which solution each cell's seeds found (`phase.trial_regimes`): one panel per facet
    value, each cell in the colour of its most common regime, with every regime's count
    written in it (its `label`: code and count, most common first). Cells with no seed of a
    known regime are crossed out."""
    table = phase.trial_regimes
    if table.empty:
        raise AnalysisInputError("no regimes: the trials carry no category outcome (copy's "
                                 "regime); load a copy sweep whose trajectories log "
                                 "attn_offset and attn_concentration")
    if annotate is None:
        annotate = len(phase.x_values) * len(phase.y_values) <= ANNOTATE_CELLS
    names = list(phase.regime_codes) or sorted(set(table["top"].dropna()))
    colors = regime_colors(names)
    cmap = ListedColormap([colors[n] for n in names])
    norm = BoundaryNorm(np.arange(len(names) + 1) - 0.5, len(names))
    gx, gy = phase_scales(phase, scales)
    legend = [Patch(facecolor=colors[n], edgecolor="grey",
                    label=f"{phase.regime_codes.get(n, n)}: {n}") for n in names]
    by = f", by {axis_label(phase.facet)}" if phase.facet else ""
    pooled = f"; pooled over {', '.join(phase.pooled)}" if phase.pooled else ""
    title = (f"{phase.regime_column or 'regime'} of each cell's seeds over {axis_label(phase.x)}"
             f" × {axis_label(phase.y)}{by}\ncolour: the most common; in each cell: seeds per "
             f"regime{pooled}")
    layout = _phase_layout(phase, rows=1, legend=len(legend), title=title)
    cell_inches = min(layout.panel[0] / len(phase.x_values), layout.panel[1] / len(phase.y_values))
    fontsize = float(np.clip(12 * cell_inches, 6, 10))  # five lines fit a cell
    fig = layout.figure()
    for i, value in enumerate(phase.facet_values):
        ax = layout.axes(fig, 0, i)
        cells = table if phase.facet is None else table[table[phase.facet] == value]
        codes = cells.assign(code=cells["top"].map({n: k for k, n in enumerate(names)}))
        _mesh(ax, phase.grid("code", frame=codes), gx, gy, cmap=cmap, norm=norm)
        _mark_unsampled(ax, cells.assign(state=np.where(cells["n"] == 0, "missing", "")),
                        False, gx, gy)
        if annotate:
            for row in cells[cells["n"] > 0].itertuples(index=False):
                ax.text(gx.centers[row.ix], gy.centers[row.iy], row.label.replace(", ", "\n"),
                        ha="center", va="center", fontsize=fontsize, linespacing=1.0)
        label = value_label(phase.facet, value) if phase.facet else "all trials"
        _setup_grid_axes(ax, phase, f"regime, {label}", gx, gy)
    layout.title(fig, title)
    layout.legend(fig, legend, ncols=layout.legend_cols)
    return fig


# ---------------------------------------------------------------- trajectories

def select_cell(trials: pd.DataFrame, cell: Mapping[str, object]) -> pd.DataFrame:
    """The counted trials (status ok or diverged) whose columns equal the cell's values."""
    for column in cell:
        if column not in trials.columns:
            raise AnalysisInputError(f"cell column {column!r} is not a trials column")
    chosen = trials[np.logical_and.reduce([trials[c] == v for c, v in cell.items()])
                    ] if cell else trials
    if "status" in chosen.columns:
        chosen = chosen[chosen["status"].isin(COUNTED_STATUSES)]
    return chosen


def cell_label(cell: Mapping[str, object]) -> str:
    return ", ".join(value_label(c, v) for c, v in cell.items()) or "all trials"


def _band(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Median and interquartile range over seeds, per step."""
    values = pd.DataFrame({"step": rows["step"].astype(float),
                           "v": pd.to_numeric(rows[metric], errors="coerce").astype(float)})
    grouped = values.groupby("step")["v"]
    return pd.DataFrame({"median": grouped.median(), "q25": grouped.quantile(0.25),
                         "q75": grouped.quantile(0.75)}).sort_index()


def _cell_rows(trials: pd.DataFrame, trajectories: pd.DataFrame, cell: Mapping[str, object]
               ) -> tuple[pd.DataFrame, int]:
    chosen = select_cell(trials, cell)
    keys = ["sweep", "trial_id"] if {"sweep"} <= set(chosen.columns) & set(
        trajectories.columns) else ["trial_id"]
    rows = trajectories.merge(chosen[keys], on=keys)
    return rows, len(chosen)


def _present_metrics(metrics: Sequence[str], trajectories: pd.DataFrame) -> list[str]:
    """The wanted metrics the trajectories hold, or a one-line error naming what they hold."""
    present = [m for m in metrics if m in trajectories.columns]
    if not present:
        raise AnalysisInputError(
            f"none of {', '.join(metrics)} is in the trajectories; available: "
            f"{', '.join(c for c in trajectories.columns if c not in ('sweep', 'trial_id'))}")
    return present


def trajectory_figure(trials: pd.DataFrame, trajectories: pd.DataFrame,
                      cells: Sequence[Mapping[str, object]],
                      metrics: Sequence[str] = COPY_METRICS) -> Figure:
    """One panel per metric (of those logged); per cell, the median over seeds against step
    and the interquartile band."""
    present = _present_metrics(metrics, trajectories)
    if not cells:
        raise AnalysisInputError("choose at least one cell to draw trajectories of")
    ncols = min(len(present), 2)
    nrows = math.ceil(len(present) / ncols)
    legend_rows = math.ceil(len(cells) / 2)
    layout = _Layout(rows=nrows, cols=ncols, panel=(3.8, 2.4), left=0.8, right=0.3, top=0.75,
                     bottom=0.7 + 0.22 * legend_rows, wgap=0.8, hgap=0.8)
    fig = layout.figure()
    colors = [f"C{i % 10}" for i in range(len(cells))]
    handles = []
    for i, metric in enumerate(present):
        ax = layout.axes(fig, i // ncols, i % ncols)
        for cell, color in zip(cells, colors, strict=True):
            rows, n = _cell_rows(trials, trajectories, cell)
            band = _band(rows, metric)
            (line,) = ax.plot(band.index, band["median"], color=color,
                              label=f"{cell_label(cell)} (n={n})")
            ax.fill_between(band.index, band["q25"], band["q75"], color=color, alpha=0.2,
                            linewidth=0)
            if i == 0:
                handles.append(line)
        ax.set_title(axis_label(metric))
        ax.set_xlabel("step")
        ax.set_ylabel(axis_label(metric))
        if metric != "loss":
            ax.set_ylim(-0.02, 1.02)
    layout.title(fig, "Trajectories: median over seeds, band = interquartile range")
    layout.legend(fig, handles, ncols=min(len(cells), 2))
    return fig


def onset_figure(trials: pd.DataFrame, facet: str | None = "model.heads") -> Figure:
    """Attention onset against KTIW onset, one point per trial, with the diagonal: above
    the diagonal, KTIW came first (the two-stage claim)."""
    for column in ("attention_onset", "ktiw_onset"):
        if column not in trials.columns:
            raise AnalysisInputError(f"trials have no {column!r}: recompute outcomes first")
    x = pd.to_numeric(trials["ktiw_onset"], errors="coerce").astype(float)
    y = pd.to_numeric(trials["attention_onset"], errors="coerce").astype(float)
    both = x.notna() & y.notna()
    layout = _Layout(rows=1, cols=1, panel=(4.2, 3.6), left=0.8, right=0.3, top=0.7,
                     bottom=0.65)
    fig = layout.figure()
    ax = layout.axes(fig, 0, 0)
    groups = trials.loc[both, facet] if facet and facet in trials.columns else None
    values = sorted(groups.dropna().unique().tolist()) if groups is not None else [None]
    for i, value in enumerate(values):
        mask = both if value is None else both & (trials[facet] == value)
        ax.scatter(x[mask], y[mask], s=18, alpha=0.6, color=f"C{i % 10}",
                   label=value_label(facet, value) if value is not None else "trials")
    top = float(np.nanmax([x[both].max(), y[both].max(), 1.0])) if both.any() else 1.0
    ax.plot([0, top], [0, top], color="grey", ls="--", lw=1, label="same step")
    first = int((x[both] < y[both]).sum())
    ties = int((x[both] == y[both]).sum())
    ax.set_xlabel("KTIW onset: first step with ktiw_acc ≥ threshold")
    ax.set_ylabel("attention onset (step)")
    ax.set_title(f"KTIW first in {first} of {count(int(both.sum()), 'trial')} "
                 f"({count(ties, 'tie')});\n{count(int((~both).sum()), 'trial')} without both "
                 "onsets not shown")
    ax.legend(fontsize="small")
    return fig


# ---------------------------------------------------------------- topic task

def _flatten_lists(rows: pd.DataFrame, column: str) -> np.ndarray:
    values = [np.asarray(v, dtype=float) for v in rows[column] if v is not None
              and np.ndim(v) > 0]
    return np.concatenate(values) if values else np.array([])


def topic_figure(trials: pd.DataFrame, trajectories: pd.DataFrame,
                 cells: Sequence[Mapping[str, object]] | None = None,
                 max_points: int = 20000) -> Figure:
    """Lu et al.'s identity, |q|²|v_t|² against 2 s_t + (2/m)(exp(s_t) - 1), one point per
    (trial, logged step, topic word); and the attention on the topic word against step."""
    for column in ("identity_lhs", "identity_rhs", "topic_attention"):
        if column not in trajectories.columns:
            raise AnalysisInputError(f"trajectories have no {column!r}: not a topic sweep?")
    cells = list(cells) if cells else [{}]
    layout = _Layout(rows=1, cols=2, panel=(4.0, 3.3), left=0.8, right=0.3, top=0.85,
                     bottom=0.65, wgap=0.9)
    fig = layout.figure()
    left, right = layout.axes(fig, 0, 0), layout.axes(fig, 0, 1)
    rows_all = pd.concat([_cell_rows(trials, trajectories, c)[0] for c in cells])
    lhs, rhs = _flatten_lists(rows_all, "identity_lhs"), _flatten_lists(rows_all, "identity_rhs")
    if lhs.size > max_points:
        pick = np.random.default_rng(0).choice(lhs.size, max_points, replace=False)
        lhs, rhs = lhs[pick], rhs[pick]
    left.scatter(rhs, lhs, s=6, alpha=0.4)
    top = float(max(lhs.max(initial=0), rhs.max(initial=0), 1e-9))
    left.plot([0, top], [0, top], color="grey", ls="--", lw=1)
    left.set_xlabel("2 s_t + (2/m)(exp(s_t) − 1)")
    left.set_ylabel("|q|² |v_t|²")
    left.set_title(f"identity, {lhs.size} points (trial, step, topic word)")
    for i, cell in enumerate(cells):
        rows, n = _cell_rows(trials, trajectories, cell)
        band = _band(rows, "topic_attention")
        right.plot(band.index, band["median"], color=f"C{i % 10}",
                   label=f"{cell_label(cell)} (n={n})")
        right.fill_between(band.index, band["q25"], band["q75"], color=f"C{i % 10}",
                           alpha=0.2, linewidth=0)
    right.set_xlabel("step (epoch: full-batch training)")
    right.set_ylabel(axis_label("topic_attention"))
    right.set_title(axis_label("topic_attention"))
    right.legend(fontsize="small")
    layout.title(fig, "Topic task: the score-norm identity and attention on topic words")
    return fig


# ---------------------------------------------------------------- seeds of cells

def seeds_figure(trials: pd.DataFrame, trajectories: pd.DataFrame,
                 cells: Sequence[Mapping[str, object]], metrics: Sequence[str],
                 outcome: str = "learned", thresholds=None, panel=(3.4, 2.0)) -> Figure:
    """One row per cell, one panel per metric, one line per seed coloured by its outcome
    (learned, not learned, diverged), with the outcome's threshold drawn: what a median hides
    when some seeds learn abruptly and others stay stuck."""
    from sweeper.results import DEFAULT_THRESHOLDS

    thresholds = DEFAULT_THRESHOLDS if thresholds is None else thresholds
    present = _present_metrics(metrics, trajectories)
    if not cells:
        raise AnalysisInputError("choose at least one cell to draw the seeds of")
    layout = _Layout(rows=len(cells), cols=len(present), panel=panel, left=0.75, right=0.25,
                     top=0.55, bottom=0.85, wgap=0.75, hgap=0.8)
    layout = layout.widened(6.0)
    fig = layout.figure()
    lines = metric_thresholds(thresholds)
    words = {"success": outcome.replace("_", " "), "failure": f"not {outcome.replace('_', ' ')}",
             "diverged": "diverged", "other": "failed or stopped"}
    seen: set[str] = set()
    for row, cell in enumerate(cells):
        all_of_cell = _all_trials(trials, cell)
        classes = outcome_class(all_of_cell, outcome)
        keys = [k for k in ("sweep", "trial_id") if k in trajectories.columns
                and k in all_of_cell.columns]
        rows = trajectories.merge(all_of_cell[keys].assign(_class=classes.to_numpy()), on=keys)
        k = int((classes == "success").sum())
        n = int(classes.isin(["success", "failure", "diverged"]).sum())
        for col, metric in enumerate(present):
            ax = layout.axes(fig, row, col)
            for (_, group) in rows.sort_values("step").groupby("trial_id", sort=False):
                kind = group["_class"].iloc[0]
                seen.add(kind)
                ax.plot(group["step"], group[metric], color=OUTCOME_COLORS[kind], alpha=0.7,
                        lw=1.1, ls="--" if kind == "diverged" else "-")
            if metric in lines:
                ax.axhline(lines[metric], color="black", lw=0.8, ls=":")
            ax.set_title(f"{cell_label(cell)}: {k}/{n}" if col == 0 else
                         axis_label(metric), fontsize="small")
            ax.set_xlabel("step")
            ax.set_ylabel(axis_label(metric), fontsize="small")
            if metric != "loss" and not metric.startswith("loss"):
                ax.set_ylim(-0.02, 1.02)
    layout.title(fig, f"One line per seed, coloured by {outcome.replace('_', ' ')}; dotted: "
                      "the threshold")
    handles = [Line2D([], [], color=OUTCOME_COLORS[c], lw=1.5, label=words[c],
                      ls="--" if c == "diverged" else "-")
               for c in ("success", "failure", "diverged", "other") if c in seen]
    if handles:
        layout.legend(fig, handles, ncols=len(handles))
    return fig


def _all_trials(trials: pd.DataFrame, cell: Mapping[str, object]) -> pd.DataFrame:
    """Every trial of a cell, whatever its status."""
    if not cell:
        return trials
    mask = np.logical_and.reduce([trials[c] == v for c, v in cell.items()])
    return trials[np.asarray(mask, dtype=bool)]


def objective_figure(cells: pd.DataFrame, parameters: Sequence[str], objective: str,
                     scales: Mapping[str, str] | None = None, direction: str | None = None
                     ) -> Figure:
    """The objective of each cell (its mean over counted seeds) against each parameter of a
    random or Optuna search, one panel per parameter: numeric axes, log where the axis is
    log-uniform or log-spaced; point size grows with the seeds counted."""
    if not parameters:
        raise AnalysisInputError("no parameters to draw the objective against")
    scales = scales or {}
    ncols = min(len(parameters), 3)
    layout = _Layout(rows=math.ceil(len(parameters) / ncols), cols=ncols, panel=(3.2, 2.4),
                     left=0.8, right=0.3, top=0.6, bottom=0.65, wgap=0.8, hgap=0.8)
    layout = layout.widened(5.0)
    fig = layout.figure()
    y = pd.to_numeric(cells["objective"], errors="coerce").astype(float)
    size = 12 + 4 * pd.to_numeric(cells.get("n", 1), errors="coerce").fillna(1).astype(float)
    for i, column in enumerate(parameters):
        ax = layout.axes(fig, i // ncols, i % ncols)
        values = cells[column]
        scale = axis_scale(column, sorted(values.dropna().unique().tolist()),
                           None if column not in scales else scales[column] == "log")
        if scale.numeric:
            ax.scatter(values.astype(float), y, s=size, alpha=0.6)
            if scale.kind == "log":
                ax.set_xscale("log")
        else:
            codes = values.map({v: k for k, v in enumerate(scale.values)})
            ax.scatter(codes, y, s=size, alpha=0.6)
            ax.set_xticks(range(len(scale.values)), [_tick(v) for v in scale.values])
        ax.set_xlabel(axis_label(column))
        ax.set_ylabel(axis_label(objective))
    best = f" ({direction})" if direction else ""
    layout.title(fig, f"{objective}{best} per cell against each parameter; "
                      "larger points: more seeds")
    return fig


# ---------------------------------------------------------------- paper comparisons

def seed_lines_figure(trials: pd.DataFrame, trajectories: pd.DataFrame,
                      cells: Sequence[Mapping[str, object]], metric: str = "accuracy",
                      by: str | None = None) -> Figure:
    """One panel per cell, one line per seed: shows what a median hides when some seeds learn
    and others stay stuck (Snell et al.'s bimodal hard distribution). Each line is labelled
    "seed S"; with `by` (a trials column) lines are coloured by their trial's value of it, with
    a legend of those values."""
    if metric not in trajectories.columns:
        _present_metrics([metric], trajectories)  # the one-line error naming what they hold
    if not cells:
        raise AnalysisInputError("choose at least one cell to draw the seeds of")
    info = trials.drop_duplicates("trial_id").set_index("trial_id")
    values = _sorted_unique(info[by]) if by else []
    colors = {v: f"C{i % 10}" for i, v in enumerate(values)}
    ncols = min(len(cells), 2)
    layout = _Layout(rows=math.ceil(len(cells) / ncols), cols=ncols, panel=(3.8, 2.4),
                     left=0.8, right=0.3, top=0.75,
                     bottom=0.6 + (0.22 * math.ceil(len(values) / 4) if by else 0),
                     wgap=0.8, hgap=0.8)
    fig = layout.figure()
    for i, cell in enumerate(cells):
        ax = layout.axes(fig, i // ncols, i % ncols)
        rows, n = _cell_rows(trials, trajectories, cell)
        for trial_id, seed_rows in rows.sort_values("step").groupby("trial_id", sort=False):
            trial = info.loc[trial_id] if trial_id in info.index else None
            seed = trial["seed"] if trial is not None and "seed" in info.columns else "?"
            color = colors.get(trial[by], "C0") if by and trial is not None else "C0"
            ax.plot(seed_rows["step"], seed_rows[metric], color=color, alpha=0.45, lw=1,
                    label=f"seed {seed}")
        ax.set_title(f"{cell_label(cell)} (n={n})")
        ax.set_xlabel("step")
        ax.set_ylabel(axis_label(metric))
        if metric != "loss":
            ax.set_ylim(-0.02, 1.02)
    coloured = f", coloured by {axis_label(by)}" if by else ""
    layout.title(fig, f"{axis_label(metric)}, one line per seed{coloured}")
    if by:
        layout.legend(fig, [Line2D([], [], color=c, label=value_label(by, v))
                            for v, c in colors.items()], ncols=min(len(values), 4) or 1)
    return fig


def share_figure(table: pd.DataFrame, x: str, what: str = "learned") -> Figure:
    """The share of seeds that learned against `x`, with its 95% interval, from a table with
    columns x, share, share_low, share_high, learned and seeds (`papers.learning_table`);
    `what` names the success in the labels (e.g. "learned to attend")."""
    for column in (x, "share", "share_low", "share_high", "learned", "seeds"):
        if column not in table.columns:
            raise AnalysisInputError(f"table has no {column!r}")
    layout = _Layout(rows=1, cols=1, panel=(4.2, 3.0), left=0.8, right=0.3, top=0.6,
                     bottom=0.65)
    fig = layout.figure()
    ax = layout.axes(fig, 0, 0)
    xs = np.arange(len(table))
    share = table["share"].to_numpy(float)
    ax.errorbar(xs, share, yerr=[share - table["share_low"], table["share_high"] - share],
                fmt="o-", capsize=4)
    for xi, (k, n) in zip(xs, table[["learned", "seeds"]].itertuples(index=False)):
        ax.annotate(f"{k}/{n}", (xi, 0.04), ha="center", fontsize="small")
    ax.set_xticks(xs, [_tick(v) for v in table[x]])
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(f"share of seeds that {what}")
    ax.set_ylim(-0.02, 1.05)
    layout.title(fig, f"Seeds that {what}, with 95% Wilson intervals")
    return fig


def heatmap_figure(table: pd.DataFrame, x: str, y: str, value: str, title: str) -> Figure:
    """A grid of `value` over the (x, y) values of a table, each cell annotated; cells with
    no value are left white."""
    for column in (x, y, value):
        if column not in table.columns:
            raise AnalysisInputError(f"table has no {column!r}")
    grid = table.pivot_table(index=y, columns=x, values=value, aggfunc="first", dropna=False)
    grid = grid.sort_index().sort_index(axis=1)
    values = grid.to_numpy(float)
    layout = _Layout(rows=1, cols=1, panel=(4.2, 3.2), left=0.9, right=1.0, top=0.6,
                     bottom=0.65)
    fig = layout.figure()
    ax = layout.axes(fig, 0, 0)
    mesh = ax.imshow(np.ma.masked_invalid(values), origin="lower", aspect="auto", cmap="viridis")
    for (r, c), v in np.ndenumerate(values):
        if not np.isnan(v):
            ax.text(c, r, short_number(v), ha="center", va="center", fontsize="small", color="w")
    ax.set_xticks(range(grid.shape[1]), [_tick(v) for v in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [_tick(v) for v in grid.index])
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    fig.colorbar(mesh, cax=layout.colorbar_axes(fig, 0))
    layout.title(fig, title)
    return fig


# ---------------------------------------------------------------- the paired head experiment

def heads_figure(table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """The paired head experiment (`analysis.heads.paired_table`), one group of bars per arm and
    condition: the model's rate with its exact interval, the share of trials where a head
    learned alone on that seed (the lottery of fixed tickets), the independent-heads
    prediction from the class rates (its range as an error bar), and P(the model learns | no
    head learned alone). An arm without alone runs shows the model's rate only."""
    groups = list(table.itertuples(index=False))
    if not groups:
        raise AnalysisInputError("no stage-2 trials to draw")
    fig = Figure(figsize=(max(7.5, 1.5 * len(groups) + 4), 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    bars = (("model learned", "rate", "low", "high", "#1f78b4"),
            ("a head learned alone (same seed)", "any_alone_rate", None, None, "#a6cee3"),
            ("independent heads (class rates)", "independent", "independent_low",
             "independent_high", "#b2df8a"),
            ("model learned | no head alone", "learned_if_none_alone", "if_none_low",
             "if_none_high", _RECOVERED_COLOR))
    width = 0.2
    for j, (label, column, low, high, color) in enumerate(bars):
        x = np.arange(len(groups)) + (j - 1.5) * width
        values = np.array([_number(getattr(g, column)) for g in groups])
        errors = None
        if low is not None:
            lows = np.array([_number(getattr(g, low)) for g in groups])
            highs = np.array([_number(getattr(g, high)) for g in groups])
            errors = np.vstack([np.clip(values - lows, 0, None), np.clip(highs - values, 0, None)])
            errors = np.where(np.isfinite(errors), errors, 0.0)
        shown = np.isfinite(values)  # a bar that does not apply is not drawn at 0
        ax.bar(x[shown], values[shown], width,
               yerr=None if errors is None else errors[:, shown], color=color, label=label,
               capsize=2, error_kw={"elinewidth": 0.8})
    ax.set_xticks(np.arange(len(groups)), [_heads_label(g) for g in groups], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of trials (95% exact intervals)")
    ax.set_title(title or "multi-head models against their own heads alone (paired)",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def _heads_label(group) -> str:
    verdict = group.verdict if isinstance(group.verdict, str) else ""
    condition = group.condition.replace("_", " ")
    base = [] if str(getattr(group, "base_seed", "all")) == "all" else [
        f"base {group.base_seed}"]
    return "\n".join([condition, group.arm, *base, *verdict.split(": ")])


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")

"""What a notebook shows of a sweep: HTML for `SweepResult` (its `_repr_html_`), `Results`
(`results_html`) and `PhaseDiagram` (`phase_html`), and loaded trajectories drawn one line per
trial coloured by a column (`trajectories_figure`).

Nothing is drawn or formatted twice: tables and inline figures are the HTML report's
(`analysis.report`), figures are `analysis.plots`'. Every string that comes from a sweep (its
name, column names, values) is escaped, so a sweep named `<b>` shows as text.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweeper.results.words import count

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .load import Results
    from .phase import PhaseDiagram

MAX_ROWS = 40  # rows of a table a repr shows; the frame itself has them all


def summary_html(kind: str, text: str, facts: Sequence[tuple[str, object]] = (),
                 body: Sequence[str] = ()) -> str:
    """`kind` in bold, one line of `text`, a two-column table of facts, then `body` (HTML made
    here: tables, a figure)."""
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                   f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
                   for k, v in facts)
    table = f"<table>{rows}</table>" if rows else ""
    return (f"<div class='sweeper-repr'><p><strong>{html.escape(kind)}</strong> "
            f"{html.escape(text)}</p>{table}{''.join(body)}</div>")


def frame_html(frame: pd.DataFrame, caption: str, max_rows: int = MAX_ROWS,
               digits: Mapping[str, int | None] | None = None,
               headers: Mapping[str, str] | None = None) -> str:
    """The report's table of the first `max_rows` rows, under a caption, with a line saying
    how many more there are."""
    from .report import _table

    more = (f"<p>... {len(frame) - max_rows} more rows</p>" if len(frame) > max_rows else "")
    return (f"<p><em>{html.escape(caption)}</em></p>"
            + _table(frame.head(max_rows), dict(digits or {}), dict(headers or {})) + more)


def figure_html(fig: Figure, caption: str) -> str:
    """The figure inline as a base64 PNG (the report's `<figure>`)."""
    from .report import _figure_html

    return _figure_html(fig, "repr", caption)


# ---------------------------------------------------------------- the three objects

def phase_html(phase: PhaseDiagram) -> str:
    """The phase diagram's summary, its figure (`plots.phase_figure`) and its cells table (as
    the report's Cells section shows them)."""
    from .plots import phase_figure
    from .report import CELL_HEADERS, cell_digits, cells_table

    facts = [("outcome", phase.success_text()), ("x", phase.x), ("y", phase.y)]
    if phase.facet:
        facts.append(("facet", f"{phase.facet} in {', '.join(map(str, phase.facet_values))}"))
    states = phase.cells["state"].value_counts()
    facts += [("cells", f"{len(phase.cells)} ("
               + ", ".join(f"{r} {n}" for r, n in states.items() if n) + ")"),
              ("boundary edges", f"{len(phase.boundary)} at p = {phase.level:g}")]
    body = [figure_html(phase_figure(phase), "phase diagram"),
            frame_html(cells_table(phase), "cells", digits=cell_digits(phase),
                       headers=CELL_HEADERS)]
    return summary_html("PhaseDiagram", f"of {phase.outcome}", facts, body)


def results_html(results: Results) -> str:
    """The sweeps loaded, trials per status, and their axes (`seeds.varying_columns`) with
    their values."""
    from .seeds import varying_columns

    trials = results.trials
    facts: list[tuple[str, object]] = [
        ("sweeps", ", ".join(s.name for s in results.sweeps)), ("trials", len(trials))]
    if "status" in trials.columns:
        facts.append(("status", ", ".join(f"{n} {s}" for s, n in
                                          trials["status"].value_counts().sort_index().items())))
    files = sum(len(s.files["trajectories"]) for s in results.sweeps)
    facts.append(("trajectories", "read" if results.trajectories_read
                  else f"unread ({count(files, 'file')})"))
    varying = varying_columns(trials, results.manifests)
    axes = pd.DataFrame({"column": varying,
                         "values": [", ".join(_values(trials[c])) for c in varying]})
    body = [frame_html(axes, "axes")] if varying else []
    return summary_html("Results", f"of sweep{'s' * (len(results.sweeps) > 1)} "
                        + ", ".join(repr(s.name) for s in results.sweeps), facts, body)


def sweep_result_html(result: Any) -> str:
    """A `sweeper.api.SweepResult`: its summary line, counts, the Optuna study's best trial
    when it has one, and its cell table (`result.cells`)."""
    from sweeper.results.cells import CELL_COLUMNS

    facts: list[tuple[str, object]] = [
        ("results", f"{result.results.rstrip('/')}/{result.sweep}"),
        ("trials", f"{result.expanded} expanded, {result.already_stored} stored before, "
                   f"{result.ran} ran"),
        ("stored", ", ".join(f"{n} {s}" for s, n in sorted(result.status.items())) or "nothing")]
    if result.best_trial_text():
        facts.append(("best trial", result.best_trial_text()))
    body = []
    if result.cells is not None and len(result.cells):
        axes = [c for c in result.cells.columns if c not in (*CELL_COLUMNS, "n", "objective")]
        facts.append(("axes", ", ".join(axes) or "none"))
        body.append(frame_html(result.cells, f"cells: {result.shown_by}",
                               digits={a: None for a in axes}))
    return summary_html("SweepResult", result.summary(), facts, body)


# ---------------------------------------------------------------- helpers

def _values(column: pd.Series, limit: int = 8) -> list[str]:
    values = sorted(column.astype(str).unique())
    return values if len(values) <= limit else [*values[:limit], f"... ({len(values)} values)"]


def trajectories_figure(results: Results, metric: str, by: str | None,
                        cells: Sequence[Mapping[str, object]] | None) -> Figure:
    """`plots.seed_lines_figure` over the loaded trials (one panel per cell,
    default one of them all)."""
    from . import plots

    if by is not None and by not in results.trials.columns:
        from .errors import unknown_column

        raise unknown_column(by, results.trials.columns, "by")
    trajectories = results.trajectories
    return plots.seed_lines_figure(results.trials, trajectories, list(cells or [{}]), metric,
                                   by=by)


# ---------------------------------------------------------------- the objects' own methods

def plot_trajectories(self: Results, metric: str, by: str | None = None,
                      cells: Sequence[Mapping[str, object]] | None = None) -> Figure:
    """`res.plot("attn_acc", by="model.heads")`: the loaded trials' curves of `metric`, one
    line per trial labelled by its seed, coloured by the values of `by`; one panel per cell of
    `cells` (dicts of column: value), default one panel of them all."""
    return trajectories_figure(self, metric, by, cells)


def plot_phase(self: PhaseDiagram, title: str | None = None,
               size: tuple[float, float] | None = None) -> Figure:
    """`phase.plot()`: the phase diagram as `sweeper phase` draws it (`plots.phase_figure`);
    `size` in inches (width, height)."""
    from .plots import phase_figure

    return phase_figure(self, title=title, size=size)


def _install() -> None:
    """Gives `Results` and `PhaseDiagram` their notebook HTML (`_repr_html_`) and `.plot()`.

    The methods are defined here, not in analysis.load and analysis.phase, because drawing
    (analysis.plots, analysis.report) sits above the data objects and imports them: a method
    written there would import its own importer. `analysis/__init__` imports this module, so
    the methods are present wherever `analysis` is imported."""
    from .load import Results
    from .phase import PhaseDiagram

    Results._repr_html_ = results_html
    Results.plot = plot_trajectories
    PhaseDiagram._repr_html_ = phase_html
    PhaseDiagram.plot = plot_phase


_install()

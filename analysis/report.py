"""One self-contained HTML page per sweep: manifest, counts, phase diagrams, trajectories, cells.

Figures are embedded as base64 PNG and a Content-Security-Policy forbids every other source,
so the page reads offline and cannot reach the network. Every number in the phase sections
comes from the `PhaseDiagram` the page is built from (`Report.phase`).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sweeper.results.outcomes import DEFAULT_THRESHOLDS, Thresholds, with_outcomes

from . import plots
from .errors import AnalysisInputError
from .load import Results
from .phase import (
    PhaseDiagram,
    compute_phase,
    default_axes,
    default_outcome,
    outcome_trajectories,
    representative_cells,
)

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CELL_COLUMNS = ("n_trials", "n", "successes", "p", "p_low", "p_high", "median_steps_to_learn",
                "median_attention_onset", "regime", "recovered")
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #555; } pre { background: #f7f7f7; padding: 0.8em; }
.note { color: #8a4b00; } .wide { overflow-x: auto; }
"""


@dataclass
class Report:
    """The page and what it was made from."""
    html: str
    phase: PhaseDiagram
    figures: dict[str, Figure] = field(default_factory=dict)
    cells: list[dict] = field(default_factory=list)


# ---------------------------------------------------------------- formatting

def fmt_number(value: object, digits: int | None = 3) -> str:
    """How every value appears in the page (tests format the data object the same way).
    digits=None: floats in their shortest form (axis values: 0.25, not 0.250)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}" if digits is None else f"{value:.{digits}f}"
    return str(value)


def _table(frame: pd.DataFrame, numeric_digits: dict[str, int | None] | None = None,
           headers: dict[str, str] | None = None) -> str:
    digits, headers = numeric_digits or {}, headers or {}
    head = "".join(f"<th class='text'>{html.escape(headers.get(str(c), str(c)))}</th>"
                   for c in frame.columns)
    rows = []
    for values in frame.itertuples(index=False):
        tds = []
        for column, value in zip(frame.columns, values, strict=True):
            text = fmt_number(value, digits.get(column, 3))
            numeric = isinstance(value, numbers.Number) and not isinstance(value, bool | np.bool_)
            cls = "" if numeric else " class='text'"
            tds.append(f"<td{cls}>{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    return (f"<div class='wide'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _figure_html(fig: Figure, name: str, caption: str, dpi: int = 100) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    width, height = (round(v * dpi) for v in fig.get_size_inches())
    return (f"<figure id='fig-{name}'><img alt='{html.escape(caption, quote=True)}' "
            f"width='{width}' height='{height}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _section(ident: str, title: str, body: str) -> str:
    return f"<section id='{ident}'><h2>{html.escape(title)}</h2>{body}</section>"


# ---------------------------------------------------------------- sections

def _manifest_section(results: Results) -> str:
    parts = []
    for name, manifest in results.manifests.items():
        shown = {k: v for k, v in manifest.items() if k != "sweep_file"}
        values = [json.dumps(v) if isinstance(v, dict | list) else fmt_number(v, None)
                  for v in shown.values()]
        rows = pd.DataFrame({"field": list(shown), "value": values})
        parts.append(f"<h3>{html.escape(name)}</h3>" + (_table(rows) if len(rows) else
                                                          "<p class='note'>no manifest.json</p>"))
        if manifest.get("sweep_file"):
            parts.append("<details><summary>sweep file</summary><pre>"
                         f"{html.escape(str(manifest['sweep_file']))}</pre></details>")
    return _section("manifest", "Manifest", "".join(parts))


def _counts_section(results: Results, phase: PhaseDiagram) -> str:
    trials = results.trials
    by = ["sweep", "status"] if "status" in trials.columns else ["sweep"]
    counts = trials.groupby(by).size().rename("trials").reset_index()
    body = [_table(counts), f"<p>{len(trials)} trials stored."]
    expanded = sum(int(m.get("trials_expanded", 0) or 0) for m in results.manifests.values())
    if expanded:
        body.append(f" {expanded} expanded from the sweep file"
                    f" ({max(expanded - len(trials), 0)} not stored yet).")
    body.append("</p>")
    if phase.excluded:
        left_out = ", ".join(f"{k}: {v}" for k, v in phase.excluded.items())
        body.append(f"<p>Not counted as seeds in the phase diagram: {html.escape(left_out)}.</p>")
    return _section("counts", "Trials", "".join(body))


def _phase_section(phase: PhaseDiagram, figures: dict[str, Figure]) -> str:
    counts = phase.regime_counts().reset_index()
    body = [_figure_html(figures["phase"], "phase",
                         "Success probability per cell, with the p = "
                         f"{phase.level:g} boundary and the recovery maps"),
            _figure_html(figures["regimes"], "regimes", "Regime of every cell"),
            "<h3>Cells per regime</h3>", _table(counts),
            f"<p>{int(phase.cells['recovered'].sum())} recovered cells; "
            f"{len(phase.boundary)} boundary segments.</p>"]
    if phase.pooled:
        body.append(f"<p class='note'>Cells pool over {html.escape(', '.join(phase.pooled))}, "
                    "which vary within a cell.</p>")
    title = f"Phase diagram: success = {phase.success_text()}"
    return _section("phase", title, "".join(body))


def cells_table(phase: PhaseDiagram) -> pd.DataFrame:
    """The cells as the page shows them."""
    keys = [k for k in (phase.facet, phase.x, phase.y) if k]
    return phase.cells[[*keys, *CELL_COLUMNS]]


CELL_HEADERS = {"n_trials": "trials", "n": "seeds", "p_low": "p low", "p_high": "p high",
                "median_steps_to_learn": "median steps to learn",
                "median_attention_onset": "median attention onset"}


def cell_digits(phase: PhaseDiagram) -> dict[str, int | None]:
    """Decimals per cells column in the page: axis values as given, medians to one."""
    axes = {k: None for k in (phase.facet, phase.x, phase.y) if k}
    return {**axes, "median_steps_to_learn": 1, "median_attention_onset": 1}


def _cells_section(phase: PhaseDiagram) -> str:
    note = (f"<p>p = successes / seeds; interval: {phase.confidence:.0%} Wilson; regime: "
            f"learned (lower bound > {phase.level:g}), failed (upper bound < {phase.level:g}), "
            f"unreliable (spans it), insufficient (seeds < {phase.min_seeds}), missing (no "
            "trials).</p>")
    table = _table(cells_table(phase), cell_digits(phase), CELL_HEADERS)
    return _section("cells", "Cells", note + table)


def _family_figures(results: Results, columns: set[str]) -> set[str]:
    """The extra figures the sweeps' families ask for (`Family.figures`), from the task ids in
    their manifests; for a task whose family is not installed here, from the columns."""
    from sweeper.errors import SweeperInputError
    from sweeper.families import family_of

    figures = set()
    for manifest in results.manifests.values():
        try:
            figures.update(family_of(str(manifest.get("task"))).figures)
        except SweeperInputError:
            if "identity_lhs" in columns:
                figures.add("identity")
    return figures


def _trajectory_section(results: Results, trials: pd.DataFrame, cells: list[dict],
                        figures: dict[str, Figure]) -> str:
    columns = set(results.trajectory_columns)
    ids = [i for c in cells for i in plots.select_cell(trials, c)["trial_id"]]
    body = []
    if "identity" in _family_figures(results, columns):
        wanted = [c for c in ("identity_lhs", "identity_rhs", "topic_attention", "loss")
                  if c in columns]
        rows = results.read_trajectories(trial_ids=ids, columns=wanted)
        figures["topic"] = plots.topic_figure(trials, rows, cells)
        body.append(_figure_html(figures["topic"], "topic",
                                 "The identity's two sides, and topic attention against step"))
    metrics = [m for m in plots.COPY_METRICS if m in columns]
    if metrics and "identity" not in _family_figures(results, columns):
        rows = results.read_trajectories(trial_ids=ids, columns=metrics)
        figures["trajectories"] = plots.trajectory_figure(trials, rows, cells, metrics)
        body.append(_figure_html(figures["trajectories"], "trajectories",
                                 "Median and interquartile band over seeds, chosen cells"))
    if not body:
        body.append("<p class='note'>No trajectory metrics to draw.</p>")
    listing = "".join(f"<li>{html.escape(plots.cell_label(c))}</li>" for c in cells)
    return _section("trajectories", "Trajectories", f"<ul>{listing}</ul>" + "".join(body))


def _onset_section(trials: pd.DataFrame, phase: PhaseDiagram, figures: dict[str, Figure]) -> str:
    if trials["attention_onset"].isna().all() or trials["ktiw_onset"].isna().all():
        return ""
    figures["onsets"] = plots.onset_figure(trials, phase.facet)
    return _section("onsets", "Attention onset against KTIW onset", _figure_html(
        figures["onsets"], "onsets", "One point per trial; above the diagonal KTIW came first"))


# ---------------------------------------------------------------- the page

def _axes(trials: pd.DataFrame, x: str | None, y: str | None, facet: str | None
          ) -> tuple[str, str, str | None]:
    if (x is None) != (y is None):
        raise AnalysisInputError("give both x and y, or neither (then they are inferred)")
    auto = default_axes(trials) if x is None or facet == "auto" else None
    if x is None:
        x, y = auto[0], auto[1]
    if facet == "auto":
        facet = auto[2] if auto[2] not in (x, y) else None
    return x, y, facet


def make_report(results: Results, *, x: str | None = None, y: str | None = None,
                facet: str | None = "auto", thresholds: Thresholds = DEFAULT_THRESHOLDS,
                min_seeds: int = 3, cells: list[dict] | None = None,
                outcome: str | None = None) -> Report:
    """Build the page. Axes default to the swept columns (see `phase.default_axes`); the
    outcome to the one the sweep's family names (copy: attention_learned)."""
    x, y, facet = _axes(results.trials, x, y, facet)
    outcome = outcome or default_outcome(results)
    trials = with_outcomes(results.trials, outcome_trajectories(results), thresholds)
    threshold = (thresholds.attention_learned if outcome == "attention_learned"
                 else thresholds.accuracy)
    phase = compute_phase(trials, x, y, facet, min_seeds=min_seeds,
                          accuracy_threshold=threshold, outcome=outcome)
    cells = cells if cells is not None else representative_cells(phase)
    figures = {"phase": plots.phase_figure(phase), "regimes": plots.regime_figure(phase)}
    sections = [_manifest_section(results), _counts_section(results, phase),
                _phase_section(phase, figures),
                _trajectory_section(results, trials, cells, figures),
                _onset_section(trials, phase, figures), _cells_section(phase)]
    names = ", ".join(results.manifests)
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<title>sweeper report: {html.escape(names)}</title><style>{_STYLE}</style></head>"
            f"<body><h1>Sweep report: {html.escape(names)}</h1>"
            f"<p>Outcome: {html.escape(outcome)}. Thresholds: accuracy {thresholds.accuracy:g}, "
            f"attention learned {thresholds.attention_learned:g}, attention onset "
            f"{thresholds.attention:g}, KTIW {thresholds.ktiw:g}; axes {html.escape(x)} × "
            f"{html.escape(y)}" + (f", facet {html.escape(facet)}" if facet else "") + ".</p>"
            + "".join(sections) + "</body></html>\n")
    return Report(page, phase, figures, cells)


def write_report(results: Results, path: str | os.PathLike, **kwargs) -> Report:
    """Build the page and write it (UTF-8); returns the Report."""
    report = make_report(results, **kwargs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.html, encoding="utf-8")
    return report

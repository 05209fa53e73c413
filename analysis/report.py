"""One self-contained HTML page per sweep: manifest, counts, phase diagrams, trajectories, cells.

Figures are embedded as base64 PNG and a Content-Security-Policy forbids every other source,
so the page reads offline and cannot reach the network. Every number in the phase sections
comes from the `PhaseDiagram` the page is built from (`Report.phase`).
"""

from __future__ import annotations

import base64
import html
import io
import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sweeper.results.files import write_whole_file
from sweeper.results.outcomes import DEFAULT_THRESHOLDS, Thresholds
from sweeper.results.words import count

from . import plots
from .errors import AnalysisInputError
from .load import Results
from .outcomes import outcome_threshold, with_outcomes
from .phase import (
    PhaseDiagram,
    compute_phase,
    default_axes,
    default_bins,
    default_outcome,
    heads_aligned,
    is_head_axis,
    lottery_summary,
    outcome_trajectories,
    representative_cells,
    with_bins,
)
from .search import search_info

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CELL_COLUMNS = ("n_trials", "n", "successes", "p", "p_low", "p_high", "median_steps_to_learn",
                "median_attention_onset", "state", "recovered")
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #555; } pre { background: #f7f7f7; padding: 0.8em; }
.note { color: #8a4b00; } .wide { overflow-x: auto; } img.mapped { max-width: none; }
td.error { white-space: pre-wrap; font-family: monospace; font-size: 0.85em; text-align: left; }
div.seeds { display: inline-block; vertical-align: top; margin: 0.4em; padding: 0.2em; }
div.seeds h4 { margin: 0.2em 0; font-size: 0.85em; }
div.seeds:target { outline: 3px solid #ff7f00; }
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
           headers: dict[str, str] | None = None, raw: Sequence[str] = ()) -> str:
    """An HTML table; columns in `raw` hold HTML made here (links), inserted as they are."""
    digits, headers = numeric_digits or {}, headers or {}
    head = "".join(f"<th class='text'>{html.escape(headers.get(str(c), str(c)))}</th>"
                   for c in frame.columns)
    rows = []
    for values in frame.itertuples(index=False):
        tds = []
        for column, value in zip(frame.columns, values, strict=True):
            if column in raw:
                tds.append(f"<td class='text'>{value or ''}</td>")
                continue
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
    """Each manifest as a table of its fields (a nested field as a table in its cell, a list
    of records as a table with a row each) and the sweep file as YAML, as it was written."""
    parts = []
    for name, manifest in results.manifests.items():
        shown = {k: v for k, v in manifest.items() if k != "sweep_file"}
        parts.append(f"<h3>{html.escape(name)}</h3>" + (
            _value_html(shown, head=("field", "value")) if shown
            else "<p class='note'>no manifest.json</p>"))
        if manifest.get("sweep_file"):
            parts.append("<h4>Sweep file</h4>" + _yaml_html(manifest["sweep_file"]))
    return _section("manifest", "Manifest", "<details><summary>the run's record: its sweep "
                    "file, identity, versions and code (click to open)</summary>"
                    + "".join(parts) + "</details>")


MAX_NESTED = 4  # levels of tables inside tables; deeper values are shown as YAML


def _value_html(value: object, depth: int = 0, head: tuple[str, str] | None = None) -> str:
    """A manifest value as HTML: a mapping as a field/value table (with a `head` row), a list
    of mappings as a
    table with a row per item, other lists comma-separated, text with line breaks (a sweep
    file kept in a version) as YAML in a folded <pre>, anything else as `fmt_number`."""
    if isinstance(value, dict | list) and depth >= MAX_NESTED:
        return _yaml_html(value)
    if isinstance(value, dict):
        rows = "".join(f"<tr><th class='text'>{html.escape(str(k))}</th>"
                       f"<td class='text'>{_value_html(v, depth + 1)}</td></tr>"
                       for k, v in value.items())
        thead = ("<thead><tr>" + "".join(f"<th class='text'>{h}</th>" for h in head)
                 + "</tr></thead>") if head else ""
        return (f"<div class='wide'><table class='fields'>{thead}<tbody>{rows}</tbody></table>"
                "</div>")
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for v in value for k in v))
        head = "".join(f"<th class='text'>{html.escape(str(k))}</th>" for k in keys)
        rows = "".join("<tr>" + "".join(
            f"<td class='text'>{_value_html(v.get(k), depth + 1)}</td>" for k in keys) + "</tr>"
                       for v in value)
        return (f"<div class='wide'><table class='records'><thead><tr>{head}</tr></thead>"
                f"<tbody>{rows}</tbody></table></div>")
    if isinstance(value, list):
        return html.escape(", ".join(fmt_number(v, None) for v in value)) or "–"
    if isinstance(value, str) and "\n" in value.strip():
        return f"<details><summary>{html.escape(value.strip().splitlines()[0])} …</summary>" \
               f"{_yaml_html(value)}</details>"
    return html.escape(fmt_number(value, None))


def _yaml_html(value: object) -> str:
    """YAML in a <pre>: text (a sweep file) as it was written, anything else dumped as YAML."""
    import yaml

    text = value if isinstance(value, str) else yaml.safe_dump(value, sort_keys=False,
                                                                 allow_unicode=True)
    return f"<pre class='yaml'>{html.escape(text.rstrip())}</pre>"


def _counts_section(results: Results, phase: PhaseDiagram) -> str:
    trials = results.trials
    by = ["sweep", "status"] if "status" in trials.columns else ["sweep"]
    counts = trials.groupby(by).size().rename("trials").reset_index()
    body = [_table(counts), f"<p>{count(len(trials), 'trial')} stored."]
    expanded = sum(int(m.get("trials_expanded", 0) or 0) for m in results.manifests.values())
    if expanded:
        body.append(f" {expanded} expanded from the sweep file"
                    f" ({max(expanded - len(trials), 0)} not stored yet).")
    body.append("</p>")
    if phase.excluded:
        left_out = ", ".join(f"{k}: {v}" for k, v in phase.excluded.items())
        body.append(f"<p>Not counted as seeds in the phase diagram: {html.escape(left_out)}.</p>")
    return _section("counts", "Trials", "".join(body))


def _cell_map(fig: Figure, phase: PhaseDiagram, linked: dict[int, str], dpi: int = 100) -> str:
    """An image map over the phase figure's p(success) panels: each cell links to its seeds'
    panel (`linked`: index of the cells row -> anchor)."""
    height = fig.get_size_inches()[1] * dpi
    scale = dpi / fig.dpi
    areas = []
    for value, ax, gx, gy in getattr(fig, "phase_panels", []):
        for index, row in phase.facet_cells(value).iterrows():
            if index not in linked:
                continue
            corners = ax.transData.transform([(gx.pos(row["ix"] - 0.5), gy.pos(row["iy"] - 0.5)),
                                              (gx.pos(row["ix"] + 0.5), gy.pos(row["iy"] + 0.5))])
            (x0, y0), (x1, y1) = corners * scale
            label = html.escape(plots.cell_label(cell_of_row(phase, row)), quote=True)
            areas.append(f"<area shape='rect' coords='{round(x0)},{round(height - y1)},"
                         f"{round(x1)},{round(height - y0)}' href='#{linked[index]}' "
                         f"alt='{label}' title='{label}: seeds'>")
    return f"<map name='phase-cells'>{''.join(areas)}</map>" if areas else ""


def cell_of_row(phase: PhaseDiagram, row: pd.Series) -> dict:
    """A phase cell as {column: value} (facet, x, y)."""
    keys = [k for k in (phase.facet, phase.x, phase.y) if k]
    return {k: (row[k].item() if isinstance(row[k], np.generic) else row[k]) for k in keys}


def _phase_section(phase: PhaseDiagram, figures: dict[str, Figure],
                   linked: dict[int, str] | None = None) -> str:
    counts = phase.state_counts().reset_index()
    phase_html = _figure_html(figures["phase"], "phase",
                              "Success probability per cell, with the p = "
                              f"{phase.level:g} boundary and the recovery maps"
                              + ("; click a cell for its seeds" if linked else ""))
    if linked:
        phase_html = (phase_html.replace("<img ", "<img usemap='#phase-cells' class='mapped' ", 1)
                      + _cell_map(figures["phase"], phase, linked))
    body = [phase_html,
            _figure_html(figures["states"], "states", "State of every cell"),
            "<h3>Cells per state</h3>", _table(counts),
            *([_figure_html(figures["trial_regimes"], "trial_regimes",
                            f"Which solution each cell's seeds found ({phase.regime_column}): "
                            "the most common colours the cell, every count is written in it")]
              if "trial_regimes" in figures else []),
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


def _cells_section(phase: PhaseDiagram, linked: dict[int, str] | None = None) -> str:
    note = (f"<p>p = successes / seeds; interval: {phase.confidence:.0%} Wilson; state: "
            f"learned (lower bound > {phase.level:g}), failed (upper bound < {phase.level:g}), "
            f"unreliable (spans it), insufficient (seeds < {phase.min_seeds}), missing (no "
            "trials).</p>")
    frame = cells_table(phase)
    raw: tuple[str, ...] = ()
    if linked:
        frame = frame.assign(seeds=[f"<a href='#{linked[i]}'>seeds</a>" if i in linked else ""
                                    for i in frame.index])
        raw = ("seeds",)
    table = _table(frame, cell_digits(phase), CELL_HEADERS, raw=raw)
    return _section("cells", "Cells", note + table)


MAX_SEED_PANELS = 64  # cells with a seeds panel in the page; `sweeper seeds` draws any other


def _seeds_section(results: Results, trials: pd.DataFrame, phase: PhaseDiagram,
                   thresholds: Thresholds) -> tuple[dict[int, str], str]:
    """A panel per sampled cell, every seed's curves coloured by outcome with the threshold
    drawn (inline SVG: cheap, and the page stays one file), each with an anchor the phase
    figure and the cells table link to. Returns (links, section)."""
    from . import svg
    from .seeds import seed_metrics

    sampled = phase.cells[phase.cells["n_trials"] > 0]
    shown = sampled.head(MAX_SEED_PANELS)
    if shown.empty:
        return {}, ""
    metrics = seed_metrics(results)
    cells = [cell_of_row(phase, row) for _, row in shown.iterrows()]
    members = [plots._all_trials(trials, c) for c in cells]
    ids = [i for m in members for i in m["trial_id"]]
    rows = results.read_trajectories(trial_ids=ids, columns=metrics)
    by_trial = {tid: group.sort_values("step") for tid, group in rows.groupby("trial_id")}
    limits = plots.metric_thresholds(thresholds)
    links, parts = {}, []
    for (index, _), cell, member in zip(shown.iterrows(), cells, members, strict=True):
        anchor = f"seeds-{index}"
        classes = plots.outcome_class(member, phase.outcome)
        k = int((classes == "success").sum())
        n = int(classes.isin(["success", "failure", "diverged"]).sum())
        charts = []
        for metric in metrics:
            lines = [(kind, by_trial[t]["step"].to_numpy(float),
                      pd.to_numeric(by_trial[t][metric], errors="coerce").to_numpy(float))
                     for t, kind in zip(member["trial_id"], classes, strict=True)
                     if t in by_trial]
            charts.append(svg.seeds_svg(lines, plots.axis_label(metric),
                                        limits.get(metric),
                                        unit_range=not metric.startswith("loss")))
        label = html.escape(plots.cell_label(cell))
        parts.append(f"<div class='seeds' id='{anchor}'><h4>{label}: {k}/{n} "
                     f"{html.escape(phase.outcome.replace('_', ' '))}</h4>{''.join(charts)}"
                     "</div>")
        links[index] = anchor
    note = ("" if len(shown) == len(sampled) else
            f"<p class='note'>The first {len(shown)} of {count(len(sampled), 'cell')}; draw any "
            "other "
            "with <code>sweeper seeds RESULTS/SWEEP --where ...</code>.</p>")
    body = (f"<p>One line per seed, coloured by {html.escape(phase.outcome)}: "
            f"{svg.legend_html()}; dotted: the threshold.</p>" + note + "".join(parts))
    return links, _section("seeds", "Seeds of each cell", body)


MAX_FAILED_ROWS = 200


def _failed_section(trials: pd.DataFrame, keys: Sequence[str]) -> str:
    """Failed trials (the code raised on every attempt) with their errors."""
    if "status" not in trials.columns:
        return ""
    failed = trials[trials["status"] == "failed"]
    if failed.empty:
        return _section("failed", "Failed trials", "<p>No trial failed.</p>")
    columns = ["trial_id", *[k for k in keys if k in failed.columns],
               *[c for c in ("seed", "attempts", "host") if c in failed.columns], "error"]
    shown = failed[columns].head(MAX_FAILED_ROWS)
    rows = []
    for _, row in shown.iterrows():
        cells = "".join(f"<td class='text'>{html.escape(fmt_number(row[c], None))}</td>"
                        for c in columns[:-1])
        error = html.escape(str(row["error"] or ""))
        rows.append(f"<tr>{cells}<td class='error'>{error}</td></tr>")
    head = "".join(f"<th class='text'>{html.escape(c)}</th>" for c in columns)
    more = ("" if len(failed) <= MAX_FAILED_ROWS else
            f"<p class='note'>{len(failed) - MAX_FAILED_ROWS} more not shown.</p>")
    body = (f"<p>{count(len(failed), 'trial')} failed (their code raised on every attempt); "
            "they are "
            "not counted as seeds, and a later run trains them again.</p>"
            f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}"
            f"</tbody></table></div>{more}")
    return _section("failed", "Failed trials", body)


def _objective_section(trials: pd.DataFrame, info, outcome: str,
                       figures: dict[str, Figure], manifests: dict | None = None) -> str:
    """A random or Optuna search: the objective per cell against each parameter."""
    from .search import best_first, objective_cells
    from .seeds import varying_columns

    objective = info.objective or outcome
    if objective not in trials.columns:
        return ""
    keys = [c for c in info.axes if c in trials.columns] or varying_columns(trials, manifests)
    if not keys:
        return ""
    cells = objective_cells(trials, keys, objective)
    if cells.empty:
        return ""
    figures["objective"] = plots.objective_figure(cells, keys, objective, info.scales(),
                                                  info.direction)
    best = best_first(cells, info.direction).head(10)
    body = (_figure_html(figures["objective"], "objective",
                         f"{objective} per cell (mean over its counted seeds) against each "
                         "parameter")
            + f"<h3>Best cells ({html.escape(info.direction or 'maximize')})</h3>"
            + _table(best, {k: None for k in keys}))
    return _section("objective", f"Search: {objective} against the parameters", body)


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


def trajectory_caption(cells: list[dict]) -> str:
    """What the trajectory cells compare: "The same task cell (c = 0.5, h = 0.25) at H = 1
    and at H = 2, H = 4" when they differ in one column only (a head count, or the facet),
    else the cells listed."""
    varying = [k for k in (cells[0] if cells else {}) if len({str(c[k]) for c in cells}) > 1]
    if len(cells) > 1 and len(varying) == 1:
        head = varying[0]
        task = {k: v for k, v in cells[0].items() if k != head}
        others = ", ".join(plots.value_label(head, c[head]) for c in cells[1:])
        where = f" ({plots.cell_label(task)})" if task else ""
        question = (": does adding heads change how it learns?"
                    if is_head_axis(head, [c[head] for c in cells]) else "")
        return (f"The same task cell{where} at {plots.value_label(head, cells[0][head])} and "
                f"at {others}{question}")
    return "Chosen cells: " + "; ".join(plots.cell_label(c) for c in cells)


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
                                 "Median and interquartile band over seeds, per cell"))
    if not body:
        body.append("<p class='note'>No trajectory metrics to draw.</p>")
    listing = "".join(f"<li>{html.escape(plots.cell_label(c))}</li>" for c in cells)
    caption = f"<p>{html.escape(trajectory_caption(cells))}</p>"
    return _section("trajectories", "Trajectories", caption + f"<ul>{listing}</ul>"
                    + "".join(body))


def _lottery_section(trials: pd.DataFrame, phase: PhaseDiagram,
                     figures: dict[str, Figure]) -> str:
    """Recovery beyond independent heads (a facet that counts heads only): the map, the
    lottery table, and how many heads aligned per cell where the family counts them."""
    if phase.lottery.empty:
        return ""
    figures["lottery"] = plots.lottery_figure(phase)
    lot = phase.lottery
    body = [_figure_html(figures["lottery"], "lottery",
                         "Observed rate minus what independent heads would give (1 - (1 - "
                         "p_1)^H); outlined: the exact lottery test rejects at 0.05"),
            f"<p>{lottery_summary(lot)}.</p>",
            _table(lot.drop(columns=[c for c in ("ix", "iy") if c in lot.columns]))]
    if "attention_heads" in trials.columns:
        keys = [k for k in (phase.facet, phase.x, phase.y) if k]
        body += ["<h3>Heads aligned per trial</h3>", _table(heads_aligned(trials, keys))]
    return _section("lottery", "Averaged heads against a lottery of independent heads",
                    "".join(body))


def _onset_section(trials: pd.DataFrame, phase: PhaseDiagram, figures: dict[str, Figure]) -> str:
    if trials["attention_onset"].isna().all() or trials["ktiw_onset"].isna().all():
        return ""
    figures["onsets"] = plots.onset_figure(trials, phase.facet)
    return _section("onsets", "Attention onset against KTIW onset", _figure_html(
        figures["onsets"], "onsets", "One point per trial; above the diagonal KTIW came first"))


# ---------------------------------------------------------------- the page

def _axes(trials: pd.DataFrame, x: str | None, y: str | None, facet: str | None,
          manifests: dict | None = None) -> tuple[str, str, str | None]:
    if (x is None) != (y is None):
        raise AnalysisInputError("give both x and y, or neither (then they are inferred)")
    auto = default_axes(trials, manifests) if x is None or facet == "auto" else None
    if x is None:
        x, y = auto[0], auto[1]
    if facet == "auto":
        facet = auto[2] if auto[2] not in (x, y) else None
    return x, y, facet


def make_report(results: Results, *, x: str | None = None, y: str | None = None,
                facet: str | None = "auto", thresholds: Thresholds = DEFAULT_THRESHOLDS,
                min_seeds: int = 3, cells: list[dict] | None = None,
                outcome: str | None = None, base: object = None,
                bins: int | dict[str, int] | str | None = "auto") -> Report:
    """Build the page. Axes default to the swept columns (see `phase.default_axes`); the
    outcome to the one the sweep's family names (copy: attention_learned); bins as
    `phase_from_results`'s (a random or Optuna sweep's continuous axes binned)."""
    x, y, facet = _axes(results.trials, x, y, facet, results.manifests)
    outcome = outcome or default_outcome(results)
    trials = with_outcomes(results.trials, outcome_trajectories(results), thresholds)
    threshold = outcome_threshold(trials, outcome, thresholds)
    info = search_info(next(iter(results.manifests.values()), {}))
    phase = compute_phase(trials, x, y, facet, min_seeds=min_seeds,
                          accuracy_threshold=threshold, outcome=outcome, base=base,
                          bins=default_bins(results) if bins == "auto" else bins,
                          scales=info.scales())
    cells = cells if cells is not None else representative_cells(phase)
    binned = with_bins(trials, phase.bins)  # the trials as the cells name them
    figures = {"phase": plots.phase_figure(phase, scales=info.scales()),
               "states": plots.state_figure(phase, info.scales())}
    if not phase.trial_regimes.empty:  # copy: which solution each cell's seeds found
        figures["trial_regimes"] = plots.trial_regime_figure(phase, scales=info.scales())
    objective = _objective_section(trials, info, outcome, figures,
                                   results.manifests) if info.drawn else ""
    linked, seeds = _seeds_section(results, binned, phase, thresholds)
    keys = [k for k in (facet, x, y) if k]
    # the answer first (a search's objective, the phase map, the recovery beyond a lottery),
    # then what it rests on; the run's record (manifest, sweep file) last, folded
    sections = [objective, _phase_section(phase, figures, linked),
                _lottery_section(binned, phase, figures), _counts_section(results, phase),
                _trajectory_section(results, binned, cells, figures),
                _onset_section(trials, phase, figures), seeds,
                _failed_section(trials, keys), _cells_section(phase, linked),
                _manifest_section(results)]
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
    write_whole_file(path, report.html.encode("utf-8"))
    return report

"""What a notebook shows: the HTML of SweepResult, Results and PhaseDiagram (escaped, with their
counts and the phase figure inline), figures that show inline, trajectories coloured by a
column, and refusals from Python worded with the Python argument, not the flag."""

from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser

import pandas as pd
import pytest
from analysis_fixtures import store, trials_frame  # noqa: F401 - a session fixture
from matplotlib.figure import Figure
from sweep_helpers import TINY, cli, write_sweep

import analysis
import sweeper
from analysis import AnalysisInputError, compute_phase
from analysis.notebook import phase_html, results_html, trajectories_figure
from analysis.plots import phase_figure
from sweeper.errors import SweeperInputError
from sweeper.results import ResultsInputError, cell_stats
from sweeper.results.errors import command_line, in_python_words, python_arguments

ODD = "<b>&x'</b>"  # a value that is markup unless escaped


def _text(markup: str) -> str:
    """The page's text: tags dropped, entities decoded, whitespace runs one space."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


class _Tables(HTMLParser):
    """The cells of every <table> in a page, as text: a list of tables, each a list of rows."""

    def __init__(self, markup: str):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _frame(markup: str, after: str) -> pd.DataFrame:
    """The first table after the caption `after`, header row as columns (all text)."""
    head, *rows = _Tables(markup.split(f"<em>{after}</em>", 1)[1]).tables[0]
    return pd.DataFrame(rows, columns=head)


def _png(markup: str) -> bytes:
    found = re.search(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", markup)
    assert found, "no inline PNG"
    return base64.b64decode(found.group(1))


# -- PhaseDiagram ------------------------------------------------------------------------------
def _odd_phase():
    """A phase diagram whose x values are markup: (1 of 4) and (3 of 4) seeds learned."""
    trials = trials_frame({(1, ODD, 0.0): (1, 4), (1, "plain", 0.0): (3, 4)})
    return compute_phase(trials, "task.cooccurrence", "task.hardness", outcome="learned",
                         min_seeds=1)


def test_a_phase_diagrams_html_escapes_values_and_shows_its_cells_and_figure():
    phase = _odd_phase()
    markup = phase_html(phase)
    assert ODD not in markup and html.escape(ODD) in markup
    assert _png(markup).startswith(b"\x89PNG")
    by_x = _frame(markup, "cells").set_index("task.cooccurrence")
    assert (by_x.loc[ODD, "successes"], by_x.loc[ODD, "seeds"]) == ("1", "4")
    assert (by_x.loc["plain", "successes"], by_x.loc["plain", "p"]) == ("3", "0.750")
    text = _text(markup)
    assert "PhaseDiagram of learned" in text and "boundary edges" in text


def test_the_phase_figure_is_an_inline_figure_with_k_of_n_annotations():
    phase = _odd_phase()
    fig = phase_figure(phase, annotate=True)
    assert isinstance(fig, Figure) and fig._repr_png_().startswith(b"\x89PNG")
    # one probability panel (no facet) and its colour bar; annotate writes k/n in the cells
    assert len(fig.phase_panels) == 1
    panel = fig.phase_panels[0][1]
    assert {"1/4", "3/4"} <= {t.get_text() for t in panel.texts}
    assert not any(t.get_text() == "1/4" for t in phase_figure(phase, annotate=False).axes[0].texts)


def test_a_phase_diagram_shows_as_html_in_a_notebook_and_plots_itself():
    phase = _odd_phase()
    assert phase._repr_html_() == phase_html(phase)  # what Jupyter shows for `phase`
    fig = phase.plot(title="my title", size=(5.0, 4.0))
    assert isinstance(fig, Figure) and fig._repr_png_().startswith(b"\x89PNG")
    assert tuple(fig.get_size_inches()) == (5.0, 4.0)
    assert "my title" in " ".join(t.get_text() for t in fig.texts)
    assert len(fig.phase_panels) == 1


# -- Results -----------------------------------------------------------------------------------
def test_results_show_as_html_in_a_notebook_and_plot_their_trajectories(store):  # noqa: F811
    res = analysis.load(store, "copy", where="task.cooccurrence == 0.5 and task.hardness == 0")
    assert res._repr_html_() == results_html(res)
    fig = res.plot("attn_acc", by="model.heads")
    counted = res.trials[res.trials["status"].isin(["ok", "diverged"])]
    assert len(fig.axes[0].lines) == len(counted) > 0
    assert fig._repr_png_().startswith(b"\x89PNG")


def test_results_html_names_the_sweep_its_counts_and_axes(store):  # noqa: F811
    res = analysis.load(store, "copy")
    text = _text(results_html(res))
    statuses = res.trials["status"].value_counts()
    assert "Results of sweep 'copy'" in text and f"trials {len(res.trials)}" in text
    for status, n in statuses.items():
        assert f"{n} {status}" in text
    for column in ("task.cooccurrence", "task.hardness", "model.heads"):
        values = ", ".join(sorted(res.trials[column].astype(str).unique()))
        assert f"{column} {values}" in text
    assert "unread" in text and not res.trajectories_read


def test_results_plot_draws_a_line_per_trial_labelled_by_seed_coloured_by_a_column(store):  # noqa: F811,E501
    cell = {"task.cooccurrence": 0.5, "task.hardness": 0.0}
    res = analysis.load(store, "copy", where="task.cooccurrence == 0.5 and task.hardness == 0")
    fig = trajectories_figure(res, "attn_acc", "model.heads", [cell])
    counted = res.trials[res.trials["status"].isin(["ok", "diverged"])]
    lines = fig.axes[0].lines
    assert len(lines) == len(counted) > 0
    assert sorted(line.get_label() for line in lines) == sorted(
        f"seed {s}" for s in counted["seed"])
    heads = sorted(counted["model.heads"].unique())
    colours = {line.get_color() for line in lines}
    assert len(colours) == len(heads)  # one colour per head count
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == [f"H = {h}" for h in heads]
    every = trajectories_figure(res, "attn_acc", None, None)  # every trial, one panel
    assert len(every.axes) == 1 and len(every.axes[0].lines) == len(counted)
    assert {line.get_color() for line in every.axes[0].lines} == {"C0"} and not every.legends
    with pytest.raises(AnalysisInputError, match="unknown column 'model.hedas'"):
        trajectories_figure(res, "attn_acc", "model.hedas", None)
    with pytest.raises(AnalysisInputError, match="none of nope is in the trajectories"):
        trajectories_figure(res, "nope", None, None)


# -- SweepResult -------------------------------------------------------------------------------
def test_a_sweep_results_html_escapes_its_name_and_shows_its_cells():
    trials = trials_frame({(1, 0.0, 0.0): (2, 4), (1, 0.5, 0.0): (0, 3)})
    cells = cell_stats(trials, ["task.cooccurrence"], "learned")
    result = sweeper.SweepResult(ODD, "results", 7, 0, 7, 2, 1.5, {"ok": 7}, cells)
    markup = result._repr_html_()
    assert ODD not in markup and html.escape(ODD) in markup
    text = _text(markup)
    assert f"sweep {ODD}: ran 7 trials" in text and "axes task.cooccurrence" in text
    table = _frame(markup, "cells: p(learned)")
    assert list(table["n"]) == ["4", "3"] and list(table["successes"]) == ["2", "0"]
    assert "best trial" not in text  # not an Optuna search


# -- refusals in the caller's words ------------------------------------------------------------
def test_flags_become_python_arguments_through_one_table():
    assert in_python_words("a new name, or --extend to add") == "a new name, or extend=True to add"
    assert in_python_words("--results: got 'x'") == "results: got 'x'"
    assert in_python_words("--pack-size/pack_size: got 0") == "pack_size: got 0"
    assert in_python_words("with --where set") == "with where= set"
    assert in_python_words("--unknown-flag stays") == "--unknown-flag stays"

    @python_arguments
    def refuse():
        raise SweeperInputError("or --extend to add")

    with pytest.raises(SweeperInputError, match=r"^or extend=True to add$"):
        refuse()
    with command_line(), pytest.raises(SweeperInputError, match=r"^or --extend to add$"):
        refuse()


def test_a_changed_configuration_is_refused_naming_extend_true_in_python(tmp_path):
    path = write_sweep(tmp_path / "tiny.yaml", {**TINY, "seeds": 1, "budget": {"steps": 10}})
    results = str(tmp_path / "r")
    sweeper.run(str(path), results=results, executor="local")
    with pytest.raises(SweeperInputError) as refused:
        sweeper.run(str(path), results=results, executor="local", budget={"steps": 20})
    message = str(refused.value)
    assert "extend=True to add these trials" in message and "--extend" not in message
    # the command keeps the flag's words
    rc, _, err = cli(["run", path, "--results", results, "--executor", "local",
                      "--set", "budget.steps=20"])
    assert rc == 2 and "--extend to add these trials" in err and "extend=True" not in err
    assert sweeper.run(str(path), results=results, executor="local", budget={"steps": 20},
                       extend=True).ran == 2


def test_analysis_refusals_from_python_name_the_argument(store):  # noqa: F811
    with pytest.raises(ResultsInputError, match=r"^results: got 'nosuch://bucket/x'"):
        analysis.load("nosuch://bucket/x", "copy")
    with pytest.raises(AnalysisInputError, match=r"^metric= id: ambiguous; allowed: one "
                                                 r"of task.id, model.id"):
        analysis.best.best_trials(store, "copy", metric="id")
    rc, _, err = cli(["best", f"{store}/copy", "--metric", "id"])
    assert rc == 2 and "error: --metric id: ambiguous" in err, err

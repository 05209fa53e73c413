"""Outputs people read: the phase figure's title and size, query's default and exact columns,
the report's manifest, sweep file, head comparison and words, and counts in words."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from analysis import load, plots
from analysis.axes import METRIC_LABELS, axis_label
from analysis.cli import main
from analysis.phase import phase_from_results, representative_cells
from analysis.report import trajectory_caption
from sweeper.results.cells import resolution_warning
from sweeper.results.words import count

try:
    from analysis_fixtures import copy_report, store  # noqa: F401
    from sweep_helpers import cli_subprocess
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import copy_report, store  # noqa: F401
    from tests.sweep_helpers import cli_subprocess

X, Y, F = "task.cooccurrence", "task.hardness", "model.heads"


# ---------------------------------------------------------------- phase: title and size

def test_phase_title_and_size_reach_the_saved_png(store, tmp_path):  # noqa: F811
    png = tmp_path / "phase.png"
    assert main(["phase", str(store / "copy"), "--x", X, "--y", Y, "-o", str(png),
                 "--title", "Heads recover attention", "--size", "9,6.5"]) == 0
    with Image.open(png) as image:
        assert image.size == (900, 650)
    phase = phase_from_results(load(store, "copy"), X, Y, F)
    fig = plots.phase_figure(phase, title="Heads recover attention", size=(9, 6.5))
    assert fig._suptitle.get_text() == "Heads recover attention"
    assert tuple(fig.get_size_inches()) == (9, 6.5)


@pytest.mark.parametrize("size", ["0,5", "abc", "8", "8,x", "200,5", "nan,5"])
def test_bad_size_is_refused_in_one_line(store, tmp_path, capsys, size):  # noqa: F811
    png = tmp_path / "phase.png"
    with pytest.raises(SystemExit) as exit_:
        main(["phase", str(store / "copy"), "--x", X, "--y", Y, "-o", str(png),
              f"--size={size}"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "argument --size: got" in err and "in inches" in err
    assert not png.exists()


def test_a_size_too_small_for_the_panels_is_refused_naming_the_flag(store, tmp_path):  # noqa: F811
    png = tmp_path / "phase.png"
    done = cli_subprocess(["phase", store / "copy", "--x", X, "--y", Y, "-o", png,
                           "--size", "2,2"])
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "--size: got 2,2; allowed: at least" in done.stderr
    assert not png.exists()


def test_the_default_title_wraps_at_words_never_inside_one(store):  # noqa: F811
    phase = phase_from_results(load(store, "copy"), X, Y, F)
    title = plots.phase_title(phase)
    for width in (3.0, 5.0, 8.0):
        wrapped = plots.wrap_title(title, width)
        assert wrapped.split() == title.split()  # every word whole, in order
    long = "p(attention learned) over co-occurrence strength " + "x" * 60 + " and more"
    assert plots.wrap_title(long, 3.0).split() == long.split()
    fig = plots.phase_figure(phase)
    assert fig._suptitle.get_text().split() == title.split()


# ---------------------------------------------------------------- query columns

def _query(capsys, *argv) -> list[dict]:
    assert main(["query", *map(str, argv), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_query_prints_swept_columns_outcome_and_final_metrics_by_default(store, capsys):  # noqa: F811
    rows = _query(capsys, store / "copy")
    assert list(rows[0]) == [X, Y, F, "model.shared_embedding", "seed", "status",
                             "attention_learned", "attention_steps", "final_loss",
                             "final_accuracy", "final_attn_acc", "trial_id"]
    assert len(rows) == len(load(store, "copy").trials)
    every = _query(capsys, store / "copy", "--all", "--limit", "1")
    assert {"error", "node_id", "task.lift", "best_attn_acc"} <= set(every[0])


def test_query_columns_prints_the_swept_ones_then_those_or_with_only_exactly_those(
        store, capsys):  # noqa: F811
    rows = _query(capsys, store / "copy", "--columns", "seed,final_accuracy", "--only")
    assert all(list(r) == ["seed", "final_accuracy", "trial_id"] for r in rows)
    rows = _query(capsys, store / "copy", "--columns", "heads,learned", "--limit", "2",
                  "--only")
    assert list(rows[0]) == [F, "learned", "trial_id"]
    rows = _query(capsys, store / "copy", "--columns", "seed,final_accuracy")
    swept = [c for c in rows[0] if c.startswith(("task.", "model."))]
    assert swept and list(rows[0]) == [*swept, "seed", "final_accuracy", "trial_id"]
    assert main(["query", str(store / "copy"), "--only"]) == 2


def test_query_columns_and_all_are_refused_together(store, capsys):  # noqa: F811
    assert main(["query", str(store / "copy"), "--columns", "seed", "--all"]) == 2
    assert "give --columns or --all, not both" in capsys.readouterr().err


# ---------------------------------------------------------------- report

def _section(html: str, name: str) -> str:
    start = html.index(f"<section id='{name}'>")
    return html[start:html.index("</section>", start)]


def test_report_manifest_is_a_table_and_the_sweep_file_yaml(copy_report):  # noqa: F811
    report, _ = copy_report
    manifest = _section(report.html, "manifest")
    assert "<table class='fields'>" in manifest
    assert "<th class='text'>provenance</th><td class='text'><div class='wide'><table" in manifest
    assert '{"' not in manifest and "\\n" not in manifest  # no JSON, no escaped text
    pre = manifest[manifest.index("<pre class='yaml'>"):]
    assert "\nname: copy\ntask: copy-v1" in pre[:pre.index("</pre>")]


def test_report_manifest_shows_nested_records_as_tables():
    from analysis.report import _value_html

    shown = _value_html({"identity": {"task": "copy-v1", "seeds": [0, 1]},
                         "versions": [{"fingerprint": "ab", "sweep_file": "name: a\nseeds: 2\n"},
                                      {"fingerprint": "cd", "sweep_file": "name: a\nseeds: 4\n"}]})
    assert shown.count("<table") == 3 and "<th class='text'>fingerprint</th>" in shown
    assert "<pre class='yaml'>name: a\nseeds: 4</pre>" in shown and "0, 1" in shown


def test_report_trajectories_compare_one_task_cell_across_head_counts(copy_report):  # noqa: F811
    report, _ = copy_report
    cells = report.cells
    assert len(cells) == len({tuple(c.items()) for c in cells}) >= 2
    assert [c[F] for c in cells] == sorted(c[F] for c in cells) and cells[0][F] == 1
    assert len({(c[X], c[Y]) for c in cells}) == 1  # the same task cell
    section = _section(report.html, "trajectories")
    assert "The same task cell (c = " in section and "at H = 1 and at H = " in section
    assert trajectory_caption(cells) in section.replace("&#x27;", "'")


def test_representative_cells_skip_wholly_shared_cells_and_first_rows(store):  # noqa: F811
    res = load(store, "copy")
    phase = phase_from_results(res, X, Y, F, min_seeds=50)  # every cell insufficient
    cells = representative_cells(phase)
    assert len(cells) >= 2 and len({(c[X], c[Y]) for c in cells}) == 1
    assert {c[F] for c in cells} >= {1} and len({c[F] for c in cells}) == len(cells)
    solo = phase_from_results(res, X, Y, None, min_seeds=50)
    chosen = representative_cells(solo)
    assert len({tuple(c.items()) for c in chosen}) == len(chosen) >= 2
    assert chosen != [{X: r[X], Y: r[Y]} for _, r in solo.cells.head(len(chosen)).iterrows()]


def test_figure_axes_are_labelled_in_words(copy_report):  # noqa: F811
    report, _ = copy_report
    labels = [ax.get_ylabel() for ax in report.figures["trajectories"].axes if ax.get_ylabel()]
    assert "attention accuracy" in labels and "attn_acc" not in labels
    assert set(labels) <= set(METRIC_LABELS.values())
    assert axis_label("attn_acc") == "attention accuracy"
    assert axis_label("final_accuracy") == "final token accuracy"
    assert axis_label(X) == "co-occurrence strength c"


# ---------------------------------------------------------------- counts in words

def test_counts_are_plural_correct():
    assert count(1, "seed") == "1 seed" and count(2, "seed") == "2 seeds"
    assert count(0, "trial") == "0 trials"
    assert count(1, "cell summary", "cell summaries") == "1 cell summary"
    assert count(3, "cell summary", "cell summaries") == "3 cell summaries"
    assert resolution_warning(1).startswith("warning: 1 seed per cell cannot")
    assert resolution_warning(2).startswith("warning: 2 seeds per cell cannot")


def test_phase_messages_count_in_words(store):  # noqa: F811
    phase = phase_from_results(load(store, "copy"), X, Y, F, min_seeds=1)
    title = plots.phase_title(phase)
    assert "cells need ≥ 1 seed" in title and "1 seeds" not in title
    legend = [h.get_label() for h in plots._phase_legend(phase)]
    assert "fewer than 1 seed" in legend


def test_sweeper_and_analysis_share_one_count_helper():
    import sweeper.api as api

    assert not hasattr(api, "_count") and api.count is count

"""Each figure renders from a small sweep's Parquet, with the panels, marks and sizes expected."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle
from PIL import Image

from analysis import AnalysisInputError, compute_phase, load, plots, with_outcomes
from analysis.phase import phase_from_results, representative_cells

try:
    from analysis_fixtures import copy_report, store, trials_frame  # noqa: F401
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import copy_report, store, trials_frame  # noqa: F401

X, Y, F = "task.cooccurrence", "task.hardness", "model.heads"


def main_axes(fig):
    """The panels, without colorbars (which have no title)."""
    return [ax for ax in fig.axes if ax.get_title()]


def assert_png(fig, path, dpi=100):
    plots.save(fig, path, dpi=dpi)
    with Image.open(path) as image:
        assert image.format == "PNG"
        width, height = (round(v * dpi) for v in fig.get_size_inches())
        assert image.size == (width, height)


def test_phase_figure_panels_labels_and_title(copy_report, tmp_path):
    report, _ = copy_report
    fig, phase = report.figures["phase"], report.phase
    titles = [ax.get_title() for ax in main_axes(fig)]
    assert titles == ["p(success), H = 1", "p(success), H = 2", "p(success), H = 4",
                      "recovery: p(H = 2) − p(H = 1)", "recovery: p(H = 4) − p(H = 1)"]
    assert len(fig.axes) == 5 + 2  # two colorbars
    for ax in main_axes(fig):
        assert ax.get_xlabel() == "co-occurrence strength c"
        assert ax.get_ylabel() == "hardness h"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "0.25", "0.5", "1"]
    title = " ".join(fig._suptitle.get_text().split())  # the title names outcome and axes
    assert title.startswith("p(attention learned: best head's attention accuracy ≥ 0.9) over "
                            "co-occurrence strength c × hardness h, by heads H")
    assert_png(fig, tmp_path / "phase.png")
    assert ET.parse(plots.save(fig, tmp_path / "phase.svg")).getroot().tag.endswith("svg")
    assert phase.accuracy_threshold == 0.9 and phase.outcome == "attention_learned"


def test_phase_figure_draws_the_boundary_and_marks_of_the_data_object(copy_report):
    report, _ = copy_report
    fig, phase = report.figures["phase"], report.phase
    for ax, heads in zip(main_axes(fig)[:3], phase.facet_values, strict=True):
        segments = phase.boundary[phase.boundary[F] == heads]
        assert len(ax.lines) == len(segments)
        cells = phase.facet_cells(heads)
        hatched = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_hatch()]
        assert len(hatched) == cells["state"].isin(["insufficient", "missing"]).sum()
        labels = {t.get_text() for t in ax.texts}
        sampled = cells[cells["n"] >= phase.min_seeds]
        assert {f"{r.successes}/{r.n}" for r in sampled.itertuples()} <= labels


def test_phase_figure_without_facet_and_with_missing_cells(tmp_path):
    grid = {(1, 0.0, 0.0): (0, 5), (1, 1.0, 0.0): (5, 5), (1, 0.5, 1.0): (1, 2)}
    phase = compute_phase(trials_frame(grid), X, Y, None, accuracy_threshold=0.9)
    fig = plots.phase_figure(phase)
    (ax,) = main_axes(fig)
    assert ax.get_title() == "p(success), all trials"
    hatches = sorted(p.get_hatch() for p in ax.patches if p.get_hatch())
    assert hatches == ["///"] + ["xx"] * 3  # 1 insufficient, 3 grid points without trials
    assert "n=2" in {t.get_text() for t in ax.texts}
    assert "≥ 0.9" in fig._suptitle.get_text()
    assert_png(fig, tmp_path / "one.png")


def test_recovered_cells_are_outlined():
    grid = {(1, 0.0, 0.0): (0, 10), (4, 0.0, 0.0): (10, 10)}
    fig = plots.phase_figure(compute_phase(trials_frame(grid), X, Y, F))
    outlines = [[p for p in ax.patches if not p.get_fill()] for ax in main_axes(fig)]
    assert [len(o) for o in outlines] == [0, 1, 1]  # H = 4 panel and its recovery map


def test_regime_figure(copy_report):
    fig = copy_report[0].figures["states"]
    assert [ax.get_title() for ax in fig.axes] == ["state, H = 1", "state, H = 2",
                                                   "state, H = 4"]


def test_trajectory_figure(copy_report, tmp_path):
    report, _ = copy_report
    fig = report.figures["trajectories"]
    assert [ax.get_title() for ax in fig.axes] == [
        "token accuracy", "attention accuracy", "KTIW-probe accuracy",
        "uniform-attention accuracy"]
    for ax in fig.axes:
        assert len(ax.lines) == len(report.cells) and ax.get_xlabel() == "step"
        assert len(ax.collections) == len(report.cells)  # the interquartile bands
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(labels) == len(report.cells) and all("(n=" in t for t in labels)
    assert_png(fig, tmp_path / "trajectories.png")


def test_trajectory_figure_medians_come_from_the_trajectories(store):
    res = load(store, "copy", where="model.heads == 4 and task.cooccurrence == 1.0 and "
                                    "task.hardness == 0.0")
    cell = {F: 4, X: 1.0, Y: 0.0}
    fig = plots.trajectory_figure(res.trials, res.trajectories, [cell], metrics=["accuracy"])
    (line,) = fig.axes[0].lines
    counted = res.trials[res.trials["status"].isin(["ok", "diverged"])]["trial_id"]
    rows = res.trajectories[res.trajectories["trial_id"].isin(counted)]
    expected = rows.groupby("step")["accuracy"].median()
    assert list(line.get_xdata()) == list(expected.index.astype(float))
    assert list(line.get_ydata()) == pytest.approx(list(expected))
    with pytest.raises(AnalysisInputError, match="none of"):
        plots.trajectory_figure(res.trials, res.trajectories, [cell], metrics=["nope"])


def test_onset_figure(store, tmp_path):
    res = load(store, "copy")
    trials = with_outcomes(res.trials, res.trajectories)
    fig = plots.onset_figure(trials)
    (ax,) = fig.axes
    both = trials["attention_onset"].notna() & trials["ktiw_onset"].notna()
    points = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    assert points == both.sum()
    assert [line.get_label() for line in ax.lines] == ["same step"]
    first = (trials.loc[both, "ktiw_onset"] < trials.loc[both, "attention_onset"]).sum()
    assert ax.get_title().startswith(f"KTIW first in {first} of {both.sum()} trials")
    assert_png(fig, tmp_path / "onsets.png")


def test_topic_figure(store, tmp_path):
    res = load(store, "topic")
    phase = phase_from_results(res, X, "task.distractors", "model.classifier")
    cells = representative_cells(phase)
    assert len(cells) == 3
    fig = plots.topic_figure(res.trials, res.trajectories, cells)
    left, right = fig.axes
    assert left.get_xlabel() == "2 s_t + (2/m)(exp(s_t) − 1)"
    assert left.get_ylabel() == "|q|² |v_t|²"
    ids = set().union(*(plots.select_cell(res.trials, c)["trial_id"] for c in cells))
    rows = res.trajectories[res.trajectories["trial_id"].isin(ids)]
    assert len(left.collections[0].get_offsets()) == rows["identity_lhs"].map(len).sum()
    assert right.get_title() == "attention on the topic word" and len(right.lines) == 3
    assert_png(fig, tmp_path / "topic.png")
    with pytest.raises(AnalysisInputError, match="not a topic sweep"):
        plots.topic_figure(res.trials, res.trajectories.drop(columns=["identity_lhs"]))


def test_save_by_extension_only(tmp_path, copy_report):
    with pytest.raises(AnalysisInputError, match="use one of .png, .svg, .pdf"):
        plots.save(copy_report[0].figures["states"], tmp_path / "x.jpg")


def test_axis_labels_in_words():
    assert plots.axis_label(X) == "co-occurrence strength c"
    assert plots.axis_label(Y) == "hardness h"
    assert plots.axis_label(F) == "heads H"
    assert plots.axis_label("custom.column") == "custom.column"
    assert plots.value_label(F, 4) == "H = 4"

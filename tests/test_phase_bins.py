"""Binned phase diagrams: a random sweep's continuous axes in N bins by default, a grid's values
as its cells, the bins recorded in the data object and shown by `sweeper phase`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis import AnalysisInputError, load, plots
from analysis.cli import build_parser, main
from analysis.phase import axis_bins, phase_from_results, with_bins

try:
    import synthetic_stores as synthetic
    from analysis_fixtures import store  # noqa: F401
except ImportError:  # tests/ imported as a package
    from tests import synthetic_stores as synthetic
    from tests.analysis_fixtures import store  # noqa: F401

X, Y, F = "task.cooccurrence", "task.hardness", "model.heads"


@pytest.fixture(scope="module")
def random_sweep(tmp_path_factory):
    """A random search: 40 configurations with continuous c and h, 2 seeds each."""
    root = tmp_path_factory.mktemp("random")
    return synthetic.write_random_copy_sweep(root, "random", cells=40, seeds=2, steps=60)


def _phase(folder, **kwargs):
    return phase_from_results(load(folder.parent, folder.name), X, Y, F, **kwargs)


def test_a_random_sweep_is_binned_by_default_and_counts_every_trial_once(random_sweep):
    res = load(random_sweep.parent, "random")
    assert res.trials[X].nunique() == 40  # one value per configuration: 40 columns unbinned
    phase = phase_from_results(res, X, Y, F)
    assert set(phase.bins) == {X, Y}
    assert len(phase.x_values) == 5 and len(phase.y_values) == 5
    for column, values in ((X, phase.x_values), (Y, phase.y_values)):
        bins = phase.bins[column]
        assert bins.method == "quantile" and values == bins.labels
        assert len(bins.edges) == 6 and bins.edges == sorted(bins.edges)
        assert bins.edges[0] == res.trials[column].min()
        assert bins.edges[-1] == res.trials[column].max()
    assert int(phase.cells["n_trials"].sum()) == len(res.trials)
    labelled = with_bins(res.trials, phase.bins)
    counts = labelled.groupby([F, X, Y]).size()
    for _, cell in phase.cells[phase.cells["n_trials"] > 0].iterrows():
        assert counts[(cell[F], cell[X], cell[Y])] == cell["n_trials"]


def test_quantile_bins_hold_about_as_many_trials(random_sweep):
    phase = _phase(random_sweep)
    per_bin = phase.cells.groupby(X)["n_trials"].sum()
    assert per_bin.sum() == 80 and per_bin.max() - per_bin.min() <= 4


def test_bins_per_axis_and_by_width(random_sweep):
    phase = _phase(random_sweep, bins={"x": 3, "y": 4}, bins_method="width")
    assert len(phase.x_values) == 3 and len(phase.y_values) == 4
    edges = np.array(phase.bins[Y].edges)
    assert np.allclose(np.diff(edges), np.diff(edges)[0])
    assert phase.bins[X].method == "width"
    assert phase.x_values[0].startswith("[") and phase.x_values[0].endswith(")")
    assert phase.x_values[-1].endswith("]")  # the last bin holds the largest value


def test_bins_none_gives_one_cell_per_value(random_sweep):
    phase = _phase(random_sweep, bins=None)
    assert phase.bins == {} and len(phase.x_values) == 40


def test_a_grid_sweep_keeps_its_values(store):  # noqa: F811
    phase = _phase(store / "copy")
    assert phase.bins == {}
    assert phase.x_values == [0.0, 0.25, 0.5, 1.0] and phase.y_values == [0.0, 0.5, 1.0]
    asked = _phase(store / "copy", bins=2)  # asked for, a grid is binned too
    assert len(asked.x_values) == 2 and set(asked.bins) == {X, Y}


def test_an_axis_with_few_values_or_no_numbers_is_not_binned():
    import pandas as pd

    assert axis_bins(X, pd.Series([0.1, 0.2, 0.1]), 5) is None
    assert axis_bins("model.cell", pd.Series(["lstm", "gru", "rnn"] * 3), 2) is None
    made = axis_bins(X, pd.Series(np.linspace(0, 1, 11)), 2)
    assert made.labels == ["[0, 0.5)", "[0.5, 1]"]
    assert made.assign(pd.Series([0.0, 0.49, 0.5, 1.0])).tolist() == [
        "[0, 0.5)", "[0, 0.5)", "[0.5, 1]", "[0.5, 1]"]


@pytest.mark.parametrize(("bins", "message"), [
    (1, "allowed: an integer from 2"), ({"z": 3}, "allowed: x, y"), ("many", "allowed: auto"),
])
def test_bad_bins_in_the_api_are_one_line_errors(random_sweep, bins, message):
    with pytest.raises(AnalysisInputError, match=message):
        _phase(random_sweep, bins=bins)
    with pytest.raises(AnalysisInputError, match="bins method"):
        _phase(random_sweep, bins_method="equal")


def test_cli_phase_bins_by_default_and_shows_them(random_sweep, tmp_path, capsys):
    png, cells = tmp_path / "phase.png", tmp_path / "cells.json"
    assert main(["phase", str(random_sweep), "--x", X, "--y", Y, "-o", str(png),
                 "--cells", str(cells)]) == 0
    out = capsys.readouterr().out
    phase = _phase(random_sweep)
    for column in (X, Y):
        assert phase.bins[column].describe() in out
        assert f"{column} in 5 quantile bins: edges " in out
    rows = json.loads(cells.read_text())
    assert {r[X] for r in rows} == set(phase.x_values)
    assert png.stat().st_size > 0
    fig = plots.phase_figure(phase)
    ax = fig.phase_panels[0][1]
    assert [t.get_text() for t in ax.get_xticklabels()] == phase.x_values
    assert "c in 5 quantile bins" in fig._suptitle.get_text().replace("\n", " ")


def test_cli_phase_bins_per_axis_and_none(random_sweep, tmp_path, capsys):
    png = tmp_path / "phase.png"
    assert main(["phase", str(random_sweep), "--x", X, "--y", Y, "-o", str(png),
                 "--bins", "x=3,y=4", "--bins-method", "width"]) == 0
    out = capsys.readouterr().out
    assert f"{X} in 3 width bins" in out and f"{Y} in 4 width bins" in out
    parse = build_parser().parse_args  # none: a cell per value, as bins=None (above)
    assert parse(["phase", "R/S", "--x", X, "--y", Y, "--bins", "none"]).bins is None
    assert parse(["phase", "R/S", "--x", X, "--y", Y]).bins == "auto"
    assert parse(["phase", "R/S", "--x", X, "--y", Y, "--bins", "7"]).bins == 7


@pytest.mark.parametrize("value", ["1", "x=3,z=4", "x=3,x=4", "lots", "-2"])
def test_cli_refuses_bad_bins_in_one_line(random_sweep, tmp_path, capsys, value):
    png = tmp_path / "phase.png"
    with pytest.raises(SystemExit) as exit_:
        main(["phase", str(random_sweep), "--x", X, "--y", Y, "-o", str(png),
              f"--bins={value}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "argument --bins" in err
    assert not png.exists()

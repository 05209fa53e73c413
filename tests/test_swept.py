"""Parameters apart from derived columns: in a sweep over c at a fixed L, copy's task.vocab varies
with c (N = L + round(c L)) but was never swept, so no view offers it as an axis, a colour, a
slice, an importance or a default column; it stays readable by name. One rule
(`analysis.swept`) serves every view."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest
from sweep_helpers import cli, run_local, variant, write_sweep

import analysis
from analysis.phase import default_axes
from analysis.query import DEFAULT, query_frame
from analysis.swept import declared_axes, swept_columns


@pytest.fixture(scope="module")
def c_by_heads(tmp_path_factory):
    """A real sweep (local executor): c x heads at L = 4, so vocab is 4 or 6 with c."""
    return run_local(tmp_path_factory.mktemp("swept"), variant(**{
        "name": "ch", "axes.model.heads": {"grid": [1, 2]}, "seeds": 1, "budget": {"steps": 10}}))


def test_a_column_the_task_sets_from_a_swept_one_is_not_a_parameter(c_by_heads):
    res = analysis.load(str(c_by_heads), "ch")
    assert res.trials["task.vocab"].nunique() == 2  # it varies ...
    assert swept_columns(res.trials, res.manifests) == ["task.cooccurrence", "model.heads"]
    # heads is the facet; y is a fixed preferred axis, never vocab (x = c, y = vocab before)
    assert default_axes(res.trials, res.manifests) == ("task.cooccurrence", "task.hardness",
                                                      "model.heads")
    assert "varying: task.cooccurrence, model.heads;" in repr(res)


def test_query_shows_parameters_by_default_and_a_derived_column_when_named(c_by_heads):
    default = query_frame(c_by_heads, "ch", columns=DEFAULT)
    assert "task.vocab" not in default.columns
    assert {"task.cooccurrence", "model.heads"} <= set(default.columns)
    named = query_frame(c_by_heads, "ch", columns=["task.vocab"])
    assert named["task.vocab"].tolist() == sorted(named["task.vocab"].tolist())  # sorted by c
    rc, out, _ = cli(["query", "ch", "--results", c_by_heads])
    assert rc == 0 and "task.vocab" not in out.splitlines()[0]


def test_the_dashboard_offers_parameters_only(c_by_heads):
    from analysis.dashboard.data import SweepView

    view = SweepView(pafs.LocalFileSystem(), str(c_by_heads), "ch")
    state = view.state()
    assert [a["column"] for a in state["axes"]] == ["task.cooccurrence", "model.heads"]
    search = view.search()
    assert [p["column"] for p in search["parameters"]] == ["task.cooccurrence", "model.heads"]
    assert set(search["importance"]["values"]) == {"task.cooccurrence", "model.heads"}


def test_the_run_s_overrides_count_as_its_axes(tmp_path):
    path = write_sweep(tmp_path / "s.yaml", variant(**{"name": "over", "seeds": 1,
                                                       "budget": {"steps": 10}}))
    assert cli(["run", path, "--results", tmp_path / "r", "--executor", "local",
                "--no-estimate", "--set", "model.heads=1,2", "--set",
                "task.cooccurrence=0.5"])[0] == 0
    manifest = analysis.load(str(tmp_path / "r"), "over").manifest
    assert declared_axes(manifest) == {"model.heads"}
    older = {"sweep_file": "name: s\naxes:\n  task:\n    cooccurrence: {grid: [0, 1]}\n"}
    assert declared_axes(older) == {"task.cooccurrence"}  # a manifest without `axes`
    assert declared_axes({"sweep_file": "# synthetic\nname: s\n"}) is None
    assert declared_axes({}) is None


def test_without_declared_axes_every_varying_parameter_counts(tmp_path):
    """A synthetic store's manifest names no axes: nothing is called derived."""
    import synthetic_stores as synthetic

    synthetic.write_copy_sweep(tmp_path, "syn", cooccurrence=(0.0, 0.5), hardness=(0.0,),
                               heads=(1,), seeds=1, seed=1)
    res = analysis.load(str(tmp_path), "syn")
    assert "task.cooccurrence" in swept_columns(res.trials, res.manifests)


def test_a_value_fixed_differently_in_two_sweeps_is_a_parameter_of_the_comparison(tmp_path):
    for heads in (1, 2):
        data = variant(**{"name": f"h{heads}", "fixed.model.heads": heads, "seeds": 1,
                          "budget": {"steps": 10}})
        path = write_sweep(tmp_path / f"h{heads}.yaml", data)
        assert cli(["run", path, "--results", tmp_path / "r", "--executor", "local",
                    "--no-estimate"])[0] == 0
    res = analysis.load(str(tmp_path / "r"), ["h1", "h2"])
    assert swept_columns(res.trials, res.manifests) == ["task.cooccurrence", "model.heads"]


def test_query_marks_trials_that_share_a_training(tmp_path):
    """At c = 0 hardness changes nothing: the h = 1 trials share the h = 0 ones' training;
    `query` names it in `shared_with` so that two identical rows are not read as two seeds."""
    data = variant(**{"name": "sh", "axes.task.hardness": {"grid": [0.0, 1.0]}, "seeds": 1,
                      "budget": {"steps": 10}})
    path = write_sweep(tmp_path / "sh.yaml", data)
    assert cli(["run", path, "--results", tmp_path / "r", "--executor", "local",
                "--no-estimate"])[0] == 0
    rows = query_frame(tmp_path / "r", "sh", columns=DEFAULT)
    assert "shared_with" in rows.columns
    shared = rows[rows["shared_with"].notna()]
    assert len(shared) == 1 and shared["task.cooccurrence"].item() == 0.0


def test_a_live_sweep_keeps_its_declared_axes_from_its_first_pack():
    """The first pack of a c x h x heads sweep may hold one h and one head count only: the
    default view is still c x h faceted by heads (not c against whatever else is there)."""
    import pandas as pd

    first_pack = pd.DataFrame({"task.cooccurrence": [0.0, 0.25, 0.5],
                               "task.hardness": [0.0] * 3, "model.heads": [1] * 3,
                               "model.width": [32] * 3, "seed": [0, 0, 0]})
    manifest = {"axes": ["task.cooccurrence", "task.hardness", "model.heads"]}
    assert default_axes(first_pack, {"live": manifest}) == (
        "task.cooccurrence", "task.hardness", "model.heads")
    assert default_axes(first_pack)[2] is None  # undeclared: nothing to facet by yet


def test_a_fixed_value_changed_with_extend_is_a_parameter_not_pooled(tmp_path):
    """L = 6, then L = 8 under the same name with --extend: task.length varies and is shown
    and kept apart (task.vocab, set from c and L, stays derived)."""
    data = variant(**{"name": "ext", "fixed.task.length": 6, "seeds": 1,
                      "budget": {"steps": 10}})
    path = write_sweep(tmp_path / "ext.yaml", data)
    run = ["run", path, "--results", tmp_path / "r", "--executor", "local", "--no-estimate"]
    assert cli(run)[0] == 0
    assert cli([*run, "--set", "task.length=8", "--extend"])[0] == 0
    res = analysis.load(str(tmp_path / "r"), "ext")
    assert swept_columns(res.trials, res.manifests) == ["task.length", "task.cooccurrence"]
    best = res.best("accuracy", by="config")
    assert len(best) == 4 and (best["seeds"] == 1).all()  # 2 lengths x 2 c, not pooled
    assert set(best["task.length"]) == {6, 8}

"""Trials that differ only in parameters that change nothing train once (issue 23).

Copy at c = 0 (the block is the whole vocabulary) trains the same model at every hardness: the
plan trains one trial per training id, stores the others as rows of their own that name it in
`shared_with`, and analysis reads them as that training's trajectory, marked as shared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_helpers import variant, write_sweep

import analysis
import sweeper
from sweeper.plan import make_plan, share_trainings
from sweeper.search_space import load_sweep
from sweeper.spec import make_spec
from sweeper.train import train_pack

HARD_AXES = {"cooccurrence": {"grid": [0.0, 0.5]}, "hardness": {"grid": [0.0, 1.0]}}


def _spec(c: float, h: float, seed: int = 0, **task):
    return make_spec("copy-v1", "seq2seq", {"length": 4, "cooccurrence": c, "hardness": h, **task},
                     {"width": 8, "heads": 2},
                     {"batch_size": 8, "eval_size": 8, "steps": 6, "eval_every": 3}, seed)


@pytest.mark.parametrize("task", [{}, {"repeat": True, "vocab": 3}, {"mapping": "permutation"}])
def test_a_declared_ineffective_parameter_changes_nothing_trained(task):
    """The declaration is a claim about the data: trained at h = 0 and h = 1 in one pack (with
    an easy model beside them, so the pack's vocabulary is padded), the models' trajectories
    are equal to the last bit; at c = 0.5 hardness changes them (the check can fail)."""
    hard = [_spec(0.0, h, **task) for h in (0.0, 1.0)]
    assert hard[0].training_id == hard[1].training_id != hard[1].trial_id
    results = train_pack([*hard, _spec(0.5, 0.0, **{k: v for k, v in task.items()
                                                      if k != "vocab"})])
    assert results[0].trajectory == results[1].trajectory
    easy = train_pack([_spec(0.5, h) for h in (0.0, 1.0)])
    assert easy[0].trajectory["loss"] != easy[1].trajectory["loss"]


def test_training_id_ignores_only_the_parameters_that_change_nothing():
    assert _spec(0.0, 0.0).training_id == _spec(0.0, 1.0).training_id == _spec(0.0, 0.0).trial_id
    assert _spec(0.0, 1.0).training_id != _spec(0.0, 1.0).trial_id
    assert _spec(0.0, 1.0, seed=1).training_id != _spec(0.0, 1.0).training_id
    assert _spec(0.5, 1.0).training_id == _spec(0.5, 1.0).trial_id != _spec(0.5, 0.0).trial_id


def test_the_quick_sweep_trains_56_of_its_72_trials():
    plan = make_plan(load_sweep("search_spaces/quick.yaml"), set())
    sharing = plan.sharing
    assert (len(plan.pending), len(sharing.trainings), sharing.saved) == (72, 56, 16)
    for sharers in sharing.shares.values():  # c = 0: h = 0.5 and 1 share h = 0's
        assert len(sharers) == 2
        assert {s.task_params["hardness"] for s in sharers} == {0.5, 1.0}
        assert all(s.task_params["cooccurrence"] == 0.0 for s in sharers)


def test_a_stored_trial_is_shared_not_trained_again():
    specs = [_spec(0.0, h) for h in (0.0, 0.5, 1.0)]
    sharing = share_trainings(specs, stored={specs[1].trial_id})
    assert sharing.trainings == [] and sharing.shares == {}
    assert sharing.shares_stored == {specs[1].trial_id: [specs[0], specs[2]]}


def test_a_run_stores_shared_rows_once_and_analysis_reads_them_as_shared(tmp_path, capsys):
    path = write_sweep(tmp_path / "s.yaml", variant(**{"axes.task": HARD_AXES, "name": "sh"}))
    root = str(tmp_path / "r")
    result = sweeper.run(str(path), results=root, executor="local")
    assert (result.ran, result.shared, result.status) == (8, 2, {"ok": 8})
    assert "6 trained, 2 sharing" in result.summary()
    res = analysis.load(root, "sh")
    trials = res.trials.set_index("trial_id")
    shared = trials[trials["shared_with"].notna()]
    assert len(shared) == 2 and set(shared["task.hardness"]) == {1.0}
    assert set(shared["task.cooccurrence"]) == {0.0}
    stored = analysis.load(root, "sh")._read_sweep(res.sweeps[0], None, None, None)
    assert stored.column("trial_id").unique().to_pylist().__len__() == 6  # trained once
    for alias, row in shared.iterrows():
        source = trials.loc[row["shared_with"]]
        assert source["task.hardness"] == 0.0 and source["seed"] == row["seed"]
        assert source["final_loss"] == row["final_loss"]
        mine = res.read_trajectories([alias])
        theirs = res.read_trajectories([row["shared_with"]])
        assert list(mine["trial_id"].unique()) == [alias]
        assert mine["loss"].tolist() == theirs["loss"].tolist() and len(mine) == 3
    assert res.trajectories.groupby("trial_id").size().to_dict() == {i: 3 for i in trials.index}
    phase = analysis.phase_from_results(res, "task.cooccurrence", "task.hardness")
    cells = phase.cells.set_index(["task.cooccurrence", "task.hardness"])
    assert cells.loc[(0.0, 1.0), "n_shared"] == 2 and cells["n_shared"].sum() == 2
    again = sweeper.run(str(path), results=root, executor="local")
    assert again.ran == 0


def test_an_added_equivalent_cell_shares_the_stored_training(tmp_path, capsys):
    axes = {"cooccurrence": {"grid": [0.0]}, "hardness": {"grid": [0.0]}}
    path = write_sweep(tmp_path / "s.yaml", variant(**{"axes.task": axes, "name": "add"}))
    root = str(tmp_path / "r")
    assert sweeper.run(str(path), results=root, executor="local").ran == 2
    wider = {**axes, "hardness": {"grid": [0.0, 0.5]}}
    path = write_sweep(tmp_path / "s.yaml", variant(**{"axes.task": wider, "name": "add"}))
    from sweeper.cli import main

    assert main(["plan", str(path), "--results", root, "--json", "--no-estimate"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert (planned["pending"], planned["trainings"], planned["shared"]) == (2, 0, 2)
    result = sweeper.run(str(path), results=root, executor="local", extend=True)
    assert (result.ran, result.shared, result.packs) == (2, 2, 0)
    trials = analysis.load(root, "add").trials
    added = trials[trials["task.hardness"] == 0.5]
    assert len(added) == 2 and added["shared_with"].notna().all()
    first = trials[trials["task.hardness"] == 0.0].set_index("seed")
    for _, row in added.iterrows():
        assert row["shared_with"] == first.loc[row["seed"], "trial_id"]
        assert row["final_loss"] == first.loc[row["seed"], "final_loss"]


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    """c in {0, 0.5} x h in {0, 1}, 2 seeds: 8 trials, 6 trained, 2 sharing (c = 0, h = 1)."""
    tmp = tmp_path_factory.mktemp("shared")
    path = write_sweep(tmp / "s.yaml", variant(**{"axes.task": HARD_AXES, "name": "sh"}))
    sweeper.run(str(path), results=str(tmp / "r"), executor="local")
    return str(tmp / "r")


def test_sql_trajectories_hold_the_shared_rows_under_each_trial(shared_store):
    rows = analysis.sql(shared_store, 'SELECT t."task.cooccurrence" c, t."task.hardness" h, '
                        'count(*) n FROM trials t JOIN trajectories USING (trial_id) '
                        'GROUP BY 1, 2 ORDER BY 1, 2', "sh")
    assert rows["n"].tolist() == [6, 6, 6, 6]  # 2 seeds x 3 evaluations in every cell


def test_the_dashboard_draws_a_shared_cell_with_its_trainings_curves(shared_store):
    import pyarrow.fs as pafs

    from analysis.dashboard.data import SweepView

    view = SweepView(pafs.LocalFileSystem(), shared_store, "sh")
    cells = {h: view.cell([{"column": "task.cooccurrence", "value": 0.0},
                           {"column": "task.hardness", "value": h}]) for h in (0.0, 1.0)}
    mine, theirs = cells[1.0], cells[0.0]
    assert len(mine["curves"]) == 2 and set(mine["curves"]) == {t["trial_id"]
                                                                for t in mine["trials"]}
    by_seed = {t["seed"]: t["trial_id"] for t in theirs["trials"]}
    for t in mine["trials"]:
        assert t["shared_with"] == by_seed[t["seed"]]
        assert mine["curves"][t["trial_id"]] == theirs["curves"][t["shared_with"]]
    phase = view.phase("task.cooccurrence", "task.hardness", None)
    assert sorted(c["n_shared"] for c in phase["cells"]) == [0, 0, 0, 2]


def test_a_cell_pooled_over_hardness_counts_a_shared_training_once(shared_store):
    from sweeper.results.cells import cell_stats

    trials = analysis.load(shared_store, "sh").trials
    pooled = cell_stats(trials, ["task.cooccurrence"], "attention_learned").set_index(
        "task.cooccurrence")
    assert pooled.loc[0.0, "n_trials"] == 4 and pooled.loc[0.0, "n"] == 2  # 2 trainings
    assert pooled.loc[0.5, "n"] == 4
    apart = cell_stats(trials, ["task.cooccurrence", "task.hardness"], "attention_learned")
    assert apart["n"].tolist() == [2, 2, 2, 2]  # its own cell: the shared seeds count there


def test_the_estimate_ignores_shared_rows_that_took_no_time(shared_store):
    from sweeper.estimate import _from_store
    from sweeper.packing import form_packs

    trials = analysis.load(shared_store, "sh").trials
    specs = [make_spec("copy-v1", "seq2seq", {"length": 4, "cooccurrence": 0.0, "hardness": 1.0},
                       {"width": 8}, {"batch_size": 8, "eval_every": 10, "eval_size": 8,
                                      "steps": 20}, seed) for seed in range(2)]  # TINY's
    only_shared = trials[trials["shared_with"].notna()]
    assert all(c is None for c in _from_store(form_packs(specs, None, 1), only_shared))
    cost = _from_store(form_packs(specs, None, 1), trials)
    assert None not in cost and min(cost) > 0


def test_an_older_file_without_the_column_keeps_it_through_read_and_compact(tmp_path):
    """A store from before sharing (no shared_with column) extended with shared rows: read
    and compact keep the column whichever file comes first."""
    import pyarrow.parquet as pq

    from sweeper.results import Store

    one = {"cooccurrence": {"grid": [0.5]}, "hardness": {"grid": [0.0]}}
    both = {"cooccurrence": {"grid": [0.5, 0.0]}, "hardness": {"grid": [0.0, 1.0]}}
    root = str(tmp_path / "r")
    for axes, extend in ((one, False), (both, True)):
        path = write_sweep(tmp_path / "s.yaml", variant(**{
            "axes.task": axes, "name": "o", "seeds": 1, "pack_size": 1}))
        sweeper.run(str(path), results=root, executor="local", extend=extend)
        if not extend:  # as written before the column existed
            for f in (tmp_path / "r" / "o" / "trials").glob("*.parquet"):
                table = pq.read_table(f)
                pq.write_table(table.drop_columns(["shared_with"]).replace_schema_metadata(
                    table.schema.metadata), f)
    store = Store.open(root)
    for _ in range(2):  # as stored, then compacted into one file
        trials = store.read("o", "trials").to_pandas()
        assert trials["shared_with"].notna().sum() == 1 and len(trials) == 4
        res = analysis.load(root, "o")
        assert res.trajectories.groupby("trial_id").size().tolist() == [3] * 4
        store.compact("o")


def test_every_reader_counts_a_pooled_shared_training_once(shared_store, capsys):
    """x = co-occurrence, y = width: each cell pools over hardness, so at c = 0 the two
    hardness values' rows are 2 trainings, not 4. The trials' cell statistics, the summary's
    cells (what the dashboard's map and status read), the dashboard's map, `sweeper phase
    --json` and the API's phase agree on every cell's n and successes."""
    import json

    import pyarrow.fs as pafs

    from analysis.cli import main
    from analysis.dashboard.data import SweepView
    from analysis.phase import compute_phase, phase_from_summary
    from sweeper.results.cells import cell_stats

    x, y, outcome = "task.cooccurrence", "model.width", "attention_learned"
    results = analysis.load(shared_store, "sh")
    trials = results.trials
    truth = cell_stats(trials, [x, y], outcome).set_index(x)[["n", "successes"]]
    assert truth.loc[0.0, "n"] == 2 and truth.loc[0.5, "n"] == 4

    def counts(cells):
        return cells.set_index(x)[["n", "successes"]].astype(int)

    view = SweepView(pafs.LocalFileSystem(), shared_store, "sh")
    view.refresh()
    readers = {
        "trials": compute_phase(trials, x, y, None, outcome=outcome).cells,
        "summary": phase_from_summary(view.summary.cells, x, y, None, outcome=outcome).cells,
    }
    for name, cells in readers.items():
        assert counts(cells).equals(truth.astype(int)), name
    drawn = view.phase(x, y, None, outcome=outcome)
    grid = drawn["facets"][0]["grid"]
    assert sorted(v for row in grid["n"] for v in row) == sorted(truth["n"].tolist())
    assert main(["phase", f"{shared_store}/sh", "--x", x, "--y", y, "--outcome", outcome,
                 "--json", "-o", str(Path(shared_store) / "p.png")]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert sorted((c[x], c["n"]) for c in cells) == [(0.0, 2), (0.5, 4)]

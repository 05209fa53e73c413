"""The sweep commands end to end with the in-process executor (`--executor local`, no Ray):
run, resume, extend, status, compact, failures, and where results go."""

from __future__ import annotations

import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest
from sweep_helpers import (
    TINY_STEPS,
    all_files,
    assert_all_parquet_readable,
    assert_only_store_files,
    cli,
    variant,
    write_sweep,
)

from sweeper.executors.local import LocalExecutor
from sweeper.plan import expand
from sweeper.results import Store
from sweeper.runner import run_sweep
from sweeper.search_space import load_sweep


def _files_state(root) -> dict[str, int]:
    """The results' record (trials and trajectories parts); the cell summary is a view that
    every committed pack rewrites."""
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in all_files(root)
            if p.suffix == ".parquet" and p.name.startswith("part-")}


def _trials(root, sweep="tiny") -> pd.DataFrame:
    return pd.read_parquet(root / sweep / "trials")


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("local-sweep")
    sweep_file = write_sweep(base / "tiny.yaml", variant())
    results = base / "results"
    # two packs of two, so that there are files to compact
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local",
                        "--pack-size", "2"])
    assert rc == 0, err
    return {"file": sweep_file, "results": results, "out": out,
            "files": _files_state(results)}


def test_local_run_lands_in_parquet(first_run):
    results = first_run["results"]
    specs = expand(load_sweep(str(first_run["file"])))
    trials = _trials(results)
    assert len(trials) == 4 and trials["trial_id"].is_unique
    assert set(trials["trial_id"]) == {s.trial_id for s in specs}
    assert sorted(trials["task.cooccurrence"]) == [0.0, 0.0, 0.5, 0.5]
    assert set(trials["seed"]) == {0, 1}
    assert (trials["status"] == "ok").all() and (trials["attempts"] == 1).all()
    assert trials["node_id"].isna().all()  # run in-process
    assert {"task.hardness", "task.lift", "model.heads", "train.lr", "train.steps",
            "learned", "final_accuracy", "best_loss"} <= set(trials.columns)
    traj = pq.read_table(results / "tiny" / "trajectories")
    assert traj.num_rows == 4 * len(TINY_STEPS)
    assert sorted(set(traj.column("step").to_pylist())) == list(TINY_STEPS)
    assert "sweep tiny: ran 4 trials" in first_run["out"]
    assert "stored: 4 ok" in first_run["out"]
    assert "task.cooccurrence" in first_run["out"] and "p(attention_learned)" in first_run["out"]


def test_local_run_writes_only_the_store(first_run):
    assert_only_store_files(first_run["results"])
    assert_all_parquet_readable(first_run["results"])
    assert sorted(p.name for p in first_run["file"].parent.iterdir()) == ["results",
                                                                          "tiny.yaml"]


def test_manifest_records_the_sweep(first_run):
    manifest = Store.open(str(first_run["results"])).read_manifest("tiny")
    assert manifest["sweep_file"] == first_run["file"].read_text()
    assert manifest["trials_expanded"] == 4
    assert manifest["task"] == "copy-v1" and manifest["search"] == "grid"
    assert {"sweeper", "torch", "pyarrow", "git_commit", "git_dirty"} <= set(
        manifest["provenance"])


def test_status_by_name_path_and_file(first_run):
    results = first_run["results"]
    expected = "tiny: 4 done, 0 failed, 0 pending (4 ok)"
    for argv in (["status", "tiny", "--results", results], ["status", results / "tiny"],
                 ["status", first_run["file"], "--results", results]):
        rc, out, err = cli(argv)
        assert rc == 0, err
        assert out.startswith(expected), out


def test_status_says_what_the_driver_is_doing_and_when_the_sweep_last_changed(first_run,
                                                                              tmp_path):
    import json

    results = tmp_path / "copy"
    shutil.copytree(first_run["results"], results)
    progress = json.loads((results / "tiny" / "progress.json").read_text())
    rc, out, err = cli(["status", "tiny", "--results", results])
    assert rc == 0, err
    assert out.rstrip().endswith(f"; finished; updated {progress['updated']}"), out
    # a driver that wrote "running" a minute ago and nothing since was killed or lost
    progress.update(state="running", updated="2026-01-01T00:00:00+00:00")
    (results / "tiny" / "progress.json").write_text(json.dumps(progress))
    rc, out, err = cli(["status", "tiny", "--results", results, "--json"])
    status = json.loads(out)
    assert status["driver"] == "stalled" and status["age_s"] > 60
    assert status["updated"] == "2026-01-01T00:00:00+00:00"
    (results / "tiny" / "progress.json").unlink()  # a store written by an older sweeper
    rc, out, err = cli(["status", "tiny", "--results", results])
    manifest = Store.open(str(results)).read_manifest("tiny")
    assert out.rstrip().endswith(f"; stored; updated {manifest['updated']}"), out


def test_compact_through_the_cli(first_run, tmp_path):
    results = tmp_path / "copy"
    shutil.copytree(first_run["results"], results)
    before = _trials(results).sort_values("trial_id").reset_index(drop=True)
    traj_before = pq.read_table(results / "tiny" / "trajectories").num_rows
    rc, out, err = cli(["compact", "tiny", "--results", results])
    assert rc == 0, err
    assert "2 trial files merged into 1 (4 trials)" in out
    assert len(list((results / "tiny" / "trials").iterdir())) == 1
    after = _trials(results).sort_values("trial_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(before, after)
    assert pq.read_table(results / "tiny" / "trajectories").num_rows == traj_before
    rc, out, _ = cli(["compact", results / "tiny"])
    assert rc == 0 and "nothing to compact" in out
    rc, out, _ = cli(["status", "tiny", "--results", results])
    assert "4 done, 0 failed, 0 pending" in out


def test_rerun_runs_nothing_new(first_run):
    rc, out, err = cli(["run", first_run["file"], "--results", first_run["results"],
                        "--executor", "local"])
    assert rc == 0, err
    assert "ran 0 trials" in out and "stored: 4 ok" in out
    assert _files_state(first_run["results"]) == first_run["files"]


def test_status_of_an_edited_file_counts_its_new_trials_as_pending(first_run):
    edited = write_sweep(first_run["file"].parent / "edited.yaml", variant(seeds=3))
    rc, out, err = cli(["status", edited, "--results", first_run["results"]])
    assert rc == 0, err
    assert "tiny: 4 done, 0 failed, 2 pending" in out, out


def test_adding_a_seed_runs_only_the_new_trials(first_run):
    write_sweep(first_run["file"], variant(seeds=3))
    rc, out, err = cli(["run", first_run["file"], "--results", first_run["results"],
                        "--executor", "local"])
    assert rc == 0, err
    assert "ran 2 trials" in out
    state = _files_state(first_run["results"])
    for name, mtime in first_run["files"].items():  # nothing already stored is rewritten
        assert state[name] == mtime
    trials = _trials(first_run["results"])
    assert len(trials) == 6 and trials["trial_id"].is_unique
    assert sorted(trials["seed"]) == [0, 0, 1, 1, 2, 2]
    rc, out, _ = cli(["status", "tiny", "--results", first_run["results"]])
    assert out.startswith("tiny: 6 done, 0 failed, 0 pending")


def test_progress_goes_to_the_stderr_of_the_moment(tmp_path):
    """The progress line is written to sys.stderr as it is when the sweep runs (a default
    argument bound at import would write to whatever stream was current back then)."""
    import contextlib
    import io

    sweep = load_sweep(str(write_sweep(tmp_path / "t.yaml", variant(seeds=1))))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        run_sweep(sweep, Store.open(str(tmp_path / "r")), LocalExecutor())
    assert "2/2 trials: 2 done, 0 failed" in err.getvalue()


# -- failures ----------------------------------------------------------------------------------
def test_failing_trials_are_retried_then_stored_as_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEPER_FAIL_SEEDS", "1")
    sweep_file = write_sweep(tmp_path / "tiny.yaml", variant(retries=3))
    results = tmp_path / "results"
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local",
                        "--pack-size", "1", "--retries", "1"])
    assert rc == 0, err
    trials = _trials(results).set_index("seed")
    failed = trials.loc[1]
    assert (failed["status"] == "failed").all()
    assert failed["error"].str.contains("injected failure").all()
    assert (failed["attempts"] == 2).all()  # --retries 1 overrides the file's 3
    assert failed["final_accuracy"].isna().all()
    ok = trials.loc[0]
    assert (ok["status"] == "ok").all() and (ok["attempts"] == 1).all()
    traj = pq.read_table(results / "tiny" / "trajectories")
    assert set(traj.column("trial_id").to_pylist()) == set(ok["trial_id"])
    assert "stored: 2 failed, 2 ok" in out
    rc, out, _ = cli(["status", "tiny", "--results", results])
    assert out.startswith("tiny: 2 done, 2 failed, 0 pending")
    # A rerun after the bug is fixed trains the failed trials again; their new rows supersede
    # the failed ones (each trial counted once), which stay in their files until compaction.
    monkeypatch.delenv("SWEEPER_FAIL_SEEDS")
    rc, out, _ = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0 and "ran 2 trials" in out and "stored: 4 ok" in out
    rc, out, _ = cli(["status", "tiny", "--results", results])
    assert out.startswith("tiny: 4 done, 0 failed, 0 pending")
    from analysis import load, query

    assert sorted(load(results, "tiny").trials["status"]) == ["ok"] * 4
    n = query.sql(results, "SELECT count(*) AS n FROM trials", "tiny")["n"].item()
    assert n == 4
    assert len(pq.read_table(results / "tiny" / "trials")) == 6  # the failed rows, kept
    rc, out, _ = cli(["compact", "tiny", "--results", results])
    assert rc == 0 and len(pq.read_table(results / "tiny" / "trials")) == 4
    rc, out, _ = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0 and "nothing to run" in out


def test_a_failing_trial_fails_alone_and_its_pack_mates_are_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEPER_FAIL_SEEDS", "1")
    sweep_file = write_sweep(tmp_path / "tiny.yaml", variant(retries=0))
    results = tmp_path / "results"
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local",
                        "--pack-size", "4"])
    assert rc == 0, err
    trials = _trials(results).set_index("seed")
    assert (trials.loc[1]["status"] == "failed").all()
    assert (trials.loc[0]["status"] == "ok").all()  # trained alone after the pack raised
    assert "stored: 2 failed, 2 ok" in out


def test_a_learning_rate_axis_runs(tmp_path):
    """train.lr is stored as train.lr (one name everywhere); the summary table finds it."""
    sweep_file = write_sweep(tmp_path / "lr.yaml", variant(**{
        "axes": {"train": {"lr": {"grid": [0.001, 0.01]}}}, "seeds": 1}))
    rc, out, err = cli(["run", sweep_file, "--results", tmp_path / "r", "--executor", "local"])
    assert rc == 0, err
    assert "ran 2 trials" in out
    assert sorted(_trials(tmp_path / "r")["train.lr"]) == [0.001, 0.01]


def test_a_scheduler_on_the_local_executor_is_refused_before_writing(tmp_path):
    """Early stopping is Ray Tune's (ASHA); the local executor says so, and writes nothing.
    (Optuna runs on the local executor: tests/test_strategies.py.)"""
    sweep_file = write_sweep(tmp_path / "asha.yaml", variant(
        scheduler={"type": "asha", "metric": "accuracy", "grace_period": 10}))
    results = tmp_path / "results"
    results.mkdir()
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "scheduler" in err and "allowed" in err and "local" in err, err
    assert all_files(results) == [], "a refused run wrote files"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("executor", ["local", "ray"])
@pytest.mark.parametrize("device", ["cuda", "cuda:1", "tpu"])
def test_a_device_this_machine_lacks_is_refused_before_writing(device, executor, tmp_path):
    sweep_file = write_sweep(tmp_path / "tiny.yaml", variant())
    results = tmp_path / "results"
    results.mkdir()
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", executor,
                        "--device", device])
    assert rc == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "device" in err and "allowed" in err, err
    assert all_files(results) == [], "a refused run wrote files"


def test_with_device_gives_each_pack_a_gpu_and_sizes_packs_for_it(tmp_path):
    from sweeper.devices import with_device
    from sweeper.packing import MAX_CPU_PACK, form_packs

    sweep = load_sweep(write_sweep(tmp_path / "s.yaml", variant(seeds=40)))
    on_gpu = with_device(sweep, "cuda")
    assert on_gpu.device == "cuda" and on_gpu.resources == {"cpu": 1, "gpu": 1}
    specs = expand(on_gpu)
    assert {s.device for s in specs} == {"cuda"}
    assert [len(p) for p in form_packs(specs, None, workers=1)] == [80]  # one pack fills a GPU
    assert max(len(p) for p in form_packs(expand(sweep), None, 1)) <= MAX_CPU_PACK


@pytest.mark.parametrize("command", ["status", "compact"])
def test_unknown_or_escaping_sweep_names_are_input_errors(command, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    for name in ("nope", "../outside"):
        rc, out, err = cli([command, name, "--results", results])
        assert rc == 2, (name, out, err)
        assert len(err.strip().splitlines()) == 1, err
        assert ("no sweep of that name" if name == "nope" else "allowed") in err, err
    assert all_files(results) == []


# -- where results go --------------------------------------------------------------------------
def test_default_results_root_and_the_files_results_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_sweep(tmp_path / "a.yaml", variant(name="a", seeds=1,
                                             **{"axes.task.cooccurrence": {"grid": [0.5]}}))
    rc, _, err = cli(["run", "a.yaml", "--executor", "local"])
    assert rc == 0, err
    assert len(_trials(tmp_path / "results", "a")) == 1  # ./results by default
    elsewhere = str(tmp_path / "elsewhere")
    write_sweep(tmp_path / "b.yaml", variant(name="b", seeds=1, results=elsewhere,
                                             **{"axes.task.cooccurrence": {"grid": [0.5]}}))
    rc, _, err = cli(["run", "b.yaml", "--executor", "local"])
    assert rc == 0, err
    assert len(_trials(tmp_path / "elsewhere", "b")) == 1
    assert not (tmp_path / "results" / "b").exists()

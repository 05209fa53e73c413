"""End to end on a real local Ray: `sweeper run` in a child process starts an embedded Ray
(2 CPUs), runs Ray Tune and stores Parquet. Grid and Optuna sweeps (the study in the sweep's
folder), ASHA early stopping, a strategy written in the tests driving Ray through the protocol,
exactly-once re-runs and extensions, a trial that raises, and a driver killed with SIGKILL
partway."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import optuna
import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from sweep_helpers import (
    REPO,
    TINY_STEPS,
    all_files,
    assert_all_parquet_readable,
    assert_only_store_files,
    cli,
    parquet_files,
    subprocess_env,
    variant,
    write_sweep,
)

from sweeper.plan import expand
from sweeper.search_space import load_sweep
from sweeper.strategies.optuna import STUDY_FILE

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RUN_TIMEOUT = 420


def _command(sweep_file, results, *extra) -> list[str]:
    return [sys.executable, "-m", "sweeper.cli", "run", str(sweep_file), "--results",
            str(results), "--num-cpus", "2", *map(str, extra)]


def ray_run(sweep_file, results, *extra, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run(_command(sweep_file, results, *extra), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, cwd=REPO, env=subprocess_env(**env))
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


def _mtimes(results) -> dict[str, int]:
    """The record's files (trials and trajectories parts); the cell summary is a view that
    every committed pack rewrites."""
    return {p.relative_to(results).as_posix(): p.stat().st_mtime_ns
            for p in all_files(results) if p.suffix == ".parquet" and p.name.startswith("part-")}


def _check_tables(results, sweep: str, expected_ids: set[str]) -> pd.DataFrame:
    """Both readers agree; one row per trial; trajectories = trials x logged steps, stored
    once per training (a trial that shares an equivalent one's training has no rows)."""
    trials = pd.read_parquet(results / sweep / "trials")
    assert trials["trial_id"].is_unique
    assert set(trials["trial_id"]) == expected_ids
    arrow = ds.dataset(str(results / sweep / "trials"), format="parquet").to_table()
    assert arrow.num_rows == len(trials)
    traj = pq.read_table(results / sweep / "trajectories").to_pandas()
    shared = trials["shared_with"].notna()
    ok = set(trials.loc[(trials["status"] == "ok") & ~shared, "trial_id"])
    assert set(traj["trial_id"]) == ok
    assert set(trials.loc[shared, "shared_with"]) <= ok
    assert len(traj) == len(ok) * len(TINY_STEPS)
    for _, steps in traj.groupby("trial_id")["step"]:
        assert sorted(steps) == list(TINY_STEPS)
    return trials


# -- a grid sweep, re-run, extended with seeds of which one fails -------------------------------
@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    base = tmp_path_factory.mktemp("ray-grid")
    sweep_file = write_sweep(base / "grid.yaml", variant(name="ray-grid", seeds=[0, 2]))
    results = base / "results"
    start = time.perf_counter()
    proc = ray_run(sweep_file, results)
    return {"base": base, "file": sweep_file, "results": results, "proc": proc,
            "seconds": time.perf_counter() - start, "files": _mtimes(results)}


def test_grid_sweep_lands_in_parquet(grid):
    results = grid["results"]
    ids = {s.trial_id for s in expand(load_sweep(str(grid["file"])))}
    assert len(ids) == 4
    trials = _check_tables(results, "ray-grid", ids)
    assert (trials["status"] == "ok").all() and (trials["attempts"] == 1).all()
    assert sorted(trials["task.cooccurrence"]) == [0.0, 0.0, 0.5, 0.5]
    assert set(trials["seed"]) == {0, 2}
    assert (trials["task.length"] == 4).all() and (trials["model.width"] == 8).all()
    assert (trials["train.steps"] == 20).all() and (trials["task.hardness"] == 0.0).all()
    assert trials["node_id"].notna().all(), "trained on a Ray node"
    assert trials["final_accuracy"].between(0, 1).all()
    # where and why each stopped, carried from the worker (`result_to_report`)
    assert (trials["stopped_at"] == 20).all() and (trials["stop_reason"] == "budget").all()
    assert "sweep ray-grid: ran 4 trials" in grid["proc"].stdout
    assert "stored: 4 ok" in grid["proc"].stdout
    assert "4/4 trials: 4 done, 0 failed" in grid["proc"].stderr  # the progress line
    assert "starting Ray on this machine" in grid["proc"].stderr  # no silent wait


def test_grid_sweep_writes_no_per_trial_files(grid):
    assert_only_store_files(grid["results"])
    assert_all_parquet_readable(grid["results"])
    assert sorted(p.name for p in grid["base"].iterdir()) == ["grid.yaml", "results"]


def test_grid_status(grid):
    rc, out, err = cli(["status", "ray-grid", "--results", grid["results"]])
    assert rc == 0, err
    assert out.startswith("ray-grid: 4 done, 0 failed, 0 pending (4 ok)")


def test_running_again_runs_nothing_new(grid):
    """The same command again stores nothing new. It runs with RAY_ADDRESS pointing at no
    cluster: without --address the command starts its own Ray whatever the environment says
    (a RAY_ADDRESS, or a cluster someone else started on this machine)."""
    proc = ray_run(grid["file"], grid["results"], RAY_ADDRESS="127.0.0.1:9")
    assert "ran 0 trials" in proc.stdout and "stored: 4 ok" in proc.stdout
    assert "starting Ray" not in proc.stderr  # nothing to run: no Ray started
    assert _mtimes(grid["results"]) == grid["files"]


@pytest.fixture(scope="module")
def extended(grid):
    """Seeds 1 and 3 added; seed 1 raises on every attempt (SWEEPER_FAIL_SEEDS)."""
    write_sweep(grid["file"], variant(name="ray-grid", seeds=[0, 1, 2, 3]))
    proc = ray_run(grid["file"], grid["results"], "--pack-size", "1", "--retries", "1",
                   SWEEPER_FAIL_SEEDS="1")
    return {**grid, "proc": proc}


def test_adding_seeds_runs_only_the_new_trials(extended):
    assert "ran 4 trials" in extended["proc"].stdout
    now = _mtimes(extended["results"])
    for name, mtime in extended["files"].items():
        assert now[name] == mtime, f"{name} was rewritten"
    ids = {s.trial_id for s in expand(load_sweep(str(extended["file"])))}
    trials = _check_tables(extended["results"], "ray-grid", ids)
    assert sorted(trials["seed"]) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_failing_trial_is_retried_then_stored_failed(extended):
    trials = pd.read_parquet(extended["results"] / "ray-grid" / "trials")
    failed = trials[trials["seed"] == 1]
    assert len(failed) == 2
    assert (failed["status"] == "failed").all()
    assert failed["error"].str.contains("injected failure").all(), failed["error"].tolist()
    assert (failed["attempts"] == 2).all(), failed["attempts"].tolist()  # 1 + 1 retry
    others = trials[trials["seed"] != 1]
    assert (others["status"] == "ok").all()
    assert (others[others["seed"] == 3]["attempts"] == 1).all()  # same run, not disturbed
    assert "stored: 2 failed, 6 ok" in extended["proc"].stdout
    assert_only_store_files(extended["results"])


def test_status_after_failures(extended):
    rc, out, err = cli(["status", "ray-grid", "--results", extended["results"]])
    assert rc == 0, err
    assert out.startswith("ray-grid: 6 done, 2 failed, 0 pending (2 failed, 6 ok)")


# -- an Optuna sweep ---------------------------------------------------------------------------
def test_optuna_sweep_lands_in_parquet(tmp_path):
    sweep_file = write_sweep(tmp_path / "optuna.yaml", variant(**{
        "name": "ray-optuna", "axes": {"task": {"hardness": {"uniform": [0.0, 1.0]}},
                                       "model": {"heads": {"choice": [1, 2]}}},
        "search": {"type": "optuna", "trials": 3, "objective": "best_accuracy",
                   "direction": "maximize", "seed": 0}}))
    results = tmp_path / "results"
    proc = ray_run(sweep_file, results)
    assert "ran 6 trials" in proc.stdout
    trials = pd.read_parquet(results / "ray-optuna" / "trials")
    assert len(trials) == 6 and trials["trial_id"].is_unique
    assert (trials["status"] == "ok").all()
    assert trials["task.hardness"].between(0, 1).all()
    assert set(trials["model.heads"]) <= {1, 2}
    cells = trials.groupby(["task.hardness", "model.heads"])["seed"].apply(sorted)
    assert len(cells) == 3 and all(seeds == [0, 1] for seeds in cells)
    assert set(trials.groupby("pack_id").size()) == {2}  # one Tune trial per cell
    _check_tables(results, "ray-optuna", set(trials["trial_id"]))
    manifest = json.loads((results / "ray-optuna" / "manifest.json").read_text())
    assert manifest["search"] == "optuna" and manifest["trials_expanded"] == 6
    study_file = results / "ray-optuna" / STUDY_FILE
    folder = results / "ray-optuna"
    assert [p for p in all_files(results) if p.suffix != ".parquet"] == [
        folder / "lease.json", folder / "manifest.json", study_file, folder / "progress.json"]
    assert_all_parquet_readable(results)
    study = optuna.load_study(study_name="ray-optuna", storage=f"sqlite:///{study_file}")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    assert {i for t in study.trials for i in t.user_attrs["trial_ids"]} == set(
        trials["trial_id"])
    rc, out, _ = cli(["status", "ray-optuna", "--results", results])
    assert out.startswith("ray-optuna: 6 done, 0 failed, 0 pending")


def test_asha_stops_packs_early_and_optuna_hears_of_it(tmp_path):
    """ASHA on Ray with an Optuna search: packs it stops are stored `stopped` with the steps
    they reached, and their cells are PRUNED trials of the study. (Reduction factor 100 on a
    continuous metric: a pack is stopped at step 10 unless its loss is the lowest so far, so
    among 8 packs some are.)"""
    sweep_file = write_sweep(tmp_path / "asha.yaml", variant(**{
        "name": "ray-asha", "seeds": 1,
        "axes": {"task": {"hardness": {"uniform": [0.0, 1.0]},
                          "cooccurrence": {"choice": [0.0, 0.5]}}},
        "search": {"type": "optuna", "trials": 8, "objective": "best_loss",
                   "direction": "minimize", "seed": 1},
        "scheduler": {"type": "asha", "metric": "loss", "mode": "min", "grace_period": 10,
                      "reduction_factor": 100}}))
    results = tmp_path / "results"
    proc = ray_run(sweep_file, results)
    assert "ran 8 trials" in proc.stdout
    trials = pd.read_parquet(results / "ray-asha" / "trials")
    assert len(trials) == 8 and trials["trial_id"].is_unique
    assert set(trials["status"]) == {"ok", "stopped"}, trials["status"].tolist()
    traj = pd.read_parquet(results / "ray-asha" / "trajectories")
    steps = traj.groupby("trial_id")["step"].max()
    status = trials.set_index("trial_id")["status"]
    assert (steps[status[status == "stopped"].index] == 10).all()
    assert (steps[status[status == "ok"].index] == 20).all()
    study = optuna.load_study(study_name="ray-asha",
                              storage=f"sqlite:///{results / 'ray-asha' / STUDY_FILE}")
    states = [t.state.name for t in study.trials]
    assert states.count("PRUNED") == (status == "stopped").sum()
    assert states.count("COMPLETE") == (status == "ok").sum()


# -- any strategy, through the protocol ------------------------------------------------------------
def test_a_strategy_written_in_the_tests_drives_ray(tmp_path, monkeypatch, ray_tmpdir):
    """The strategy of tests/strategy_helpers.py, plugged into the registry, on Ray with two
    slots: its second round waits (the searcher answers "not now") until the first is told."""
    from strategy_helpers import ScriptedStrategy

    from sweeper.executors.ray_tune import RayTuneExecutor
    from sweeper.results import Store
    from sweeper.runner import run_sweep
    from sweeper.strategies import STRATEGIES

    monkeypatch.setitem(STRATEGIES, "grid", "strategy_helpers:ScriptedStrategy")
    sweep = load_sweep(str(write_sweep(tmp_path / "s.yaml", variant(name="ray-scripted"))))
    store = Store.open(str(tmp_path / "results"))
    with RayTuneExecutor(num_cpus=2) as executor:
        assert executor.capacity(sweep) == 2
        summary = run_sweep(sweep, store, executor)
    strategy = ScriptedStrategy.last
    strategy.check_rounds()
    assert strategy.closed and summary["ran"] == 4 and summary["packs"] == 4
    assert any(e[0] == "ask" and e[2] == [] for e in strategy.events)  # it was asked, waited
    assert [e[2] for e in strategy.events if e[0] == "tell"] == [("ok",)] * 4
    trials = _check_tables(tmp_path / "results", "ray-scripted",
                           {s.trial_id for s in expand(sweep)})
    assert trials["node_id"].notna().all()


def test_a_sweep_runs_in_tune_runs_of_bounded_size_sharing_one_scheduler(tmp_path, monkeypatch,
                                                                           ray_tmpdir):
    """Tune keeps every trial of a run in the driver, so the executor ends a Tune run after
    `round_packs` new packs and starts another: every trial stored once, ASHA's rungs (one
    scheduler across runs) remember the packs of earlier runs."""
    from sweeper.executors import ray_tune
    from sweeper.results import Store
    from sweeper.runner import run_sweep

    monkeypatch.setattr(ray_tune, "ROUND_PACKS", 3)
    monkeypatch.setattr(ray_tune, "ROUND_PACKS_PER_SLOT", 1)
    runs = []
    tune_run = ray_tune.RayTuneExecutor._tune_run

    def counted(self, sweep, trainable, scheduler, searcher, sink, slots):
        runs.append(scheduler)
        return tune_run(self, sweep, trainable, scheduler, searcher, sink, slots)

    monkeypatch.setattr(ray_tune.RayTuneExecutor, "_tune_run", counted)
    sweep = load_sweep(str(write_sweep(tmp_path / "s.yaml", variant(**{
        "name": "ray-rounds", "pack_size": 1, "axes.task.hardness": {"grid": [0.0, 1.0]},
        "scheduler": {"type": "asha", "metric": "loss", "mode": "min", "grace_period": 10,
                      "reduction_factor": 100}}))))  # 2 x 2 cells x 2 seeds, packs of 1
    store = Store.open(str(tmp_path / "results"))
    with ray_tune.RayTuneExecutor(num_cpus=2) as executor:
        summary = run_sweep(sweep, store, executor)
    packs = summary["packs"]  # 8 trials; some share a training (c = 0: hardness is moot)
    assert packs >= 5 and len(runs) == -(-packs // 3) and all(s is runs[0] for s in runs)
    rung_10 = next(seen for b in runs[0]._brackets for step, seen in b._rungs if step == 10)
    assert len(rung_10) == packs  # every pack reached step 10, in whichever run
    trials = pd.read_parquet(tmp_path / "results" / "ray-rounds" / "trials")
    assert trials["trial_id"].is_unique
    assert set(trials["trial_id"]) == {s.trial_id for s in expand(sweep)}
    assert set(trials["status"]) <= {"ok", "stopped"}


TUNE_ENDS_EARLY = """
import os, signal, sys, threading
from pathlib import Path
from sweep_helpers import SLOW, variant, write_sweep
from sweeper.executors import ray_tune
from sweeper.recording import Feedback
from sweeper.results import Store
from sweeper.runner import run_sweep
from sweeper.search_space import load_sweep

ray_tune.ROUND_PACKS, ray_tune.ROUND_PACKS_PER_SLOT = 2, 1
tmp = Path(sys.argv[1])
sweep = load_sweep(str(write_sweep(tmp / "s.yaml", variant(SLOW, name="usr1", seeds=3))))
started = Feedback.started

def started_then_usr1(self, specs):  # Tune's own SIGUSR1 handler ends its run
    if not getattr(Feedback, "sent", False):
        Feedback.sent = True
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGUSR1)).start()
    return started(self, specs)

Feedback.started = started_then_usr1
with ray_tune.RayTuneExecutor(num_cpus=2) as executor:
    summary = run_sweep(sweep, Store.open(str(tmp / "results")), executor)
print("ran", summary["ran"], "pending", summary["pending"])
"""


def test_a_tune_run_ended_with_packs_out_ends_the_sweep_with_them_pending(tmp_path, ray_tmpdir):
    """Tune ends a run early on SIGUSR1 (SLURM's --signal): the packs it left out stay
    pending and the sweep ends, instead of a next run waiting for them for ever."""
    done = subprocess.run([sys.executable, "-c", TUNE_ENDS_EARLY, str(tmp_path)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=REPO,
                          env=subprocess_env(PYTHONPATH=f"{REPO}/tests:{REPO}"))
    assert done.returncode == 0, done.stderr[-3000:]
    ran, pending = map(int, re.search(r"ran (\d+) pending (\d+)", done.stdout).groups())
    assert pending > 0 and ran + pending == 6, done.stdout


# -- crash safety --------------------------------------------------------------------------------
def _tune_dirs(name: str) -> list[str]:
    return glob.glob(os.path.join(tempfile.gettempdir(), "sweeper-tune-*", name))


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_sweep_resumes_with_every_trial_stored_once(tmp_path):
    name = f"ray-crash-{uuid.uuid4().hex[:6]}"
    sweep_file = write_sweep(tmp_path / "crash.yaml", variant(name=name, seeds=4, **{
        "axes.task.hardness": {"grid": [0.0, 0.5, 1.0]}}))  # 2 x 3 cells x 4 seeds = 24
    ids = {s.trial_id for s in expand(load_sweep(str(sweep_file)))}
    assert len(ids) == 24
    results = tmp_path / "results"
    command = _command(sweep_file, results, "--pack-size", "1")
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                env=subprocess_env(), start_new_session=True)
        try:
            # Kill once a trial is stored and Tune has written its experiment folder (it may
            # write it after the first result arrives): the checks below need both.
            deadline = time.monotonic() + RUN_TIMEOUT
            while not (parquet_files(results, name, "trials") and _tune_dirs(name)):
                assert proc.poll() is None, "the sweep ended before it could be killed"
                assert time.monotonic() < deadline, (
                    f"in {RUN_TIMEOUT} s: a stored trial "
                    f"{bool(parquet_files(results, name, 'trials'))}, Tune's experiment folder "
                    f"{bool(_tune_dirs(name))}")
                time.sleep(0.2)
            still_running = proc.poll() is None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray it started
            proc.wait(timeout=60)
    assert still_running, "killed too late: the sweep had finished"
    deadline = time.monotonic() + 30
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group_alive(proc.pid), "processes of the killed sweep survived"

    stored_before = len(pd.read_parquet(results / name / "trials"))
    assert 1 <= stored_before < 24
    assert_all_parquet_readable(results)
    # What Tune had written so far (the killed run could not remove its temporary folder):
    # experiment-level state only, no per-trial JSON/CSV/TensorBoard files.
    leftovers = _tune_dirs(name)
    try:
        assert len(leftovers) == 1, leftovers
        per_trial = [os.path.relpath(f, leftovers[0])
                     for f in glob.glob(f"{leftovers[0]}/*/**/*", recursive=True)
                     if os.path.isfile(f)]
        assert per_trial == [], per_trial[:10]
    finally:
        for d in leftovers:
            shutil.rmtree(os.path.dirname(d), ignore_errors=True)

    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          cwd=REPO, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    left = 24 - stored_before
    assert re.search(rf"ran {left} trials? (\(.*sharing.*\) )?in", proc.stdout), proc.stdout
    trials = _check_tables(results, name, ids)
    assert (trials["status"] == "ok").all()
    assert_all_parquet_readable(results)
    assert_only_store_files(results)  # no temporary or orphaned file is left either
    names = {p.name for p in parquet_files(results, name, "trials")}
    assert names == {p.name for p in parquet_files(results, name, "trajectories")}
    assert not _tune_dirs(name)


def test_without_a_compiler_a_ray_sweep_says_so_once_in_the_terminal(tmp_path):
    """The native kernels are built (or found missing) by the driver before Ray's workers
    start: the one-line notice reaches the terminal, not only the workers' logs, and the
    sweep trains on the reference path."""
    sweep_file = write_sweep(tmp_path / "nocc.yaml", variant(name="ray-nocc", seeds=1))
    results = tmp_path / "results"
    proc = ray_run(sweep_file, results, CXX="/bin/false",
                   TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    notices = [ln for ln in proc.stderr.splitlines() if "native kernels unavailable" in ln]
    assert len(notices) == 1 and "reference path" in notices[0], proc.stderr[-2000:]
    assert "ran 2 trials" in proc.stdout

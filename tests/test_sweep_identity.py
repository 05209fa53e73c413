"""A sweep is one thing: one driver at a time (the lease), one configuration per name (the
fingerprint), interrupts that say so, overrides from the command line, and JSON for scripts.
Every test runs `sweeper` in real child processes on the local executor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from sweep_helpers import (
    REPO,
    SLOW,
    TINY,
    cli_subprocess,
    parquet_files,
    running_packs,
    subprocess_env,
    wait_for,
    write_sweep,
)


def _start(sweep_file: Path, results: Path, *extra: str,
           stderr=subprocess.PIPE) -> subprocess.Popen:
    """A driver of `sweeper run`; `stderr` a pipe or an open file (to read while it runs)."""
    return subprocess.Popen([sys.executable, "-m", "sweeper.cli", "run", str(sweep_file),
                             "--results", str(results), "--executor", "local", *extra],
                            stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=REPO,
                            env=subprocess_env())


def _holds_lease(results: Path, sweep: str, pid: int) -> bool:
    try:
        return json.loads((results / sweep / "lease.json").read_text() or "{}").get("pid") == pid
    except (OSError, ValueError):
        return False


def _stored_once(results: Path, sweep: str, expected: int) -> None:
    trials = pd.read_parquet(results / sweep / "trials")
    assert len(trials) == expected and trials["trial_id"].is_unique


# -- one driver per sweep ---------------------------------------------------------------------
def test_a_second_driver_is_refused_at_once_naming_the_first(tmp_path):
    sweep, results = write_sweep(tmp_path / "slow.yaml", SLOW), tmp_path / "results"
    first, waiting = _start(sweep, results), None
    try:
        wait_for(lambda: _holds_lease(results, "slow", first.pid), what="the first lease")
        first.send_signal(signal.SIGSTOP)  # holds its lease (a lock) until the second waits:
        # a fast machine would otherwise finish the sweep before the waiting driver looks
        start = time.monotonic()
        second = cli_subprocess(["run", sweep, "--results", results, "--executor", "local"])
        assert second.returncode == 2 and time.monotonic() - start < 30
        [line] = second.stderr.strip().splitlines()
        assert f"pid {first.pid}" in line and "one driver per sweep" in line
        told = tmp_path / "waiting.err"
        with told.open("w") as err_file:
            waiting = _start(sweep, results, "--wait", stderr=err_file)
        wait_for(lambda: "waiting:" in told.read_text(), what="the second driver waiting")
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
        out, _ = waiting.communicate(timeout=300)
        assert waiting.returncode == 0
        assert told.read_text().startswith("waiting: sweep slow: being run by")
        assert "nothing to run" in out
    finally:
        for process in (first, waiting):
            if process is not None:
                process.kill()
    _stored_once(results, "slow", 4)


def test_a_killed_drivers_lease_is_taken_over_and_every_trial_stored_once(tmp_path):
    sweep, results = write_sweep(tmp_path / "slow.yaml", SLOW), tmp_path / "results"
    first = _start(sweep, results)
    wait_for(lambda: len(parquet_files(results, "slow", "trials")) >= 1, what="a stored pack")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    second = cli_subprocess(["run", sweep, "--results", results, "--executor", "local"],
                            timeout=300)
    assert second.returncode == 0, second.stderr
    assert f"took over the lease of sweep slow from {os.uname().nodename} pid {first.pid}" \
        in second.stderr
    _stored_once(results, "slow", 4)


# -- interrupts -------------------------------------------------------------------------------
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_stores_what_finished_says_so_and_resumes(tmp_path, signum, status):
    sweep, results = write_sweep(tmp_path / "slow.yaml", SLOW), tmp_path / "results"
    driver = _start(sweep, results)
    wait_for(lambda: running_packs(results, "slow"), what="a running pack")
    driver.send_signal(signum)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == status, err
    stored = len(pd.read_parquet(results / "slow" / "trials")) if parquet_files(
        results, "slow", "trials") else 0
    assert 1 <= stored < 4  # the running pack finished and was stored; no new one started
    assert err.rstrip().endswith(f"interrupted: {4 - stored} trials pending; run the same "
                                 "command to resume")
    again = cli_subprocess(["run", sweep, "--results", results, "--executor", "local"],
                           timeout=300)
    assert again.returncode == 0, again.stderr
    _stored_once(results, "slow", 4)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_second_interrupt_abandons_the_running_pack(tmp_path, signum, status):
    sweep, results = write_sweep(tmp_path / "slow.yaml", SLOW), tmp_path / "results"
    driver = _start(sweep, results)
    wait_for(lambda: running_packs(results, "slow"), what="a running pack")
    driver.send_signal(signum)
    time.sleep(0.2)
    driver.send_signal(signum)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == status and "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("interrupted: the running packs were abandoned "
                                            "(nothing of them stored); run the same command "
                                            "to resume")
    assert not parquet_files(results, "slow", "trajectories") or parquet_files(
        results, "slow", "trials")  # nothing half-stored


# -- one configuration per name -----------------------------------------------------------------
def test_a_changed_configuration_under_the_same_name_is_refused_unless_extended(tmp_path):
    results = tmp_path / "results"
    first = write_sweep(tmp_path / "a.yaml", TINY)
    assert cli_subprocess(["run", first, "--results", results, "--executor",
                           "local"]).returncode == 0
    changed = {**TINY, "fixed": {**TINY["fixed"], "model": {"width": 12}}}
    second = write_sweep(tmp_path / "b.yaml", changed)
    refused = cli_subprocess(["run", second, "--results", results, "--executor", "local"])
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert "model.width: 8 -> 12" in line and "--extend" in line
    assert len(pd.read_parquet(results / "tiny" / "trials")) == 4  # nothing written
    # more seeds or axis values extend the same study: allowed
    more = write_sweep(tmp_path / "c.yaml", {**TINY, "seeds": 3})
    assert cli_subprocess(["run", more, "--results", results, "--executor",
                           "local"]).returncode == 0
    extended = cli_subprocess(["run", second, "--results", results, "--executor", "local",
                               "--extend"])
    assert extended.returncode == 0, extended.stderr
    manifest = json.loads((results / "tiny" / "manifest.json").read_text())
    assert len(manifest["versions"]) == 3 and len({v["fingerprint"] for v in
                                                   manifest["versions"]}) == 2
    status = cli_subprocess(["status", second, "--results", results, "--json"])
    assert json.loads(status.stdout)["pending"] == 0
    # every version that has run is accepted again, without --extend
    assert cli_subprocess(["run", first, "--results", results, "--executor",
                           "local"]).returncode == 0
    # plan refuses what run would refuse, and plans it with --extend
    third = write_sweep(tmp_path / "d.yaml", {**TINY, "fixed": {**TINY["fixed"],
                                                                 "model": {"width": 16}}})
    planned = cli_subprocess(["plan", third, "--results", results, "--no-estimate"])
    assert planned.returncode == 2 and planned.stderr.count("\n") == 1, planned.stderr
    assert "--extend to add these trials" in planned.stderr
    extended = cli_subprocess(["plan", third, "--results", results, "--no-estimate", "--extend"])
    assert extended.returncode == 0, extended.stderr


# -- overrides and JSON ---------------------------------------------------------------------------
def test_set_overrides_fixed_values_axes_and_keys_and_are_recorded(tmp_path):
    sweep, results = write_sweep(tmp_path / "tiny.yaml", TINY), tmp_path / "results"
    sets = ["--set", "model.width=12", "--set", "model.heads=1,2", "--set", "name=tiny_w12",
            "--set", "seeds=1", "--set", "train.lr=3e-3"]
    plan = cli_subprocess(["plan", sweep, "--results", results, "--json", "--no-estimate",
                           *sets])
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert (planned["sweep"], planned["trials"], planned["pending"]) == ("tiny_w12", 4, 4)
    run = cli_subprocess(["run", sweep, "--results", results, "--executor", "local", "--json",
                          *sets])
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["ran"] == 4 and summary["status"] == {"ok": 4}
    assert len(summary["cells"]) == 4 and summary["pending"] == 0
    trials = pd.read_parquet(results / "tiny_w12" / "trials")
    assert set(trials["model.width"]) == {12} and set(trials["model.heads"]) == {1, 2}
    assert set(trials["train.lr"]) == {3e-3}
    manifest = json.loads((results / "tiny_w12" / "manifest.json").read_text())
    assert manifest["overrides"] == [s for s in sets if s != "--set"]
    bad = cli_subprocess(["plan", sweep, "--results", results, "--set", "model.widht=12"])
    assert bad.returncode == 2 and "widht" in bad.stderr and "width" in bad.stderr
    bare = cli_subprocess(["plan", sweep, "--results", results, "--set", "widht=12"])
    assert bare.returncode == 2 and "--set widht: unknown key" in bare.stderr


def test_plan_estimates_from_stored_trials_and_says_when_nothing_is_left(tmp_path):
    sweep, results = write_sweep(tmp_path / "tiny.yaml", TINY), tmp_path / "results"
    probe = cli_subprocess(["plan", sweep, "--results", results, "--probe"])
    assert "from a timed probe" in probe.stdout
    assert cli_subprocess(["run", sweep, "--results", results, "--executor",
                           "local"]).returncode == 0
    more = write_sweep(tmp_path / "more.yaml", {**TINY, "seeds": 4})
    estimate = cli_subprocess(["plan", more, "--results", results, "--json"])
    data = json.loads(estimate.stdout)
    assert data["pending"] == 4 and data["estimate"]["basis"].startswith("stored trials")
    assert data["estimate"]["seconds"] > 0
    done = cli_subprocess(["plan", sweep, "--results", results])
    assert done.stdout.strip() == "tiny: nothing to run: all 4 trials are stored"
    again = cli_subprocess(["run", sweep, "--results", results, "--executor", "local"])
    assert again.stdout.startswith("sweep tiny: nothing to run: all 4 trials are stored")
    assert "trials:" not in again.stderr  # no progress line for a run with nothing to do


def test_tasks_and_status_speak_json(tmp_path):
    tasks = json.loads(cli_subprocess(["tasks", "--json"]).stdout)
    assert {"copy", "topic"} <= {f["name"] for f in tasks["families"]}
    copy = next(f for f in tasks["families"] if f["name"] == "copy")
    assert copy["phase_outcome"] == "attention_learned"
    assert "length" in [p["name"] for p in copy["tasks"][0]["params"]]


# -- what the identity holds ------------------------------------------------------------------
C_SWEEP = """\
name: c
task: copy-v1
model: seq2seq
axes:
  task:
    cooccurrence: {grid: [0.0, 0.5, 1.0]}
seeds: 1
budget: {steps: 20}
"""


def test_a_column_the_axes_change_is_no_part_of_the_identity():
    from sweeper.identity import identity
    from sweeper.search_space import parse_sweep

    mine = identity(parse_sweep(C_SWEEP))
    assert mine["task.length"] == 10  # fixed: part of the study
    # N = L + round(c L) takes 10, 15 and 20 here: printing one of them as the study's would lie
    assert "task.vocab" not in mine and "task.cooccurrence" not in mine
    fixed = identity(parse_sweep(C_SWEEP.replace("axes:", "fixed: {task: {vocab: 24}}\naxes:")))
    assert fixed["task.vocab"] == 24  # set in the file, it is


def test_a_stored_identity_that_kept_a_derived_column_is_the_same_study():
    from sweeper.errors import SweeperInputError
    from sweeper.identity import check_same_study, identity
    from sweeper.search_space import parse_sweep

    sweep = parse_sweep(C_SWEEP)
    mine = identity(sweep)
    older = {"identity": {**mine, "task.vocab": 15}, "versions": []}  # before the rule
    check_same_study(sweep, mine, older, extend=False)
    changed = {"identity": {**mine, "task.length": 12}, "versions": []}
    with pytest.raises(SweeperInputError, match="task.length: 12 -> 10"):
        check_same_study(sweep, mine, changed, extend=False)

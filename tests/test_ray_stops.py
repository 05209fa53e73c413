"""How a sweep on the Ray executor stops, in real child processes on an embedded Ray (2 CPUs,
on loopback, with a temp dir of its own): SIGINT and SIGTERM as on the local executor (the
running packs stored, 130 / 143, the interrupted line, a rerun storing the rest once), a driver
waiting for another's lease leaving on the first signal, and a store step that raises ending
the sweep in one line instead of training its pack again for ever."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pandas as pd
import pytest
from sweep_helpers import (
    REPO,
    SLOW,
    all_files,
    assert_all_parquet_readable,
    cli_subprocess,
    parquet_files,
    running_packs,
    subprocess_env,
    wait_for,
    write_sweep,
)

from sweeper.results import Store
from sweeper.results.lease import acquire

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SIGNALS = [pytest.param(signal.SIGINT, 130, id="SIGINT"),
           pytest.param(signal.SIGTERM, 143, id="SIGTERM")]
RAY_START_S = 300  # an embedded Ray and its first worker start in seconds; allow a busy machine

# `sweeper ARGV` whose store raises a KeyError, not a write error, from its second pack on
FAULTY_STORE = '''
import sys

from sweeper.results.store import Store

write_pack, packs = Store.write_pack, []


def second_pack_fails(self, *args, **kwargs):
    packs.append(args)
    if len(packs) > 1:
        raise KeyError("injected: not a write error")
    return write_pack(self, *args, **kwargs)


Store.write_pack = second_pack_fails
from sweeper.cli import main

sys.exit(main(sys.argv[1:]))
'''


def _run(program: list[str], sweep_file: Path, results: Path, *extra: str,
         stderr: IO[str] | int = subprocess.PIPE) -> subprocess.Popen:
    """`sweeper run` in a child process (`program`: how Python starts it), leading a process
    group of its own (as under SLURM or systemd: a signal may go to the whole group)."""
    return subprocess.Popen([sys.executable, *program, "run", str(sweep_file), "--results",
                             str(results), "--num-cpus", "2", *extra],
                            stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=REPO,
                            env=subprocess_env(), start_new_session=True)


def _stored(results: Path, sweep: str) -> pd.DataFrame:
    trials = pd.read_parquet(results / sweep / "trials")
    assert trials["trial_id"].is_unique
    return trials


@pytest.mark.parametrize("to", ["driver", "group"])
@pytest.mark.parametrize(("signum", "status"), SIGNALS)
def test_a_signal_stores_the_running_packs_says_so_and_a_rerun_stores_the_rest_once(
        tmp_path, ray_tmpdir, signum, status, to):
    """To the driver, or to its whole process group (SLURM's scancel, systemd, `kill --
    -PGID`): Ray's processes have a session of their own, so its workers finish the pack."""
    import os

    sweep, results = write_sweep(tmp_path / "slow.yaml", SLOW), tmp_path / "results"
    driver = _run(["-m", "sweeper.cli"], sweep, results)
    try:
        wait_for(lambda: running_packs(results, "slow"), RAY_START_S, "a running pack")
        running = running_packs(results, "slow")
        if to == "group":
            os.killpg(driver.pid, signum)  # its own group: it leads a session (`_run`)
        else:
            driver.send_signal(signum)
        out, err = driver.communicate(timeout=120)
    finally:
        driver.kill()
    assert driver.returncode == status, err[-3000:]
    assert "SIGTERM received" not in err and "Traceback" not in err  # Ray's handler never ran
    stored = _stored(results, "slow")
    assert set(running) <= set(stored["pack_id"]) and len(stored) < 4
    assert err.rstrip().endswith(f"interrupted: {4 - len(stored)} trials pending; run the same "
                                 "command to resume")
    again = cli_subprocess(["run", sweep, "--results", results, "--executor", "local"])
    assert again.returncode == 0, again.stderr[-3000:]  # (resuming on Ray: test_ray_sweeps)
    assert f"ran {4 - len(stored)} trials" in again.stdout
    assert len(_stored(results, "slow")) == 4


def test_a_sigterm_while_ray_starts_stops_the_run_the_same_way(tmp_path, ray_tmpdir):
    """`ray.init` sets its own SIGTERM handler as it starts (SystemExit wherever the driver is,
    even where it is lost): the driver's is kept throughout."""
    sweep, results = write_sweep(tmp_path / "slow.yaml", SLOW), tmp_path / "results"
    driver = _run(["-m", "sweeper.cli"], sweep, results)
    try:
        wait_for(lambda: list(Path(ray_tmpdir).glob("ray/session_*")), RAY_START_S,
                 "Ray starting")
        driver.send_signal(signal.SIGTERM)
        out, err = driver.communicate(timeout=120)
    finally:
        driver.kill()
    assert driver.returncode == 143, err[-3000:]
    assert "SIGTERM received" not in err and "Traceback" not in err
    assert err.rstrip().endswith("interrupted: 4 trials pending; run the same command to resume")
    assert not parquet_files(results, "slow", "trials")


@pytest.mark.parametrize(("signum", "status"), SIGNALS)
def test_a_driver_waiting_for_the_lease_leaves_on_the_first_signal_writing_nothing(
        tmp_path, signum, status):
    """The waiter runs on the default (Ray) executor, which it never starts: the lease comes
    first."""
    sweep, results = write_sweep(tmp_path / "slow.yaml", SLOW), tmp_path / "results"
    log = tmp_path / "waiter.err"
    with acquire(Store.open(str(results)), "slow"), open(log, "w") as stderr:
        files = {p: p.read_bytes() for p in all_files(results)}  # another driver's lease
        waiter = _run(["-m", "sweeper.cli"], sweep, results, "--wait", stderr=stderr)
        try:
            wait_for(lambda: "waiting: sweep slow: being run by" in log.read_text(), 120,
                     "the waiter")
            start = time.monotonic()
            waiter.send_signal(signum)
            waiter.wait(timeout=60)
        finally:
            waiter.kill()
        assert waiter.returncode == status, log.read_text()
        assert time.monotonic() - start < 10
        assert log.read_text().strip().splitlines()[-1] == (
            "interrupted: stopped waiting for the other driver of sweep slow; nothing was run")
        assert {p: p.read_bytes() for p in all_files(results)} == files


@pytest.mark.parametrize("executor", ["ray", "local"])
def test_a_store_step_that_raises_ends_the_sweep_in_one_line_and_the_store_resumes(
        tmp_path, ray_tmpdir, executor):
    """Not a write error (those were one line already): a KeyError from the store, injected
    in the driver by a wrapper around `sweeper.cli.main`. On Ray it used to drop the pack and
    Tune retried it for ever."""
    wrapper = tmp_path / "faulty_store.py"
    wrapper.write_text(FAULTY_STORE)
    sweep = write_sweep(tmp_path / "slow.yaml", {**SLOW, "budget": {"steps": 100}})
    results = tmp_path / "results"
    driver = _run([str(wrapper)], sweep, results, "--executor", executor)
    try:
        wait_for(lambda: parquet_files(results, "slow", "trials"), RAY_START_S, "a stored pack")
        out, err = driver.communicate(timeout=60)  # the next pack's store step fails
    finally:
        driver.kill()
    assert driver.returncode == 1, err[-3000:]
    assert "Traceback" not in err and err.count("injected") == 1
    assert err.strip().splitlines()[-1].startswith(
        "sweeper run: error: storing a trained pack failed: KeyError: 'injected: not a write "
        "error' (at faulty_store.py:")
    assert len(_stored(results, "slow")) == 1
    assert_all_parquet_readable(results)
    again = cli_subprocess(["run", sweep, "--results", results, "--executor", "local"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(_stored(results, "slow")) == 4

"""How a sweep on the Ray executor stops, in real child processes on an embedded Ray (2 CPUs,
on loopback, with a temp dir of its own): a store step that raises ends the sweep in one line
instead of training its pack again for ever."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from sweep_helpers import (
    REPO,
    SLOW,
    assert_all_parquet_readable,
    cli_subprocess,
    parquet_files,
    subprocess_env,
    wait_for,
    write_sweep,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

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


def _run(program: list[str], sweep_file: Path, results: Path, *extra: str) -> subprocess.Popen:
    """`sweeper run` in a child process (`program`: how Python starts it)."""
    return subprocess.Popen([sys.executable, *program, "run", str(sweep_file), "--results",
                             str(results), "--num-cpus", "2", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=subprocess_env())


def _stored(results: Path, sweep: str) -> pd.DataFrame:
    trials = pd.read_parquet(results / sweep / "trials")
    assert trials["trial_id"].is_unique
    return trials


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

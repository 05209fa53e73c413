"""A task family from outside the package: examples/zipf-copy, installed as a user would.

The example is built and installed (`pip install --target`, no network: no dependencies, no
build isolation) into a folder that the child processes put on their path; its entry point
(`sweeper.families`) is then all that makes sweeper find it. In those processes it is listed,
covered by the contract suite, run as a sweep on an embedded Ray and drawn as a phase diagram.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from sweep_helpers import REPO, subprocess_env

EXAMPLE = REPO / "examples" / "zipf-copy"
pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--target", str(target), str(EXAMPLE)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(target.glob("sweeper_zipf_copy-*.dist-info/entry_points.txt"))
    return target


def _run(plugin_path: Path, *argv: str, timeout: float = 420) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env["PYTHONPATH"] = f"{plugin_path}:{env['PYTHONPATH']}"
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def test_an_installed_plugin_is_listed_without_importing_torch(plugin_path):
    code = ("import sys, runpy; sys.argv = ['sweeper', 'tasks']\n"
            "try:\n    runpy.run_module('sweeper.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')")
    out = _run(plugin_path, "-c", code).stdout
    assert "family zipf-copy:" in out and "task zipf-copy-v1:" in out
    assert "exponent" in out
    assert out.rstrip().endswith("NO-TORCH")


def test_the_contract_suite_covers_an_installed_plugin(plugin_path):
    out = _run(plugin_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
               "tests/test_families.py", "-k", "zipf").stdout  # one process: it counts
    assert " passed" in out and "failed" not in out
    assert "deselected" in out  # the built-in families were there too, and left out by -k


def test_a_plugin_sweep_runs_on_ray_and_draws_its_phase_diagram(plugin_path, tmp_path):
    sweep = tmp_path / "zipf.yaml"
    sweep.write_text("\n".join([
        "name: zipf_small", "task: zipf-copy-v1", "model: seq2seq",
        "fixed: {task: {length: 5}, model: {width: 8}, "
        "train: {batch_size: 8, eval_size: 8, eval_every: 5}}",
        "axes: {task: {exponent: {grid: [0.0, 2.0]}}, model: {heads: {grid: [1, 2]}}}",
        "seeds: 2", "budget: {steps: 10}", "resources: {cpu: 1}"]))
    results = tmp_path / "results"
    _run(plugin_path, "-m", "sweeper.cli", "run", str(sweep), "--results", str(results),
         "--num-cpus", "2")
    trials = pd.read_parquet(results / "zipf_small" / "trials")
    assert len(trials) == 8 and set(trials["status"]) == {"ok"}
    assert set(trials["task.id"]) == {"zipf-copy-v1"}
    assert sorted(set(trials["task.exponent"])) == [0.0, 2.0]
    manifest = json.loads((results / "zipf_small" / "manifest.json").read_text())
    assert manifest["outcome"] == "attention_learned"  # the plugin family's phase outcome

    figure, cells = tmp_path / "phase.png", tmp_path / "cells.csv"
    _run(plugin_path, "-m", "analysis", "phase", str(results / "zipf_small"),
         "--x", "task.exponent", "--y", "model.heads", "--facet", "none", "-o", str(figure),
         "--cells", str(cells))
    assert figure.stat().st_size > 10_000 and figure.read_bytes()[:4] == b"\x89PNG"
    table = pd.read_csv(cells)
    assert len(table) == 4 and table["n"].sum() == 8

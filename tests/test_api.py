"""The Python API: sweeper.run(...) -> SweepResult, overrides, and what a notebook shows."""

from __future__ import annotations

import pytest
from sweep_helpers import TINY, write_sweep

import sweeper
from sweeper.errors import SweeperInputError


def test_run_a_sweep_file_with_overrides_and_load_its_results(tmp_path):
    path = write_sweep(tmp_path / "tiny.yaml", TINY)
    result = sweeper.run(str(path), results=str(tmp_path / "r"), executor="local",
                         name="api", seeds=1, budget={"steps": 10})
    assert isinstance(result, sweeper.SweepResult)
    assert (result.sweep, result.expanded, result.ran, result.already_stored) == ("api", 2, 2, 0)
    assert result.status == {"ok": 2}
    assert list(result.cells["task.cooccurrence"]) == [0.0, 0.5]
    assert list(result.cells["n"]) == [1, 1]
    shown = repr(result)
    assert shown.startswith("SweepResult(sweep api: ran 2 trials")
    assert "cells (attention_learned)" in shown
    res = result.load()
    assert len(res.trials) == 2 and set(res.trials["train.steps"]) == {10}
    assert "<Results of sweep 'api': 2 trials (2 ok)" in repr(res)
    again = sweeper.run(str(path), results=str(tmp_path / "r"), executor="local",
                        name="api", seeds=1, budget={"steps": 10})
    assert (again.ran, again.already_stored) == (0, 2)


def test_run_takes_a_mapping_and_validates_it_like_a_file(tmp_path):
    result = sweeper.run({**TINY, "name": "from_dict", "seeds": 1}, results=str(tmp_path),
                         executor="local")
    assert result.ran == 2 and (tmp_path / "from_dict" / "trials").is_dir()
    with pytest.raises(SweeperInputError, match="seeds"):
        sweeper.run(TINY, results=str(tmp_path / "bad"), executor="local", seeds=-1)
    with pytest.raises(SweeperInputError, match="executor"):
        sweeper.run(TINY, results=str(tmp_path / "bad"), executor="slurm")
    assert not (tmp_path / "bad").exists()


def test_overrides_replace_an_axis_whole_and_keep_the_others(tmp_path):
    from sweeper.overrides import sweep_from

    path = write_sweep(tmp_path / "tiny.yaml", {**TINY, "axes": {
        "task": {"cooccurrence": {"grid": [0.0, 0.5]}, "hardness": {"grid": [0.0, 1.0]}}}})
    sweep = sweep_from(str(path), {"axes": {"task": {"cooccurrence": {"choice": [0.5]}}}})
    axes = {a.path: (a.kind, a.values) for a in sweep.axes}
    assert axes == {"task.cooccurrence": ("choice", (0.5,)),
                    "task.hardness": ("grid", (0.0, 1.0))}
    one_line = sweep_from("{name: inline, task: copy-v1, model: seq2seq, seeds: 1}")
    assert one_line.name == "inline"

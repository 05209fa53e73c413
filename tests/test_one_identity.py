"""One number, one trial: a value is normalised where it enters (-0.0 is 0.0; a subnormal,
which the workers would train as 0, is refused), and every stored trial's id is the id of the
configuration stored beside it (`sweeper.spec.spec_from_flat`)."""

from __future__ import annotations

import pandas as pd
import pytest
from sweep_helpers import cli, variant, write_sweep

import sweeper
from sweeper.errors import SweeperInputError
from sweeper.spec import make_spec, spec_from_flat

SUBNORMALS = ("4.9e-324", "-4.9e-324", "1e-310", "2.2e-308")


@pytest.fixture(autouse=True)
def no_flush_to_zero():
    """Training in this process (a test before) leaves the CPU's flush-to-zero flags on, and
    then the text 4.9e-324 parses as 0 itself: each test here starts with them off."""
    import torch

    torch.set_flush_denormal(False)


def test_minus_zero_is_zero_in_every_id():
    zero = make_spec("copy-v1", "seq2seq", {"hardness": 0.0, "cooccurrence": 0.0})
    minus = make_spec("copy-v1", "seq2seq", {"hardness": -0.0, "cooccurrence": -0.0})
    assert minus.trial_id == zero.trial_id and minus.training_id == zero.training_id
    assert str(minus.task_params["hardness"]) == "0.0"


def test_a_grid_of_zero_and_minus_zero_gives_a_value_twice(tmp_path):
    path = write_sweep(tmp_path / "z.yaml", variant(**{
        "axes.task.hardness": {"grid": [0.0, -0.0]}}))
    rc, _, err = cli(["plan", path, "--results", tmp_path / "r"])
    assert rc == 2 and err.count("\n") == 1 and "given twice" in err, err


@pytest.mark.parametrize("text", SUBNORMALS)
@pytest.mark.parametrize("where", ["file", "set", "python"])
def test_a_subnormal_is_refused_in_one_line_wherever_it_enters(text, where, tmp_path):
    value = float(text)
    sweep = variant(**({"fixed.task.hardness": abs(value)} if where == "file" else {}))
    if where == "python":
        with pytest.raises(SweeperInputError, match="subnormal"):
            sweeper.run(variant(**{"fixed.task.hardness": abs(value)}),
                        results=str(tmp_path / "r"), executor="local", estimate=False)
        assert not (tmp_path / "r").exists()
        return
    path = write_sweep(tmp_path / "s.yaml", sweep)
    sets = ["--set", f"task.hardness={text.lstrip('-')}"] if where == "set" else []
    for command in (["plan"], ["run", "--executor", "local"]):
        rc, _, err = cli([command[0], path, *command[1:], *sets, "--results", tmp_path / "r"])
        assert rc == 2 and err.count("\n") == 1, err
        assert "task.hardness: got" in err and "subnormal" in err
    assert not (tmp_path / "r").exists()


def test_every_stored_trial_is_the_trial_its_stored_configuration_names(tmp_path):
    """Values of every kind through a real run and back through pandas: a realised c, a set
    optional (vocab), a list (head_seeds), -0.0, a log-spaced lr, shared trainings."""
    sweeps = [
        variant(name="realised", **{"fixed.task.length": 6, "fixed.task.hardness": -0.0,
                                    "axes.task.cooccurrence": {"grid": [0.0, 0.25, 0.5]}}),
        variant(name="vocab", **{"fixed.task.vocab": 7, "axes.train.lr": {
            "grid": [1e-4, 3.3e-3]}, "axes.task": {"hardness": {"grid": [0.0, 1.0]}}}),
        variant(name="heads", **{"fixed.model.heads": 2, "fixed.model.head_seeds": [3, 7],
                                 "axes.task.hardness": {"grid": [0.0, 0.5]}}),
    ]
    for sweep in sweeps:
        sweeper.run(sweep, results=str(tmp_path), executor="local", estimate=False)
        trials = pd.read_parquet(tmp_path / sweep["name"] / "trials")
        assert len(trials) >= 4
        for row in trials.to_dict("records"):
            assert spec_from_flat(row).trial_id == row["trial_id"], (sweep["name"], row)


def test_a_subnormal_is_refused_after_torch_has_flushed_them(tmp_path):
    """Training turns the CPU's flush-to-zero flags on for the process (a notebook that trained
    and then plans): the rule reads the bits, which no float arithmetic there can see."""
    import struct

    import torch

    value = struct.unpack("<d", (1).to_bytes(8, "little"))[0]  # 4.9e-324, from its bits (a
    # text parsed where the flags are on is 0 already: training in this process sets them)
    assert torch.set_flush_denormal(True)
    try:
        with pytest.raises(SweeperInputError, match="subnormal"):
            make_spec("copy-v1", "seq2seq", {"hardness": value})
    finally:
        torch.set_flush_denormal(False)

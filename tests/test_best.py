"""The best trials of a sweep by one metric: `sweeper best` (table and --json, the three ways
of naming a sweep the analysis commands take) and `SweepResult.best`, on a real random sweep
trained here; ranks checked against the stored trials read with pandas."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sweep_helpers import cli, cli_subprocess, variant

import sweeper

RANDOM = variant(name="rand", seeds=1, search={"type": "random", "trials": 6, "seed": 3},
                 axes={"task": {"hardness": {"uniform": [0.0, 1.0]}}})


@pytest.fixture(scope="module")
def random_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("best")
    result = sweeper.run(RANDOM, results=str(root), executor="local")
    assert result.ran >= 4  # (a random search may draw a cell twice: trained once)
    return root, result


def _stored(root) -> pd.DataFrame:
    trials = pd.read_parquet(root / "rand" / "trials")
    return trials[trials["status"] == "ok"]


@pytest.mark.parametrize("mode", ["max", "min"])
def test_best_ranks_the_finished_trials_by_the_metric(random_sweep, mode):
    root, result = random_sweep
    best = result.best("final_accuracy", mode=mode, n=3)
    stored = _stored(root).sort_values("final_accuracy", ascending=mode == "min")
    assert best["final_accuracy"].tolist() == stored["final_accuracy"].head(3).tolist()
    assert {"task.hardness", "seed", "trial_id"} <= set(best.columns)
    assert set(best["trial_id"]) <= set(stored["trial_id"])


def test_sweeper_best_prints_a_table_or_json_for_a_name_a_folder_or_a_path(random_sweep):
    root, _ = random_sweep
    expected = _stored(root).sort_values("final_loss")["trial_id"].head(2).tolist()
    for target in (root / "rand", str(root / "rand") + "/"):
        rc, out, err = cli(["best", target, "--metric", "final_loss", "--mode", "min", "-n",
                            "2", "--json"])
        assert rc == 0, err
        assert [r["trial_id"] for r in json.loads(out)] == expected
    rc, out, err = cli(["best", root / "rand", "--metric", "final_loss", "--mode", "min"])
    assert rc == 0 and out.splitlines()[0].split()[-1] == "final_loss", err
    assert len(out.splitlines()) == 1 + min(5, len(_stored(root)))  # a header, then -n 5


@pytest.mark.parametrize(("argv", "says"), [
    (["--metric", "nonsense"], "nonsense"),
    (["--metric", "id"], "--metric id: ambiguous; allowed: one of task.id, model.id"),
    (["--metric", "accuracy", "--by", "cell"], "--by"),
    (["--metric", "learned"], "a yes/no outcome ranks configurations"),  # one seed a cell
    (["--metric", "seed"], "not a measurement"),
    (["--metric", "task.vocab"], "not a measurement"),
    (["--metric", "accuracy", "--mode", "best"], "--mode"),
    (["--metric", "accuracy", "-n", "0"], "-n"),
])
def test_sweeper_best_refuses_bad_input_in_one_line(random_sweep, argv, says):
    root, _ = random_sweep
    proc = cli_subprocess(["best", root / "rand", *argv])
    rc, out, err = proc.returncode, proc.stdout, proc.stderr
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err, err


def test_query_takes_json_as_every_printing_command_does(random_sweep):
    root, _ = random_sweep
    rc, out, err = cli(["query", root / "rand", "--columns", "final_loss", "--json"])
    assert rc == 0 and len(json.loads(out)) == len(_stored(root)), err
    assert cli(["query", root / "rand", "--json", "--format", "json"])[0] == 0
    rc, out, err = cli(["query", root / "rand", "--json", "--format", "csv"])
    assert rc == 2 and out == "" and "--json and --format csv: give one" in err


SEEDED = variant(name="seeded", seeds=3, budget={"steps": 20})


@pytest.fixture(scope="module")
def seeded_sweep(tmp_path_factory):
    """Two configurations (c = 0 and 0.5) of three seeds each."""
    root = tmp_path_factory.mktemp("best_seeded")
    result = sweeper.run(SEEDED, results=str(root), executor="local")
    assert result.ran == 6
    return root, result


def test_best_ranks_configurations_by_their_mean_over_seeds_where_there_are_seeds(
        seeded_sweep):
    from scipy import stats

    root, result = seeded_sweep
    best = result.best("accuracy")  # by config: the default with 3 seeds a configuration
    trials = pd.read_parquet(root / "seeded" / "trials")
    means = trials.groupby("task.cooccurrence")["final_accuracy"].agg(["mean", "sem", "size"])
    assert list(best.columns) == ["task.cooccurrence", "seeds", "mean_final_accuracy", "low",
                                  "high"]
    assert best["task.cooccurrence"].tolist() == means.sort_values(
        "mean", ascending=False, kind="stable").index.tolist()
    for _, row in best.iterrows():
        m = means.loc[row["task.cooccurrence"]]
        assert row["seeds"] == 3 and row["mean_final_accuracy"] == pytest.approx(m["mean"])
        if m["sem"] > 0:
            low, high = stats.t.interval(0.95, 2, loc=m["mean"], scale=m["sem"])
            assert (row["low"], row["high"]) == pytest.approx((low, high))
    per_trial = result.best("accuracy", by="trial", n=10)
    assert len(per_trial) == 6 and {"seed", "trial_id"} <= set(per_trial.columns)


def test_a_yes_no_outcome_ranks_configurations_by_its_share_with_an_exact_interval(
        seeded_sweep):
    from scipy import stats

    root, _ = seeded_sweep
    rc, out, err = cli(["best", root / "seeded", "--metric", "learned", "--json"])
    assert rc == 0, err
    rows = json.loads(out)
    trials = pd.read_parquet(root / "seeded" / "trials")
    for row in rows:
        k = int(trials[trials["task.cooccurrence"] == row["task.cooccurrence"]]["learned"].sum())
        ci = stats.binomtest(k, 3).proportion_ci(0.95, method="exact")
        assert row["mean_learned"] == pytest.approx(k / 3)
        assert (row["low"], row["high"]) == pytest.approx((ci.low, ci.high))
    rc, _, err = cli(["best", root / "seeded", "--metric", "learned", "--by", "trial"])
    assert rc == 2 and "a yes/no outcome ranks configurations" in err


def test_a_loss_ranks_lowest_first_and_an_accuracy_s_interval_stays_in_0_1(seeded_sweep):
    root, result = seeded_sweep
    loss = result.best("loss")  # final_loss: lower is better, so the lowest first
    assert loss["mean_final_loss"].tolist() == sorted(loss["mean_final_loss"])
    assert result.best("loss", mode="max")["mean_final_loss"].is_monotonic_decreasing
    steps = result.best("accuracy")
    assert ((steps["low"] >= 0) & (steps["high"] <= 1)).all()

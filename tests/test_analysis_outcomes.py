"""Outcomes recomputed from trajectories at user thresholds."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis import Thresholds, recompute_outcomes, with_outcomes
from analysis.load import load
from sweeper.results import ResultsInputError

try:
    from analysis_fixtures import store  # noqa: F401 - the session store fixture
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import store  # noqa: F401


def trajectory(trial: str, steps, **metrics) -> pd.DataFrame:
    return pd.DataFrame({"sweep": "s", "trial_id": trial, "step": steps, **metrics})


@pytest.fixture
def copy_rows() -> pd.DataFrame:
    steps = [0, 10, 20, 30]
    return pd.concat([
        trajectory("a", steps, accuracy=[0.1, 0.6, 0.96, 0.99], attn_acc=[0.0, 0.4, 0.7, 0.9],
                   ktiw_acc=[0.0, 0.55, 0.8, 0.9]),
        trajectory("b", steps, accuracy=[0.1, 0.5, 0.9, 0.93], attn_acc=[0.0, 0.1, 0.2, 0.6],
                   ktiw_acc=[0.2, 0.3, 0.5, 0.6]),
    ], ignore_index=True)


def by_trial(frame: pd.DataFrame) -> dict:
    return frame.set_index("trial_id").to_dict("index")


def test_default_thresholds(copy_rows):
    out = by_trial(recompute_outcomes(copy_rows))
    assert out["a"]["learned"] is True and out["a"]["steps_to_learn"] == 20
    assert out["a"]["attention_onset"] == 20 and out["a"]["ktiw_onset"] == 10
    assert out["b"]["learned"] is False and pd.isna(out["b"]["steps_to_learn"])
    assert out["b"]["attention_onset"] == 30 and out["b"]["ktiw_onset"] == 20


def test_user_thresholds_change_the_outcomes(copy_rows):
    out = by_trial(recompute_outcomes(copy_rows, thresholds=Thresholds(
        accuracy=0.9, attention=0.15, ktiw=0.3)))
    assert out["b"]["learned"] is True and out["b"]["steps_to_learn"] == 20
    assert out["b"]["attention_onset"] == 20 and out["b"]["ktiw_onset"] == 10
    assert out["a"]["attention_onset"] == 10


def test_threshold_is_inclusive(copy_rows):
    out = by_trial(recompute_outcomes(copy_rows, thresholds=Thresholds(accuracy=0.93)))
    assert out["b"]["steps_to_learn"] == 30


def test_rows_out_of_order_still_give_the_first_step(copy_rows):
    shuffled = copy_rows.sample(frac=1.0, random_state=3)
    assert recompute_outcomes(shuffled).sort_values("trial_id").reset_index(drop=True).equals(
        recompute_outcomes(copy_rows).sort_values("trial_id").reset_index(drop=True))


def test_trials_without_rows_have_unknown_outcomes(copy_rows):
    trials = pd.DataFrame({"sweep": "s", "trial_id": ["a", "b", "failed"]})
    out = by_trial(recompute_outcomes(copy_rows, trials))
    assert pd.isna(out["failed"]["learned"])
    assert pd.isna(out["failed"]["steps_to_learn"])
    assert list(recompute_outcomes(copy_rows, trials)["trial_id"]) == ["a", "b", "failed"]


def test_topic_trajectories_without_attention_columns():
    rows = trajectory("t", [0, 250, 500], accuracy=[0.25, 0.97, 1.0], loss=[1.386, 0.9, 0.2])
    trials = pd.DataFrame({"sweep": ["s"], "trial_id": ["t"], "task.classes": [4]})
    out = by_trial(recompute_outcomes(rows, trials))["t"]
    assert out["learned"] is True and out["steps_to_learn"] == 250
    assert pd.isna(out["attention_onset"]) and pd.isna(out["ktiw_onset"])
    assert out["plateau_exit"] == 500  # ln 4 / 2 = 0.693
    lower = by_trial(recompute_outcomes(rows, trials, Thresholds(plateau=0.7)))["t"]
    assert lower["plateau_exit"] == 250


def test_weak_cooccurrence_leaves_the_plateau_halfway_to_its_own_loss_floor():
    # rho = 0.6, C = 4: the floor H(y | topic word) = 1.112, halfway to ln 4: 1.249. A loss of
    # 1.2 has left the plateau although it is far above ln 4 / 2.
    rows = pd.concat([trajectory(t, [0, 250, 500], accuracy=[0.25, 0.6, 0.6],
                                 loss=[1.386, 1.3, 1.2]) for t in ("weak", "full")])
    trials = pd.DataFrame({"sweep": "s", "trial_id": ["weak", "full"], "task.classes": [4, 4],
                           "task.cooccurrence": [0.6, 1.0]})
    out = by_trial(recompute_outcomes(rows, trials))
    assert out["weak"]["plateau_exit"] == 500
    assert pd.isna(out["full"]["plateau_exit"])  # rho = 1: still needs loss < 0.693


@pytest.mark.parametrize("classes,rho,expected", [
    (4, 1.0, 0.0), (4, 0.25, math.log(4)), (2, 0.5, math.log(2)),
    (4, 0.8, -0.8 * math.log(0.8) - 0.2 * math.log(0.2 / 3)), (4, 0.0, math.log(3))])
def test_label_entropy_on_hand_worked_cases_for_scalars_and_arrays(classes, rho, expected):
    import numpy as np
    from sweep_helpers import derive_outcomes

    from sweeper.results import label_entropy, plateau_level

    assert label_entropy(classes, rho) == pytest.approx(expected, abs=1e-12)
    assert float(label_entropy(np.array([classes]), np.array([rho]))[0]) == pytest.approx(
        expected, abs=1e-12)
    level = plateau_level(classes, rho)
    assert level == pytest.approx((math.log(classes) + expected) / 2)
    # the trainer's stored outcome uses the same level
    from sweeper.families import families

    traj = {"step": [0, 50, 100],
            **{m.name: [0.0] * 3 for m in families()["topic"].scalar_metrics()},
            "loss": [level + 0.5, level + 1e-9, level - 1e-9]}
    assert derive_outcomes("topic", traj, classes=classes, cooccurrence=rho)[
        "plateau_exit"] == 100


def test_missing_accuracy_is_an_input_error():
    with pytest.raises(ResultsInputError, match="no 'accuracy' column"):
        recompute_outcomes(trajectory("t", [0], loss=[1.0]))


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high"])
def test_thresholds_are_checked(bad):
    with pytest.raises(ResultsInputError, match="accuracy threshold"):
        Thresholds(accuracy=bad)


def test_recomputed_outcomes_match_the_stored_ones_at_the_defaults(store):
    for sweep in ("copy", "topic"):
        res = load(store, sweep)
        stored = res.trials.set_index("trial_id")
        again = recompute_outcomes(res.trajectories, res.trials).set_index("trial_id")
        for column in ("learned", "steps_to_learn", "attention_onset", "ktiw_onset",
                       "plateau_exit"):
            a, b = stored[column], again.loc[stored.index, column]
            same = (a == b).fillna(False) | (a.isna() & b.isna())
            assert same.all(), (sweep, column)


def test_with_outcomes_replaces_the_stored_columns(store):
    res = load(store, "copy")
    lenient = with_outcomes(res.trials, res.trajectories, Thresholds(accuracy=0.6))
    assert len(lenient) == len(res.trials)
    # runs stuck on the KTIW plateau (accuracy ~0.66) learn at 0.6, not at 0.95
    assert lenient["learned"].sum() > res.trials["learned"].sum()
    assert not math.isnan(lenient["steps_to_learn"].astype(float).max())

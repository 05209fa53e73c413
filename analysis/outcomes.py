"""Outcomes recomputed from trajectories with the thresholds the analysis chooses.

The trainer stores outcomes at the default thresholds; an analysis must not depend on them
(DESIGN 2.3), so everything here starts again from the logged steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import AnalysisInputError

OUTCOME_COLUMNS = ("learned", "steps_to_learn", "attention_onset", "ktiw_onset", "plateau_exit")


@dataclass(frozen=True)
class Thresholds:
    """accuracy: a trial has learned once `accuracy` >= this. attention, ktiw: the onsets are
    the first steps with `attn_acc`, `ktiw_acc` >= these. plateau: topic task, the plateau is
    left when the loss falls this fraction of the way from its floor up to ln(C) (the floor is
    0 at co-occurrence 1, so then: below plateau * ln(C))."""

    accuracy: float = 0.95
    attention: float = 0.5
    ktiw: float = 0.5
    plateau: float = 0.5

    def __post_init__(self) -> None:
        for name in ("accuracy", "attention", "ktiw", "plateau"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 <= value <= 1):
                raise AnalysisInputError(f"{name} threshold {value!r}: a number in [0, 1]")


DEFAULT_THRESHOLDS = Thresholds()


def _keys(frame: pd.DataFrame) -> list[str]:
    return ["sweep", "trial_id"] if "sweep" in frame.columns else ["trial_id"]


def first_step(trajectories: pd.DataFrame, keys: list[str], hit: pd.Series) -> pd.Series:
    """Per trial, the first logged step where `hit` holds (trials with no hit are absent)."""
    rows = trajectories.loc[hit.fillna(False).astype(bool), [*keys, "step"]]
    return rows.groupby(keys, sort=False)["step"].min()


def _index(frame: pd.DataFrame, keys: list[str]) -> pd.Index:
    """The trial key of every row, as an index to look trials up with."""
    if len(keys) > 1:
        return pd.MultiIndex.from_frame(frame[keys])
    return pd.Index(frame[keys[0]])


def _metric(trajectories: pd.DataFrame, name: str) -> pd.Series | None:
    if name not in trajectories.columns:
        return None
    return pd.to_numeric(trajectories[name], errors="coerce").astype(float)


def recompute_outcomes(trajectories: pd.DataFrame, trials: pd.DataFrame | None = None,
                       thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """One row per trial (of `trials` if given, else of the trajectories), keyed by
    (sweep,) trial_id: learned, steps_to_learn, attention_onset, ktiw_onset, plateau_exit.

    A trial without trajectory rows (a failed one) gets learned = NA, not False. Onsets whose
    metric is not logged (the topic task has no attn_acc) are NA.
    """
    if "accuracy" not in trajectories.columns:
        raise AnalysisInputError(
            "trajectories have no 'accuracy' column, needed for learned; available columns: "
            + ", ".join(map(str, trajectories.columns)))
    keys = _keys(trajectories) if trials is None else _keys(trials)
    if trials is not None and not set(keys) <= set(trajectories.columns):
        keys = ["trial_id"]
    base = (trials if trials is not None else trajectories)[keys].drop_duplicates()
    out = base.set_index(keys)
    steps = first_step(trajectories, keys, _metric(trajectories, "accuracy")
                       >= thresholds.accuracy)
    out["steps_to_learn"] = steps.reindex(out.index).astype("Int64")
    logged = _index(trajectories, keys)
    has_rows = out.index.isin(logged)
    out["learned"] = pd.array(np.where(has_rows, out["steps_to_learn"].notna(), None),
                              dtype="boolean")
    for column, metric, level in (("attention_onset", "attn_acc", thresholds.attention),
                                  ("ktiw_onset", "ktiw_acc", thresholds.ktiw)):
        out[column] = _onset(trajectories, keys, metric, level, out.index)
    out["plateau_exit"] = _plateau_exit(trajectories, trials, keys, thresholds, out.index)
    return out[list(OUTCOME_COLUMNS)].reset_index()


def _onset(trajectories: pd.DataFrame, keys: list[str], metric: str, level: float,
           index: pd.Index) -> pd.Series:
    values = _metric(trajectories, metric)
    if values is None:
        return pd.Series(pd.NA, index=index, dtype="Int64")
    return first_step(trajectories, keys, values >= level).reindex(index).astype("Int64")


def label_entropy(classes: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """H(y | topic word), the topic task's loss floor: the topic word is of the sentence's
    class with probability rho, else of one of the C - 1 others (sweeper.outcomes has the same
    formula; analysis does not import sweeper)."""
    other = (1 - rho) / np.maximum(classes - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(np.where(rho > 0, rho * np.log(rho), 0.0)
                 + np.where(rho < 1, (1 - rho) * np.log(other), 0.0))


def _plateau_exit(trajectories: pd.DataFrame, trials: pd.DataFrame | None, keys: list[str],
                  thresholds: Thresholds, index: pd.Index) -> pd.Series:
    """Topic task: the first step with loss < plateau * ln(C) + (1 - plateau) * H, C =
    task.classes and H the loss floor set by task.cooccurrence (0 when rho = 1)."""
    loss = _metric(trajectories, "loss")
    if loss is None or trials is None or "task.classes" not in trials.columns:
        return pd.Series(pd.NA, index=index, dtype="Int64")
    config = trials.drop_duplicates(keys).set_index(keys)
    rows = _index(trajectories, keys)
    classes = config["task.classes"].astype(float).reindex(rows).to_numpy()
    rho = (config["task.cooccurrence"].astype(float).reindex(rows).to_numpy()
           if "task.cooccurrence" in config.columns else np.ones_like(classes))
    rho = np.where(np.isnan(rho), 1.0, rho)
    level = (thresholds.plateau * np.log(classes)
             + (1 - thresholds.plateau) * label_entropy(classes, rho))
    hit = pd.Series(loss.to_numpy() < level, index=trajectories.index)  # NaN level: False
    return first_step(trajectories, keys, hit).reindex(index).astype("Int64")


def with_outcomes(trials: pd.DataFrame, trajectories: pd.DataFrame,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """The trials with their outcome columns replaced by ones recomputed at `thresholds`."""
    recomputed = recompute_outcomes(trajectories, trials, thresholds)
    keys = [k for k in ("sweep", "trial_id") if k in recomputed.columns]
    kept = trials.drop(columns=[c for c in OUTCOME_COLUMNS if c in trials.columns])
    return kept.merge(recomputed, on=keys, how="left", validate="one_to_one")

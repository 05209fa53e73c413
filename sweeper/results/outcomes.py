"""Outcomes of trials, derived from their trajectories: the one derivation (DESIGN 2.3).

The trainer stores outcomes at the default thresholds through `trial_outcomes`; an analysis
recomputes them at its own with `recompute_outcomes` / `with_outcomes`. Both run the same
vectorised code, so the stored values and the recomputed ones cannot disagree. Thresholds are
arguments, never constants inside the trainer; the trajectory keeps everything needed.

- learned / steps_to_learn: `accuracy` >= thresholds.accuracy at a logged step (the first).
- attention_learned / attention_steps (copy): `attn_acc` (the best head's attention accuracy
  over content steps) >= thresholds.attention_learned at a logged step (the first);
  attention_heads: how many heads' `attn_acc_head` reached it at some logged step.
- attention_onset, ktiw_onset: first step with `attn_acc`, `ktiw_acc` >= their thresholds.
- plateau_exit (topic task): first step whose loss is below the plateau level, `plateau` of the
  way from the loss floor H(y | topic word) up to ln C (`plateau_level`).
A trial without trajectory rows (a failed one) gets NA for every outcome, not False.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from sweeper.results.errors import ResultsInputError
from sweeper.results.schema import Metric, scalar

OUTCOME_COLUMNS = ("learned", "steps_to_learn", "attention_learned", "attention_steps",
                   "attention_heads", "attention_onset", "ktiw_onset", "plateau_exit")
SUCCESS_OUTCOMES = {"learned": "steps_to_learn", "attention_learned": "attention_steps"}
STEP_OUTCOMES = ("steps_to_learn", "attention_steps", "attention_onset", "ktiw_onset",
                 "plateau_exit")  # a step, or never: NA
OUTCOME_TYPES = {c: pa.bool_() if c in SUCCESS_OUTCOMES else pa.int64()
                 for c in OUTCOME_COLUMNS} | {"diverged_step": pa.int64()}


@dataclass(frozen=True)
class Thresholds:
    """accuracy: a trial has learned once `accuracy` >= this. attention_learned: its attention
    has, once `attn_acc` >= this. attention, ktiw: the onsets are the first steps with
    `attn_acc`, `ktiw_acc` >= these. plateau: topic task, the plateau is
    left when the loss falls this fraction of the way from its floor up to ln(C) (the floor is
    0 at co-occurrence 1, so then: below plateau * ln(C))."""

    accuracy: float = 0.95
    attention: float = 0.5
    ktiw: float = 0.5
    plateau: float = 0.5
    attention_learned: float = 0.9

    def __post_init__(self) -> None:
        for name in ("accuracy", "attention", "ktiw", "plateau", "attention_learned"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, int | float) and 0 <= value <= 1):
                raise ResultsInputError(f"{name} threshold: got {value!r}; allowed: a number "
                                        "in [0, 1]")


DEFAULT_THRESHOLDS = Thresholds()


# ---------------------------------------------------------------- the topic task's plateau

def label_entropy(classes, rho):
    """H(y | topic word), the topic task's loss floor: the topic word is of the sentence's
    class with probability rho, else of one of the C - 1 others uniformly (arrays or scalars)."""
    classes, rho = np.asarray(classes, dtype=float), np.asarray(rho, dtype=float)
    other = (1 - rho) / np.maximum(classes - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(np.where(rho > 0, rho * np.log(np.where(rho > 0, rho, 1.0)), 0.0)
              + np.where(rho < 1, (1 - rho) * np.log(np.where(rho < 1, other, 1.0)), 0.0))
    return float(h) if h.ndim == 0 else h


def plateau_level(classes, rho=1.0, fraction: float = DEFAULT_THRESHOLDS.plateau):
    """The loss below which the topic task has left its ln C plateau: `fraction` of the way
    from the floor H(y | topic word) up to ln C (fraction * ln C when rho = 1), so that weak
    co-occurrence, whose loss cannot fall far, is judged against what it can reach."""
    classes = np.asarray(classes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = fraction * np.log(classes) + (1 - fraction) * label_entropy(classes, rho)
    return float(level) if np.ndim(level) == 0 else level


# ---------------------------------------------------------------- vectorised derivation

def _keys(frame: pd.DataFrame) -> list[str]:
    return ["sweep", "trial_id"] if "sweep" in frame.columns else ["trial_id"]


def first_step(trajectories: pd.DataFrame, keys: list[str], hit: pd.Series) -> pd.Series:
    """Per trial, the first logged step where `hit` holds (trials with no hit are absent)."""
    rows = trajectories.loc[hit.fillna(False).astype(bool), [*keys, "step"]]
    return rows.groupby(keys, sort=False)["step"].min()


def _index(frame: pd.DataFrame, keys: list[str]) -> pd.Index:
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
    (sweep,) trial_id, with the columns of OUTCOME_COLUMNS.

    `trials` supplies task.classes and task.cooccurrence for the topic task's plateau. Onsets
    whose metric is not logged (the topic task has no attn_acc) are NA.
    """
    if "accuracy" not in trajectories.columns:
        raise ResultsInputError(
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
    has_rows = out.index.isin(_index(trajectories, keys))
    out["learned"] = pd.array(np.where(has_rows, out["steps_to_learn"].notna(), None),
                              dtype="boolean")
    for column, metric, level in (("attention_steps", "attn_acc", thresholds.attention_learned),
                                  ("attention_onset", "attn_acc", thresholds.attention),
                                  ("ktiw_onset", "ktiw_acc", thresholds.ktiw)):
        out[column] = _onset(trajectories, keys, metric, level, out.index)
    out["attention_learned"] = pd.array(
        np.where(has_rows & ("attn_acc" in trajectories.columns),
                 out["attention_steps"].notna(), None), dtype="boolean")
    out["attention_heads"] = _heads_reaching(trajectories, keys, thresholds.attention_learned,
                                             out.index, has_rows)
    out["plateau_exit"] = _plateau_exit(trajectories, trials, keys, thresholds, out.index)
    return out[list(OUTCOME_COLUMNS)].reset_index()


def _onset(trajectories: pd.DataFrame, keys: list[str], metric: str, level: float,
           index: pd.Index) -> pd.Series:
    values = _metric(trajectories, metric)
    if values is None:
        return pd.Series(pd.NA, index=index, dtype="Int64")
    return first_step(trajectories, keys, values >= level).reindex(index).astype("Int64")


def _heads_reaching(trajectories: pd.DataFrame, keys: list[str], level: float,
                    index: pd.Index, has_rows: np.ndarray) -> pd.Series:
    """Per trial, how many heads' `attn_acc_head` reached `level` at some logged step."""
    if "attn_acc_head" not in trajectories.columns:
        return pd.Series(pd.NA, index=index, dtype="Int64")
    rows = trajectories[[*keys, "attn_acc_head"]].dropna(subset=["attn_acc_head"])
    heads = rows.explode("attn_acc_head")
    heads["head"] = heads.groupby(level=0).cumcount()
    heads["value"] = pd.to_numeric(heads["attn_acc_head"], errors="coerce")
    best = heads.groupby([*keys, "head"], sort=False)["value"].max()
    count = (best >= level).groupby(level=list(range(len(keys))), sort=False).sum()
    if len(keys) == 1:
        count.index = count.index.get_level_values(0)
    counts = count.reindex(index).fillna(0).astype("Int64")
    counts[~np.asarray(has_rows)] = pd.NA  # no trajectory: unknown, not zero
    return counts


def _plateau_exit(trajectories: pd.DataFrame, trials: pd.DataFrame | None, keys: list[str],
                  thresholds: Thresholds, index: pd.Index) -> pd.Series:
    loss = _metric(trajectories, "loss")
    if loss is None or trials is None or "task.classes" not in trials.columns:
        return pd.Series(pd.NA, index=index, dtype="Int64")
    config = trials.drop_duplicates(keys).set_index(keys)
    rows = _index(trajectories, keys)
    classes = config["task.classes"].astype(float).reindex(rows).to_numpy()
    rho = (config["task.cooccurrence"].astype(float).reindex(rows).to_numpy()
           if "task.cooccurrence" in config.columns else np.ones_like(classes))
    rho = np.where(np.isnan(rho), 1.0, rho)
    level = plateau_level(classes, rho, thresholds.plateau)
    hit = pd.Series(loss.to_numpy() < level, index=trajectories.index)  # NaN level: False
    return first_step(trajectories, keys, hit).reindex(index).astype("Int64")


def with_outcomes(trials: pd.DataFrame, trajectories: pd.DataFrame,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """The trials with their outcome columns replaced by ones recomputed at `thresholds`."""
    recomputed = recompute_outcomes(trajectories, trials, thresholds)
    keys = [k for k in ("sweep", "trial_id") if k in recomputed.columns]
    kept = trials.drop(columns=[c for c in OUTCOME_COLUMNS if c in trials.columns])
    return kept.merge(recomputed, on=keys, how="left", validate="one_to_one")


# ---------------------------------------------------------------- outcomes as stored

def derive_outcomes(trajectories: pd.DataFrame, trials: pd.DataFrame,
                    metrics: Iterable[Metric],
                    thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """What the trials table stores per trial: `recompute_outcomes`, plus final_<m> (the last
    logged value that is a number) and best_<m> (max, or min where lower is better) of each
    scalar metric. One row per trial of `trials`, keyed by trial_id."""
    out = recompute_outcomes(trajectories, trials, thresholds).set_index("trial_id")
    ordered = trajectories.sort_values(["trial_id", "step"])
    for m in scalar(metrics):
        values = (pd.to_numeric(ordered[m.name], errors="coerce").astype(float)
                  if m.name in ordered.columns else pd.Series(np.nan, index=ordered.index))
        grouped = values.groupby(ordered["trial_id"], sort=False)
        out[f"final_{m.name}"] = grouped.last().reindex(out.index)
        out[f"best_{m.name}"] = (grouped.min() if m.lower_is_better
                                 else grouped.max()).reindex(out.index)
    return out.reset_index()


def trials_outcomes(trajectories: Sequence[Mapping[str, Sequence]], metrics: Iterable[Metric],
                    configs: Sequence[Mapping[str, object]] | None = None,
                    thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[dict[str, object]]:
    """`derive_outcomes` of trials whose trajectories are lists ("step" and one list per
    metric), in one vectorised pass; configs: per trial, task.classes and task.cooccurrence
    where the task has them (the topic task's plateau)."""
    metrics = tuple(metrics)
    ids = [str(i) for i in range(len(trajectories))]

    def column(name: str) -> list:
        return [v for t in trajectories for v in t.get(name, [None] * len(t["step"]))]

    frame = pd.DataFrame({
        "trial_id": [i for i, t in zip(ids, trajectories) for _ in t["step"]],
        "step": [s for t in trajectories for s in t["step"]],
        **{m.name: pd.Series(column(m.name), dtype=object) if m.per_item
           else pd.array(column(m.name), dtype="Float64") for m in metrics}})
    trials = pd.DataFrame({"trial_id": ids})
    for key in ("task.classes", "task.cooccurrence"):
        values = [(c or {}).get(key) for c in (configs or [{}] * len(ids))]
        if any(v is not None for v in values):
            trials[key] = pd.array(values, dtype="Float64")
    rows = derive_outcomes(frame, trials, metrics, thresholds).set_index("trial_id").loc[ids]
    return [{c: _plain(v) for c, v in row.items()} for _, row in rows.iterrows()]


def trial_outcomes(trajectory: Mapping[str, Sequence], metrics: Iterable[Metric], *,
                   classes: int | None = None, cooccurrence: float = 1.0,
                   thresholds: Thresholds = DEFAULT_THRESHOLDS) -> dict[str, object]:
    """`trials_outcomes` of one trial."""
    config = {"task.classes": classes, "task.cooccurrence": cooccurrence} if classes else {}
    return trials_outcomes([trajectory], metrics, [config], thresholds)[0]


def _plain(value: object) -> object:
    """pandas' NA and NaN as None, numpy scalars as Python's."""
    if value is pd.NA or value is None:
        return None
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value

"""Ranking stored trials by one column, per configuration or per trial: what `sweeper best`
(`analysis.best.best_trials`, which reads the store) and `Results.best` (over what is loaded)
share. Pure: a frame in, a frame out.

Per configuration (the swept columns, seeds pooled): the mean over its finished seeds with a 95%
interval (`sweeper.results.stats`: Student's t for a number, clipped to the range the column can
take, [0, 1] for a share or an accuracy; Clopper-Pearson for a yes/no outcome's share). Per
trial: the finished trials (status ok) one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from sweeper.results.stats import exact_interval, mean_interval

from .errors import AnalysisInputError

MODES = ("max", "min")
BY = ("config", "trial")
CONFIG_PREFIXES = ("task.", "model.", "train.")
# columns that are not a measurement of a trial: never ranked by
NOT_METRICS = ("seed", "trial_id", "sweep", "pack_id", "status", "error", "host", "node_id",
               "attempts", "shared_with", "stopped_at", "stop_reason", "requested",
               "diverged_step", "wall_time_s")


def lower_is_better() -> tuple[str, ...]:
    """The metrics the registered families declare lower-is-better (loss, a residual)."""
    from sweeper.families import families

    return tuple(dict.fromkeys(m.name for f in families().values() for m in f.metrics
                               if m.lower_is_better))


def default_mode(column: str, lower_is_better: Sequence[str] = ()) -> str:
    """'min' for a column where lower is better (a loss, a step outcome: learned sooner,
    `lower_is_better`: the family's declared metrics, as final_/best_), else 'max'."""
    if column.endswith(("_steps", "_onset", "_exit", "steps_to_learn")) or "loss" in column:
        return "min"
    return "min" if any(column in (f"final_{m}", f"best_{m}") for m in lower_is_better) \
        else "max"


def check_metric(frame: pd.DataFrame, column: str, metric: str) -> bool:
    """Whether `column` of `frame` is yes/no (ranked by its share); refuses a config column
    or a column that is not a number, in one line naming `metric`."""
    if column.startswith(CONFIG_PREFIXES) or column in NOT_METRICS:
        raise AnalysisInputError(f"metric {metric}: {column} is a setting or a record of the "
                                 "run, not a measurement; allowed: an outcome or a metric "
                                 "column such as final_accuracy, best_loss or attention_steps")
    values = frame[column]
    yes_no = pd.api.types.is_bool_dtype(values) or (
        values.dtype == object and values.notna().any()
        and values.dropna().map(lambda v: isinstance(v, bool)).all())
    if not (yes_no or pd.api.types.is_numeric_dtype(values) or values.isna().all()):
        raise AnalysisInputError(f"metric {metric}: {column} is not a number; allowed: a "
                                 "numeric trials column such as final_accuracy, best_loss or "
                                 "attention_steps, or a yes/no outcome (its share of seeds)")
    return yes_no


def rank(frame: pd.DataFrame, column: str, keys: Sequence[str], *, mode: str, n: int,
         by: str | None, yes_no: bool) -> pd.DataFrame:
    """The n best configurations or trials of `frame` by `column` (see the module docstring);
    `keys`: the columns that make a configuration; `by` None: per configuration where one has
    several rows, else per trial."""
    if mode not in MODES:
        raise AnalysisInputError(f"mode: got {mode!r}; allowed: {', '.join(MODES)}")
    if by is not None and by not in BY:
        raise AnalysisInputError(f"by: got {by!r}; allowed: {', '.join(BY)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise AnalysisInputError(f"n: got {n!r}; allowed: an integer >= 1")
    keys = list(keys)
    if by is None:
        most = (frame.groupby(keys, dropna=False).size().max() if keys else len(frame)) \
            if len(frame) else 0
        by = "config" if most > 1 else "trial"
    if yes_no and by == "trial":
        raise AnalysisInputError(f"metric {column}: a yes/no outcome ranks configurations (its "
                                 "share of seeds); allowed: by config, or a numeric column")
    finished = frame[(frame["status"] == "ok") & frame[column].notna()]
    if by == "trial":
        ranked = finished.sort_values(column, ascending=mode == "min", kind="stable")
        shown = [*keys, "seed", "trial_id", column]
        return ranked[list(dict.fromkeys(shown))].head(n).reset_index(drop=True)
    return _by_config(finished, keys, column, mode, yes_no).head(n).reset_index(drop=True)


def _by_config(finished: pd.DataFrame, keys: list[str], column: str, mode: str,
               yes_no: bool) -> pd.DataFrame:
    """One row a configuration: its keys, seeds (finished, with a value), the mean of `column`
    and its interval, ranked by the mean (ties: the sweep's order)."""
    values = finished[column].astype(float)
    unit = yes_no or (len(values) and values.between(0, 1).all() and "loss" not in column)
    rows = []
    groups = finished.groupby(keys, dropna=False, sort=False) if keys else [((), finished)]
    for key, group in groups:
        x = group[column].astype(float).to_numpy()
        low, high = exact_interval(int(x.sum()), len(x)) if yes_no else mean_interval(x)
        if unit and low == low:  # a share or an accuracy cannot leave [0, 1]
            low, high = max(0.0, low), min(1.0, high)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(keys, key)), "seeds": len(x), f"mean_{column}": float(x.mean()),
                     "low": low, "high": high})
    out = pd.DataFrame(rows, columns=[*keys, "seeds", f"mean_{column}", "low", "high"])
    return out.sort_values(f"mean_{column}", ascending=mode == "min", kind="stable")

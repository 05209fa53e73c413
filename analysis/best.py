"""The best of a sweep by one column: `sweeper best` and `SweepResult.best`.

    best_trials(results, "quick", metric="final_accuracy")              # per configuration
    best_trials(results, "quick", metric="attention_steps", mode="min", by="trial")

Like Ray Tune's `ResultGrid.get_best_result(metric, mode, scope)` and Optuna's trial values, over
what the sweep stored. `by="config"` (the default where a configuration has several seeds, as
Ray's `scope="avg"` and Optuna's per-trial value): the configurations (the swept columns, seeds
pooled) ranked by the metric's mean over their finished seeds, each with its number of seeds and
a 95% interval (`sweeper.results.stats`: Student's t for a number, Clopper-Pearson for a yes/no
outcome's share). `by="trial"`: the trials that finished (status ok), each row with the sweep's
swept columns, its seed and trial id, so that it says which cell and trial it is.

A column may be named without its group or prefix, as in `sweeper query --columns`: `accuracy`
is `final_accuracy` (a metric's bare name is its last value, as Ray's). Ties keep the sweep's
order (swept columns, then seed); values that are missing (a step outcome never reached) are
left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd
import pyarrow.fs as pafs

from sweeper.results.errors import python_arguments
from sweeper.results.stats import exact_interval, mean_interval

from .errors import AnalysisInputError, unknown_column
from .load import load
from .query import _swept, _with_context, query_frame

MODES = ("max", "min")
BY = ("config", "trial")


@python_arguments
def best_trials(results: str | os.PathLike, sweep: str | Sequence[str] | None = None, *,
                metric: str, mode: str = "max", n: int = 5, where: str | None = None,
                by: str | None = None,
                filesystem: pafs.FileSystem | None = None) -> pd.DataFrame:
    """The n best configurations (`by="config"`) or trials (`by="trial"`) by `metric`, the
    highest first (mode 'max') or the lowest ('min'); `by` None: per configuration where one
    has several seeds, else per trial (module docstring)."""
    if mode not in MODES:
        raise AnalysisInputError(f"mode: got {mode!r}; allowed: {', '.join(MODES)}")
    if by is not None and by not in BY:
        raise AnalysisInputError(f"by: got {by!r}; allowed: {', '.join(BY)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise AnalysisInputError(f"n: got {n!r}; allowed: an integer >= 1")
    column = _with_context(results, sweep, [metric], "trials", filesystem, "--metric")[0][0]
    frame = query_frame(results, sweep, where=where, filesystem=filesystem)  # sorted, every column
    if column not in frame.columns:
        raise unknown_column(column, frame.columns, "--metric")
    manifests = load(results, sweep, columns=["trial_id"], filesystem=filesystem).manifests
    lead = ["sweep"] if "sweep" in frame.columns and frame["sweep"].nunique() > 1 else []
    keys = [*lead, *_swept(frame, manifests)]
    if by is None:  # several seeds a configuration: rank configurations
        most = (frame.groupby(keys, dropna=False).size().max() if keys else len(frame)) \
            if len(frame) else 0
        by = "config" if most > 1 else "trial"
    values = frame[column]
    yes_no = pd.api.types.is_bool_dtype(values) or (
        values.dtype == object and values.dropna().map(lambda v: isinstance(v, bool)).all()
        and values.notna().any())
    numeric = pd.api.types.is_numeric_dtype(values) or values.isna().all()
    if not (numeric or yes_no) or (yes_no and by == "trial"):
        raise AnalysisInputError(f"metric {metric}: {column} is not a number; allowed: a "
                                 "numeric trials column such as final_accuracy, best_loss or "
                                 "attention_steps" + (", or a yes/no outcome with by config "
                                                      "(its share of seeds)" if yes_no else ""))
    finished = frame[(frame["status"] == "ok") & values.notna()]
    if by == "trial":
        ranked = finished.sort_values(column, ascending=mode == "min", kind="stable")
        shown = [*keys, "seed", "trial_id", column]
        return ranked[list(dict.fromkeys(shown))].head(n).reset_index(drop=True)
    return _by_config(finished, keys, column, mode, yes_no).head(n).reset_index(drop=True)


def _by_config(finished: pd.DataFrame, keys: list[str], column: str, mode: str,
               yes_no: bool) -> pd.DataFrame:
    """One row a configuration: its keys, seeds (finished, with a value), the mean of `column`
    and its interval, ranked by the mean (ties: the sweep's order)."""
    rows = []
    groups = finished.groupby(keys, dropna=False, sort=False) if keys else [((), finished)]
    for key, group in groups:
        x = group[column].astype(float).to_numpy()
        low, high = (exact_interval(int(x.sum()), len(x)) if yes_no else mean_interval(x))
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(keys, key)), "seeds": len(x), f"mean_{column}": float(x.mean()),
                     "low": low, "high": high})
    out = pd.DataFrame(rows, columns=[*keys, "seeds", f"mean_{column}", "low", "high"])
    return out.sort_values(f"mean_{column}", ascending=mode == "min", kind="stable")

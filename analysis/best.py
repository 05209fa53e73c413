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

from .errors import AnalysisInputError, unknown_column
from .query import _swept, _with_context, query_frame, sweep_manifests
from .ranking import BY, MODES, check_metric, default_mode, lower_is_better, rank

__all__ = ["BY", "MODES", "best_trials", "lower_is_better"]


@python_arguments
def best_trials(results: str | os.PathLike, sweep: str | Sequence[str] | None = None, *,
                metric: str, mode: str | None = None, n: int = 5, where: str | None = None,
                by: str | None = None,
                filesystem: pafs.FileSystem | None = None) -> pd.DataFrame:
    """The n best configurations (`by="config"`) or trials (`by="trial"`) by `metric`, the
    highest first (mode 'max') or the lowest ('min'; the default for a loss or a step
    outcome: `analysis.ranking.default_mode`); `by` None: per configuration where one has
    several seeds, else per trial (module docstring)."""
    if mode is not None and mode not in MODES:
        raise AnalysisInputError(f"mode: got {mode!r}; allowed: {', '.join(MODES)}")
    column = _with_context(results, sweep, [metric], "trials", filesystem, "--metric")[0][0]
    frame = query_frame(results, sweep, where=where, filesystem=filesystem)  # sorted, every column
    if column not in frame.columns:
        raise unknown_column(column, frame.columns, "--metric")
    yes_no = check_metric(frame, column, metric)
    lead = ["sweep"] if "sweep" in frame.columns and frame["sweep"].nunique() > 1 else []
    keys = [*lead, *_swept(frame, sweep_manifests(results, sweep, filesystem))]
    return rank(frame, column, keys, mode=mode or default_mode(column, lower_is_better()),
                n=n, by=by, yes_no=yes_no)

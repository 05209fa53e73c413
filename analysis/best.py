"""The best trials of a sweep by one column: `sweeper best` and `SweepResult.best`.

    best_trials(results, "quick", metric="final_accuracy", mode="max", n=5)

Like Ray Tune's `ResultGrid.get_best_result(metric, mode)` and Optuna's `study.best_trials`, over
what the sweep stored: the trials that finished (status ok), ranked by a numeric trials column
(a final or best metric, or a number outcome such as attention_steps), each row with the sweep's
swept columns, its seed and trial id, so that it says which cell and trial it is. A column may be
named without its group or prefix, as in `sweeper query --columns` (`accuracy` ->
`final_accuracy` where that is the one match). Ties keep the sweep's order (swept columns, then
seed); trials without a value (a step outcome never reached) are left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd
import pyarrow.fs as pafs

from sweeper.results.errors import python_arguments

from .errors import AnalysisInputError, unknown_column
from .load import load
from .query import _swept, _with_context, query_frame

MODES = ("max", "min")


@python_arguments
def best_trials(results: str | os.PathLike, sweep: str | Sequence[str] | None = None, *,
                metric: str, mode: str = "max", n: int = 5, where: str | None = None,
                filesystem: pafs.FileSystem | None = None) -> pd.DataFrame:
    """The n trials with the highest (mode 'max') or lowest ('min') `metric` (module docstring)."""
    if mode not in MODES:
        raise AnalysisInputError(f"mode: got {mode!r}; allowed: {', '.join(MODES)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise AnalysisInputError(f"n: got {n!r}; allowed: an integer >= 1")
    column = _with_context(results, sweep, [metric], "trials", filesystem, "--metric")[0][0]
    frame = query_frame(results, sweep, where=where, filesystem=filesystem)  # sorted, every column
    if column not in frame.columns:
        raise unknown_column(column, frame.columns, "--metric")
    values = frame[column]
    if pd.api.types.is_bool_dtype(values) or not (pd.api.types.is_numeric_dtype(values)
                                    or values.isna().all()):
        raise AnalysisInputError(f"metric {metric}: {column} is not a number; allowed: a "
                                 "numeric trials column such as final_accuracy, best_loss or "
                                 "attention_steps")
    ranked = frame[(frame["status"] == "ok") & values.notna()]
    ranked = ranked.sort_values(column, ascending=mode == "min", kind="stable")
    manifests = load(results, sweep, columns=["trial_id"], filesystem=filesystem).manifests
    lead = ["sweep"] if "sweep" in frame.columns and frame["sweep"].nunique() > 1 else []
    shown = [*lead, *_swept(frame, manifests), "seed", "trial_id", column]
    return ranked[list(dict.fromkeys(shown))].head(n).reset_index(drop=True)

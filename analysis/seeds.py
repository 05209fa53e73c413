"""Cells and their seeds: which trials make a cell, which metrics their curves show, and the
curves themselves (read for those trials only). Used by `sweeper seeds`, the report's per-cell
panels and the dashboard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from sweeper.results import COUNTED_STATUSES, DEFAULT_THRESHOLDS, Thresholds

from .errors import AnalysisInputError, unknown_column
from .load import Results
from .outcomes import outcome_metrics, with_outcomes
from .swept import swept_columns


def varying_columns(trials: pd.DataFrame, manifests: Mapping[str, Mapping] | None = None
                    ) -> list[str]:
    """A sweep's axes: the parameters that vary, not the columns derived from them
    (`analysis.swept.swept_columns`, the one rule)."""
    return swept_columns(trials, manifests)


def cell_keys(results: Results, by: str | None = None) -> list[str]:
    """The columns that make a cell: `by` (comma-separated), else the sweep's varying ones."""
    if by:
        keys = [k.strip() for k in by.split(",") if k.strip()]
        for k in keys:
            if k not in results.trials.columns:
                raise unknown_column(k, results.trials.columns, "--by")
        return keys
    return varying_columns(results.trials, results.manifests)


def split_cells(trials: pd.DataFrame, keys: Sequence[str]) -> list[dict]:
    """The distinct cells (dicts of key values) among `trials`, sorted."""
    if not keys:
        return [{}]
    frame = trials[list(keys)].drop_duplicates()
    try:
        frame = frame.sort_values(list(keys))
    except TypeError:
        pass
    return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def seed_metrics(results: Results) -> list[str]:
    """The metrics the sweeps' family shows per seed (`Family.seed_metrics`), of those
    logged; else accuracy."""
    from sweeper.errors import SweeperInputError
    from sweeper.families import family_of

    have = set(results.trajectory_columns)
    for manifest in results.manifests.values():
        try:
            chosen = [m for m in family_of(str(manifest.get("task"))).seed_metrics if m in have]
        except SweeperInputError:
            continue
        if chosen:
            return chosen
    return [m for m in ("accuracy", "attn_acc") if m in have] or ["accuracy"]


def cell_trajectories(results: Results, metrics: Sequence[str],
                      thresholds: Thresholds = DEFAULT_THRESHOLDS
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The loaded trials with outcomes recomputed at `thresholds`, and their trajectories
    (step and `metrics`), read from their packs' files only."""
    have = set(results.trajectory_columns)
    for m in metrics:
        if m not in have:
            raise unknown_column(m, sorted(have - {"sweep"}), "--metrics")
    needed = outcome_metrics(results.trials)
    wanted = list(dict.fromkeys([*metrics, *(c for c in needed if c in have)]))
    ids = results.trials["trial_id"].tolist()
    rows = results.read_trajectories(trial_ids=ids, columns=wanted)
    trials = results.trials
    if "accuracy" in have:
        trials = with_outcomes(trials, rows, thresholds)
    return trials, rows[["sweep", "trial_id", "step", *metrics]]


def cell_of(trials: pd.DataFrame, cell: Mapping[str, object]) -> pd.DataFrame:
    """Every trial of a cell (any status)."""
    if not cell:
        return trials
    mask = np.ones(len(trials), dtype=bool)
    for column, value in cell.items():
        if column not in trials.columns:
            raise AnalysisInputError(f"cell column {column!r} is not a trials column")
        values = trials[column]
        if value is None:
            mask &= values.isna().to_numpy()
        else:
            mask &= (values == value).fillna(False).to_numpy(dtype=bool)
    return trials[mask]


def metric_thresholds(thresholds) -> dict[str, float]:
    """The threshold each metric's outcome is judged at (drawn on the seeds' curves)."""
    return {"accuracy": thresholds.accuracy, "attn_acc": thresholds.attention_learned,
            "ktiw_acc": thresholds.ktiw}


def outcome_class(trials: pd.DataFrame, outcome: str) -> pd.Series:
    """Per trial: success, failure (the outcome false), diverged, or other (failed, stopped,
    unknown): how the seeds' curves are coloured."""
    status = trials["status"] if "status" in trials.columns else pd.Series("ok", trials.index)
    value = trials[outcome].astype("boolean") if outcome in trials.columns else pd.Series(
        pd.NA, index=trials.index, dtype="boolean")
    out = np.where(status == "diverged", "diverged",
                   np.where(~status.isin(COUNTED_STATUSES) | value.isna().to_numpy(), "other",
                            np.where(value.fillna(False).to_numpy(), "success", "failure")))
    return pd.Series(out, index=trials.index)

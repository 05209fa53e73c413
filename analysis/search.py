"""What a sweep searched: its search type, objective and axis kinds (read from the sweep file
its manifest keeps), and the objective of each cell, for random and Optuna sweeps' views
(the objective against each parameter, parallel coordinates)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.outcomes import outcome_rules
from sweeper.results import COUNTED_STATUSES
from sweeper.results.objective import objective_value
from sweeper.results.reading import search_facts


@dataclass
class SearchInfo:
    """type: the search type's name, shown (or "" when unknown); drawn: its cells are drawn,
    not a grid to tabulate (what its strategy said, `search_facts`); axes: column -> kind
    (grid, choice, uniform, loguniform, int)."""

    type: str = ""
    objective: str | None = None
    direction: str | None = None
    axes: dict[str, str] = field(default_factory=dict)
    drawn: bool = False

    def scales(self) -> dict[str, str]:
        """'log' for the log-uniform axes (others decide from their values)."""
        return {c: "log" for c, kind in self.axes.items() if kind == "loguniform"}


def search_info(manifest: dict) -> SearchInfo:
    """From the manifest's `search` and its sweep file's `search:` and `axes:` (never an
    error: an unreadable file gives what the manifest says)."""
    info = _from_file(manifest, SearchInfo(type=str(manifest.get("search") or "")))
    info.drawn = search_facts(manifest, info.type)["search_draws_cells"]
    return info


def _from_file(manifest: dict, info: SearchInfo) -> SearchInfo:
    """`info` completed from the sweep file the manifest keeps."""
    text = manifest.get("sweep_file")
    if not isinstance(text, str) or not text.strip():
        return info
    try:
        import yaml

        data = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - a view, never a failure
        return info
    if not isinstance(data, dict):
        return info
    search = data.get("search")
    if isinstance(search, dict):
        info.type = info.type or str(search.get("type") or "")
        info.objective = search.get("objective")
        info.direction = search.get("direction", "maximize" if info.objective else None)
    axes = data.get("axes")
    if isinstance(axes, dict):
        for group, params in axes.items():
            if not isinstance(params, dict):
                continue
            for name, spec in params.items():
                if isinstance(spec, dict) and len(spec) == 1:
                    info.axes[f"{group}.{name}"] = str(next(iter(spec)))
    info.type = info.type or "grid"
    return info


def objective_cells(trials: pd.DataFrame, keys: Sequence[str], objective: str) -> pd.DataFrame:
    """Per cell (distinct values of `keys`): n, the counted seeds, and `objective`, their mean
    of the objective column as the search counts it (docs/sweep-files.md): a success outcome
    is the success share; a step outcome never reached counts as the step budget."""
    keys = list(keys)
    if objective not in trials.columns:
        raise KeyError(objective)
    status = trials["status"] if "status" in trials.columns else pd.Series("ok", trials.index)
    ran = trials["learned"].notna() if "learned" in trials.columns else status.eq("ok")
    budget = (pd.to_numeric(trials["train.steps"], errors="coerce").astype(float)
              if "train.steps" in trials.columns else pd.Series(math.nan, trials.index))
    values = trials[objective].astype(object)
    rules = outcome_rules(trials)
    number = pd.Series([objective_value([{objective: None if pd.isna(v) else v}], objective,
                                        steps if r else None, rules)
                        for v, steps, r in zip(values, budget, ran)], index=trials.index,
                       dtype=float)
    known = number.notna()
    use = status.isin(COUNTED_STATUSES) & known
    work = trials.loc[use, keys].copy()
    work["objective"] = number[use]
    if work.empty:
        return pd.DataFrame(columns=[*keys, "n", "objective"])
    grouped = work.groupby(keys, dropna=False, sort=True)["objective"]
    out = pd.DataFrame({"n": grouped.size(), "objective": grouped.mean()}).reset_index()
    return out[np.isfinite(out["objective"].astype(float))] if len(out) else out


def best_first(cells: pd.DataFrame, direction: str | None) -> pd.DataFrame:
    """Cells ordered best first by the objective."""
    ascending = direction == "minimize"
    return cells.sort_values("objective", ascending=ascending, kind="stable")


def finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None

"""What a sweep searched: its search type, objective and axis kinds (read from the sweep file
its manifest keeps), the objective of each cell and of each trial, and the data of the
dashboard's search views for every sweep (parallel coordinates, a slice per parameter, the
optimisation history and parameter importance)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.outcomes import outcome_rules
from sweeper.results import COUNTED_STATUSES, SUCCESS_OUTCOMES
from sweeper.results.objective import objective_value
from sweeper.results.reading import search_facts

MAX_LEVELS = 12  # a numeric parameter with more distinct values is binned in slices
BINS = 8


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
    number = trial_objective(trials, objective)
    use = number.notna()
    work = trials.loc[use, keys].copy()
    work["objective"] = number[use]
    if work.empty:
        return pd.DataFrame(columns=[*keys, "n", "objective"])
    grouped = work.groupby(keys, dropna=False, sort=True)["objective"]
    out = pd.DataFrame({"n": grouped.size(), "objective": grouped.mean()}).reset_index()
    return out[np.isfinite(out["objective"].astype(float))] if len(out) else out


def trial_objective(trials: pd.DataFrame, objective: str) -> pd.Series:
    """Each trial's objective as the search counts it (a success outcome 1 or 0; a step
    outcome never reached counts as the step budget); NaN for a trial not counted (failed,
    stopped) or without a value."""
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
    return number.where(status.isin(COUNTED_STATUSES) & np.isfinite(number))


def is_yes_no(trials: pd.DataFrame, objective: str) -> bool:
    """A yes/no outcome (learned or not), drawn as a share; else a number objective."""
    return objective in SUCCESS_OUTCOMES or (objective in trials.columns and
                                            pd.api.types.is_bool_dtype(trials[objective]))


def trial_lines(trials: pd.DataFrame, keys: Sequence[str], objective: str) -> pd.DataFrame:
    """One row per counted trial (in the order given): trial_id, the swept columns and
    `objective` (`trial_objective`): the parallel coordinates' lines."""
    number = trial_objective(trials, objective)
    use = number.notna()
    lines = trials.loc[use, ["trial_id", *keys]].copy()
    lines["objective"] = number[use].astype(float)
    return lines.reset_index(drop=True)


def _levels(column: pd.Series) -> pd.Series:
    """A parameter's values as slices and importance group them: the values themselves, or
    for a numeric parameter with more than MAX_LEVELS distinct values (a drawn search) BINS
    bins of equal counts, each named by its trials' median value."""
    numbers = pd.to_numeric(column, errors="coerce")
    if column.nunique() <= MAX_LEVELS or numbers.isna().any():
        return column
    bins = pd.qcut(numbers.astype(float), BINS, duplicates="drop")
    return numbers.groupby(bins, observed=True).transform("median")


def slices(lines: pd.DataFrame, keys: Sequence[str]) -> list[dict]:
    """Per parameter: each of its values (`_levels`) with n, the counted trials there, and
    their mean objective (for a yes/no outcome: the share that learned)."""
    out = []
    for key in keys:
        grouped = lines["objective"].groupby(_levels(lines[key]), sort=True)
        out.append({"column": key, "values": list(grouped.size().index),
                    "n": grouped.size().tolist(), "mean": grouped.mean().tolist()})
    return out


def spread_importance(lines: pd.DataFrame, keys: Sequence[str]) -> dict[str, float]:
    """Each parameter's importance, most important first: the variance (population) of the
    mean objective across its values (`_levels`), so a parameter whose values all give the
    same mean scores 0; shares of their sum (all 0 when none moves the objective)."""
    spread = {k: float(np.var(lines["objective"].groupby(_levels(lines[k])).mean().to_numpy()))
              if len(lines) else 0.0 for k in keys}
    total = sum(spread.values())
    return dict(sorted(((k, v / total if total > 0 else 0.0) for k, v in spread.items()),
                       key=lambda kv: -kv[1]))


def optuna_importance(path: str, study_name: str) -> dict[str, float] | None:
    """Optuna's own parameter importance of the study stored at `path` (its SQLite file),
    with PED-ANOVA (`PedAnovaImportanceEvaluator`: numpy only; the default fANOVA needs
    scikit-learn, which the project does not pin); None when there is no study or too few
    finished trials to evaluate."""
    import os

    if not os.path.isfile(path):
        return None
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
    try:
        names = optuna.get_all_study_names(storage)
        if not names:
            return None
        study = optuna.load_study(study_name=study_name if study_name in names else names[0],
                                  storage=storage)
        done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if len(done) < 2:
            return None
        return {k: float(v) for k, v in optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.PedAnovaImportanceEvaluator()).items()}
    except Exception:  # noqa: BLE001 - a view, never a failure (the spread is shown instead)
        return None
    finally:
        storage.remove_session()
        storage.engine.dispose()


def history(lines: pd.DataFrame, direction: str | None, keys: Sequence[str] = ()) -> dict:
    """The optimisation history as a search counts its trials: one point per cell (the
    distinct values of `keys`: an Optuna trial is a cell, its value the mean over the cell's
    seeds), in the order the cells were first stored, with the best so far (the running max,
    or min when minimising); `trial_id` names each cell's first trial, `trials` its count.
    Without keys, one point per line."""
    keys = list(keys)
    if keys and len(lines):
        grouped = lines.groupby(keys, dropna=False, sort=False)
        cells = pd.DataFrame({"objective": grouped["objective"].mean(),
                              "trial_id": grouped["trial_id"].first(),
                              "trials": grouped.size()}).reset_index()
    else:
        cells = lines.assign(trials=1)
    values = cells["objective"].astype(float)
    best = values.cummin() if direction == "minimize" else values.cummax()
    return {"trial_id": cells["trial_id"].tolist(), "objective": values.tolist(),
            "best": best.tolist(), "trials": cells["trials"].astype(int).tolist()}


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

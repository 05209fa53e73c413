"""Outcomes of trials, derived from their trajectories: the one derivation (DESIGN 2.3).

The trainer stores outcomes at the default thresholds through `trials_outcomes`; an analysis
recomputes them at its own with `recompute_outcomes` / `with_outcomes`. Both evaluate the same
declared rules (`sweeper.results.rules`: each family passes its own, `CORE_RULES` are every
family's) with the same vectorised code, so the stored values and the recomputed ones cannot
disagree. Thresholds are arguments, never constants inside the trainer; the trajectory keeps
everything needed. A trial without trajectory rows (a failed one) gets NA for every outcome,
not False; an outcome no rule gives is NA.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sweeper.numbers import check_float
from sweeper.results.errors import ResultsInputError
from sweeper.results.rules import (
    CORE_RULES,
    LEARNED,
    SUCCESS_OUTCOMES,
    OutcomeRule,
    merge_rules,
    outcome_columns,
)
from sweeper.results.schema import Metric, scalar


@dataclass(frozen=True)
class Thresholds:
    """accuracy: a trial has learned once `accuracy` >= this. attention_learned: its attention
    has, once `attn_acc` >= this. attention, ktiw: the onsets are the first steps with
    `attn_acc`, `ktiw_acc` >= these. plateau: topic task, the plateau is
    left when the loss falls this fraction of the way from its floor up to ln(C) (the floor is
    0 at co-occurrence 1, so then: below plateau * ln(C)). concentration: copy's regime, a
    head's attention is concentrated once its peak mass is this many times uniform's 1/S
    (`attn_concentration`; the one threshold not in [0, 1]). others: the thresholds a family's
    own rules name (by name; a rule's `default` where absent), in [0, 1]."""

    accuracy: float = 0.95
    attention: float = 0.5
    ktiw: float = 0.5
    plateau: float = 0.5
    attention_learned: float = 0.9
    concentration: float = 2.0
    others: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        named = {n: getattr(self, n) for n in _FRACTIONS}
        for name, value in {**named, **self.others}.items():
            check_float(value, f"{name} threshold", 0, 1, allowed="a number in [0, 1]",
                        error=ResultsInputError)
        check_float(self.concentration, "concentration threshold", 1, None,
                    allowed="a number >= 1 (multiples of uniform attention)",
                    error=ResultsInputError)

    def of(self, rule: OutcomeRule) -> float:
        """The threshold `rule` is judged at."""
        return self.named(rule.threshold, rule.default, f"outcome {rule.column}")

    def named(self, name: str, default: float | None = None, where: str = "") -> float:
        """The threshold called `name`: a field, else one of `others`, else `default`."""
        if name in _NAMED:
            return getattr(self, name)
        value = self.others.get(name, default)
        if value is None:
            raise ResultsInputError(f"{where or 'threshold'}: threshold {name!r} has no value; "
                                    "give it in Thresholds(others=...)")
        return value


_FRACTIONS = ("accuracy", "attention", "ktiw", "plateau", "attention_learned")
_NAMED = (*_FRACTIONS, "concentration")


DEFAULT_THRESHOLDS = Thresholds()


# ---------------------------------------------------------------- the plateau (below_plateau)

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
                       thresholds: Thresholds = DEFAULT_THRESHOLDS,
                       rules: Iterable[OutcomeRule] = ()) -> pd.DataFrame:
    """One row per trial (of `trials` if given, else of the trajectories), keyed by
    (sweep,) trial_id, with the columns of `outcome_columns(rules)`: `CORE_RULES` and `rules`
    (the trials' families') evaluated, the other contract columns NA.

    `trials` supplies the config columns a rule reads (below_plateau: classes, co-occurrence).
    Outcomes whose metric is not logged (the topic task has no attn_acc) are NA.
    """
    if LEARNED.metric not in trajectories.columns:
        raise ResultsInputError(
            f"trajectories have no {LEARNED.metric!r} column, needed for learned; available "
            "columns: " + ", ".join(map(str, trajectories.columns)))
    rules = merge_rules(CORE_RULES, rules)
    keys = _keys(trajectories) if trials is None else _keys(trials)
    if trials is not None and not set(keys) <= set(trajectories.columns):
        keys = ["trial_id"]
    base = (trials if trials is not None else trajectories)[keys].drop_duplicates()
    out = base.set_index(keys)
    has_rows = out.index.isin(_index(trajectories, keys))
    for rule in sorted(rules, key=lambda r: r.kind == "success"):  # steps before successes
        out[rule.column] = _evaluate(rule, trajectories, trials, keys, thresholds, out, has_rows)
    for column in outcome_columns(rules):
        if column not in out.columns:  # a contract column no family here has a rule for
            out[column] = (pd.array([pd.NA] * len(out), dtype="boolean")
                           if column in SUCCESS_OUTCOMES else
                           pd.Series(pd.NA, index=out.index, dtype="Int64"))
    return out[list(outcome_columns(rules))].reset_index()


def _evaluate(rule: OutcomeRule, trajectories: pd.DataFrame, trials: pd.DataFrame | None,
              keys: list[str], thresholds: Thresholds, out: pd.DataFrame, has_rows: np.ndarray
              ) -> pd.Series | pd.arrays.BooleanArray:
    """One rule's column, per trial of `out`'s index."""
    if rule.kind == "success":
        logged = has_rows & (rule.metric in trajectories.columns)
        reached = out[rule.steps].notna().to_numpy()
        # a trial stopped once decided (at the stored thresholds) that had not reached another
        # threshold by its stop might have later: unknown, not a failure
        unknown = ~reached & _stopped_decided(trials, keys, out.index)
        return pd.array(np.where(logged & ~unknown, reached, None), dtype="boolean")
    if rule.is_category:
        return _category(rule, trajectories, keys, thresholds, out.index)
    level = thresholds.of(rule)
    if rule.kind == "items_reaching":
        return _items_reaching(trajectories, keys, rule.metric, level, out.index, has_rows)
    values = _metric(trajectories, rule.metric)
    if values is None:
        return pd.Series(pd.NA, index=out.index, dtype="Int64")
    if rule.kind == "first_step":
        hit = values >= level
    elif rule.kind == "first_below":
        hit = values < level
    else:
        hit = _below_plateau(values, trajectories, trials, keys, rule.config, level)
        if hit is None:
            return pd.Series(pd.NA, index=out.index, dtype="Int64")
    return first_step(trajectories, keys, hit).reindex(out.index).astype("Int64")


def _stopped_decided(trials: pd.DataFrame | None, keys: list[str], index: pd.Index
                     ) -> np.ndarray:
    """Per trial of `index`, whether its training stopped once decided (`stop_reason`)."""
    if trials is None or "stop_reason" not in trials.columns:
        return np.zeros(len(index), dtype=bool)
    reason = trials.drop_duplicates(keys).set_index(keys)["stop_reason"].reindex(index)
    return (reason == "decided").fillna(False).to_numpy(dtype=bool)


def item_maxima(trajectories: pd.DataFrame, keys: list[str], metric: str) -> pd.Series:
    """Each item's (head's) largest value of a per-item metric over a trial's steps, indexed
    by (keys..., head), heads numbered in the order the metric lists them."""
    rows = trajectories[[*keys, metric]].dropna(subset=[metric])
    lists = rows[metric].to_numpy()
    lengths = np.fromiter((len(v) for v in lists), dtype=np.int64, count=len(lists))
    if len(lists) == 0 or lengths.sum() == 0:
        return pd.Series([], dtype=float, index=pd.MultiIndex.from_arrays(
            [[] for _ in (*keys, "head")], names=[*keys, "head"]))
    try:  # Arrow's lists of numbers (numpy arrays; None in them: NaN)
        values = np.concatenate(list(lists)).astype(float)
    except (TypeError, ValueError):  # anything else, value by value as a number or NaN
        flat = np.concatenate([np.asarray(v, dtype=object) for v in lists if len(v)])
        values = pd.to_numeric(pd.Series(flat), errors="coerce").to_numpy(dtype=float)
    trial = rows.groupby(keys, sort=False).ngroup().to_numpy()  # each row's trial, 0, 1, ...
    row = np.repeat(np.arange(len(lists)), lengths)  # each value's row, then its head number
    head = np.arange(len(values)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    width = int(head.max()) + 1
    best = pd.Series(values).groupby(trial[row] * width + head, sort=False).max()  # int keys
    firsts = rows.drop_duplicates(keys)  # the trials, in the order ngroup numbered them
    index = pd.MultiIndex.from_arrays(
        [*(firsts[k].to_numpy()[best.index // width] for k in keys), best.index % width],
        names=[*keys, "head"])
    return pd.Series(best.to_numpy(), index=index, name="value")


_COMPARE = {">=": np.greater_equal, ">": np.greater, "<": np.less, "<=": np.less_equal,
            "==": np.equal, "!=": np.not_equal}


def _category(rule: OutcomeRule, trajectories: pd.DataFrame, keys: list[str],
              thresholds: Thresholds, index: pd.Index) -> pd.Series:
    """Per trial, the first category of `rule` whose conditions hold at its final evaluation
    (its last logged step); NA where a metric the rule reads is not a number there."""
    missing = pd.Series(pd.NA, index=index, dtype="string")
    if any(m not in trajectories.columns for m in rule.metrics) or trajectories.empty:
        return missing
    final = trajectories.sort_values("step", kind="stable").drop_duplicates(keys, keep="last")
    values = {m: pd.to_numeric(final[m], errors="coerce").astype(float).to_numpy()
              for m in rule.metrics}
    known = np.logical_and.reduce([~np.isnan(v) for v in values.values()]
                                  + [np.ones(len(final), bool)])
    names = np.full(len(final), None, dtype=object)
    for category in reversed(rule.categories):  # the first that holds is written last
        holds = np.ones(len(final), bool)
        for c in category.when:
            bound = (thresholds.named(c.value, where=f"outcome {rule.column}")
                     if isinstance(c.value, str) else c.value)
            holds &= _COMPARE[c.op](values[c.metric], bound)
        names[holds] = category.name
    names[~known] = None
    found = pd.Series(names, index=_index(final, keys), dtype="string")
    return found.reindex(index) if len(found) else missing


def _items_reaching(trajectories: pd.DataFrame, keys: list[str], metric: str, level: float,
                    index: pd.Index, has_rows: np.ndarray) -> pd.Series:
    """Per trial, how many items (heads) of a per-item metric reached `level` at some step."""
    if metric not in trajectories.columns:
        return pd.Series(pd.NA, index=index, dtype="Int64")
    best = item_maxima(trajectories, keys, metric)
    count = (best >= level).groupby(level=list(range(len(keys))), sort=False).sum()
    if len(keys) == 1:
        count.index = count.index.get_level_values(0)
    counts = count.reindex(index).fillna(0).astype("Int64")
    counts[~np.asarray(has_rows)] = pd.NA  # no trajectory: unknown, not zero
    return counts


def _below_plateau(values: pd.Series, trajectories: pd.DataFrame, trials: pd.DataFrame | None,
                   keys: list[str], config: tuple[str, ...], fraction: float
                   ) -> pd.Series | None:
    """Per trajectory row, whether `values` is below its trial's plateau level (None: the
    trials do not say their classes)."""
    classes_column, *rho_column = config
    if trials is None or classes_column not in trials.columns:
        return None
    table = trials.drop_duplicates(keys).set_index(keys)
    rows = _index(trajectories, keys)
    classes = table[classes_column].astype(float).reindex(rows).to_numpy()
    rho = (table[rho_column[0]].astype(float).reindex(rows).to_numpy()
           if rho_column and rho_column[0] in table.columns else np.ones_like(classes))
    rho = np.where(np.isnan(rho), 1.0, rho)
    level = plateau_level(classes, rho, fraction)
    return pd.Series(values.to_numpy() < level, index=trajectories.index)  # NaN level: False


def with_outcomes(trials: pd.DataFrame, trajectories: pd.DataFrame,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS,
                  rules: Iterable[OutcomeRule] = ()) -> pd.DataFrame:
    """The trials with their outcome columns replaced by ones recomputed at `thresholds`."""
    recomputed = recompute_outcomes(trajectories, trials, thresholds, rules)
    keys = [k for k in ("sweep", "trial_id") if k in recomputed.columns]
    kept = trials.drop(columns=[c for c in recomputed.columns
                                if c in trials.columns and c not in keys])
    return kept.merge(recomputed, on=keys, how="left", validate="one_to_one")


# ---------------------------------------------------------------- decided while training

class DecisionWatch:
    """Which of K trials in training have every first-passage outcome decided, evaluation by
    evaluation, by the same rules and default thresholds as the outcomes stored
    (`trials_outcomes`).

    A first-passage outcome (`OutcomeRule.first_passage`) is decided at the first evaluation
    that meets its threshold: what the trial stores for it cannot change after that step, so
    a trial whose every one is decided may stop (`train.stop: decided`) and store the same
    first-passage outcomes as a full budget would. A success follows from its step outcome;
    a rule whose metric the family does not log (or, below_plateau, whose trial does not say
    its classes) is NA whatever the trajectory, so it is left out; a family with no rule
    left is never decided. `observe` takes one evaluation's rows (metric -> value, one per
    model; None or NaN never meets a threshold); `keep` follows a pack that shrank.
    """

    def __init__(self, rules: Iterable[OutcomeRule], metrics: Iterable[str],
                 configs: Sequence[Mapping[str, object]],
                 thresholds: Thresholds = DEFAULT_THRESHOLDS):
        logged, K = set(metrics), len(configs)
        self.checks: list[tuple[OutcomeRule, np.ndarray]] = []
        for rule in merge_rules(CORE_RULES, rules):
            if not rule.first_passage or rule.kind == "success" or rule.metric not in logged:
                continue
            level = np.full(K, thresholds.of(rule), dtype=float)
            if rule.kind == "below_plateau":
                level = self._plateau(rule, configs, thresholds.of(rule))
                if np.isnan(level).all():
                    continue
            self.checks.append((rule, level))
        self.reached = np.zeros((len(self.checks), K), dtype=bool)
        self.decided_at: list[int | None] = [None] * K

    @staticmethod
    def _plateau(rule: OutcomeRule, configs: Sequence[Mapping[str, object]],
                 fraction: float) -> np.ndarray:
        classes_column, *rho_column = rule.config
        classes = np.array([_number(c.get(classes_column)) for c in configs])
        rho = np.array([_number(c.get(rho_column[0])) if rho_column else 1.0 for c in configs])
        return np.asarray(plateau_level(classes, np.where(np.isnan(rho), 1.0, rho), fraction),
                          dtype=float)

    def observe(self, step: int, rows: Sequence[Mapping[str, object]]) -> list[int | None]:
        """Take one evaluation (at `step`); each model's decision step so far (None: not)."""
        if not self.checks:
            return self.decided_at
        for i, (rule, level) in enumerate(self.checks):
            values = np.array([_number(row.get(rule.metric)) for row in rows])
            with np.errstate(invalid="ignore"):
                hit = values >= level if rule.kind == "first_step" else values < level
            self.reached[i] |= hit
        for k in np.flatnonzero(self.reached.all(axis=0)):
            if self.decided_at[k] is None:
                self.decided_at[k] = step
        return self.decided_at

    def keep(self, index: Sequence[int]) -> None:
        """Follow the pack's models `index` (positions now), the others gone."""
        self.checks = [(rule, level[list(index)]) for rule, level in self.checks]
        self.reached = self.reached[:, list(index)]
        self.decided_at = [self.decided_at[k] for k in index]


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


# ---------------------------------------------------------------- outcomes as stored

def derive_outcomes(trajectories: pd.DataFrame, trials: pd.DataFrame,
                    metrics: Iterable[Metric], thresholds: Thresholds = DEFAULT_THRESHOLDS,
                    rules: Iterable[OutcomeRule] = ()) -> pd.DataFrame:
    """What the trials table stores per trial: `recompute_outcomes`, plus final_<m> (the last
    logged value that is a number) and best_<m> (max, or min where lower is better) of each
    scalar metric. One row per trial of `trials`, keyed by trial_id."""
    out = recompute_outcomes(trajectories, trials, thresholds, rules).set_index("trial_id")
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
                    rules: Iterable[OutcomeRule] = (),
                    configs: Sequence[Mapping[str, object]] | None = None,
                    thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[dict[str, object]]:
    """`derive_outcomes` of trials whose trajectories are lists ("step" and one list per
    metric), in one vectorised pass; rules: the trials' family's; configs: per trial, the
    config columns its rules read (below_plateau: task.classes, task.cooccurrence)."""
    metrics, rules = tuple(metrics), tuple(rules)
    ids = [str(i) for i in range(len(trajectories))]

    def column(name: str) -> list:
        return [v for t in trajectories for v in t.get(name, [None] * len(t["step"]))]

    frame = pd.DataFrame({
        "trial_id": [i for i, t in zip(ids, trajectories) for _ in t["step"]],
        "step": [s for t in trajectories for s in t["step"]],
        **{m.name: pd.Series(column(m.name), dtype=object) if m.per_item
           else pd.array(column(m.name), dtype="Float64") for m in metrics}})
    trials = pd.DataFrame({"trial_id": ids})
    for key in dict.fromkeys(c for r in rules for c in r.config):
        values = [(c or {}).get(key) for c in (configs or [{}] * len(ids))]
        if any(v is not None for v in values):
            trials[key] = pd.array(values, dtype="Float64")
    rows = derive_outcomes(frame, trials, metrics, thresholds, rules).set_index("trial_id")
    return [{c: _plain(v) for c, v in row.items()} for _, row in rows.loc[ids].iterrows()]


def trial_outcomes(trajectory: Mapping[str, Sequence], metrics: Iterable[Metric],
                   rules: Iterable[OutcomeRule] = (), config: Mapping[str, object] | None = None,
                   thresholds: Thresholds = DEFAULT_THRESHOLDS) -> dict[str, object]:
    """`trials_outcomes` of one trial."""
    return trials_outcomes([trajectory], metrics, rules, [config or {}], thresholds)[0]


def _plain(value: object) -> object:
    """pandas' NA and NaN as None, numpy scalars as Python's."""
    if value is pd.NA or value is None:
        return None
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value


def rules_stamp(rules: Iterable[OutcomeRule]) -> str:
    """What a trials file's stored outcomes were derived by: the rules and the default
    thresholds, hashed. A reader that would recompute them at the default thresholds by the
    same rules (`analysis.phase.phase_from_results`) reads them as stored instead."""
    import hashlib

    text = repr((tuple(rules), DEFAULT_THRESHOLDS))
    return hashlib.sha256(text.encode()).hexdigest()[:16]

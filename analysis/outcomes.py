"""Outcomes recomputed at an analysis's thresholds, by the rules the trials' families declare.

`sweeper.results` evaluates outcome rules it is given (`OutcomeRule`); the families declare them
(`Family.outcomes`, read through `sweeper.families.outcome_rules`). These wrappers pass the rules
of the families of the trials at hand (of every registered family when the trials do not say),
so that a family's new outcome is recomputed here without an edit to `analysis`.
"""

from __future__ import annotations

import pandas as pd

from sweeper import results
from sweeper.results import DEFAULT_THRESHOLDS, OutcomeRule, Thresholds


def outcome_rules(trials: pd.DataFrame | None = None) -> tuple[OutcomeRule, ...]:
    """The outcome rules of the families of `trials` (by task.id; all families without it)."""
    from sweeper.families import outcome_rules as family_rules

    if trials is None or "task.id" not in trials.columns:
        return family_rules()
    return family_rules(str(t) for t in trials["task.id"].dropna().unique())


def outcome_threshold(trials: pd.DataFrame | None, outcome: str,
                      thresholds: Thresholds = DEFAULT_THRESHOLDS) -> float:
    """The threshold `outcome` is judged at (attention_learned: the attention_learned
    threshold; an outcome no family declares: the accuracy threshold). A success is judged
    at its step outcome's threshold (whose rule gives its default)."""
    rules = {r.column: r for r in outcome_rules(trials)}
    rule = rules.get(outcome)
    if rule is None:
        return thresholds.accuracy
    return thresholds.of(rules.get(rule.steps, rule))


def success_choices() -> tuple[str, ...]:
    """The success outcomes of the registered families, sorted: what `--outcome` accepts."""
    return tuple(sorted(results.success_outcomes(outcome_rules())))


def outcome_metrics(trials: pd.DataFrame | None = None) -> tuple[str, ...]:
    """The trajectory columns the outcomes of `trials` are computed from."""
    return tuple(dict.fromkeys(m for r in outcome_rules(trials) for m in r.metrics))


def derived_columns() -> tuple[str, ...]:
    """The config columns the families derive from their parameters (task.lift): never a
    sweep's axis or a cell key."""
    from sweeper.families import derived_columns as declared

    return declared()


def recompute_outcomes(trajectories: pd.DataFrame, trials: pd.DataFrame | None = None,
                       thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """`sweeper.results.recompute_outcomes` by the rules of the trials' families."""
    return results.recompute_outcomes(trajectories, trials, thresholds, outcome_rules(trials))


def with_outcomes(trials: pd.DataFrame, trajectories: pd.DataFrame,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """`sweeper.results.with_outcomes` by the rules of the trials' families."""
    return results.with_outcomes(trials, trajectories, thresholds, outcome_rules(trials))

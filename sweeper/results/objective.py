"""The objective a search optimises, from stored outcomes: the one rule that the Optuna strategy
(`sweeper.strategies.optuna`) tells its study and that analysis shows (`analysis.search`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from sweeper.results.rules import OutcomeRule, step_outcomes


def objective_value(outcomes: list[Mapping[str, Any]], objective: str, steps: int,
                    rules: Iterable[OutcomeRule] = ()) -> float:
    """A cell's objective for the searcher: the mean over its seeds (`outcomes`: one mapping
    per counted seed; `rules`: the family's outcome rules, which say which outcomes are steps).

    A step-valued outcome that never happened counts as the full budget, so that "never learned"
    ranks below "learned late"; `learned` becomes the success fraction.
    """
    steps_valued = step_outcomes(rules)
    values = []
    for o in outcomes:
        value = o.get(objective)
        if value is None and objective in steps_valued:
            value = steps
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            values.append(float(value))
    return sum(values) / len(values) if values else math.nan

"""Outcomes of one trial derived from its trajectory (DESIGN 2.3).

Thresholds are arguments, never constants inside the trainer; the trajectory keeps everything
needed to recompute them with other thresholds (see `analysis.outcomes`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sweeper.trajectory import scalar_metrics

if TYPE_CHECKING:
    from sweeper.spec import TrialSpec

ACCURACY_THRESHOLD = 0.95
ATTENTION_THRESHOLD = 0.5
KTIW_THRESHOLD = 0.5
PLATEAU_FRACTION = 0.5


def first_step_at_or_above(steps: Sequence[int], values: Sequence[float],
                           threshold: float) -> int | None:
    for step, value in zip(steps, values):
        if value is not None and not math.isnan(value) and value >= threshold:
            return int(step)
    return None


def label_entropy(classes: int, rho: float) -> float:
    """H(y | topic word) of the topic task: the loss floor when the topic word is of the
    sentence's class with probability rho, else of one of the C - 1 others uniformly."""
    terms = [(rho, rho), (1 - rho, (1 - rho) / max(classes - 1, 1))]
    return -sum(mass * math.log(p) for mass, p in terms if mass > 0)


def plateau_level(classes: int, rho: float = 1.0, fraction: float = PLATEAU_FRACTION) -> float:
    """The loss below which the topic task has left its ln C plateau: `fraction` of the way
    from the floor H(y | topic word) up to ln C (fraction * ln C when rho = 1), so that weak
    co-occurrence, whose loss cannot fall far, is judged against what it can reach."""
    return fraction * math.log(classes) + (1 - fraction) * label_entropy(classes, rho)


def trial_outcomes(spec: TrialSpec, columns: Mapping[str, Sequence]) -> dict[str, object]:
    """`derive_outcomes` with what the spec's task says (topic: classes and rho)."""
    params = spec.task_params
    return derive_outcomes(spec.family, columns, classes=params.get("classes"),
                           cooccurrence=params.get("cooccurrence", 1.0))


def derive_outcomes(family: str, columns: Mapping[str, Sequence], *, classes: int | None = None,
                    cooccurrence: float = 1.0,
                    accuracy_threshold: float = ACCURACY_THRESHOLD,
                    attention_threshold: float = ATTENTION_THRESHOLD,
                    ktiw_threshold: float = KTIW_THRESHOLD) -> dict[str, object]:
    """`columns` holds the trajectory as lists: "step" and one list per metric."""
    steps = columns["step"]
    out: dict[str, object] = {}
    learn = first_step_at_or_above(steps, columns["accuracy"], accuracy_threshold)
    out["learned"] = learn is not None
    out["steps_to_learn"] = learn
    out["attention_onset"] = (first_step_at_or_above(steps, columns["attn_acc"],
                                                     attention_threshold)
                              if "attn_acc" in columns else None)
    out["ktiw_onset"] = (first_step_at_or_above(steps, columns["ktiw_acc"], ktiw_threshold)
                         if "ktiw_acc" in columns else None)
    plateau = None
    if family == "topic" and classes:
        below = [-v for v in columns["loss"]]  # first step with loss < the plateau level
        plateau = first_step_at_or_above(steps, below, -plateau_level(classes, cooccurrence))
    out["plateau_exit"] = plateau
    for metric in scalar_metrics(family):
        values = [v for v in columns[metric.name] if v is not None and not math.isnan(v)]
        out[f"final_{metric.name}"] = values[-1] if values else None
        pick = min if metric.lower_is_better else max
        out[f"best_{metric.name}"] = pick(values) if values else None
    return out

"""Outcomes of one trial derived from its trajectory (DESIGN 2.3).

Thresholds are arguments, never constants inside the trainer; the trajectory keeps everything
needed to recompute them with other thresholds (see `analysis.outcomes`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from sweeper.trajectory import scalar_metrics

ACCURACY_THRESHOLD = 0.95
ATTENTION_THRESHOLD = 0.5
KTIW_THRESHOLD = 0.5


def first_step_at_or_above(steps: Sequence[int], values: Sequence[float],
                           threshold: float) -> int | None:
    for step, value in zip(steps, values):
        if value is not None and not math.isnan(value) and value >= threshold:
            return int(step)
    return None


def derive_outcomes(family: str, columns: Mapping[str, Sequence], *, classes: int | None = None,
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
        below = [-v for v in columns["loss"]]  # first step with loss < ln(C) / 2
        plateau = first_step_at_or_above(steps, below, -math.log(classes) / 2)
    out["plateau_exit"] = plateau
    for metric in scalar_metrics(family):
        values = [v for v in columns[metric.name] if v is not None and not math.isnan(v)]
        out[f"final_{metric.name}"] = values[-1] if values else None
        pick = min if metric.lower_is_better else max
        out[f"best_{metric.name}"] = pick(values) if values else None
    return out

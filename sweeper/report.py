"""Plain-text summaries for the terminal: one trial, one evaluation step, a sweep's table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sweeper.results.rules import OUTCOME_COLUMNS
from sweeper.spec import TrialResult, TrialSpec


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


SHOWN_OUTCOMES = ("steps_to_learn", "attention_onset", "ktiw_onset", "plateau_exit")


def _shown_outcomes(spec: TrialSpec) -> list[str]:
    """The contract's outcomes a trial's summary shows after `learned`, then its family's own."""
    own = [r.column for r in spec.family.outcome_rules if r.column not in OUTCOME_COLUMNS]
    return [*SHOWN_OUTCOMES, *own]


def trial_summary(result: TrialResult, out: str, max_rows: int = 12) -> str:
    spec, traj = result.spec, result.trajectory
    cols = spec.family.summary_columns
    n = len(traj["step"])
    every = max(1, -(-n // max_rows))
    picks = sorted(set(range(0, n, every)) | ({n - 1} if n else set()))
    rows = [[traj["step"][i]] + [traj[c][i] for c in cols] for i in picks]
    config = ", ".join(f"{k}={v}" for k, v in spec.flat().items()
                       if k not in ("task.id", "model.id"))
    o = result.outcomes
    lines = [f"trial {result.trial_id}  {spec.task} x {spec.model}  status {result.status}"
             + (f" ({result.error})" if result.error else ""),
             f"config: {config}", "",
             table(rows, ["step", *cols]), "",
             f"learned {o['learned']}  "
             + "  ".join(f"{c} {_fmt(o.get(c))}" for c in _shown_outcomes(spec)),
             f"wall time {result.wall_time_s:.1f} s; written to {out}"]
    return "\n".join(lines)


def step_printer(spec: TrialSpec) -> Callable[[int, list[dict[str, Any]]], None]:
    cols = spec.family.summary_columns

    def report(step: int, rows: list[dict[str, Any]]) -> None:
        print(f"step {step:>6}  " + "  ".join(f"{c} {_fmt(rows[0][c])}" for c in cols),
              flush=True)

    return report

"""What a writer hands the store for each trial (`Record`), and the two tables made of them.

A `Record` is anything with these attributes: the trainer's `TrialResult` is one, a synthetic
trial for tests and benchmarks is another; both go through the same table builders here, so
synthetic stores cannot drift from real ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa

from sweeper.results.rules import OutcomeRule, outcome_columns
from sweeper.results.schema import Metric, summary_fields, trajectory_schema, trials_schema


class Record(Protocol):
    trial_id: str
    status: str  # ok, diverged, failed, stopped
    error: str | None
    wall_time_s: float
    host: str
    diverged_step: int | None
    shared_with: str | None  # the trial whose training this is (its trajectory); None: its own
    stopped_at: int | None  # the last step it trained to (None: nothing trained)
    stop_reason: str | None  # why it stopped there (`schema.STOP_REASONS`)
    # optional: the values asked for that trained as others, JSON text (`schema.RUN_FIELDS`)
    # requested: str | None
    outcomes: Mapping[str, Any]  # outcome_columns(rules) and final_/best_ of each scalar metric
    # optional: the family's outcome rules (`Family.outcome_rules`), for the columns they add
    # after OUTCOME_COLUMNS (a record without them stores the contract's only)
    # outcome_rules: tuple[OutcomeRule, ...]
    trajectory: Mapping[str, Sequence]  # "step" and one list per metric

    @property
    def metrics(self) -> tuple[Metric, ...]: ...

    def columns(self) -> dict[str, Any]:
        """The trial's config as flat columns: task.length, model.heads, train.lr, seed..."""

    def column_types(self) -> dict[str, pa.DataType]:
        """The Arrow type of each of `columns()`, from the parameters' declarations."""


def failed_outcomes(metrics: Sequence[Metric], rules: Sequence[OutcomeRule] = ()
                    ) -> dict[str, None]:
    """The outcomes of a trial that has no trajectory: all unknown."""
    return {**{c: None for c in outcome_columns(rules)},
            **{f.name: None for f in summary_fields(metrics)}}


def trials_table(records: Sequence[Record], sweep: str, pack: str, attempts: int = 1,
                 node_id: str | None = None) -> pa.Table:
    rows = []
    for r in records:
        rows.append({"trial_id": r.trial_id, "sweep": sweep, "pack_id": pack,
                     "status": r.status, "error": r.error, "wall_time_s": r.wall_time_s,
                     "host": r.host, "node_id": node_id, "attempts": attempts,
                     "shared_with": getattr(r, "shared_with", None),
                     "stopped_at": getattr(r, "stopped_at", None),
                     "stop_reason": getattr(r, "stop_reason", None),
                     "requested": getattr(r, "requested", None),
                     **r.columns(), **r.outcomes, "diverged_step": r.diverged_step})
    schema = trials_schema(records[0].column_types(), records[0].metrics,
                           getattr(records[0], "outcome_rules", ()))
    return pa.Table.from_pylist(rows, schema=schema)


def trajectories_table(records: Sequence[Record]) -> pa.Table:
    schema = trajectory_schema(records[0].metrics)
    columns: dict[str, list] = {name: [] for name in schema.names}
    for r in sorted(records, key=lambda r: r.trial_id):
        n = len(r.trajectory["step"])
        columns["trial_id"] += [r.trial_id] * n
        for name in schema.names[1:]:
            columns[name] += list(r.trajectory[name])
    return pa.Table.from_pydict(columns, schema=schema)

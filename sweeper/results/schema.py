"""The Arrow schemas of the two tables, built from declarations, never from code that trains.

- A family declares its metrics as `Metric`s (scalar, or a list per row: per head, per topic
  word); the trajectories table has one column per metric.
- The trials table: run facts (`RUN_FIELDS`), one typed column per config value (the caller
  gives their names and types, from the task's and model's parameter declarations), the
  outcomes (`sweeper.results.rules`) and, per scalar metric, `final_<m>` and `best_<m>`.

`TABLE_SCHEMA_VERSION` is written into every file's metadata; readers accept older versions
(`LEGACY_COLUMNS` renames what an older version called otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from sweeper.results.rules import OutcomeRule, outcome_types

TABLE_SCHEMA_VERSION = 2  # 2: train.optimizer / train.lr (1 called them optim.name / optim.lr)

# Columns older stores call otherwise: read under today's names.
LEGACY_COLUMNS = {"optim.name": "train.optimizer", "optim.lr": "train.lr"}

# a list parameter (seq2seq's head_seeds) is stored as its JSON text, "[3,7,11]", so that cells
# group by it and queries compare it (`sweeper.spec.TrialSpec.flat`)
ARROW_TYPES = {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string(),
               list: pa.string()}

RUN_FIELDS = (
    pa.field("trial_id", pa.string()), pa.field("sweep", pa.string()),
    pa.field("pack_id", pa.string()), pa.field("status", pa.string()),
    pa.field("error", pa.string()), pa.field("wall_time_s", pa.float64()),
    pa.field("host", pa.string()), pa.field("node_id", pa.string()),
    pa.field("attempts", pa.int32()),
    # the trial whose training (and trajectory) this row shares: an equivalent config, trained
    # once (`TrialSpec.training_id`); null for a trial trained as itself, and in older stores
    pa.field("shared_with", pa.string()),
    # where and why its training ended (`STOP_REASONS`): the last step it trained to, so that
    # a trial stopped once decided is not read as a shorter budget or a failure; null in
    # older stores
    pa.field("stopped_at", pa.int64()), pa.field("stop_reason", pa.string()),
    # the values the sweep asked for that trained as others, as JSON text
    # ({"task.cooccurrence": 0.25} where the trained c is 0.333333: `sweeper.cells.realised`);
    # the config columns hold what was trained. null: every value trained as asked (and in
    # older stores)
    pa.field("requested", pa.string()),
)
# decided: every first-passage outcome reached (`train.stop: decided`); budget: train.steps
# trained; early-stopper: a scheduler (ASHA) stopped its pack; diverged: its loss was not
# finite; error: its training raised on every attempt (nothing trained)
STOP_REASONS = ("decided", "budget", "early-stopper", "diverged", "error")


@dataclass(frozen=True)
class Metric:
    """One logged metric of a family: a trajectories column (and final_/best_ when scalar)."""

    name: str
    per_item: bool = False  # a list per row (per head, per topic word)
    lower_is_better: bool = False
    doc: str = ""


def scalar(metrics: Iterable[Metric]) -> tuple[Metric, ...]:
    return tuple(m for m in metrics if not m.per_item)


def trajectory_schema(metrics: Iterable[Metric]) -> pa.Schema:
    fields = [pa.field("trial_id", pa.string()), pa.field("step", pa.int32())]
    for m in metrics:
        fields.append(pa.field(m.name, pa.list_(pa.float64()) if m.per_item else pa.float64()))
    return pa.schema(fields)


def summary_fields(metrics: Iterable[Metric]) -> list[pa.Field]:
    """final_<m> and best_<m> of each scalar metric."""
    return [pa.field(f"{kind}_{m.name}", pa.float64())
            for m in scalar(metrics) for kind in ("final", "best")]


def trials_schema(config_types: Mapping[str, pa.DataType], metrics: Iterable[Metric],
                  rules: Iterable[OutcomeRule] = ()) -> pa.Schema:
    """Run facts, config columns (in the order given), outcomes (the contract's, diverged_step,
    then the other columns of the family's `rules`), final/best per metric."""
    fields = list(RUN_FIELDS)
    fields += [pa.field(name, t) for name, t in config_types.items()]
    fields += [pa.field(name, t) for name, t in outcome_types(rules).items()]
    fields += summary_fields(metrics)
    return pa.schema(fields)



def resolve_column(name: str, available: Iterable[str], field: str, hint: str = "",
                   error: type[Exception] | None = None) -> str:
    """A column (or parameter) as people write it: `heads` for `model.heads`, `accuracy` for
    `final_accuracy`. The one lookup of every flag that names a column (query's --columns and
    --where, phase's --x/--y/--facet, best's --metric, run's --set): the name itself when it
    is one; else the one name whose last dotted part it is, or its `final_`/`best_` column (a
    metric's bare name is its final value where it has both, as a Ray Tune metric is its last
    reported value); several are refused in one line naming `field` and them (`hint` added;
    raised as `error`, default `ResultsInputError`); none: the name as given, for the caller to
    name unknown with what it has."""
    available = list(available)
    if name in available:
        return name
    matches = [c for c in available if c.split(".")[-1] == name
               or c in (f"final_{name}", f"best_{name}")]
    if set(matches) == {f"final_{name}", f"best_{name}"}:
        return f"final_{name}"
    if len(matches) == 1:
        return matches[0]
    if matches:
        from sweeper.results.errors import ResultsInputError

        raise (error or ResultsInputError)(f"{field} {name}: ambiguous; allowed: one of "
                                f"{', '.join(matches)}{hint}")
    return name

"""Outcome rules: what an outcome column means, declared as data (no numpy, no torch).

A family declares the outcomes its trials store as `OutcomeRule`s (`Family.outcomes`); the
results package evaluates every rule with the same vectorised code (`sweeper.results.outcomes`),
for the trainer (stored at the default thresholds) and for an analysis (recomputed at its own),
so that the two cannot disagree. A rule names a metric of the family's trajectories, a threshold
by name (a `Thresholds` field, or one of the family's own with its `default`) and a kind:

- first_step: the first logged step with metric >= threshold (NA: never, or not logged).
- first_below: the first logged step with metric < threshold.
- success: whether the step outcome `steps` happened (NA: no trajectory, or metric not logged).
- items_reaching: how many items of a per-item metric reached the threshold at some step.
- below_plateau: the first step with metric below the level `threshold` of the way from the
  floor H(y | x) up to ln C, C and the co-occurrence rho read from the trial's `config` columns.
- category: a name (a string column) from the trial's final evaluation, the last logged step:
  the first of its `categories` whose conditions all hold (a `Category` without conditions
  catches the rest); NA when a metric a condition reads is not a number there, or not logged
  at all (a store from before the metric existed). No `metric` or `threshold` of its own: each
  `Condition` names a metric and a threshold (or a number).

First-passage and end-state: a step kind (first_step, first_below, below_plateau) and a success
are *first-passage* outcomes, decided at the evaluation where the threshold is first met and
never changed by training on; items_reaching and category are *end-state* outcomes, read over
the whole trajectory or at its last evaluation, as are the final_/best_ metrics. A sweep whose
budget stops each trial once it is decided (`train.stop: decided`) relies on this split
(`sweeper.results.outcomes.DecisionWatch`).

Every trials table stores the columns of `OUTCOME_COLUMNS` (schema version 2, a contract: NA
where a trial's family has no rule for one); a family's other rules add their columns after them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

KINDS = ("first_step", "first_below", "success", "items_reaching", "below_plateau", "category")
OPERATORS = (">=", ">", "<", "<=", "==", "!=")


@dataclass(frozen=True)
class Condition:
    """`metric op value` at a trial's final evaluation; value: a threshold's name (a
    `Thresholds` field, or one of `Thresholds.others`) or a number."""

    metric: str
    op: str  # one of OPERATORS
    value: str | float

    def __post_init__(self) -> None:
        if self.op not in OPERATORS:
            raise ValueError(f"condition on {self.metric!r}: operator {self.op!r}; allowed: "
                             + ", ".join(OPERATORS))

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value}"


@dataclass(frozen=True)
class Category:
    """One value of a category outcome: its name, and the conditions that all hold for it
    (none: every trial no earlier category took)."""

    name: str
    when: tuple[Condition, ...] = ()
    doc: str = ""


@dataclass(frozen=True)
class OutcomeRule:
    """One outcome column, declared: how it follows from a trial's trajectory."""

    column: str
    kind: str  # one of KINDS
    metric: str = ""  # every kind but category
    threshold: str = ""  # a `Thresholds` field, or a name of the family's own (then `default`)
    default: float | None = None  # the threshold's value when `Thresholds` has no such field
    steps: str = ""  # success: the step outcome whose presence it is
    config: tuple[str, ...] = ()  # below_plateau: the classes and co-occurrence columns
    doc: str = ""
    label: str = ""  # a success's words in figures: itself, then what it judges (`words`)
    categories: tuple[Category, ...] = ()  # category: its values, the first that holds wins

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"outcome {self.column!r}: kind {self.kind!r}; allowed: "
                             + ", ".join(KINDS))
        if (self.kind == "success") != bool(self.steps):
            raise ValueError(f"outcome {self.column!r}: a success rule, and only one, names "
                             "its step outcome (steps)")
        if self.kind == "below_plateau" and not self.config:
            raise ValueError(f"outcome {self.column!r}: below_plateau names its classes "
                             "(and co-occurrence) config columns")
        if self.is_category != bool(self.categories):
            raise ValueError(f"outcome {self.column!r}: a category rule, and only one, names "
                             "its categories")
        if self.is_category == bool(self.metric and self.threshold) or (
                self.is_category and (self.metric or self.threshold)):
            raise ValueError(f"outcome {self.column!r}: a rule names its metric and threshold, "
                             "except a category rule, whose conditions name theirs")

    @property
    def is_category(self) -> bool:
        """A name per trial (a string column), not a step, a count or a yes/no."""
        return self.kind == "category"

    @property
    def metrics(self) -> tuple[str, ...]:
        """The trajectory columns this outcome is computed from."""
        if not self.is_category:
            return (self.metric,)
        return tuple(dict.fromkeys(c.metric for k in self.categories for c in k.when))

    @property
    def values(self) -> tuple[str, ...]:
        """A category outcome's names, in the order its rule tries them."""
        return tuple(k.name for k in self.categories)

    @property
    def arrow_type(self) -> pa.DataType:
        if self.is_category:
            return pa.string()
        return pa.bool_() if self.kind == "success" else pa.int64()

    @property
    def words(self) -> str:
        """'learned: token accuracy': the label, else the column and its metric (a threshold
        follows it in figures)."""
        return self.label or f"{self.column}: {self.metric}"

    @property
    def first_passage(self) -> bool:
        """Decided at the first evaluation that meets its threshold (a step or a success);
        False for the end-state kinds, which training on can still change."""
        return self.kind in ("first_step", "first_below", "below_plateau", "success")

    @property
    def is_step(self) -> bool:
        """A step, or never (NA)."""
        return self.kind in ("first_step", "first_below", "below_plateau")


# The outcomes every family has: token accuracy, which every family logs.
STEPS_TO_LEARN = OutcomeRule("steps_to_learn", "first_step", "accuracy", "accuracy",
                             doc="first step with accuracy >= the accuracy threshold")
LEARNED = OutcomeRule("learned", "success", "accuracy", "accuracy", steps="steps_to_learn",
                      doc="whether accuracy reached the accuracy threshold",
                      label="learned: token accuracy")
CORE_RULES = (LEARNED, STEPS_TO_LEARN)

# The outcome columns every trials table stores (schema version 2), in this order, and their
# types: names of the contract, filled by the rules of a trial's family (NA where it has none).
OUTCOME_COLUMNS = ("learned", "steps_to_learn", "attention_learned", "attention_steps",
                   "attention_heads", "attention_onset", "ktiw_onset", "plateau_exit")
SUCCESS_OUTCOMES = {"learned": "steps_to_learn", "attention_learned": "attention_steps"}
STEP_OUTCOMES = ("steps_to_learn", "attention_steps", "attention_onset", "ktiw_onset",
                 "plateau_exit")  # a step, or never: NA
OUTCOME_TYPES = {c: pa.bool_() if c in SUCCESS_OUTCOMES else pa.int64()
                 for c in OUTCOME_COLUMNS} | {"diverged_step": pa.int64()}


def outcome_types(rules: Iterable[OutcomeRule] = ()) -> dict[str, pa.DataType]:
    """The stored outcome columns and their types: the contract's, then the rules' others."""
    return OUTCOME_TYPES | {r.column: r.arrow_type for r in rules if r.column not in OUTCOME_TYPES}


def outcome_columns(rules: Iterable[OutcomeRule] = ()) -> tuple[str, ...]:
    """OUTCOME_COLUMNS, then the columns of `rules` that are not among them."""
    rules = tuple(rules)
    return OUTCOME_COLUMNS + tuple(dict.fromkeys(r.column for r in rules
                                                 if r.column not in OUTCOME_COLUMNS))


def success_outcomes(rules: Iterable[OutcomeRule] = ()) -> dict[str, str]:
    """Each success outcome and its step outcome: the contract's, then the rules'."""
    return SUCCESS_OUTCOMES | {r.column: r.steps for r in rules if r.kind == "success"}


def step_outcomes(rules: Iterable[OutcomeRule] = ()) -> tuple[str, ...]:
    """The outcomes that are a step (or NA: never): the contract's, then the rules'."""
    return STEP_OUTCOMES + tuple(r.column for r in rules
                                 if r.is_step and r.column not in STEP_OUTCOMES)


def merge_rules(*groups: Iterable[OutcomeRule]) -> tuple[OutcomeRule, ...]:
    """The rules of several families as one set, each column once (equal rules only)."""
    out: dict[str, OutcomeRule] = {}
    for rule in (r for g in groups for r in g):
        if out.setdefault(rule.column, rule) != rule:
            raise ValueError(f"outcome {rule.column!r} is declared twice, differently")
    return tuple(out.values())

"""What a task family is: the `Family` declaration and the `Experiment` it trains.

Torch-free and import-light: the built-in families (`sweeper.families.copy`, `.topic`) and
plugins import these definitions, and `sweeper.families` (the registries) imports them to
register, so that no family module needs the package that loads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sweeper.registry import Entry
from sweeper.results.rules import CORE_RULES, OutcomeRule, merge_rules
from sweeper.results.schema import Metric, scalar


class Experiment(Protocol):
    """What a family trains and measures, for a pack of K trials of one shape.

    Built as `Experiment(specs, dtype, device)`; `model` holds the K models (a leading model dim
    K on every parameter); `train_loss()` returns one mean loss per model [K]; `evaluate()`
    returns each of the family's metrics as a [K] tensor ([K, n] for a per-item metric).
    `evaluate(probes=False)` may leave out (as NaN) the metrics that are costly to measure
    (copy: the probes); it is called so only between `train.probe_every` steps.

    Optional, `keep(index)`: go on with models `index` (positions in the pack as it is) only,
    each exactly as it was (parameters, buffers, data streams), so that a pack whose trials
    stop once decided (`train.stop: decided`) costs what its live models cost. An experiment
    without it (or whose `keep` is None) keeps a stopped model in the computation, masked, as
    a diverged one is.
    """

    model: Any  # torch.nn.Module

    def train_loss(self) -> Any: ...

    def evaluate(self, probes: bool = True) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Calibration:
    """A scale at which a family's measurements mean what its claims need, and the step
    budgets for which they do (e.g. copy's small scale: token accuracy needs attention there
    only up to some number of steps, after which the recurrent state learns to copy too).

    A trial is *at* this scale when its resolved config (`TrialSpec.flat()` columns) has every
    value of `scale`; the parameters left out are those sweeps at the scale vary, or that do
    not change what is learned. Its budget, train.steps, should then lie in [low, high]:
    `below` and `above` say why not (one clause each), `measured_by` where the range comes
    from. Plain data: `sweeper.admission.calibration_warnings` reads it before a sweep runs."""

    name: str  # how messages name it: "small scale"
    scale: Mapping[str, Any]  # flat column -> value, e.g. {"task.length": 16, ...}
    steps: tuple[int, int]  # [low, high]: the train.steps where the measurements hold
    below: str  # why a budget under low does not serve
    above: str  # why a budget over high does not serve
    measured_by: str  # the sweep file and docs that measured the range

    def at_scale(self, config: Mapping[str, Any]) -> bool:
        """Whether a trial's flat config is at this scale (every scale column given, equal)."""
        return all(column in config and config[column] == value
                   for column, value in self.scale.items())

    def outside(self, steps: int) -> bool:
        low, high = self.steps
        return not low <= steps <= high

    def warning(self, family: str, outside: list[int]) -> str:
        """One line: the field, the budgets outside, the range, the scale and why."""
        low, high = self.steps
        scale = ", ".join(f"{column} {value}" for column, value in self.scale.items())
        why = "; ".join(reason for reason, hit in (
            (f"under {low} steps {self.below}", any(s < low for s in outside)),
            (f"over {high} steps {self.above}", any(s > high for s in outside))) if hit)
        return (f"warning: train.steps: {', '.join(map(str, outside))} outside {family}'s "
                f"calibrated range {low}-{high} at its {self.name} ({scale}): {why} "
                f"(measured by {self.measured_by})")


@dataclass(frozen=True)
class Family:
    """One task family's declaration. Everything but `experiment` is plain data, torch-free."""

    name: str
    doc: str
    tasks: tuple[Entry, ...]  # the task ids this family declares
    models: tuple[Entry | str, ...]  # models that train on them: declared here, or by id
    experiment: str  # "module:Class" of the `Experiment`, imported when a trial trains
    metrics: tuple[Metric, ...]  # what a trajectory logs, one column each
    phase_outcome: str = "learned"  # the outcome phase diagrams, summaries, reports use
    train_defaults: Mapping[str, Any] = field(default_factory=dict)  # over TRAIN_PARAMS'
    full_batch: bool = False  # train.batch_size: null (the whole training set) is allowed
    summary_columns: tuple[str, ...] = ("loss", "accuracy")  # a terminal summary's metrics
    labels: Mapping[str, str] = field(default_factory=dict)  # words for derived columns
    figures: tuple[str, ...] = ()  # extra figures `analysis` reports draw (e.g. "identity")
    # the metrics a cell's per-seed curves show (`sweeper seeds`, the dashboard, the report)
    seed_metrics: tuple[str, ...] = ("accuracy",)
    # a config that trains in well under a second: {"task": {...}, "model": {...},
    # "train": {...}}; the contract suite (tests/test_families.py) trains every family with it
    small: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # peak bytes one trial needs while training, from its resolved task, model and train
    # parameters (an estimate within a small factor; torch-free): checked before a sweep starts
    memory_bytes: Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], int] | None \
        = None
    # the outcomes its trials store beyond `CORE_RULES` (learned, steps_to_learn), declared as
    # data (`sweeper.results.rules`): evaluated by the results package when a trial is stored
    # and when an analysis recomputes them
    outcomes: tuple[OutcomeRule, ...] = ()
    # the config columns its tasks' `derived()` add (task.lift): they follow from the
    # parameters, so a sweep's varying columns and its cells leave them out
    derived: tuple[str, ...] = ()
    # the scales its claims were calibrated at and the budgets each holds for: a sweep at one
    # of them with a budget outside is warned before it runs (`Calibration`)
    calibrations: tuple[Calibration, ...] = ()

    @property
    def outcome_rules(self) -> tuple[OutcomeRule, ...]:
        """Every outcome rule of this family: `CORE_RULES`, then its own."""
        return merge_rules(CORE_RULES, self.outcomes)

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(m if isinstance(m, str) else m.id for m in self.models)

    def scalar_metrics(self) -> tuple[Metric, ...]:
        return scalar(self.metrics)

    def load_experiment(self) -> Callable[..., Experiment]:
        module, _, name = self.experiment.partition(":")
        return getattr(importlib.import_module(module), name)

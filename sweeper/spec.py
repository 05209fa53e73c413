"""The typed trial spec, its trial id, its flat config columns, and a trial's result.

A trial id is a hash of the canonical config (task, model, optimiser, budget, seed and the
config's schema version, `sweeper.results.CONFIG_SCHEMA_VERSION`): the same config always gets
the same id, on any machine, so a re-run or resumed sweep can skip ids already stored. The
device is not part of it: it changes where, not what. New metrics or table columns never
change an id.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import pyarrow as pa

from sweeper import results
from sweeper.errors import ParameterError
from sweeper.families import MODELS, TASKS, Family, check_pair, family_of
from sweeper.numbers import MAX_SEED, check_int, shown
from sweeper.registry import Entry, Param
from sweeper.results.schema import ARROW_TYPES, Metric

# Training parameters; a family may change the defaults (`Family.train_defaults`: the topic
# family trains with the paper's full-batch SGD).
TRAIN_PARAMS = (
    Param("optimizer", str, "adam", "adam or sgd", choices=("adam", "sgd")),
    Param("lr", float, 1e-3, "learning rate", low=0, high=1e6),
    Param("batch_size", int, 64, "sequences per step (null: full batch, topic only)", low=1,
          high=1_000_000, nullable=True),
    Param("steps", int, 200, "optimiser steps", low=1, high=10_000_000),
    Param("eval_every", int, 10, "steps between evaluations", low=1, high=10_000_000),
    Param("eval_size", int, 128, "fresh evaluation sequences (copy)", low=1, high=1_000_000),
    # The probes (copy: the KTIW probe, uniform-attention accuracy, the per-component metrics)
    # cost 2-3 training steps an evaluation at the calibrated scale (docs/performance.md);
    # null keeps them at every evaluation on the whole evaluation batch.
    Param("probe_every", int, None, "steps between probe evaluations, a multiple of "
          "eval_every (null: every evaluation)", low=1, high=10_000_000, nullable=True),
    Param("probe_size", int, None, "sequences the probes use, at most eval_size (null: "
          "eval_size)", low=1, high=1_000_000, nullable=True),
    # The budget rule: `decided` stops each trial of a pack at the first evaluation
    # `stop_margin` steps past the one where its every first-passage outcome was reached
    # (`sweeper.results.DecisionWatch`): those outcomes are the full budget's, end-state ones
    # (regime, final_*, attention_heads) are read at the stop (docs/sweep-files.md).
    Param("stop", str, None, "when a trial stops before train.steps: null (never) or "
          "decided (once its first-passage outcomes are reached)", choices=("decided",),
          nullable=True),
    Param("stop_margin", int, None, "steps trained past the decision with stop: decided "
          "(null: 0)", low=0, high=10_000_000, nullable=True),
)
OPTIONAL_TRAIN = ("probe_every", "probe_size", "stop", "stop_margin")  # hashed only when set:
# ids made before stay
TRAIN_ENTRY = Entry("train", lambda **kw: kw, TRAIN_PARAMS)


@dataclass(frozen=True)
class TrialSpec:
    task: str
    model: str
    task_params: Mapping[str, Any]  # resolved: every parameter present
    model_params: Mapping[str, Any]
    train: Mapping[str, Any]
    seed: int
    device: str = field(default="cpu", compare=False)
    # the values asked for that train as others ((path, requested value) pairs: a grid's c =
    # 0.25 trains as 1/3 at L = 6, `Entry.steps`): stored beside the trained values, hashed
    # into nothing (`sweeper.cells.realised`)
    requested: tuple[tuple[str, Any], ...] = field(default=(), compare=False)

    @property
    def family(self) -> Family:
        return family_of(self.task)

    def config(self) -> dict[str, Any]:
        """The canonical nested config: what the trial id hashes."""
        return {"task": {"id": self.task, **_hashed(TASKS.get(self.task), self.task_params)},
                "model": {"id": self.model, **_hashed(MODELS.get(self.model), self.model_params)},
                # "optim" only here, in the hashed form (ids stay those of stores made before
                # the columns became train.optimizer / train.lr)
                "optim": {"name": self.train["optimizer"], "lr": self.train["lr"]},
                "train": {**{k: self.train[k] for k in ("batch_size", "steps", "eval_every",
                                                        "eval_size")},
                          **{k: self.train[k] for k in OPTIONAL_TRAIN
                             if self.train.get(k) is not None}},
                "seed": self.seed}

    def canonical_json(self) -> str:
        return results.layout.canonical_json(self.config())

    @cached_property
    def trial_id(self) -> str:
        """Hashed once per spec (a plan of a million trials asks each several times)."""
        return results.trial_id(self.config())

    def with_seed(self, seed: int) -> TrialSpec:
        """This spec with another seed, its id hashed from this one's canonical text with the
        seed's digits put in (the same text `trial_id` would build: a plan of a million trials
        builds one config a cell, not one a trial)."""
        other = replace(self, seed=seed)
        before, after = self._text_around_seed
        other.__dict__["trial_id"] = results.hash_text(f"{before}{seed}{after}")
        return other

    @cached_property
    def _text_around_seed(self) -> tuple[str, str]:
        """The canonical config text before and after the seed's digits."""
        marker = 10**15 + 7  # a seed no sweep has: its digits appear once, at the seed
        text = results.canonical_json(replace(self, seed=marker).config())
        before, _, after = text.partition(f'"seed":{marker}')
        return before + '"seed":', after

    @property
    def training_id(self) -> str:
        """The id of the model this trial trains: its trial id with the task parameters that
        change nothing here (`Entry.ineffective`: copy's hardness at c = 0) at their defaults.
        Trials with one training id train the same model bit for bit; a plan trains it once
        and the others share its result (`plan.share_trainings`)."""
        entry = TASKS.get(self.task)
        names = entry.ineffective(dict(self.task_params)) if entry.ineffective else ()
        if not names:
            return self.trial_id
        task = {**self.task_params, **{n: entry.param(n).default for n in names}}
        return results.trial_id(replace(self, task_params=task).config())

    @property
    def metrics(self) -> tuple[Metric, ...]:
        return self.family.metrics

    def value(self, path: str) -> Any:
        """A resolved parameter by its path, `task.cooccurrence` (task, model or train)."""
        group, name = path.split(".", 1)
        return {"task": self.task_params, "model": self.model_params,
                "train": self.train}[group].get(name)

    def unset_optional(self) -> set[str]:
        """Flat columns of the optional parameters left null (`Entry.optional`): hashed into
        neither the trial id nor the sweep's identity, so adding one keeps both."""
        groups = (("task", TASKS.get(self.task), self.task_params),
                  ("model", MODELS.get(self.model), self.model_params))
        return {f"{group}.{k}" for group, entry, params in groups for k, v in params.items()
                if v is None and k in entry.optional}

    def flat(self) -> dict[str, Any]:
        """Config as flat columns, one name per setting everywhere (sweep files, trials table,
        query, phase): `task.length`, `model.heads`, `train.optimizer`, `train.lr`, `seed`."""
        out: dict[str, Any] = {"task.id": self.task}
        out.update({f"task.{k}": v for k, v in self.task_params.items()})
        out.update({f"task.{k}": v for k, v in self.make_task().derived().items()})
        out["model.id"] = self.model
        out.update({f"model.{k}": _column_value(v) for k, v in self.model_params.items()})
        out.update({f"train.{p.name}": self.train[p.name] for p in TRAIN_PARAMS})
        out["seed"] = self.seed
        return out

    def column_types(self) -> dict[str, pa.DataType]:
        """The Arrow type of each `flat()` column, from the parameter declarations."""
        types = {"task.id": pa.string()}
        types.update({f"task.{p.name}": ARROW_TYPES[p.type] for p in TASKS.get(self.task).params})
        types.update({f"task.{k}": ARROW_TYPES[type(v)]
                      for k, v in self.make_task().derived().items()})
        types["model.id"] = pa.string()
        types.update({f"model.{p.name}": ARROW_TYPES[p.type]
                      for p in MODELS.get(self.model).params})
        types.update({f"train.{p.name}": ARROW_TYPES[p.type] for p in TRAIN_PARAMS})
        types["seed"] = pa.int64()
        return types

    def outcomes(self, trajectory: Mapping[str, list]) -> dict[str, Any]:
        """The outcomes stored with this trial (see `outcomes_of`)."""
        return outcomes_of([self], [trajectory])[0]

    def make_task(self) -> Any:
        return TASKS.get(self.task).factory(**self.task_params)

    def make_model_config(self) -> Any:
        return MODELS.get(self.model).factory(**self.model_params)

    def memory_bytes(self) -> int:
        """Peak bytes this trial needs while training (the family's estimate; 0 if none)."""
        estimate = self.family.memory_bytes
        return 0 if estimate is None else int(estimate(dict(self.task_params),
                                                       dict(self.model_params),
                                                       dict(self.train)))

    def pack_key(self) -> tuple:
        """Specs with equal keys share tensor shapes and train together as one pack."""
        train = {k: self.train[k] for k in ("optimizer", "batch_size", "steps", "eval_every",
                                            "eval_size", "stop", "stop_margin")}
        return (self.make_task().shape(), self.make_model_config().shape(),
                tuple(sorted(train.items())), self.device)


def _hashed(entry: Entry, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a trial id hashes: all but the entry's optional ones left null."""
    return {k: v for k, v in params.items() if v is not None or k not in entry.optional}


def _column_value(value: Any) -> Any:
    """A list parameter (seq2seq's head_seeds) as its JSON text, `[3,7,11]`: a table cell
    that cells can be grouped by and queried with (ARROW_TYPES stores list as a string)."""
    return json.dumps(value, separators=(",", ":")) if isinstance(value, list) else value


def make_spec(task: str, model: str, task_params: Mapping[str, Any] | None = None,
              model_params: Mapping[str, Any] | None = None,
              train: Mapping[str, Any] | None = None, seed: int = 0,
              device: str = "cpu") -> TrialSpec:
    """Validate and complete a spec; raises `SweeperInputError` naming the bad field."""
    task_entry, model_entry = TASKS.get(task), MODELS.get(model)
    family = check_pair(task, model)
    resolved_train = TRAIN_ENTRY.resolve({**family.train_defaults, **(train or {})}, "train")
    if resolved_train["batch_size"] is None and not family.full_batch:
        raise ParameterError(f"train.batch_size: got null; allowed: an integer >= 1 (the "
                             f"{family.name} family has no full batch)")
    _check_probes(resolved_train)
    _check_stop(resolved_train)
    seed = check_int(seed, "seed", 0, MAX_SEED)
    check_device(device, "device")
    return TrialSpec(task, model, task_entry.resolve(task_params or {}, "task"),
                     model_entry.resolve(model_params or {}, "model"), resolved_train, seed,
                     device)


DEVICE = re.compile(r"cpu|cuda(:[0-9]{1,4})?")


def check_device(device: Any, where: str) -> str:
    """A device a trial can train on: cpu, cuda or cuda:N (the one rule: sweep files, --device,
    `sweeper.run(device=...)`, `make_spec`)."""
    if not isinstance(device, str) or not DEVICE.fullmatch(device):
        raise ParameterError(f"{where}: got {shown(device)}; allowed: cpu, cuda or cuda:N")
    return device


def _check_probes(train: Mapping[str, Any]) -> None:
    every, size = train["probe_every"], train["probe_size"]
    if every is not None and every % train["eval_every"]:
        raise ParameterError(f"train.probe_every: got {every}; allowed: a multiple of "
                             f"train.eval_every ({train['eval_every']}) or null")
    if size is not None and size > train["eval_size"]:
        raise ParameterError(f"train.probe_size: got {size}; allowed: at most train.eval_size "
                             f"({train['eval_size']}) or null")


def _check_stop(train: Mapping[str, Any]) -> None:
    if train["stop_margin"] is not None and train["stop"] is None:
        raise ParameterError(f"train.stop_margin: got {train['stop_margin']}; allowed: null "
                             "unless train.stop is decided")


def is_probe_step(train: Mapping[str, Any], step: int) -> bool:
    """Whether the evaluation at `step` runs the probes: every evaluation without probe_every,
    else its multiples and the last step."""
    every = train.get("probe_every")
    return every is None or step % every == 0 or step == train["steps"]


def spec_from_config(config: Mapping[str, Any], device: str = "cpu") -> TrialSpec:
    """Rebuild a spec from `TrialSpec.config()` (as stored or sent to a worker)."""
    task = dict(config["task"])
    model = dict(config["model"])
    train = {"optimizer": config["optim"]["name"], "lr": config["optim"]["lr"],
             **config["train"]}
    return make_spec(task.pop("id"), model.pop("id"), task, model, train, config["seed"], device)


def spec_from_flat(flat: Mapping[str, Any], device: str = "cpu") -> TrialSpec:
    """Rebuild a spec from a trials row's config columns (`TrialSpec.flat`: what was trained):
    its id is the stored trial's (tests/test_one_identity.py holds every stored trial to it).
    Derived columns (copy's task.lift) are left out; a null (None, NaN, pandas' NA) is an
    unset optional parameter; a list parameter is read back from its JSON text."""
    def value(param: Param, column: str) -> Any:
        v = flat.get(column)
        if v is None or (not isinstance(v, str | list) and v != v) or str(v) == "<NA>":
            return None
        if param.type is list and isinstance(v, str):
            return json.loads(v)
        return v.item() if hasattr(v, "item") else v  # a numpy scalar as Python's

    task, model = str(flat["task.id"]), str(flat["model.id"])
    groups = {g: {p.name: value(p, f"{g}.{p.name}") for p in entry.params
                  if f"{g}.{p.name}" in flat}
              for g, entry in (("task", TASKS.get(task)), ("model", MODELS.get(model)),
                               ("train", TRAIN_ENTRY))}
    return make_spec(task, model, groups["task"], groups["model"], groups["train"],
                     int(flat["seed"]), device)


def outcomes_of(specs: list[TrialSpec], trajectories: list[Mapping[str, list]]
                ) -> list[dict[str, Any]]:
    """The outcomes stored with trials of one family, at the default thresholds, by its rules
    (`Family.outcome_rules`), in one vectorised pass (`sweeper.results.trials_outcomes`)."""
    rules = specs[0].family.outcome_rules
    return results.trials_outcomes(trajectories, specs[0].metrics, rules, rule_configs(specs))


def rule_configs(specs: list[TrialSpec]) -> list[dict[str, Any]]:
    """Per trial, the config columns its family's outcome rules read (below_plateau:
    task.classes, task.cooccurrence)."""
    needed = [c for r in specs[0].family.outcome_rules for c in r.config]
    return [{c: s.task_params.get(c.removeprefix("task.")) for c in needed} for s in specs]


@dataclass
class TrialResult:
    """One trained (or failed) trial: what the store records (a `sweeper.results.Record`)."""

    spec: TrialSpec
    status: str  # "ok", "diverged", "failed" (raised on every attempt) or "stopped" (early stop)
    trajectory: dict[str, list]  # "step" and one list per metric
    outcomes: dict[str, Any]
    wall_time_s: float
    error: str | None = None
    diverged_step: int | None = None
    host: str = field(default_factory=socket.gethostname)
    shared_with: str | None = None  # the trial whose training this result is (None: its own)
    stopped_at: int | None = None  # the last step it trained to (None: nothing trained)
    stop_reason: str | None = None  # why there (`sweeper.results.schema.STOP_REASONS`)

    @property
    def trial_id(self) -> str:
        return self.spec.trial_id

    @property
    def metrics(self) -> tuple[Metric, ...]:
        return self.spec.metrics

    @property
    def requested(self) -> str | None:
        """The values asked for that trained as others, as JSON text ({"task.cooccurrence":
        0.25}); None when every value trained as asked."""
        if not self.spec.requested:
            return None
        return json.dumps(dict(self.spec.requested), separators=(",", ":"), sort_keys=True)

    @property
    def outcome_rules(self) -> tuple[results.OutcomeRule, ...]:
        return self.spec.family.outcome_rules

    def columns(self) -> dict[str, Any]:
        return self.spec.flat()

    def column_types(self) -> dict[str, pa.DataType]:
        return self.spec.column_types()

    def shared_as(self, spec: TrialSpec) -> TrialResult:
        """This training's result as the result of `spec`, an equivalent trial (same
        training id): its own config columns, this one's status and outcomes, no trajectory of
        its own (the trajectory is stored once, under `shared_with`), no time of its own."""
        return TrialResult(spec, self.status, {"step": [], **{m.name: [] for m in spec.metrics}},
                           dict(self.outcomes), 0.0, self.error, self.diverged_step, self.host,
                           shared_with=self.trial_id, stopped_at=self.stopped_at,
                           stop_reason=self.stop_reason)

    @classmethod
    def failed(cls, spec: TrialSpec, error: str, wall_time_s: float = 0.0) -> TrialResult:
        """A trial that raised on every attempt: stored with its error and no trajectory."""
        empty = {"step": [], **{m.name: [] for m in spec.metrics}}
        outcomes = results.failed_outcomes(spec.metrics, spec.family.outcome_rules)
        return cls(spec, "failed", empty, outcomes, wall_time_s, error=error,
                   stop_reason="error")

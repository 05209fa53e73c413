"""Task families: each one vertical slice, declared in one place (Gymnasium's registry pattern).

A `Family` declares everything sweeper needs to list, validate, train, store, summarise and draw
one kind of experiment: its task entries (versioned ids such as `copy-v1`), the models that train
on them, the experiment that trains them (batches, loss, evaluation: imported lazily, it needs
torch), its metrics, the outcome its phase diagrams use by default, train defaults, the columns a
terminal summary prints and words for its axes. Registering a family is all it takes: the
registries below, `sweeper tasks`, the sweep-file checks, the trainer, the store and `analysis`
read the declaration, and `tests/test_families.py` runs one contract suite over every
registered family.

Families come from two places: the built-ins (`sweeper.families.copy`, `sweeper.families.topic`)
and plugins, found through the Python entry-point group `sweeper.families`; an entry point names
a `Family` object (`my_package:FAMILY`). Both load on first use of a registry, so importing
sweeper stays cheap, and a family's declaration module must not import torch (its experiment
does, and loads only when a trial trains).

    [project.entry-points."sweeper.families"]
    zipf-copy = "sweeper_zipf:FAMILY"

A model may train tasks of several families: a family lists its models as `Entry`s (declared
here) or by id (a model another family declares, such as `seq2seq`), so a new data distribution
for an existing model is a new family with a new task id, not a new version of `copy`.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sweeper.errors import ParameterError, UnknownNameError
from sweeper.registry import Entry, Registry
from sweeper.results.schema import Metric, scalar

ENTRY_POINT_GROUP = "sweeper.families"


class Experiment(Protocol):
    """What a family trains and measures, for a pack of K trials of one shape.

    Built as `Experiment(specs, dtype, device)`; `model` holds the K models (a leading model dim
    K on every parameter); `train_loss()` returns one mean loss per model [K]; `evaluate()`
    returns each of the family's metrics as a [K] tensor ([K, n] for a per-item metric).
    `evaluate(probes=False)` may leave out (as NaN) the metrics that are costly to measure
    (copy: the probes); it is called so only between `train.probe_every` steps.
    """

    model: Any  # torch.nn.Module

    def train_loss(self) -> Any: ...

    def evaluate(self, probes: bool = True) -> dict[str, Any]: ...


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

    @property
    def model_ids(self) -> tuple[str, ...]:
        return tuple(m if isinstance(m, str) else m.id for m in self.models)

    def scalar_metrics(self) -> tuple[Metric, ...]:
        return scalar(self.metrics)

    def load_experiment(self) -> Callable[..., Experiment]:
        module, _, name = self.experiment.partition(":")
        return getattr(importlib.import_module(module), name)


FAMILIES: dict[str, Family] = {}
_TASK_FAMILY: dict[str, str] = {}  # task id -> family name


def register_family(family: Family) -> None:
    """Add a family, its tasks and the models it declares to the registries."""
    if family.name in FAMILIES:
        raise ValueError(f"family {family.name!r} is already registered")
    metric_names = {m.name for m in family.metrics}
    for column in (*family.summary_columns, *family.seed_metrics):
        if column not in metric_names:
            raise ValueError(f"family {family.name!r}: summary column {column!r} is not one of "
                             "its metrics")
    for task in family.tasks:
        TASKS.add(task)
        _TASK_FAMILY[task.id] = family.name
    for model in family.models:
        if not isinstance(model, str):
            MODELS.add(model)
    FAMILIES[family.name] = family


def family_of(task: str) -> Family:
    """The family a task id belongs to (raises with a did-you-mean for an unknown id)."""
    _load()
    if task not in _TASK_FAMILY:
        raise UnknownNameError("task id", task, sorted(_TASK_FAMILY))
    return FAMILIES[_TASK_FAMILY[task]]


def families() -> dict[str, Family]:
    _load()
    return FAMILIES


def families_of_model(model: str) -> list[Family]:
    return [f for f in families().values() if model in f.model_ids]


def check_pair(task: str, model: str, where: str = "model") -> Family:
    """The task's family, if `model` trains on it; else a one-line error naming `where`."""
    family = family_of(task)
    MODELS.get(model)  # an unknown model: did-you-mean
    if model not in family.model_ids:
        raise ParameterError(f"{where}: got {model!r}, which does not train on {task}; "
                             f"allowed for {task}: {', '.join(family.model_ids)}")
    return family


def column_label(column: str) -> str | None:
    """Words for a config column from the declarations (`task.hardness` -> 'hardness h')."""
    label = _declared(column, "label")
    if label is None:
        label = next((f.labels[column] for f in families().values() if column in f.labels),
                     None)
    return label


def column_symbol(column: str) -> str | None:
    """The paper's symbol for a config column (`task.hardness` -> 'h'), if declared."""
    return _declared(column, "symbol")


def _declared(column: str, attribute: str) -> str | None:
    """A `Param` attribute (label, symbol) of the first declared parameter named like the
    column (`task.hardness`: a task parameter `hardness`)."""
    _load()
    group, _, name = column.partition(".")
    registry = {"task": TASKS, "model": MODELS}.get(group)
    if registry is None:
        return None
    for entry in registry.entries.values():
        for p in entry.params:
            if p.name == name and getattr(p, attribute):
                return getattr(p, attribute)
    return None


# -- loading: the built-ins, then plugins, on first use ------------------------------------------
_LOADED = False
_LOADING = False


def _load() -> None:
    """Register the built-in families and every installed plugin's, once."""
    global _LOADED, _LOADING
    if _LOADED or _LOADING:
        return
    _LOADING = True
    try:
        from sweeper.families.copy import FAMILY as COPY
        from sweeper.families.topic import FAMILY as TOPIC

        for family in (COPY, TOPIC):
            if family.name not in FAMILIES:
                register_family(family)
        for family in _plugin_families():
            if family.name not in FAMILIES:
                register_family(family)
        _LOADED = True
    finally:
        _LOADING = False


def _plugin_families() -> list[Family]:
    from importlib.metadata import entry_points

    found = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            family = point.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break sweeper
            warnings.warn(f"sweeper family plugin {point.name!r} ({point.value}) failed to "
                          f"load: {exc}", stacklevel=2)
            continue
        if callable(family) and not isinstance(family, Family):
            family = family()
        if not isinstance(family, Family):
            warnings.warn(f"sweeper family plugin {point.name!r} ({point.value}) is not a "
                          "sweeper.families.Family; skipped", stacklevel=2)
            continue
        found.append(family)
    return found


TASKS = Registry("task", loader=_load)
MODELS = Registry("model", loader=_load)

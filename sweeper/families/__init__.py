"""Task families: each one vertical slice, declared in one place (Gymnasium's registry pattern).

A `Family` declares everything sweeper needs to list, validate, train, store, summarise and draw
one kind of experiment: its task entries (versioned ids such as `copy-v1`), the models that train
on them, the experiment that trains them (batches, loss, evaluation: imported lazily, it needs
torch), its metrics, the outcomes its trials store (rules declared as data, evaluated by
`sweeper.results`), the one its phase diagrams use by default, the config columns its tasks
derive, train defaults, the columns a terminal summary prints and words for its axes (the
declaration itself: `sweeper.families.base`). Registering a family is all it takes: the
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

import warnings
from collections.abc import Iterable

from sweeper.errors import ParameterError, UnknownNameError
from sweeper.families.base import Experiment, Family
from sweeper.registry import Registry
from sweeper.results.rules import CORE_RULES, OutcomeRule, merge_rules

ENTRY_POINT_GROUP = "sweeper.families"
__all__ = ["ENTRY_POINT_GROUP", "Experiment", "FAMILIES", "Family", "MODELS", "TASKS",
           "check_pair", "column_label", "column_symbol", "derived_columns", "families",
           "families_of_model", "family_of", "outcome_rules", "register_family"]


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
    successes = [r.column for r in family.outcome_rules if r.kind == "success"]
    if family.phase_outcome not in successes:
        raise ValueError(f"family {family.name!r}: phase outcome {family.phase_outcome!r} is "
                         f"not one of its success outcomes ({', '.join(successes)})")
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


def outcome_rules(task_ids: Iterable[str] | None = None) -> tuple[OutcomeRule, ...]:
    """The outcome rules of the families of `task_ids` (all families: None), as one set, for
    recomputing the outcomes of their trials (`sweeper.results.with_outcomes`). Unknown task
    ids (a plugin not installed here) add none."""
    _load()
    names = (FAMILIES if task_ids is None else
             dict.fromkeys(_TASK_FAMILY[t] for t in task_ids if t in _TASK_FAMILY))
    return merge_rules(CORE_RULES, *(FAMILIES[n].outcomes for n in names))


def derived_columns() -> tuple[str, ...]:
    """The config columns every registered family's tasks derive (task.lift): not settings of
    their own, so never a sweep's varying column or a cell key."""
    return tuple(dict.fromkeys(c for f in families().values() for c in f.derived))


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

"""Versioned ids (`copy-v1`), typed parameters, `make(id, **params)` and did-you-mean errors.

A `Registry` holds entries of one kind (tasks, models). Each entry declares its parameters as
`Param`s, so that validation, listings (`sweeper tasks`) and the sweep-file checks all read the
same declaration. Entries are registered by the task families that declare them
(`sweeper.families`), which is enough to have them covered by the contract tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sweeper.errors import ParameterError, UnknownNameError
from sweeper.numbers import bounds_text, check_float, check_int, shown


@dataclass(frozen=True)
class Param:
    """One parameter: its type, default and allowed range or choices."""

    name: str
    type: type  # int, float, bool, str, or list (a list of integers, each within low..high)
    default: Any
    doc: str = ""
    low: float | None = None  # inclusive
    high: float | None = None  # inclusive
    choices: tuple[Any, ...] | None = None
    nullable: bool = False  # None allowed (meaning "derive it")
    label: str = ""  # words for plots and tables: "co-occurrence strength c"
    symbol: str = ""  # the paper's symbol, for "c = 0.5"

    def allowed(self) -> str:
        if self.choices is not None:
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.type is list:
            text = "a list of integers" + self._bounds(" each ")
        elif self.type is bool:
            text = "true or false"
        else:
            kind = {int: "an integer", float: "a number"}.get(self.type, self.type.__name__)
            text = kind + self._bounds(" ")
        return text + (" (or null)" if self.nullable else "")

    def _bounds(self, lead: str) -> str:
        text = bounds_text(self.low, self.high)
        return lead + text if text else ""

    def check(self, value: Any, where: str) -> Any:
        """Return `value` coerced to this parameter's type, or raise naming `where` (numbers by
        the one rule for numbers, `sweeper.numbers`)."""
        if value is None and self.nullable:
            return None
        allowed = self.allowed()
        bad = ParameterError(f"{where}: got {shown(value)}; allowed: {allowed}")
        if self.type is list:
            if not isinstance(value, list | tuple) or not value:
                raise bad
            try:  # a fresh list: the caller's is not kept
                return [check_int(item, where, self.low, self.high) for item in value]
            except ParameterError:
                raise bad from None  # the whole list shown, as the field is
        if self.type is int:
            value = check_int(value, where, self.low, self.high, allowed=allowed)
        elif self.type is float:
            value = check_float(value, where, self.low, self.high, allowed=allowed)
        elif not isinstance(value, self.type):  # bool, str
            raise bad
        if self.choices is not None and value not in self.choices:
            raise bad
        return value


@dataclass(frozen=True)
class Entry:
    id: str
    factory: Callable[..., Any]
    params: tuple[Param, ...]
    doc: str = ""
    check: Callable[[dict[str, Any], str], None] | None = None  # cross-parameter checks
    # the one form of parameters that mean the same (e.g. copy's vocab and cooccurrence): so
    # that equal tasks get equal configs, columns and trial ids
    canonical: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # the parameters that change nothing a trial trains at these (resolved) parameters (e.g.
    # copy's hardness when the block is the whole vocabulary): configs that differ only in
    # them train one model, which every one of them shares (`TrialSpec.training_id`)
    ineffective: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    # nullable parameters hashed into the trial id only when set (not null): a parameter added
    # after trials were stored keeps their ids valid at its null default (`TrialSpec.config`)
    optional: tuple[str, ...] = ()
    # the spacing at which a float parameter is trained, at these (resolved) parameters, where
    # `canonical` moves a requested value to a realised one (copy: c in steps of 1/L): what
    # `sweeper plan` says when it names a value trained as another, and the step an Optuna
    # or random search proposes on, so that a proposal is what trains (`sweeper.cells`)
    steps: Callable[[dict[str, Any]], dict[str, float]] | None = None

    def realisation_steps(self, requested: Mapping[str, Any]) -> dict[str, float]:
        """`steps` at these requested parameters (defaults filled in, before `canonical`)."""
        if self.steps is None:
            return {}
        return self.steps({p.name: requested.get(p.name, p.default) for p in self.params})

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise UnknownNameError(f"{self.id} parameter", name, [p.name for p in self.params])

    def resolve(self, params: Mapping[str, Any], where: str = "") -> dict[str, Any]:
        """Every parameter with its default filled in, validated. `where` prefixes messages."""
        prefix = f"{where}." if where else ""
        out = {}
        for name in params:
            if name not in {p.name for p in self.params}:
                raise UnknownNameError(f"{self.id} parameter", f"{prefix}{name}",
                                       [f"{prefix}{p.name}" for p in self.params])
        for p in self.params:
            out[p.name] = p.check(params.get(p.name, p.default), f"{prefix}{p.name}")
        if self.check is not None:
            self.check(out, where)
        return self.canonical(out) if self.canonical is not None else out


@dataclass
class Registry:
    """Entries of one kind, by id. `loader` runs once before the first lookup: the families
    register their entries then (`sweeper.families`), so that plugins load lazily."""

    kind: str  # "task" or "model"
    entries: dict[str, Entry] = field(default_factory=dict)
    loader: Callable[[], None] | None = field(default=None, repr=False)

    def _ready(self) -> dict[str, Entry]:
        if self.loader is not None:
            self.loader()
        return self.entries

    def add(self, entry: Entry) -> None:
        if entry.id in self.entries:
            raise ValueError(f"{self.kind} {entry.id!r} is already registered")
        self.entries[entry.id] = entry

    def get(self, id: str) -> Entry:
        entries = self._ready()
        if id not in entries:
            raise UnknownNameError(f"{self.kind} id", id, entries)
        return entries[id]

    def make(self, id: str, **params: Any) -> Any:
        entry = self.get(id)
        return entry.factory(**entry.resolve(params))

    def ids(self) -> list[str]:
        return sorted(self._ready())

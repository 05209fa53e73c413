"""Run a sweep from Python: `sweeper.run(...) -> SweepResult` (what `sweeper run` does).

    import sweeper
    result = sweeper.run("search_spaces/quick.yaml", results="results", executor="local",
                         seeds=2, budget={"steps": 100})
    result                    # the summary and the cell table, as `sweeper run` prints them
    res = result.load()       # the same `Results` as analysis.load("results", "quick")

Overrides are top-level keys of the sweep file (name, fixed, axes, seeds, budget, ...): a
mapping is merged into the file's group by group (`axes={"task": {"hardness": {...}}}` replaces
the hardness axis and keeps the others), and each parameter's value or axis is replaced whole;
anything else replaces the key. The result is validated like a file, with the same one-line
errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sweeper.executors import EXECUTORS, make_executor  # noqa: F401 (the names api offers)

DEFAULT_RESULTS = "./results"


@dataclass
class SweepResult:
    """What a run did and where its results are; `.load()` reads them."""

    sweep: str
    results: str  # the results root (a path or URI)
    expanded: int  # trials the file expands to (adaptive: the search's budget)
    already_stored: int  # trials stored before this run
    ran: int  # trials this run stored
    packs: int | None  # packs this run started
    seconds: float
    status: dict[str, int]  # trials stored per status, after the run
    cells: Any = field(default=None, repr=False)  # pandas DataFrame: sweeper.results.cell_stats
    outcome: str = "learned"
    interrupted: bool = False  # a SIGINT or SIGTERM stopped it (sweeper.interrupts)
    pending: int | None = None  # trials of this run's plan not stored (None: cannot say)
    exit_status: int = 0  # what `sweeper run` exits with: 0, or 130 / 143 when interrupted
    shared: int = 0  # of `ran`: trials stored with an equivalent trial's training (plan.Sharing)

    def to_json(self) -> dict[str, Any]:
        """The run's summary as plain data (`sweeper run --json`; docs/python-api.md)."""
        cells = None if self.cells is None else json.loads(
            self.cells.to_json(orient="records"))
        return {"sweep": self.sweep, "results": self.results, "expanded": self.expanded,
                "already_stored": self.already_stored, "ran": self.ran, "packs": self.packs,
                "seconds": round(self.seconds, 3), "trials_per_s": round(self.trials_per_s, 4),
                "status": self.status, "interrupted": self.interrupted,
                "pending": self.pending, "shared": self.shared, "outcome": self.outcome,
                "cells": cells}

    @property
    def trials_per_s(self) -> float:
        return self.ran / self.seconds if self.seconds else 0.0

    def load(self, **kwargs: Any):
        """The stored trials and trajectories: `analysis.load(results, sweep, **kwargs)`."""
        import analysis

        return analysis.load(self.results, self.sweep, **kwargs)

    def summary(self) -> str:
        stored = ", ".join(f"{n} {s}" for s, n in sorted(self.status.items())) or "nothing"
        if self.ran == 0 and not self.interrupted and self.pending == 0:
            return (f"sweep {self.sweep}: nothing to run: all {self.already_stored} trials are "
                    f"stored (ran 0 trials; stored: {stored}); results in "
                    f"{self.results.rstrip('/')}/{self.sweep}")
        packs = f", {_count(self.packs, 'pack')}" if self.packs is not None else ""
        stopped = " (interrupted)" if self.interrupted else ""
        shared = (f" ({self.ran - self.shared} trained, {self.shared} sharing an equivalent "
                  "trial's training)" if self.shared else "")
        return (f"sweep {self.sweep}{stopped}: ran {_count(self.ran, 'trial')}{shared} in "
                f"{self.seconds:.1f} s "
                f"({self.trials_per_s:.2f} trials/s{packs}); stored: {stored}; results in "
                f"{self.results.rstrip('/')}/{self.sweep}")

    def __repr__(self) -> str:
        lines = [f"SweepResult({self.summary()})"]
        if self.cells is not None and len(self.cells):
            lines += ["", f"cells ({self.outcome}):", self.cells.to_string(index=False,
                                                                         max_rows=40)]
        return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def sweep_from(source: str | os.PathLike | Mapping[str, Any],
               overrides: Mapping[str, Any] | None = None, sets: list[str] | None = None):
    """A validated `SweepFile` from a path, YAML text or a mapping, with overrides merged and
    then `--set` overrides applied (`apply_sets`)."""
    if sets:
        return sweep_from(apply_sets(_raw(source, overrides), sets))
    import yaml

    from sweeper.search_space import load_sweep, parse_sweep, parse_yaml

    if isinstance(source, Mapping):
        text = yaml.safe_dump(dict(source), sort_keys=False)
    else:
        text = os.fspath(source)
        if os.path.exists(text) or not _looks_like_yaml(text):
            if not overrides:
                return load_sweep(text)
            with open(text) as f:
                text = f.read()
    if not overrides:
        return parse_sweep(text)
    data = parse_yaml(text)
    return parse_sweep(yaml.safe_dump(_merged(data, overrides), sort_keys=False))


def _raw(source: str | os.PathLike | Mapping[str, Any],
         overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sweep file's mapping, overrides merged, before validation."""
    from sweeper.search_space import parse_yaml

    if isinstance(source, Mapping):
        data: Any = dict(source)
    else:
        text = os.fspath(source)
        if os.path.exists(text) or not _looks_like_yaml(text):
            from sweeper.search_space import read_sweep_text

            text = read_sweep_text(text)
        data = parse_yaml(text)
    if not isinstance(data, dict):
        from sweeper.search_space import SweepFileError

        raise SweepFileError(f"the file: got {type(data).__name__}; allowed: a YAML mapping of "
                             "the sweep-file keys")
    return _merged(data, overrides) if overrides else data


GROUPS = ("task", "model", "train")


def apply_sets(data: Mapping[str, Any], sets: list[str]) -> dict[str, Any]:
    """`--set` overrides on a sweep file's mapping, in order (values read as sweep files are):

    - `model.width=48`: a fixed value (task, model, train); it replaces an axis of that name.
    - `model.heads=1,4`: a comma list sweeps an axis (a grid) and replaces a fixed value.
    - any other dotted key sets that key of the file: `seeds=4`, `budget.steps=100`,
      `name=quick_w48`, `search.trials=20`.
    """
    import copy

    from sweeper.search_space import TOP_KEYS, SweepFileError, load_yaml_value

    out = copy.deepcopy(dict(data))
    for item in sets:
        key, sep, raw = item.partition("=")
        path = key.strip().split(".")
        if not sep or not key.strip() or any(not p for p in path):
            raise SweepFileError(f"--set: got {item!r}; allowed: KEY=VALUE such as "
                                 "model.width=48, model.heads=1,4 or seeds=4")
        if len(path) == 1 and path[0] not in TOP_KEYS:
            raise SweepFileError(f"--set {key}: unknown key{_group_hint(out, path[0])}; allowed: "
                                 f"GROUP.NAME (task, model, train) or a key of the file: "
                                 f"{', '.join(TOP_KEYS)}")
        values = [load_yaml_value(v.strip()) for v in raw.split(",")] if "," in raw \
            and not raw.strip().startswith(("[", "{")) else None
        value = load_yaml_value(raw.strip()) if values is None else None
        if path[0] in GROUPS and len(path) == 2:
            group, name = path
            fixed = out.setdefault("fixed", {}) or {}
            axes = out.setdefault("axes", {}) or {}
            out["fixed"], out["axes"] = fixed, axes
            if values is None:
                (axes.get(group) or {}).pop(name, None)
                fixed.setdefault(group, {})[name] = value
            else:
                (fixed.get(group) or {}).pop(name, None)
                axes.setdefault(group, {})[name] = {"grid": values}
            continue
        node = out
        for part in path[:-1]:
            if not isinstance(node.get(part, {}), dict):
                raise SweepFileError(f"--set {key}: {part} is not a mapping in the file; "
                                     "allowed: a key of a mapping")
            node = node.setdefault(part, {})
        node[path[-1]] = value if values is None else values
    return out


def _group_hint(data: Mapping[str, Any], name: str) -> str:
    """' (did you mean model.width?)' when `name` is a parameter of the file's task or model,
    or a train parameter."""
    from sweeper.errors import SweeperInputError
    from sweeper.families import MODELS, TASKS
    from sweeper.spec import TRAIN_PARAMS

    groups = []
    for group, registry in (("task", TASKS), ("model", MODELS)):
        try:
            if name in {p.name for p in registry.get(str(data.get(group))).params}:
                groups.append(group)
        except SweeperInputError:
            pass
    if name in {p.name for p in TRAIN_PARAMS}:
        groups.append("train")
    return f" (did you mean {' or '.join(f'{g}.{name}' for g in groups)}?)" if groups else ""


def _looks_like_yaml(text: str) -> bool:
    """Sweep-file text rather than a path: several lines, or a one-line {...} mapping."""
    return "\n" in text or text.lstrip().startswith("{")


def _merged(base: Any, changes: Mapping[str, Any], depth: int = 0) -> Any:
    """`changes` merged into `base`: mappings down to the groups (depth 2), below that each
    parameter's value or axis replaced whole."""
    if not isinstance(base, Mapping):
        return dict(changes)
    out = dict(base)
    for key, value in changes.items():
        if depth < 2 and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value, depth + 1)
        else:
            out[key] = value
    return out


def run(sweep: str | os.PathLike | Mapping[str, Any], *, results: str | None = None,
        executor: str = "ray", address: str | None = None, num_cpus: int | None = None,
        pack_size: int | None = None, retries: int | None = None, device: str | None = None,
        results_shared: bool = False, verbose: bool = False, stream=None,
        wait: bool = False, extend: bool = False, sets: list[str] | None = None,
        **overrides: Any) -> SweepResult:
    """Run what of a sweep is not stored yet; see the module's docstring.

    sets: `--set` overrides (`apply_sets`), applied after `overrides`. wait: wait for another
    driver of the sweep to finish instead of refusing. extend: store trials of a configuration
    that differs from the stored sweep's under its name (`sweeper.identity`). SIGINT and SIGTERM
    stop the run once its running packs are stored (`sweeper.interrupts`)."""
    from sweeper.interrupts import stop_on_signals
    from sweeper.plan import make_plan
    from sweeper.results import Store
    from sweeper.runner import phase_outcome, run_sweep

    spec = sweep_from(sweep, overrides, sets)
    if retries is not None:
        spec = replace(spec, retries=retries)
    if device is not None:
        from sweeper.sweep_commands import with_device

        spec = with_device(spec, device)
    root = results or spec.results or DEFAULT_RESULTS
    store = Store.open(root)
    plan = make_plan(spec, set())  # expand once up front: a bad cell fails before anything is
    # written
    runner = make_executor(executor, address=address, num_cpus=num_cpus,
                           results_shared=results_shared, verbose=verbose)
    from sweeper.results.store import check_writable

    check_writable(store)
    memory = None
    if address is None:  # the trials train on this machine (a cluster's nodes may differ)
        memory = check_memory(spec, plan.specs, pack_size or spec.pack_size)
        # (automatic packs are cut to fit `memory` over the packs running at once)
    runner.check(spec, store)  # before it starts and before anything is written
    if address is None:
        prepare_native_kernels(spec, plan, store)
    from sweeper.results.lease import acquire

    with stop_on_signals(stream) as stop, acquire(store, spec.name, wait=wait, stream=stream), \
            runner:
        summary = run_sweep(spec, store, runner, pack_size, stream=stream, stop=stop,
                            extend=extend, overrides=list(sets or []), memory=memory)
    outcome = phase_outcome(spec)
    return SweepResult(spec.name, root, summary["expanded"], summary["already_stored"],
                       summary["ran"], summary["packs"], summary["seconds"], summary["status"],
                       cells_of(store, spec, outcome), outcome, summary["interrupted"],
                       summary["pending"], stop.exit_status if summary["interrupted"] else 0,
                       summary["shared"])


def prepare_native_kernels(sweep, plan, store) -> None:
    """Build (or load) the native kernels in this process before the workers start, when
    trials will train on this machine's CPU: its one-line notices (building once; or
    unavailable, so the reference path trains) reach this terminal instead of the workers' logs,
    and the workers load the cached build instead of each waiting on it."""
    if sweep.device != "cpu":
        return
    if plan.specs and {s.trial_id for s in plan.specs} <= store.done_ids(sweep.name):
        return  # nothing will train
    from sweeper.layers import native

    native.ops()


MEMORY_SHARE = 0.8  # of this machine's memory, what trials training here may use together


def check_memory(spec, specs: list, pack_size: int | None = None,
                 available: int | None = None) -> int | None:
    """Refuse a sweep whose one trial, or one pack of a size it fixes, needs more memory than
    this machine has (the family's estimate, `TrialSpec.memory_bytes`), naming the setting;
    checked over `specs` (every trial of a grid, random or boundary sweep), or the fixed
    settings of an Optuna one (no specs). Returns the bytes the packs may use together
    (automatic pack sizes are cut to fit, `plan.form_packs`); None when unknown.

    A fixed pack is checked alone: with several packs running at once, their sum may exceed
    what one fits in (automatic packs are cut for that sum)."""
    from sweeper.errors import SweeperInputError
    from sweeper.spec import make_spec

    available = available or _physical_memory()
    if not available:
        return None
    budget = memory_budget(available)
    specs = specs or [make_spec(spec.task, spec.model, spec.fixed["task"], spec.fixed["model"],
                                spec.fixed["train"])]
    need, worst = max(((s.memory_bytes(), i) for i, s in enumerate(specs)))
    worst = specs[worst]
    if need > budget:
        flat = worst.flat()
        shown = ", ".join(f"{k} {flat[k]}" for k in ("task.length", "task.samples",
                                                     "task.vocab", "model.width",
                                                     "model.dim", "train.batch_size",
                                                     "train.eval_size") if k in flat)
        raise SweeperInputError(f"fixed/axes: one trial needs about {need / 2**30:,.1f} GiB "
                                f"({shown}); allowed: what fits in this machine's "
                                f"{available / 2**30:,.1f} GiB (a smaller batch, width or length)")
    fixed = _fixed_packs(spec, specs, pack_size, need)
    if fixed is not None and need > 0:
        field, trials, pack_bytes = fixed
        if pack_bytes > budget:
            raise SweeperInputError(f"{field}: got {trials}; a pack of {trials} trials needs "
                                    f"about {pack_bytes / 2**30:,.1f} GiB; allowed: at most "
                                    f"{max(1, budget // need)} on this machine's "
                                    f"{available / 2**30:,.1f} GiB")
    return budget


def _fixed_packs(spec, specs: list, pack_size: int | None,
                 need: int) -> tuple[str, int, int] | None:
    """(the setting, its value, the largest pack's bytes) for packs whose size the sweep fixes:
    an Optuna cell's seeds, a boundary proposal's seeds, or a pack size (grid and random);
    None for automatic packs."""
    from sweeper.plan import form_packs

    if spec.search.type == "optuna":  # a pack is a proposed cell's seeds
        return "seeds", len(spec.seeds), len(spec.seeds) * need
    if spec.search.type == "boundary":
        from sweeper.strategies.boundary import settings_of

        n = settings_of(spec).seeds_per_proposal
        return "search.seeds_per_proposal", n, n * need
    if pack_size:
        largest = max(sum(s.memory_bytes() for s in p) for p in form_packs(specs, pack_size))
        return "--pack-size/pack_size", pack_size, largest
    return None


def memory_budget(available: int | None = None) -> int | None:
    """The bytes trials training on this machine may use together (MEMORY_SHARE of it)."""
    available = available or _physical_memory()
    return int(MEMORY_SHARE * available) if available else None


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def cells_of(store, spec, outcome: str = "learned"):
    """The sweep's cells (`sweeper.results.cell_stats` of `outcome` over its axes), or None
    when nothing is stored."""
    from sweeper.results import SUCCESS_OUTCOMES, cell_stats

    data = store.read(spec.name, "trials")
    if data is None:
        return None
    return cell_stats(data.to_pandas(), [a.column for a in spec.axes], outcome,
                      SUCCESS_OUTCOMES[outcome])

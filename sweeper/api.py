"""The library entry point: `sweeper.run(...) -> SweepResult` (what `sweeper run` does).

    import sweeper
    result = sweeper.run("search_spaces/quick.yaml", results="results", executor="local",
                         seeds=2, budget={"steps": 100})
    result                    # the summary and the cell table, as `sweeper run` prints them
    res = result.load()       # the same `Results` as analysis.load("results", "quick")

Overrides are top-level keys of the sweep file (name, fixed, axes, seeds, budget, ...): a
mapping is merged into the file's group by group (`axes={"task": {"hardness": {...}}}` replaces
the hardness axis and keeps the others), and each parameter's value or axis is replaced whole;
anything else replaces the key (`sweeper.overrides`). The result is validated like a file,
with the same one-line errors.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sweeper.executors import EXECUTORS, make_executor  # noqa: F401 (the names api offers)
from sweeper.results.errors import python_arguments
from sweeper.results.words import count

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
    pending: int | None = None  # trials of the sweep's whole plan not stored (None: cannot say)
    exit_status: int = 0  # what `sweeper run` exits with: 0, or 130 / 143 when interrupted
    shared: int = 0  # of `ran`: trials stored with an equivalent trial's training (plan.Sharing)
    taken_s: float | None = None  # wall seconds from the executor's start to its stop
    estimate: Any = field(default=None, repr=False)  # sweeper.estimate.Estimate made before
    # training (what `sweeper plan` says), or None (nothing to train; a cluster, no stored
    # trials of the shape)
    # an Optuna search's best trial: objective, direction, value, number (the Optuna trial),
    # params, trial_ids (its cell's seeds); None for other searches (`best_trial_text`)
    best_trial: dict[str, Any] | None = None
    # where the sweep stands after the run, as `sweeper status` and the dashboard say it
    # (sweeper.results.summary.SweepProgress: stored, running, pending of the whole plan, state)
    progress: Any = field(default=None, repr=False)
    decided: int = 0  # of `ran`: trials stopped once decided (`budget.stop: decided`)
    # a search that optimises an objective (Optuna): its name and direction; `cells` then holds
    # the objective per cell as the study is told it (`analysis.search.objective_cells`), best
    # first, not the family's phase outcome
    objective: str | None = None
    direction: str | None = None

    @property
    def shown_by(self) -> str:
        """What the cell table shows: the search's objective, else p(the phase outcome)."""
        if self.objective is not None:
            return f"{self.objective}, {self.direction}, best first"
        return f"p({self.outcome})"

    def to_json(self) -> dict[str, Any]:
        """The run's summary as plain data (`sweeper run --json`; docs/python-api.md)."""
        cells = None if self.cells is None else json.loads(
            self.cells.to_json(orient="records"))
        return {"sweep": self.sweep, "results": self.results, "expanded": self.expanded,
                "already_stored": self.already_stored, "ran": self.ran, "packs": self.packs,
                "seconds": round(self.seconds, 3), "trials_per_s": round(self.trials_per_s, 4),
                "status": self.status, "interrupted": self.interrupted,
                "pending": self.pending, "shared": self.shared, "decided": self.decided,
                "outcome": self.outcome, "objective": self.objective,
                "direction": self.direction,
                "taken_s": None if self.taken_s is None else round(self.taken_s, 3),
                "estimate": None if self.estimate is None else self.estimate.to_json(),
                "best_trial": self.best_trial,
                "progress": None if self.progress is None else self.progress.to_json(),
                "cells": cells}

    def timing(self) -> str:
        """`took 48 s (estimated 45 s)`: the wall time against the estimate made before
        training (`sweeper.estimate.estimate_run`, what `sweeper plan` prints)."""
        if self.taken_s is None:
            return ""
        said = "no estimate" if self.estimate is None else \
            f"estimated {self.estimate.seconds:.0f} s"
        return f"took {self.taken_s:.0f} s ({said})"

    @property
    def trials_per_s(self) -> float:
        return self.ran / self.seconds if self.seconds else 0.0

    def load(self, **kwargs: Any):
        """The stored trials and trajectories: `analysis.load(results, sweep, **kwargs)`."""
        import analysis

        return analysis.load(self.results, self.sweep, **kwargs)

    def best(self, metric: str, mode: str | None = None, n: int = 5, where: str | None = None,
             by: str | None = None):
        """The sweep's n best configurations (mean over seeds, with its interval) or finished
        trials by a numeric trials column (a pandas DataFrame with the swept columns):
        `analysis.best.best_trials`, what `sweeper best` prints. `result.best("accuracy")`,
        `result.best("attention_steps", mode="min", by="trial", where="model.heads == 1")`."""
        from analysis.best import best_trials

        return best_trials(self.results, self.sweep, metric=metric, mode=mode, n=n,
                           where=where, by=by)

    def summary(self) -> str:
        stored = ", ".join(f"{n} {s}" for s, n in sorted(self.status.items())) or "nothing"
        if self.ran == 0 and not self.interrupted and self.pending == 0:
            return (f"sweep {self.sweep}: nothing to run: all "
                    f"{count(self.already_stored, 'trial')} "
                    f"{'is' if self.already_stored == 1 else 'are'} stored (ran 0 trials; "
                    f"stored: {stored}); results in "
                    f"{self.results.rstrip('/')}/{self.sweep}")
        packs = f", {count(self.packs, 'pack')}" if self.packs is not None else ""
        stopped = " (interrupted)" if self.interrupted else ""
        shared = (f" ({self.ran - self.shared} trained, {self.shared} sharing an equivalent "
                  "trial's training)" if self.shared else "")
        if self.decided:
            shared += (f" ({self.decided} stopped once decided: first-passage outcomes as the "
                       "full budget's, end-state ones at the stop)")
        took = f"; {self.timing()}" if self.taken_s is not None else ""
        return (f"sweep {self.sweep}{stopped}: ran {count(self.ran, 'trial')}{shared} in "
                f"{self.seconds:.1f} s "
                f"({self.trials_per_s:.2f} trials/s{packs}){took}; stored: {stored}; results "
                f"in {self.results.rstrip('/')}/{self.sweep}")

    def cell_table(self, max_rows: int = 40) -> str:
        """Per cell: trials, seeds counted, success share with its Wilson interval, median
        steps, failed trials (`cells`: `sweeper.results.cell_stats`, as the phase diagram
        counts); what `sweeper run` prints and a notebook shows."""
        from sweeper.report import table
        from sweeper.results.cells import CELL_COLUMNS

        cells, outcome = self.cells, self.outcome
        if self.objective is not None:
            return self._objective_table(max_rows)
        axes = [c for c in cells.columns if c not in CELL_COLUMNS]
        rows = [[*(row[a] for a in axes), int(row["n_trials"]), int(row["n"]),
                 None if row["n"] == 0 else round(float(row["p"]), 3),
                 None if row["n"] == 0 else f"{row['p_low']:.2f}-{row['p_high']:.2f}",
                 None if row["median_steps"] != row["median_steps"] else row["median_steps"],
                 int(row["failed"])]
                for _, row in cells.head(max_rows).iterrows()]
        text = table(rows, [*axes, "trials", "counted", f"p({outcome})", "95% interval",
                            "median steps", "failed"])
        if len(cells) > max_rows:
            text += f"\n... {len(cells) - max_rows} more cells"
        return text

    def _objective_table(self, max_rows: int) -> str:
        """Per cell, best first: its counted seeds and the objective as the study is told it
        (the mean over them; a step outcome never reached counts as the budget)."""
        from sweeper.report import table

        cells = self.cells
        axes = [c for c in cells.columns if c not in ("n", "objective")]
        rows = [[*(row[a] for a in axes), int(row["n"]), round(float(row["objective"]), 4)]
                for _, row in cells.head(max_rows).iterrows()]
        text = table(rows, [*axes, "counted", f"{self.objective} ({self.direction}, mean)"])
        if len(cells) > max_rows:
            text += f"\n... {len(cells) - max_rows} more cells"
        return text

    def best_trial_text(self) -> str | None:
        """One line for an Optuna search's best trial (what `sweeper run` prints last), e.g.
        "optuna best of best_accuracy (maximize): 0.8125 at Optuna trial 2 (task.hardness=0.3);
        trial ids 1a2b..., 3c4d..."; None for other searches, or before a trial completes."""
        best = self.best_trial
        if not best:
            return None
        params = ", ".join(f"{k}={v!r}" for k, v in best["params"].items())
        proposed = {k: v for k, v in best.get("proposed", {}).items()
                    if best["params"].get(k) != v}
        if proposed:  # trained as other than Optuna proposed: the trained value is the one
            params += "; optuna proposed " + ", ".join(f"{k}={v!r}" for k, v in proposed.items())
        return (f"optuna best of {best['objective']} ({best['direction']}): "
                f"{best['value']:.4g} at Optuna trial {best['number']} ({params}); trial ids "
                f"{', '.join(best['trial_ids']) or 'none'}")

    def _repr_html_(self) -> str:
        """What a notebook shows: `analysis.notebook.sweep_result_html`."""
        from analysis.notebook import sweep_result_html

        return sweep_result_html(self)

    def __repr__(self) -> str:
        lines = [f"SweepResult({self.summary()})"]
        if self.cells is not None and len(self.cells):
            shown = self.outcome if self.objective is None else self.shown_by
            lines += ["", f"cells ({shown}):", self.cell_table()]
        if self.best_trial_text():
            lines += ["", self.best_trial_text()]
        return "\n".join(lines)


@python_arguments
def run(sweep: str | os.PathLike | Mapping[str, Any], *, results: str | None = None,
        executor: str | None = None, address: str | None = None, num_cpus: int | None = None,
        pack_size: int | None = None, retries: int | None = None, device: str | None = None,
        results_shared: bool = False, verbose: bool = False, stream=None,
        wait: bool = False, extend: bool = False, sets: list[str] | None = None,
        estimate: bool = True, strict: bool = False, workers: int | None = None,
        **overrides: Any) -> SweepResult:
    """Run what of a sweep is not stored yet; see the module's docstring.

    sets: `--set` overrides (`apply_sets`), applied after `overrides`. wait: wait for another
    driver of the sweep to finish instead of refusing. extend: store trials of a configuration
    that differs from the stored sweep's under its name (`sweeper.identity`). SIGINT and SIGTERM
    stop the run once its running packs are stored (`sweeper.interrupts`). estimate: False
    skips the wall-time estimate before training (`SweepResult.estimate` is then None).
    strict: a value asked for that the task trains as another (c = 0.25 at L = 6 trains as 1/3:
    `sweeper.cells.realised_notes`) is refused instead of noted. workers: packs training at
    once (default: the executor's capacity), as `sweeper plan --workers` estimates them."""
    from sweeper.admission import admit_here, calibration_warnings, resolution_warnings
    from sweeper.devices import prepare_native_kernels
    from sweeper.interrupts import stop_on_signals
    from sweeper.overrides import sweep_from
    from sweeper.plan import make_plan, realised_notes
    from sweeper.results import Store
    from sweeper.runner import run_sweep
    from sweeper.sweep_fields import run_options

    pack_size, retries, num_cpus = run_options(pack_size, retries, num_cpus)
    if workers is not None:
        from sweeper.numbers import check_int
        from sweeper.sweep_fields import MAX_CPUS

        workers = check_int(workers, "--workers/workers", 1, MAX_CPUS)
    spec = sweep_from(sweep, overrides, sets)
    if retries is not None:
        spec = replace(spec, retries=retries)
    if device is not None:
        from sweeper.devices import with_device

        spec = with_device(spec, device)
    root = results or spec.results or DEFAULT_RESULTS
    store = Store.open(root)
    plan = make_plan(spec, set())  # expanded once a run, up front: a bad cell fails before
    # anything is written
    realised = realised_notes(plan.specs, spec, strict)
    executor, chosen = choose_executor(executor, spec, plan, store, address,
                                       pack_size or spec.pack_size, num_cpus)
    runner = make_executor(executor, address=address, num_cpus=num_cpus,
                           results_shared=results_shared, verbose=verbose)
    from sweeper.results.store import check_writable

    check_writable(store)
    from sweeper.identity import check_same_study

    # a damaged manifest, or a changed configuration under the name, is refused (one line)
    # before any write and before an estimate's probe trains
    check_same_study(spec, plan.identity, store.read_manifest(spec.name), extend)
    memory = None
    if address is None:  # the trials train on this machine (a cluster's nodes may differ)
        memory = admit_here(spec, plan.specs, pack_size or spec.pack_size)
        # (automatic packs are cut to fit `memory` over the packs running at once)
    runner.check(spec, store)  # before it starts and before anything is written
    notices = [*resolution_warnings(spec), *calibration_warnings(spec, plan.specs)]
    with stop_on_signals(stream) as stop, _lease(store, spec.name, wait, stream, stop):
        for line in [*realised, chosen]:  # admitted: said first, before a probe or Ray
            _say(stream, line)
        store.recover(spec.name)  # damaged files moved aside (one line each) before any read
        estimated = _estimate(spec, plan, store, executor, address, num_cpus, pack_size,
                              memory, stream, workers) if estimate else None
        started = time.perf_counter()
        if plan.strategy.nothing_left(plan, store):  # said by the summary; no Ray started
            from sweeper.executors.local import LocalExecutor

            runner = LocalExecutor()  # it starts nothing; the strategy proposes nothing
        else:
            _say(stream, getattr(runner, "starting", lambda: None)())
        with runner:  # Ray starts in the background while the kernels load (`RayTuneExecutor`)
            if address is None:  # under the lease (a second driver is refused at once, not
                # after a build), before the workers start: they load what this builds. A
                # first build (~1 min) waits for Ray's start first, so the driver's SIGTERM
                # handler is back in place while it compiles (`RayTuneExecutor.started`)
                prepare_native_kernels(spec, plan, store, getattr(runner, "started", None))
            summary = run_sweep(spec, store, runner, pack_size, workers, stream=stream, stop=stop,
                                extend=extend, overrides=list(sets or []), memory=memory,
                                plan=plan, notices=notices)  # said once admitted
        taken = time.perf_counter() - started
    outcome = spec.family.phase_outcome
    objective = spec.search.objective  # set by a search that optimises one (Optuna)
    cells = (_objective_cells(store, spec) if objective else
             _stored_cells(store, spec, outcome))
    return SweepResult(spec.name, root, summary["expanded"], summary["already_stored"],
                       summary["ran"], summary["packs"], summary["seconds"], summary["status"],
                       cells, outcome, summary["interrupted"],
                       summary["pending"], stop.exit_status if summary["interrupted"] else 0,
                       summary["shared"], taken, estimated, summary.get("best_trial"),
                       summary["progress"], summary["decided"], objective,
                       spec.search.direction if objective else None)


def choose_executor(executor: str | None, sweep, plan, store, address: str | None,
                    pack_size: int | None, num_cpus: int | None = None
                    ) -> tuple[str, str | None]:
    """The executor a run uses, and the line that says why when it was not named: Ray, unless
    what is left to train is one pack on this machine (a grid or random sweep without an ASHA
    scheduler, GPUs or more CPUs than the machine has, and no Ray flag given), which trains in
    this process with nothing to start (Ray's start is ~10-15 s, more than such a sweep
    trains). `sweeper plan` estimates with the same choice."""
    if executor is not None:
        return executor, None
    if (address is not None or num_cpus is not None or sweep.scheduler is not None
            or plan.adaptive or sweep.resources["gpu"] or sweep.resources["cpu"] > 1):
        return "ray", None  # what only Ray does, or threads the local executor does not give
    from sweeper.packing import form_packs

    pending = plan.with_stored(store.done_ids(sweep.name)).sharing.trainings
    slots = max(1, int((os.cpu_count() or 1) // sweep.resources["cpu"]))
    packs = form_packs(pending, pack_size, slots)  # as Ray would cut them for its slots
    if len(packs) != 1:
        return "ray", None
    return "local", (f"one pack to train ({len(packs[0])} model{'s' if len(packs[0]) != 1 else ''}"
                     "): training it in this process, no Ray to start (--executor ray for Ray)")


def _estimate(spec, plan, store, executor: str, address: str | None, num_cpus: int | None,
              pack_size: int | None, memory: int | None, stream=None,
              workers: int | None = None):
    """The run's estimate before it trains: what `sweeper plan` with the same executor says
    (`sweeper.estimate.estimate_for`), against what is stored now; a probe that trains says
    so first."""
    from sweeper.estimate import estimate_for, parallelism

    how = parallelism(executor, spec, address=address, num_cpus=num_cpus, workers=workers)
    return estimate_for(plan.with_stored(store.done_ids(spec.name)), store, how,
                        pack_size or spec.pack_size, memory, probe=address is None,
                        say=lambda line: _say(stream, line))


def _say(stream, line: str | None) -> None:
    """One line of what the run is doing now, so that no wait is silent (stderr by default)."""
    if line:
        out = stream or sys.stderr
        out.write(line + "\n")
        out.flush()



def _lease(store, sweep: str, wait: bool, stream, stop):
    """The sweep's lease (`sweeper.results.lease`); a driver waiting for another one's leaves on
    the first signal (`sweeper.interrupts.Interrupted`): it has nothing running to finish, and
    writes nothing."""
    from sweeper.results.lease import WaitStopped, acquire

    try:
        return acquire(store, sweep, wait=wait, stream=stream, stop=stop.event)
    except WaitStopped:
        raise stop.interrupted(f"stopped waiting for the other driver of sweep {sweep}; "
                               "nothing was run") from None


def _objective_cells(store, spec):
    """An objective search's cells, best first (`analysis.search.objective_cells`: the value
    its study is told), or None when nothing is stored."""
    import pyarrow as pa

    from analysis.search import best_first, objective_cells

    axes = [a.column for a in spec.axes]
    objective = spec.search.objective
    wanted = [*axes, objective, "status", "learned", "train.steps", "trial_id"]
    try:
        data = store.read(spec.name, "trials", columns=list(dict.fromkeys(wanted)))
    except pa.ArrowInvalid:
        data = store.read(spec.name, "trials")
    if data is None:
        return None
    cells = objective_cells(data.to_pandas(), axes, objective)
    return best_first(cells, spec.search.direction).reset_index(drop=True)


def _stored_cells(store, spec, outcome: str):
    """The sweep's cells (`sweeper.results.cell_stats` of `outcome` over its axes), or None
    when nothing is stored."""
    import pyarrow as pa

    from sweeper.results import cell_stats
    from sweeper.results.rules import success_outcomes

    axes = [a.column for a in spec.axes]
    steps = success_outcomes(spec.family.outcome_rules)[outcome]
    wanted = [*axes, outcome, steps, "status", "trial_id", "shared_with"]
    try:  # only what the table needs: the whole table of a big sweep costs the
        # driver hundreds of MB
        data = store.read(spec.name, "trials", columns=list(dict.fromkeys(wanted)))
    except pa.ArrowInvalid:  # a store from before one of these columns existed
        data = store.read(spec.name, "trials")
    if data is None:
        return None
    return cell_stats(data.to_pandas(), axes, outcome, steps)

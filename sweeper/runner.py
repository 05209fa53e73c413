"""Orchestrate a run of a sweep: its plan, its strategy, the executor that trains what the
strategy proposes, the Recorder that stores what comes back, and the manifest.

The caller (`sweeper.api.run`) has expanded the sweep once (`sweeper.plan.make_plan`) and holds
its lease; recording is `sweeper.recording`'s, training the executor's (`sweeper.executors`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from sweeper.interrupts import Stoppable, StopRequest
from sweeper.plan import Plan, make_plan, plan_progress
from sweeper.recording import Feedback, Progress, Recorder
from sweeper.results import Store
from sweeper.results.summary import read_progress
from sweeper.search_space import SweepFile
from sweeper.strategies import Context, make_strategy, strategy_class


def manifest(sweep: SweepFile, plan: Plan, previous: dict[str, Any] | None = None,
             overrides: list[str] | None = None) -> dict[str, Any]:
    """What the manifest says of a run (the store adds provenance: versions, git commit): the
    sweep file, its identity and fingerprint (`sweeper.identity`), and every version of the
    file that has run under this name; what its strategy says of its search, for readers that
    must not branch on the type (`sweeper.results.reading.search_facts`)."""
    from sweeper.identity import fingerprint, versions
    from sweeper.results.rules import success_outcomes

    config = plan.identity
    rules = strategy_class(sweep.search.type)
    # what its maps show: the outcome it judges its cells by when that is a yes/no one (an
    # Optuna search of `learned`, a boundary search's outcome), else the family's
    judged = rules.judged_outcome(sweep.search, sweep.family)
    outcome = (judged if judged in success_outcomes(sweep.family.outcome_rules)
               else sweep.family.phase_outcome)
    return {"sweep_file": sweep.text, "task": sweep.task, "model": sweep.model,
            "search": sweep.search.type, "search_draws_cells": rules.draws_cells,
            "search_samples_level_set": rules.samples_level_set,
            "search_adaptive": rules.adaptive,
            "outcome": outcome, "objective": sweep.search.objective,
            # what the sweep varies, its `--set` overrides applied: the parameters every view
            # offers (`analysis.swept`), apart from the columns derived from them
            "axes": [a.column for a in sweep.axes],
            "direction": sweep.search.direction if sweep.search.objective else None,
            "trials_expanded": plan.budget,
            "identity": config, "fingerprint": fingerprint(config),
            "overrides": list(overrides or []),
            "versions": versions(sweep, config, previous, overrides)}


def run_sweep(sweep: SweepFile, store: Store, executor: Any, pack_size: int | None = None,
              workers: int | None = None, stream=None, stop: StopRequest | None = None,
              extend: bool = False, overrides: list[str] | None = None,
              memory: int | None = None, plan: Plan | None = None,
              notices: list[str] | None = None) -> dict[str, Any]:
    """Run what is not stored yet; returns a summary (counts, seconds, trials per second).

    `executor` follows `sweeper.executors.base.Executor` (entered by the caller when it needs
    starting); `workers` overrides its capacity. The strategy comes from `search.type`; a
    `stop` request (`sweeper.interrupts`) makes it propose nothing more. The caller holds the
    sweep's lease (`sweeper.results.lease`). A sweep stored with another configuration is
    refused unless `extend` (`sweeper.identity`). `memory`: the bytes the packs running at once
    may use together when they train on this machine (automatic pack sizes fit in it).
    `plan`: the sweep's plan when the caller expanded it already (expanded once per run).
    `notices`: lines (warnings) to write once the run is admitted and its manifest written,
    before anything trains, so that a refusal or a failed first write stays one line.
    """
    from sweeper.identity import check_same_study

    start = time.perf_counter()
    plan = make_plan(sweep, set()) if plan is None else plan
    previous = store.read_manifest(sweep.name)
    check_same_study(sweep, plan.identity, previous, extend)
    store.recover(sweep.name)
    stored = store.done_ids(sweep.name)  # failed trials are trained again
    retried = store.stored_ids(sweep.name) - stored
    plan = plan.with_stored(stored)
    workers = executor.capacity(sweep) if workers is None else workers
    pack_bytes = None if memory is None else memory // max(1, workers)
    strategy = make_strategy(Context(plan, store, pack_size or sweep.pack_size, workers,
                                     pack_bytes))
    if stop is not None:
        strategy = Stoppable(strategy, stop)
    record = manifest(sweep, plan, previous, overrides)
    recorder: Recorder | None = None
    try:
        store.write_manifest(sweep.name, record)
        for notice in notices or ():  # admitted, its first write done: a refusal or a failed
            (stream or sys.stderr).write(notice + "\n")  # first write stays one line
        sharing = plan.sharing
        progress = Progress(record["trials_expanded"], stream, stored=len(stored),
                            failed=len(retried))
        recorder = Recorder(store, sweep.name, progress, set(stored), retried=retried,
                            shares=sharing.shares)
        try:
            recorder.share_stored(sharing.shares_stored)
            feedback = Feedback(recorder, strategy)
            if not strategy.done:
                try:
                    executor.run(sweep, strategy, feedback)
                except KeyboardInterrupt:  # a second signal: abandoned, and said so in the file
                    recorder.close(interrupted=True, abandoned=True)
                    raise
            best = getattr(strategy, "best_trial", None)  # an Optuna study's best (before close)
            best_trial = best() if callable(best) else None
        except BaseException:  # the merge child, if any, ends before the lease is given back
            if recorder.merges is not None:  # (a next driver might merge its files)
                recorder.merges.close(quietly=True)
            raise
    finally:
        try:
            strategy.close()
        except BaseException:
            if recorder is not None and recorder.merges is not None:
                recorder.merges.close(quietly=True)
            raise
    interrupted = stop is not None and stop.requested
    recorder.close(interrupted)
    conclusion = getattr(strategy, "conclusion", None)  # why an adaptive search stopped
    ended = conclusion() if callable(conclusion) else None
    if ended:
        recorder.progress.stream.write(ended + "\n")
    seconds = time.perf_counter() - start
    now = plan_progress(plan, store, sweep.name, read_progress(store.fs, store.path(sweep.name)))
    return {"sweep": sweep.name, "expanded": record["trials_expanded"],
            "already_stored": len(stored), "ran": recorder.written, "packs": feedback.packs,
            "shared": recorder.shared, "decided": recorder.decided,
            "seconds": seconds, "trials_per_s": recorder.written / seconds if seconds else 0.0,
            "search_end": ended, "best_trial": best_trial,
            "status": store.status_counts(sweep.name),
            "interrupted": interrupted, "pending": now.pending, "progress": now}

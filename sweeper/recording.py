"""What a run records: the progress line, the `Recorder` (the single writer of a sweep's
results) and the `Feedback` executors report packs to.

The `Recorder` is the single writer of a sweep's results: executors report to it (through
`Feedback`) from the driver process only, so each pack is committed once (its trials file) and
a trial id already stored is never written again, whatever the executor retried or the
strategy proposed twice. A strategy is told of a pack only after its results are stored.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sweeper.results import Store
from sweeper.spec import TrialResult, TrialSpec
from sweeper.strategies import Strategy

HEARTBEAT_S = 10.0  # the longest a running driver leaves its progress file unwritten


class Progress:
    """One status line: trials done, failed, running and pending of the sweep's whole plan
    (`sweeper.results.summary.sweep_progress`, as `sweeper status` counts them: the trials
    stored before this run included), throughput, ETA (stderr, throttled).

    `total`: the whole plan (None: unknown); `stored`: trials stored with an outcome before
    this run (what it does not train again), `failed`: stored as failed before it (trained
    again: a new row replaces the failed one)."""

    def __init__(self, total: int | None, stream=None, every_s: float = 1.0, stored: int = 0,
                 failed: int = 0):
        stream = sys.stderr if stream is None else stream
        self.total, self.stream, self.every_s = total, stream, every_s
        self.before = stored + failed
        self.done, self.failed, self.running = stored, failed, 0
        self.packs: dict[str, tuple[int, int]] = {}  # running packs: (step reached, budget)
        self.start = time.perf_counter()
        self._last = 0.0
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def update(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < (self.every_s if self.tty else 10 * self.every_s):
            return
        self._last = now
        self.stream.write(("\r" if self.tty else "") + self.line() + ("" if self.tty else "\n"))
        self.stream.flush()

    def counts(self):
        """This driver's view by the one definition (`sweep_progress`)."""
        from sweeper.results.summary import sweep_progress

        return sweep_progress({"ok": self.done, "failed": self.failed}, None,
                              planned=self.total, running=self.running)

    def line(self) -> str:
        elapsed = time.perf_counter() - self.start
        now = self.counts()
        rate = (now.stored - self.before) / elapsed if elapsed > 0 else 0.0
        if self.total:
            width = 24
            filled = min(width, int(width * now.stored / self.total))
            bar = "[" + "#" * filled + "." * (width - filled) + "] "
            left = (now.pending or 0) + now.running
            eta = f"ETA {_duration(left / rate)}" if rate > 0 and left else "ETA -"
            count = f"{now.stored}/{self.total}"
            pending = f", {now.pending} pending"
        else:
            bar, eta, count, pending = "", "", str(now.stored), ""
        return (f"{bar}{count} trials: {now.done} done, {now.failed} failed, "
                f"{now.running} running{self._steps()}{pending} | {rate:.2f} trials/s | {eta}"
                ).rstrip(" |")

    def _steps(self) -> str:
        """Where the running packs are: ' (steps 120/400, 40/400)', at most 3 listed."""
        reached = [f"{step}/{steps}" for step, steps in self.packs.values()]
        if not reached:
            return ""
        more = f", +{len(reached) - 3}" if len(reached) > 3 else ""
        return f" (step{'s' * (len(reached) > 1)} {', '.join(reached[:3])}{more})"

    def close(self) -> None:
        if self.done + self.failed == self.before and not self.counts().pending:
            return  # nothing was to run: the summary says so in one line
        self.update(force=True)
        if self.tty:
            self.stream.write("\n")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@dataclass
class Recorder:
    store: Store
    sweep: str
    progress: Progress
    stored: set[str] = field(default_factory=set)
    written: int = 0
    lost_trials: int = 0
    retried: set[str] = field(default_factory=set)  # ids stored as failed before this run
    # a training's trial id -> the pending trials that share it (`plan.Sharing`): stored with
    # it, in its pack's files
    shares: Mapping[str, list[TrialSpec]] = field(default_factory=dict)
    shared: int = 0  # rows written that share another trial's training
    decided: int = 0  # rows written of trials stopped once decided (`train.stop: decided`)
    # the cell summary (sweeper.results.summary: RESULTS/SWEEP/cells.parquet), kept current
    # after every committed pack, and the running packs for progress.json
    summary: Any = None
    merges: Any = None  # `sweeper.results.merging.DriverMerges`, from the first pack stored
    packs: dict[str, dict[str, Any]] = field(default_factory=dict)
    _progress_at: float = 0.0
    _warned: bool = False
    _pool_before: Any = None  # Arrow's memory pool before this driver's (put back at close)

    def __post_init__(self) -> None:
        from sweeper.results.store import use_system_allocator

        # a driver that frees memory for hours must give it back; the pool it replaced comes
        # back at `close`
        self._pool_before = use_system_allocator()

    def started(self, specs: list[TrialSpec]) -> bool:
        """A pack began training; False when it was already running (an executor that
        trains a lost pack again starts it twice), which changes no count."""
        key = _pack_key(specs)
        if key in self.packs:
            self.packs[key]["step"] = 0  # a new attempt starts from step 0
            return False
        self.progress.running += len(specs)
        self.packs[key] = {"pack": key, "trials": len(specs), "step": 0,
                           "steps": int(specs[0].train["steps"]), "started": _now()}
        self.progress.packs[key] = (0, int(specs[0].train["steps"]))
        self.progress.update()
        self.write_progress(force=True)
        return True

    def _ended(self, specs: list[TrialSpec]) -> None:
        """A pack is no longer running: counted once, and only if its start was (Tune calls
        no start for a trial whose reused actor was already dead)."""
        key = _pack_key(specs)
        if self.packs.pop(key, None) is not None:
            self.progress.running -= len(specs)
        self.progress.packs.pop(key, None)

    def progressed(self, specs: list[TrialSpec], step: int) -> None:
        """A running pack's workers reached evaluation step `step` (throttled reports)."""
        key = _pack_key(specs)
        if key not in self.packs:
            return
        self.packs[key]["step"] = int(step)
        self.progress.packs[key] = (int(step), self.packs[key]["steps"])
        self.progress.update()
        self.write_progress()

    def heartbeat(self) -> None:
        """Rewrite the progress file when nothing else did for HEARTBEAT_S: a live driver
        whose packs report rarely must not look stalled (`summary.driver_state`)."""
        if time.perf_counter() - self._progress_at >= HEARTBEAT_S:
            self.write_progress(force=True)

    def write_progress(self, force: bool = False, state: str = "running") -> None:
        """RESULTS/SWEEP/progress.json, at most once a second unless forced; a failed write
        is one warning, never the sweep's end (the file is a view, not a record)."""
        now = time.perf_counter()
        if not force and now - self._progress_at < 1.0:
            return
        self._progress_at = now
        from sweeper.results.summary import PROGRESS_FILE, progress_bytes

        payload = {"sweep": self.sweep, "state": state, "host": socket.gethostname(),
                   "planned": self.progress.total, "done": self.progress.done,
                   "failed": self.progress.failed, "running": self.progress.running,
                   "lost": self.lost_trials, "written": self.written,
                   "packs": list(self.packs.values())}
        self._quietly(lambda: self.store._put(self.store.path(self.sweep, PROGRESS_FILE),
                                              progress_bytes(payload)))

    def _quietly(self, write, what: str = "could not write the sweep's progress or cell "
                 "summary") -> None:
        """Upkeep (a view file, a merge) that fails is one warning, never the sweep's end:
        what is stored stays as it is."""
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - upkeep must never stop a sweep
            if not self._warned:
                self._warned = True
                self.progress.stream.write(f"warning: {what} ({exc}); results are "
                                           "unaffected\n")

    def close(self, interrupted: bool = False, abandoned: bool = False) -> None:
        """The sweep's end (finished, or interrupted: a signal stopped it; `abandoned`: a
        second signal, so no last merge is asked for): the last progress line and file."""
        self.progress.close()
        if self.merges is not None:  # the child's merge in flight: before the end's reads
            self._quietly(lambda: self.merges.close(quietly=abandoned),
                          "could not merge the sweep's files (readers open more of them)")
        if self.summary is not None:
            self._quietly(self.summary.write)  # the packs added since its last write
        if self.written:  # a finished sweep's folder holds no merge's inputs (a glob of it
            # would count them twice): a reader that listed them just now finds them gone
            # and lists again (`Store.read`)
            self._quietly(lambda: self.store.delete_replaced(self.sweep),
                          "could not delete the files merges replaced")
        self.packs.clear()
        self.progress.running = 0
        self.write_progress(force=True, state="interrupted" if interrupted else "finished")
        import pyarrow as pa

        pa.set_memory_pool(self._pool_before)

    def finished(self, specs: list[TrialSpec], results: list[TrialResult], attempts: int = 1,
                 node_id: str | None = None) -> None:
        """Store a pack's results (all of them, or what an early stop left), each with the
        driver's spec of its trial (a worker's spec is rebuilt from the config: it lacks
        what is not hashed, such as the values asked for, `TrialSpec.requested`)."""
        self._ended(specs)
        by_id = {s.trial_id: s for s in specs}
        results = [replace(r, spec=by_id.get(r.trial_id, r.spec)) for r in results]
        results = results + [r.shared_as(s) for r in results
                             for s in self.shares.get(r.trial_id, ())]
        self._store(results, attempts, node_id)

    def share_stored(self, shares: Mapping[str, list[TrialSpec]]) -> None:
        """Store the pending trials that share a training stored before this run (an
        equivalent cell added since): rows of their own with its outcomes, nothing trained."""
        if not shares:
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        ids = pa.array(sorted(shares), pa.string())
        rows = {r["trial_id"]: r for r in self.store.read(
            self.sweep, "trials", filter=pc.field("trial_id").isin(ids)).to_pylist()}
        results = []
        for trial_id, sharers in shares.items():
            row = rows[trial_id]
            outcomes = {k: row.get(k) for k in TrialResult.failed(sharers[0], "").outcomes}
            trained = TrialResult(sharers[0], row["status"], {}, outcomes, 0.0, row["error"],
                                  row.get("diverged_step"), row["host"],
                                  stopped_at=row.get("stopped_at"),
                                  stop_reason=row.get("stop_reason"))
            source = row.get("shared_with") or trial_id  # a shared row's own source
            results += [replace(trained.shared_as(s), shared_with=source) for s in sharers]
        self._store(results, 1, None)

    def _store(self, results: list[TrialResult], attempts: int, node_id: str | None) -> None:
        # a retried trial that fails again keeps its first failed row (and error), not two
        fresh = [r for r in results if r.trial_id not in self.stored
                 and not (r.status == "failed" and r.trial_id in self.retried)]
        if fresh:
            again = [r.trial_id for r in fresh if r.trial_id in self.retried]
            pack = self.store.write_pack(self.sweep, fresh, attempts, node_id, again)
            self.stored.update(r.trial_id for r in fresh)
            self.written += len(fresh)
            self.shared += sum(r.shared_with is not None for r in fresh)
            self.decided += sum(r.stop_reason == "decided" for r in fresh)
            self._quietly(lambda: self._summary().add(pack, fresh, attempts, node_id,
                                                      supersedes=again))
            self._quietly(self._merges().after_pack,
                          "could not merge the sweep's files (readers open more of them)")
        for r in fresh:
            if r.trial_id in self.retried:  # its new row replaces the failed one
                self.progress.failed -= 1
            if r.status == "failed":
                self.progress.failed += 1
            else:
                self.progress.done += 1
        self.progress.update()
        self.write_progress(force=True)

    def _merges(self):
        if self.merges is None:
            from sweeper.results.merging import DriverMerges

            self.merges = DriverMerges(self.store, self.sweep)
        return self.merges

    def _summary(self):
        if self.summary is None:
            from sweeper.results.summary import SummaryWriter

            self.summary = SummaryWriter(self.store, self.sweep)
        return self.summary

    def failed(self, specs: list[TrialSpec], error: str, attempts: int) -> None:
        self.finished(specs, [TrialResult.failed(s, error) for s in specs], attempts)

    def lost(self, specs: list[TrialSpec], error: str) -> None:
        """A pack whose worker kept being lost: nothing stored, so the next run trains it."""
        self._ended(specs)
        self.lost_trials += len(specs)
        last = error.strip().splitlines()[-1] if error.strip() else "worker lost"
        self.progress.stream.write(f"warning: a pack of {len(specs)} trials lost its worker "
                                   f"repeatedly ({last}); left pending for the next run\n")
        self.write_progress(force=True)


def _pack_key(specs: list[TrialSpec]) -> str:
    """A running pack's name: the id its files get when all its trials are fresh."""
    from sweeper.results import pack_id

    return pack_id(s.trial_id for s in specs)


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Feedback:
    """The sink executors report packs to (`sweeper.executors.base.PackSink`): each pack's results
    are stored first (the Recorder), then told to the strategy, so the strategy (and an Optuna
    study) never knows of a result the store lacks."""

    recorder: Recorder
    strategy: Strategy
    packs: int = 0  # packs started in this run

    def started(self, specs: list[TrialSpec]) -> None:
        self.packs += self.recorder.started(specs)

    def finished(self, specs: list[TrialSpec], results: list[TrialResult], attempts: int = 1,
                 node_id: str | None = None) -> None:
        self.recorder.finished(specs, results, attempts, node_id)
        self.strategy.tell(specs, results)

    def failed(self, specs: list[TrialSpec], error: str, attempts: int) -> None:
        self.finished(specs, [TrialResult.failed(s, error) for s in specs], attempts)

    def lost(self, specs: list[TrialSpec], error: str) -> None:
        self.recorder.lost(specs, error)
        self.strategy.tell(specs, None)

    def progressed(self, specs: list[TrialSpec], step: int) -> None:
        self.recorder.progressed(specs, step)

    def heartbeat(self) -> None:
        self.recorder.heartbeat()

"""The Ray Tune executor: the one module of sweeper that imports Ray.

One Tune trial trains one pack. Whatever the search (grid, random, Optuna, any strategy of
`sweeper.strategies`), Tune asks `_StrategySearcher`, a Tune `Searcher` that hands it the packs
the strategy proposes (`suggest` -> `ask`, one per free slot; `Searcher.FINISHED` once the
strategy is done); the pack's spec configs travel in the trial's config, as JSON. Workers send
their results back as plain data in their last report, and a Tune callback on the driver passes
each pack to the sink (`sweeper.recording.Feedback`: the Recorder, the store's single writer,
then the strategy's `tell`). Tune's own loggers are off: the store is the record. A sweep runs
as Tune runs of at most `round_packs` new packs, one after another, sharing the searcher and
the scheduler: Tune keeps every trial of a run in the driver (ROUND_PACKS).

Ray facts this module works around (Ray 2.60, measured): a local Ray binds to the machine's
non-loopback address unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; Tune writes ~5 files per trial
unless TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1; with a custom searcher Tune keeps one trial
pending unless `max_concurrent_trials` is set, which wraps the searcher in a
ConcurrencyLimiter allowing that many; Tune pickles its searcher and callbacks into its own
experiment state (for a Tune resume sweeper never uses), so their driver-side state (a study's
database connection) stays out of the pickle; `ray.init` (embedded or `--address`) sets SIGTERM
handlers of its own (a SystemExit, then a C-level stack dump) over the driver's, which are set
again once it has started (`_driver_handlers`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")  # sweeper.interrupts handles SIGINT

import ray  # noqa: E402
from ray import tune  # noqa: E402
from ray.tune.search import Searcher  # noqa: E402

from sweeper.cells import cell_specs  # noqa: E402
from sweeper.executors.base import (  # noqa: E402
    PROGRESS_EVERY_S,
    PackSink,
    nothing_proposed,
    store_step,
)
from sweeper.executors.checks import check_ray  # noqa: E402
from sweeper.results.words import count  # noqa: E402
from sweeper.search_space import SweepFile  # noqa: E402
from sweeper.spec import TrialResult, TrialSpec  # noqa: E402
from sweeper.strategies import Strategy  # noqa: E402
from sweeper.workers import PackOutcome, execute_pack_with_retries  # noqa: E402

PACK_METRIC = "pack_metric"  # what ASHA watches: the pack's mean of the chosen metric
# Tune's own retries are for packs whose worker was lost (a dead node or process): errors of
# the code are caught and retried on the worker (`execute_pack_with_retries`). A Tune trial
# recovers up to LOST_PACK_RETRIES times; a trial Tune gives up on is proposed again as a new
# trial, up to LOST_PACK_RETRIES times. Only then does the pack stay pending (never `failed`);
# the next run trains it.
LOST_PACK_RETRIES = 20
# Tune keeps every trial of a run in the driver, and walks and saves them all again and again
# (measured: ~150 KB of driver memory a pack, and per-pack work that grows with the run), so a
# sweep's packs go through Tune runs of bounded size, one after another: what Tune keeps stays
# bounded in N. A run ends by letting its last packs finish, which leaves slots idle a moment:
# at least ROUND_PACKS_PER_SLOT packs a slot keep that under a few percent of a run's time.
ROUND_PACKS = 256
ROUND_PACKS_PER_SLOT = 32


# -- worker side -----------------------------------------------------------------------------
def _node() -> dict[str, str]:
    return {"node_id": ray.get_runtime_context().get_node_id()}


def _reporter(metric: str | None, last_step: int) -> Callable | None:
    """Per-evaluation reports, only when a scheduler needs them (each costs a round trip);
    without one, the step reached, at most every PROGRESS_EVERY_S (`_progress_reporter`).

    The last evaluation goes out with the final report instead: ASHA stops every trial that
    reports step >= max_t, and a stop decided on a per-evaluation report comes before the
    final one, which would store a finished pack as `stopped`.
    """
    if metric is None:
        return _progress_reporter(last_step)

    def report(step: int, rows: list[dict]) -> None:
        if step >= last_step:
            return
        values = [r[metric] for r in rows if r is not None and not math.isnan(r[metric])]
        tune.report({"step": step, "rows": rows,
                     PACK_METRIC: sum(values) / len(values) if values else math.nan})

    return report


def _progress_reporter(last_step: int, every_s: float = PROGRESS_EVERY_S) -> Callable:
    """The pack's evaluation step, no results, at most once per `every_s` seconds: one small
    round trip to the driver every few seconds (a report blocks until Tune takes it)."""
    import time

    last = [time.monotonic()]

    def report(step: int, rows: list[dict]) -> None:
        now = time.monotonic()
        if step >= last_step or now - last[0] < every_s:
            return
        last[0] = now
        tune.report({"progress": True, "step": step})

    return report


def _failed_report(outcome: PackOutcome) -> None:
    tune.report({"final": True, "error": outcome.error, "attempts": outcome.attempts, **_node()})


def _final_report(results: list, metric: str | None, attempts: int = 1) -> None:
    payload = {"final": True, "results": [result_to_report(r) for r in results], **_node(),
               "attempts": attempts}
    if metric is not None:
        values = [r.trajectory[metric][-1] for r in results if r.trajectory[metric]]
        payload[PACK_METRIC] = sum(values) / len(values) if values else math.nan
        payload["step"] = max((r.trajectory["step"][-1] for r in results
                               if r.trajectory["step"]), default=0)
    tune.report(payload)


def train_pack_trial(config: dict, device: str, threads: float, metric: str | None,
                     retries: int) -> None:
    """One Tune trial: the pack whose spec configs the searcher put in `config["pack"]`."""
    configs = json.loads(config["pack"])
    outcome = execute_pack_with_retries(configs, device, threads, retries,
                                        _reporter(metric, configs[0]["train"]["steps"]))
    if outcome.error is not None:
        _failed_report(outcome)
    else:
        _final_report(outcome.results, metric, attempts=outcome.attempts)


# -- driver side -------------------------------------------------------------------------------
TUNE_PREFIX = "sweeper-tune-"


def tune_storage() -> str:
    """A temporary folder for Tune's own state (the store is the record), marked with this
    process's id; the folders of drivers that are gone (killed: no `finally` ran) are removed
    first, so none is left behind however a run ended."""
    remove_stale_tune_storage()
    storage = tempfile.mkdtemp(prefix=TUNE_PREFIX)
    with open(os.path.join(storage, "owner.pid"), "w") as f:
        f.write(str(os.getpid()))
    return storage


def remove_stale_tune_storage(root: str | None = None) -> list[str]:
    root = root or tempfile.gettempdir()
    removed = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if not name.startswith(TUNE_PREFIX) or not os.path.isdir(path):
            continue
        try:
            with open(os.path.join(path, "owner.pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            pid = None  # an older sweeper's folder, or one a crash left half made
        unowned_and_old = pid is None and time.time() - os.path.getmtime(path) > 86_400
        if unowned_and_old or (pid is not None and not _alive(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the wire format: what a worker sends the driver (plain data, no pickles) -----------------
def result_from_report(spec: TrialSpec, payload: Mapping[str, Any]) -> TrialResult:
    """Rebuild a TrialResult on the driver from what a worker sent (plain data, no pickles)."""
    return TrialResult(spec, payload["status"], payload["trajectory"], payload["outcomes"],
                       payload["wall_time_s"], payload.get("error"), payload.get("diverged_step"),
                       payload.get("host", socket.gethostname()),
                       stopped_at=payload.get("stopped_at"),
                       stop_reason=payload.get("stop_reason"))


def result_to_report(result: TrialResult) -> dict[str, Any]:
    return {"trial_id": result.trial_id, "status": result.status,
            "trajectory": result.trajectory, "outcomes": result.outcomes,
            "wall_time_s": result.wall_time_s, "error": result.error,
            "diverged_step": result.diverged_step, "host": result.host,
            "stopped_at": result.stopped_at, "stop_reason": result.stop_reason}


def partial_result(spec: TrialSpec, rows: list[tuple[int, dict]], status: str,
                   wall_time_s: float) -> TrialResult:
    """A trial stopped early (by the scheduler) from the evaluation rows it reported."""
    names = [m.name for m in spec.metrics]
    trajectory = {"step": [s for s, _ in rows], **{n: [r[n] for _, r in rows] for n in names}}
    return TrialResult(spec, status, trajectory, spec.outcomes(trajectory), wall_time_s,
                       stopped_at=trajectory["step"][-1] if rows else None,
                       stop_reason="early-stopper")


class _StrategySearcher(Searcher):
    """Tune's view of a strategy: each suggestion is the next pack it proposes, or a pack
    whose Tune trial was given up on (`retry`).

    Tune calls `suggest` once per free slot (the ConcurrencyLimiter of `max_concurrent_trials`);
    results reach the strategy through the store callback (stored first, then told), not
    through `on_trial_complete`. FINISHED comes only once no pack is out: Tune never asks a
    finished searcher again, and a pack out may yet need proposing again. It comes when the
    strategy is done, or when this Tune run has had its `start_round` packs (the executor then
    starts another run with the same searcher).
    """

    def __init__(self, strategy: Strategy):
        super().__init__()
        self.strategy = strategy
        self.packs: dict[str, list[TrialSpec]] = {}  # Tune trial id -> its pack
        self.again: list[list[TrialSpec]] = []  # packs whose trial Tune gave up on
        self.losses: dict[str, int] = {}  # first trial id of a pack -> trials given up on
        self.round_left: float = math.inf  # new packs this Tune run may still propose

    def start_round(self, packs: int) -> None:
        """A new Tune run proposes at most `packs` new packs (packs proposed again come on
        top: they were started in it)."""
        self.round_left = packs

    def retry(self, trial_id: str, failures: int = 1) -> list[TrialSpec] | None:
        """Propose the pack of a trial Tune gave up on again, as a new trial; None once the
        pack's workers were lost more than LOST_PACK_RETRIES times in all (`failures`: the
        trial's own count, Tune's recoveries included), which is then the caller's to handle.

        Tune gives up on a trial early when it reuses a cached actor whose node is gone: the
        dead actor fails the trial twice over (its start and its reset task), and the second
        failure finds the trial already requeued, so it is errored, not recovered (Ray 2.60,
        TuneController._actor_failed then _trial_task_failure). A pack that kills every worker
        it runs on (the OOM killer) spends the one budget, not a budget per trial.

        A pack proposed again is trained even after a stop was requested, as Tune's own
        recoveries are: it was started before the stop.
        """
        pack = self.packs.pop(trial_id)
        key = pack[0].trial_id
        self.losses[key] = self.losses.get(key, 0) + max(1, failures)
        if self.losses[key] > LOST_PACK_RETRIES:
            return None
        self.again.append(pack)
        return pack

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # the strategy has its own space; Tune's metric is the scheduler's

    def suggest(self, trial_id: str) -> dict | str | None:
        if self.again:
            pack = self.again.pop(0)
        else:
            packs = [] if self.strategy.done or self.round_left <= 0 else self.strategy.ask(1)
            if not packs:
                if self.packs:
                    return None  # wait for the packs that are out
                if self.strategy.done or self.round_left <= 0:
                    return Searcher.FINISHED
                raise nothing_proposed(self.strategy)
            (pack,) = packs
            self.round_left -= 1
        self.packs[trial_id] = pack
        return {"pack": json.dumps([s.config() for s in pack], separators=(",", ":"))}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass  # told by _StoreCallback, once the pack's results are stored

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        pass  # Tune's resume is not used: the store and the strategy's own state are

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("strategy", "packs")}


def _error_text(trial) -> str:
    """The end of the trial's last traceback.

    Read from the driver's staging copy, written before on_trial_error is called; Tune's
    get_error() reads the storage copy, which the CI saw not yet synced ("the trial failed").
    """
    error = None
    try:
        local = trial.error_file
        if local and os.path.exists(local):
            with open(local) as f:
                error = f.read()
        else:
            error = trial.get_error()
    except Exception:  # noqa: BLE001
        pass
    lines = [ln for ln in str(error or "the trial failed").splitlines() if ln.strip()]
    return "\n".join(lines[-6:])


class _StoreCallback(tune.Callback):
    """Hands each finished Tune trial's pack to the sink (driver side, single writer)."""

    def __init__(self, searcher: _StrategySearcher, sink: PackSink):
        self.searcher, self.sink = searcher, sink
        self.rows: dict[str, list] = {}
        self.final: dict[str, dict] = {}
        self.started: set[str] = set()
        self.fatal: Exception | None = None  # a store step failed: end the experiment

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("searcher", "sink", "fatal")}

    def on_step_end(self, iteration, trials, **info):
        """A failed store step ends the run here (`_storing`). Otherwise the driver's heartbeat
        in its progress file (throttled by the sink)."""
        if self.fatal is not None:
            raise self.fatal
        heartbeat = getattr(self.sink, "heartbeat", None)
        if heartbeat is not None:
            heartbeat()

    def on_trial_start(self, iteration, trials, trial, **info):
        if trial.trial_id not in self.started:
            self.started.add(trial.trial_id)
            self.sink.started(self.searcher.packs[trial.trial_id])

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result.get("final"):
            self.final[trial.trial_id] = result
            return
        if "rows" in result:
            # a retry on the worker starts again from step 0: drop what the failed attempt sent
            rows = [r for r in self.rows.get(trial.trial_id, []) if r[0] < result["step"]]
            self.rows[trial.trial_id] = [*rows, (result["step"], result["rows"])]
        if ("rows" in result or result.get("progress")) and trial.trial_id in self.searcher.packs:
            progressed = getattr(self.sink, "progressed", None)
            if progressed is not None:
                progressed(self.searcher.packs[trial.trial_id], int(result["step"]))

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.rows.pop(trial.trial_id, None)  # the retry starts again from step 0

    def _storing(self, step: Callable[[], None]) -> None:
        """Run a store step (`base.store_step`: any error ends the sweep) unless one failed
        already (the sweep is stopping: nothing more is stored). Its error waits for
        `on_step_end`: raised inside a trial's callback, Tune would take it for the trial's
        failure and train the pack again, for ever, meeting the same error each time."""
        if self.fatal is not None:
            return
        try:
            with store_step():
                step()
        except Exception as exc:  # noqa: BLE001 - store_step made it the sweep's end
            self.fatal = exc

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._storing(lambda: self._store(trial))
        _forget_results(trial)

    def _store(self, trial) -> None:
        specs = self.searcher.packs.pop(trial.trial_id)
        final = self.final.pop(trial.trial_id, None)
        rows = self.rows.pop(trial.trial_id, [])
        attempts = final.get("attempts", 1) if final is not None else 1
        if final is not None and final.get("error") is not None:
            self.sink.failed(specs, final["error"], attempts)
        elif final is not None:
            by_id = {s.trial_id: s for s in specs}
            results = [result_from_report(by_id[r["trial_id"]], r) for r in final["results"]]
            self.sink.finished(specs, results, attempts, final.get("node_id"))
        else:  # stopped early by the scheduler: store what it reported, marked "stopped"
            results = [partial_result(spec, [(step, r[k]) for step, r in rows], "stopped", 0.0)
                       for k, spec in enumerate(specs)]
            self.sink.finished(specs, results, attempts)

    def on_trial_error(self, iteration, trials, trial, **info):
        """Tune gave up on the trial (its worker was lost): store its results if its final
        report had arrived, else propose the pack again, or, lost too often, leave it pending
        for the next run."""
        if trial.trial_id in self.final:  # its results (or its code's error) arrived first
            self.on_trial_complete(iteration, trials, trial)
        else:
            self._storing(lambda: self._retry_or_lose(trial))

    def _retry_or_lose(self, trial) -> None:
        self.rows.pop(trial.trial_id, None)
        pack = self.searcher.packs[trial.trial_id]
        if self.searcher.retry(trial.trial_id, getattr(trial, "num_failures", 1)) is None:
            self.sink.lost(pack, _error_text(trial))


def _forget_results(trial) -> None:
    """Once a pack is stored, its trial keeps a small report, not its trajectories: Tune keeps
    every finished trial's last result in the driver and in its experiment state, which would
    grow the driver by the whole sweep's trajectories (about 20 KB a trial)."""
    metadata = getattr(trial, "run_metadata", None)
    last = getattr(metadata, "last_result", None)
    if isinstance(last, dict) and ("results" in last or "rows" in last):
        metadata.last_result = {k: v for k, v in last.items() if k not in ("results", "rows")}


class RayTuneExecutor:
    """Start (or connect to) Ray, run a strategy's packs as Tune trials, shut down what it
    started."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 results_shared: bool = False, verbose: bool = False):
        self.address, self.num_cpus = address, num_cpus
        self.results_shared, self.verbose = results_shared, verbose

    def check(self, sweep: SweepFile, store) -> None:
        check_ray(sweep, store, self.address, self.num_cpus, self.results_shared)

    def starting(self) -> str:
        if self.address is not None:
            return f"connecting to the Ray cluster at {self.address} ..."
        cpus = "all CPUs" if self.num_cpus is None else count(self.num_cpus, "CPU")
        return f"starting Ray on this machine ({cpus}; ~5-15 s) ..."

    def __enter__(self) -> RayTuneExecutor:
        """Start Ray (embedded, or connect to `address`) in a thread of its own and return at
        once: what the driver does next (loading the kernels, torch's import among it, ~1-2 s)
        runs while Ray's processes start (~3-4 s, mostly waiting for them); the first call that
        needs Ray (`capacity`, `run`) waits for it (`started`)."""
        logging.getLogger("ray").setLevel(logging.ERROR)
        logging.getLogger("ray.tune").setLevel(logging.ERROR)
        self._handlers = _driver_handlers()
        self._start_error: BaseException | None = None
        self._up, self._stopped = threading.Event(), threading.Event()
        self._starting = threading.Thread(target=self._start, name="sweeper-ray-start",
                                          daemon=True)
        self._starting.start()
        return self

    def _start(self) -> None:
        """The start thread: it starts Ray, then lives until `__exit__` has stopped it. Ray's
        processes die with the thread that started them (the kernel's parent-death signal is
        sent when that thread ends, not the process), so it ends only after them."""
        try:
            if self.address is None:
                with _ray_processes_in_their_own_session():
                    ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False,
                             _node_ip_address="127.0.0.1", configure_logging=False,
                             log_to_driver=self.verbose)
            else:
                ray.init(address=self.address, configure_logging=False,
                         log_to_driver=self.verbose)
        except BaseException as exc:  # noqa: BLE001 - raised in the driver's thread
            self._start_error = exc
        finally:
            self._up.set()
        self._stopped.wait()

    def started(self) -> None:
        """Wait for Ray's start (raising what it raised, once), then set the driver's SIGINT
        and SIGTERM handlers again: Ray's core worker puts C-level ones of its own over them
        while it starts (see `_driver_handlers`)."""
        self._up.wait()
        if self._handlers is not None:
            _restore_handlers(self._handlers)
            self._handlers = None
        error, self._start_error = self._start_error, None
        if error is not None:
            raise error

    def __exit__(self, kind, value, traceback) -> None:
        """Stop what was started, once its start is over (a second Ctrl-C while Ray starts
        waits for it too: a shutdown during `ray.init` leaves Ray half started). The body's
        own error is the one raised; Ray's failed start only when the body had none."""
        try:
            while True:
                try:
                    self._up.wait()
                    break
                except KeyboardInterrupt:
                    continue
            if kind is None:
                self.started()
            elif self._handlers is not None:
                _restore_handlers(self._handlers)
                self._handlers = None
        finally:
            if self.address is None:
                _stop_autoscaler_monitor()
            ray.shutdown()  # then the start thread may end (`_start`)
            self._stopped.set()
            self._starting.join()

    def capacity(self, sweep: SweepFile) -> int:
        """Packs that can run at once: by CPUs, and by GPUs when each pack takes some."""
        self.started()
        resources = ray.cluster_resources()
        slots = resources.get("CPU", 1) // max(sweep.resources["cpu"], 1e-9)
        if sweep.resources["gpu"]:
            slots = min(slots, resources.get("GPU", 0) // sweep.resources["gpu"])
        return max(1, int(slots))

    def run(self, sweep: SweepFile, strategy: Strategy, sink: PackSink) -> None:
        """The strategy's packs, in Tune runs of at most `round_packs` new packs each, one
        after another, until it is done (see ROUND_PACKS). One searcher and one scheduler serve
        every run: what the strategy and ASHA's rungs know carries over."""
        self.started()
        scheduler, metric = _scheduler(sweep)
        searcher = _StrategySearcher(strategy)
        trainable = tune.with_resources(
            tune.with_parameters(train_pack_trial, device=sweep.device,
                                 threads=sweep.resources["cpu"], metric=metric,
                                 retries=sweep.retries),
            _resources(sweep))
        slots = self.capacity(sweep)
        while not strategy.done:
            searcher.start_round(round_packs(slots))
            self._tune_run(sweep, trainable, scheduler, searcher, sink, slots)
            if searcher.packs or searcher.again:
                return  # Tune ended its run with packs out (its SIGUSR1 handler, as SLURM's
                # --signal sends): they stay pending for the next run, as in one Tune run

    def _tune_run(self, sweep: SweepFile, trainable, scheduler, searcher: _StrategySearcher,
                  sink: PackSink, slots: int) -> None:
        """One Tune run: until the searcher says FINISHED. Tune's state lives in a temporary
        folder removed after it (the store is the record)."""
        storage = tune_storage()
        tuner_callbacks = [_StoreCallback(searcher, sink)]
        try:
            tuner = tune.Tuner(
                trainable,
                tune_config=tune.TuneConfig(
                    scheduler=scheduler, search_alg=searcher, num_samples=-1,
                    max_concurrent_trials=slots, reuse_actors=True,
                    trial_dirname_creator=lambda trial: f"pack_{trial.trial_id}"),
                run_config=tune.RunConfig(
                    name=sweep.name, storage_path=storage, verbose=0,
                    failure_config=tune.FailureConfig(max_failures=LOST_PACK_RETRIES),
                    checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
                    callbacks=tuner_callbacks),
            )
            store_callback = tuner_callbacks[0]
            try:
                tuner.fit()
            except Exception:
                if store_callback.fatal is not None:  # however Tune wrapped it
                    raise store_callback.fatal from None
                raise
            if store_callback.fatal is not None:
                raise store_callback.fatal
        finally:
            shutil.rmtree(storage, ignore_errors=True)


def round_packs(slots: int) -> int:
    """New packs one Tune run proposes, for `slots` packs at once (see ROUND_PACKS)."""
    return max(ROUND_PACKS, ROUND_PACKS_PER_SLOT * slots)


@contextmanager
def _ray_processes_in_their_own_session() -> Iterator[None]:
    """Start the embedded Ray's processes (GCS, raylet, and through the raylet its workers) in
    a session of their own, so that a signal to the driver's process group (SLURM's scancel,
    `kill -TERM -- -PGID`, a terminal's Ctrl-C) reaches the driver only: it stops the run once
    the running packs are stored (`sweeper.interrupts`), with the workers still alive to
    finish them, and then stops Ray (`ray.shutdown`). Ray blocks SIGINT in them for the same
    reason, but not SIGTERM: under a group SIGTERM they died first and the driver waited ~60 s
    for its GCS, then exited 1 with the pack lost. They still end with the driver whatever
    ends it: Ray shares their fate with it (the kernel's parent-death signal), and
    `ray.shutdown` stops them by their ids."""
    if not ray._private.utils.detect_fate_sharing_support():  # (macOS): Ray's reaper ends
        yield  # them by its process group, which a session of their own would escape
        return
    services = ray._private.services
    popen = services.ConsolePopen

    class SessionPopen(popen):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("start_new_session", True)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = SessionPopen
    try:
        yield
    finally:
        services.ConsolePopen = popen


def _stop_autoscaler_monitor() -> None:
    """End the embedded node's autoscaler monitor at once. `ray.shutdown` asks it to stop and
    waits 1 s (it does not stop while it sleeps between updates), then kills it: a whole second
    of the 1.5 s a shutdown took, measured, for a process that holds nothing (one node on one
    machine never scales)."""
    from ray._private import ray_constants

    node = getattr(ray._private.worker, "_global_node", None)
    processes = getattr(node, "all_processes", None) or {}
    for info in processes.get(getattr(ray_constants, "PROCESS_TYPE_MONITOR", "monitor"), []):
        try:
            info.process.kill()
            info.process.wait(timeout=5)
        except Exception:  # noqa: BLE001 - ray.shutdown stops it as it did before
            pass


def _driver_handlers() -> dict[int, Any]:
    """The SIGINT and SIGTERM handlers the driver set in Python (`sweeper.interrupts`: stop once
    the running packs are stored, exit 130 / 143), to be set again once Ray has started
    (`_restore_handlers`), so that a signal stops a run the same on every executor.

    Ray starts in a thread of its own (`RayTuneExecutor.__enter__`), where `ray.init` sets no
    Python handler (it does only in the main thread: its SIGTERM handler raised SystemExit at
    whatever line ran, even in a finaliser, where it was lost). Its core worker still adds a
    C-level SIGTERM handler (a stack dump, status 1 or an abort) that no Python call sees:
    setting the driver's handlers again puts them back. Only a SIGTERM while Ray starts
    (~3-4 s, before the first pack) is Ray's. Where the driver set none, Ray's stay (they stop
    the processes Ray started)."""
    if threading.current_thread() is not threading.main_thread():
        return {}  # handlers are the main thread's to set
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


def _restore_handlers(handlers: Mapping[int, Any]) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, handler in handlers.items():
        if callable(handler):
            signal.signal(signum, handler)


def _scheduler(sweep: SweepFile) -> tuple[Any, str | None]:
    """ASHA from the sweep's `scheduler` (it watches PACK_METRIC in the sweep's mode), and the
    metric the workers report per evaluation; (None, None) without one. The metric and mode are
    ASHA's own, not the Tune run's: one scheduler serves every run of a sweep."""
    if sweep.scheduler is None:
        return None, None
    from ray.tune.schedulers import ASHAScheduler

    s = sweep.scheduler
    return (ASHAScheduler(time_attr="step", metric=PACK_METRIC, mode=s.mode,
                          max_t=_max_steps(sweep), grace_period=s.grace_period,
                          reduction_factor=s.reduction_factor),
            s.metric)


def _resources(sweep: SweepFile) -> dict[str, float]:
    resources = {"cpu": sweep.resources["cpu"]}
    if sweep.resources["gpu"]:
        resources["gpu"] = sweep.resources["gpu"]
    return resources


def _max_steps(sweep: SweepFile) -> int:
    """The largest step budget of any trial (the scheduler's max_t)."""
    steps = [max(a.values) for a in sweep.axes if a.path == "train.steps"]
    if steps:
        return int(steps[0])
    return cell_specs(sweep, {a.path: a.values[0] for a in sweep.axes})[0].train["steps"]


def submit_job(address: str, sweep_file: str, sweep_name: str, extra_args: list[str],
               out, forward_env: list[str] | None = None) -> int:
    """Submit `sweeper run FILE --address auto` as a Ray job; stream its logs; its exit status.

    sweeper itself must be installed on the cluster's nodes (see cluster/README.md).
    """
    import shlex
    import time

    from ray.job_submission import JobSubmissionClient

    # The file's text travels in the job's environment, read back from stdin by `sweeper run -`.
    # (A runtime_env working_dir would do too, but on a local cluster Ray may garbage-collect
    # it while the driver still runs in it.)
    with open(sweep_file) as f:
        text = f.read()
    client = JobSubmissionClient(address)
    entrypoint = " ".join(["printenv SWEEPER_SWEEP_FILE | sweeper run - --address auto",
                           *map(shlex.quote, extra_args)])
    # Only what the user names travels: cluster credentials come from the cluster's roles.
    names = set(forward_env or []) | {"RAY_AUTH_MODE"}
    env = {k: os.environ[k] for k in sorted(names) if k in os.environ}
    job = None
    for attempt in range(90):  # a head that has just started may have no job agent yet
        try:
            job = client.submit_job(entrypoint=entrypoint,
                                    runtime_env={"env_vars": {**env, "SWEEPER_SWEEP_FILE": text}},
                                    submission_id=f"sweeper-{sweep_name}-{int(time.time())}")
            break
        except RuntimeError as exc:
            if "No available agent" not in str(exc) or attempt == 89:
                raise
            time.sleep(2.0)
    out.write(f"submitted {job} to {address}: {entrypoint}\n")
    return _follow(client, job, out)


def _follow(client, job: str, out) -> int:
    """Stream a job's logs until it ends; 0 if it succeeded, 1 otherwise."""
    import time

    from ray.job_submission import JobStatus

    printed = 0
    while True:
        status = client.get_job_status(job)
        logs = client.get_job_logs(job)
        out.write(logs[printed:])
        out.flush()
        printed = len(logs)
        if status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
            out.write(f"job {job}: {status.value}\n")
            return 0 if status == JobStatus.SUCCEEDED else 1
        time.sleep(1.0)

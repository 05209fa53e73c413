"""The Ray Tune executor: the one module of sweeper that imports Ray.

One Tune trial trains one pack. Grid and random sweeps hand Tune the list of packs (through the
object store) and a grid over their indices; Optuna sweeps hand it the axes as a search space
and Tune's OptunaSearch suggests cells, each trained as a pack of its seeds. Workers send their
results back as plain data in their last report, and a Tune callback on the driver passes them
to the `Recorder`, the store's single writer. Tune's own loggers are off: the store is the record.

Ray facts this module works around (Ray 2.60, measured): a local Ray binds to the machine's
non-loopback address unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; Tune writes ~5 files per trial
unless TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import ray  # noqa: E402
from ray import tune  # noqa: E402

from sweeper.errors import SweeperInputError  # noqa: E402
from sweeper.plan import cell_specs  # noqa: E402
from sweeper.runner import (  # noqa: E402
    Recorder,
    objective_value,
    partial_result,
    result_from_report,
    result_to_report,
    stored_cells,
)
from sweeper.search_space import Axis, SweepFile, parse_sweep  # noqa: E402
from sweeper.spec import TrialSpec  # noqa: E402
from sweeper.workers import PackOutcome, execute_pack_with_retries  # noqa: E402

PACK_METRIC = "pack_metric"  # what ASHA watches: the pack's mean of the chosen metric
OBJECTIVE = "objective"
# Tune's own retries are for packs whose worker was lost (a dead node or process): errors of
# the code are caught and retried on the worker (`execute_pack_with_retries`). A pack lost this
# many times in one run stays pending, never `failed`; the next run trains it.
LOST_PACK_RETRIES = 20


# -- worker side -----------------------------------------------------------------------------
def _node() -> dict[str, str]:
    return {"node_id": ray.get_runtime_context().get_node_id()}


def _reporter(metric: str | None) -> Callable | None:
    """Per-evaluation reports, only when a scheduler needs them (each costs a round trip)."""
    if metric is None:
        return None

    def report(step: int, rows: list[dict]) -> None:
        values = [r[metric] for r in rows if not math.isnan(r[metric])]
        tune.report({"step": step, "rows": rows,
                     PACK_METRIC: sum(values) / len(values) if values else math.nan})

    return report


def _failed_report(outcome: PackOutcome) -> None:
    tune.report({"final": True, "error": outcome.error, "attempts": outcome.attempts, **_node()})


def _final_report(results: list, metric: str | None, extra: dict | None = None,
                  attempts: int = 1) -> None:
    payload = {"final": True, "results": [result_to_report(r) for r in results], **_node(),
               "attempts": attempts, **(extra or {})}
    if metric is not None:
        values = [r.trajectory[metric][-1] for r in results if r.trajectory[metric]]
        payload[PACK_METRIC] = sum(values) / len(values) if values else math.nan
        payload["step"] = max((r.trajectory["step"][-1] for r in results
                               if r.trajectory["step"]), default=0)
    tune.report(payload)


def train_pack_trial(config: dict, packs: list[list[dict]], device: str, threads: float,
                     metric: str | None, retries: int) -> None:
    outcome = execute_pack_with_retries(packs[config["pack"]], device, threads, retries,
                                        _reporter(metric))
    if outcome.error is not None:
        _failed_report(outcome)
    else:
        _final_report(outcome.results, metric, attempts=outcome.attempts)


def train_cell_trial(config: dict, sweep_text: str, threads: float, metric: str | None) -> None:
    sweep = parse_sweep(sweep_text)
    specs = cell_specs(sweep, _cell(config))
    outcome = execute_pack_with_retries([s.config() for s in specs], sweep.device, threads,
                                        sweep.retries, _reporter(metric))
    if outcome.error is not None:
        # the searcher is told nothing it could take for a measurement
        _failed_report(outcome)
        return
    objective = objective_value([r.outcomes for r in outcome.results], sweep.search.objective,
                                specs[0].train["steps"])
    _final_report(outcome.results, metric, {OBJECTIVE: objective}, outcome.attempts)


# -- the search space of an adaptive sweep -----------------------------------------------------
def _key(path: str) -> str:
    return path.replace(".", "__")


def _cell(config: dict) -> dict[str, Any]:
    return {k.replace("__", "."): v for k, v in config.items()}


def _domain(axis: Axis):
    if axis.kind in ("grid", "choice"):
        return tune.choice(list(axis.values))
    low, high = axis.values
    if axis.kind == "int":
        return tune.randint(low, high + 1)
    return tune.loguniform(low, high) if axis.kind == "loguniform" else tune.uniform(low, high)


# -- driver side -------------------------------------------------------------------------------
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
    """Hands each finished Tune trial's pack to the Recorder (driver side, single writer)."""

    def __init__(self, specs_of: Callable[[Any], list[TrialSpec]], recorder: Recorder):
        self.specs_of, self.recorder = specs_of, recorder
        self.rows: dict[str, list] = {}
        self.final: dict[str, dict] = {}
        self.started: set[str] = set()

    def on_trial_start(self, iteration, trials, trial, **info):
        if trial.trial_id not in self.started:
            self.started.add(trial.trial_id)
            self.recorder.started(self.specs_of(trial))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result.get("final"):
            self.final[trial.trial_id] = result
        elif "rows" in result:
            # a retry on the worker starts again from step 0: drop what the failed attempt sent
            rows = [r for r in self.rows.get(trial.trial_id, []) if r[0] < result["step"]]
            self.rows[trial.trial_id] = [*rows, (result["step"], result["rows"])]

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.rows.pop(trial.trial_id, None)  # the retry starts again from step 0

    def on_trial_complete(self, iteration, trials, trial, **info):
        specs = self.specs_of(trial)
        final = self.final.pop(trial.trial_id, None)
        rows = self.rows.pop(trial.trial_id, [])
        attempts = final.get("attempts", 1) if final is not None else 1
        if final is not None and final.get("error") is not None:
            self.recorder.failed(specs, final["error"], attempts)
        elif final is not None:
            by_id = {s.trial_id: s for s in specs}
            results = [result_from_report(by_id[r["trial_id"]], r) for r in final["results"]]
            self.recorder.finished(specs, results, attempts, final.get("node_id"))
        else:  # stopped early by the scheduler: store what it reported, marked "stopped"
            results = [partial_result(spec, [(step, r[k]) for step, r in rows], "stopped", 0.0)
                       for k, spec in enumerate(specs)]
            self.recorder.finished(specs, results, attempts)

    def on_trial_error(self, iteration, trials, trial, **info):
        """The pack's worker was lost LOST_PACK_RETRIES + 1 times: leave it pending."""
        self.rows.pop(trial.trial_id, None)
        self.recorder.lost(self.specs_of(trial), _error_text(trial))


class RayTuneExecutor:
    """Start (or connect to) Ray, run packs as Tune trials, shut down what it started."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 results_shared: bool = False, verbose: bool = False):
        self.address, self.num_cpus = address, num_cpus
        self.results_shared, self.verbose = results_shared, verbose

    def __enter__(self) -> RayTuneExecutor:
        logging.getLogger("ray").setLevel(logging.ERROR)
        logging.getLogger("ray.tune").setLevel(logging.ERROR)
        if self.address is None:
            ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False,
                     _node_ip_address="127.0.0.1", configure_logging=False,
                     log_to_driver=self.verbose)
        else:
            ray.init(address=self.address, configure_logging=False, log_to_driver=self.verbose)
        return self

    def __exit__(self, *exc) -> None:
        ray.shutdown()

    def workers(self, cpu_per_trial: float, gpu_per_trial: float = 0) -> int:
        """Packs that can run at once: by CPUs, and by GPUs when each pack takes some."""
        resources = ray.cluster_resources()
        slots = resources.get("CPU", 1) // max(cpu_per_trial, 1e-9)
        if gpu_per_trial:
            slots = min(slots, resources.get("GPU", 0) // gpu_per_trial)
        return max(1, int(slots))

    def nodes(self) -> int:
        return sum(1 for n in ray.nodes() if n.get("Alive"))

    def check_results_reachable(self, store) -> None:
        """Workers' hosts must reach the results: a driver-local path only on one machine.

        Any --address counts as a cluster (an autoscaling one may start with only its head),
        unless the user marks the path as a filesystem every node shares.
        """
        several = self.address is not None or self.nodes() > 1
        if several and store.is_local and not self.results_shared:
            raise SweeperInputError(f"--results: got the local path {store.root!r} on a Ray "
                                    "cluster; allowed: an object-store URI (s3://...) or a "
                                    "shared filesystem marked with --results-shared")

    # -- running ------------------------------------------------------------------------------
    def _fit(self, trainable, param_space: dict, recorder: Recorder, sweep: SweepFile,
             specs_of: Callable, search_alg=None, num_samples: int = 1) -> None:
        scheduler, metric, mode = None, None, None
        if sweep.scheduler is not None:
            from ray.tune.schedulers import ASHAScheduler

            s = sweep.scheduler
            scheduler = ASHAScheduler(time_attr="step", max_t=_max_steps(sweep),
                                      grace_period=s.grace_period,
                                      reduction_factor=s.reduction_factor)
            metric, mode = PACK_METRIC, s.mode
        if search_alg is not None:
            metric, mode = OBJECTIVE, "max" if sweep.search.direction == "maximize" else "min"
        storage = tempfile.mkdtemp(prefix="sweeper-tune-")
        try:
            tuner = tune.Tuner(
                tune.with_resources(trainable, _resources(sweep)),
                param_space=param_space,
                tune_config=tune.TuneConfig(metric=metric, mode=mode, scheduler=scheduler,
                                            search_alg=search_alg, num_samples=num_samples,
                                            reuse_actors=True),
                run_config=tune.RunConfig(
                    name=sweep.name, storage_path=storage, verbose=0,
                    failure_config=tune.FailureConfig(max_failures=LOST_PACK_RETRIES),
                    checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
                    callbacks=[_StoreCallback(specs_of, recorder)]),
            )
            tuner.fit()
        finally:
            shutil.rmtree(storage, ignore_errors=True)

    def run_packs(self, packs: list[list[TrialSpec]], recorder: Recorder,
                  sweep: SweepFile) -> None:
        metric = sweep.scheduler.metric if sweep.scheduler else None
        configs = [[s.config() for s in pack] for pack in packs]
        trainable = tune.with_parameters(train_pack_trial, packs=configs, device=sweep.device,
                                         threads=sweep.resources["cpu"], metric=metric,
                                         retries=sweep.retries)
        self._fit(trainable, {"pack": tune.grid_search(list(range(len(packs))))}, recorder,
                  sweep, lambda trial: packs[trial.config["pack"]])

    def run_optuna(self, sweep: SweepFile, recorder: Recorder, store) -> None:
        from ray.tune.search.optuna import OptunaSearch

        done = stored_cells(store, sweep)
        remaining = sweep.search.trials - len(done)
        if remaining <= 0:
            return
        warm = [(cell, value) for cell, value in done if not math.isnan(value)]
        searcher = OptunaSearch(
            metric=OBJECTIVE, mode="max" if sweep.search.direction == "maximize" else "min",
            seed=sweep.search.seed,
            points_to_evaluate=[{_key(k): v for k, v in c.items()} for c, _ in warm] or None,
            evaluated_rewards=[v for _, v in warm] or None)
        metric = sweep.scheduler.metric if sweep.scheduler else None
        trainable = tune.with_parameters(train_cell_trial, sweep_text=sweep.text,
                                         threads=sweep.resources["cpu"], metric=metric)
        space = {_key(a.path): _domain(a) for a in sweep.axes}
        self._fit(trainable, space, recorder, sweep,
                  lambda trial: cell_specs(sweep, _cell(trial.config)), searcher, remaining)


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

"""What a sweep will cost before it runs: the wall-time estimate `sweeper plan` prints and
`sweeper run` compares with what it took (`estimate_run`, the one function both call).

The estimate is the executor's start and stop, plus the packs it will train spread over the
packs it trains at once (`Parallelism`):

- **which packs**: a grid or random search's packs are cut as the run cuts them
  (`packing.form_packs` for the executor's slots); an adaptive search (optuna, boundary)
  decides its packs while it runs, so its budget's worth of representative packs stands in
  (`SearchRules.budget_packs`) and the estimate says it is from the budget (an upper bound
  where the search may stop early).
- **what a pack costs**, the better source first: stored trials of the same shape (a stored
  trial's `wall_time_s` is its share of its pack's time, pack time / K; the median per step of
  that shape, scaled by the pending step budget); else a timed probe: three short trainings
  of the largest pending pack of each shape on the threads a pack gets (n steps evaluated at
  start and end; 2n steps evaluated at start, middle and end; 2n steps at start and end; the
  faster of two tries each), which separate a pack's set-up (building models and data), a step
  and an evaluation (`StepCost`); a pack's time is then its models x (set-up + steps x step +
  evaluations x evaluation). Two timings cannot separate the set-up from the evaluations: the
  set-up was counted once per evaluation (41 of them in a 400-step run), and a run of the quick
  sweep was estimated at twice what it took.
  The probe measures this machine's speed as it is now (a loaded machine gives a slower step);
  its measurement is kept for an hour per shape, host, code and threads (`probed_step_cost`),
  so `sweeper run` right after `sweeper plan` does not probe again.
- **where they run**: packs go to the executor's slots longest first, each to the least loaded
  slot (as `packing.longest_first` hands them out), and each pack adds the executor's fixed
  per-pack cost (the driver's writes; Ray's dispatch); the slowest slot's time is the training.
- **start and stop**: the local executor trains in this process (nothing to start but its
  first pack's warm-up); embedded Ray starts its processes and its workers (each imports
  torch; they start side by side, a round per core), stops them, and charges packs that train
  side by side `SIDE_BY_SIDE` more than a probe of one alone. These are seconds measured on
  the 2-core dev machine (docs/performance.md, "Estimates against runs (issue 27)" and "Two
  cores and a small sweep's start"), scaled by the machine's load now (`load_factor`), since
  a loaded machine starts processes proportionally slower.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sweeper.spec import TrialSpec

if TYPE_CHECKING:
    from sweeper.sweep_fields import Plan, Sweep

PROBE_STEPS = 4
PROBE_ROUNDS = 3  # a probe's timings are taken again while they contradict each other
PROBE_SHAPES = 4  # at most this many shapes are probed (the largest pack of each)
PROBE_MODELS = 16  # at most this many models of the largest pack train in the probe

# Seconds measured on the 2-core dev machine with nothing else running (docs/performance.md,
# "Estimates against runs"); scaled by `load_factor`. Measured again for issue 43 (7 December,
# quick.yaml on embedded Ray, `--no-estimate`): Ray starts in the background while the driver
# loads torch and the kernels, and its first packs began 4.3 s later than the local executor's;
# its shutdown took 0.35 s.
RAY_START_S = 3.0  # start the embedded node (GCS, raylet) beyond the driver's own start, and
# stop it
RAY_WORKER_START_S = 1.7  # a round of Tune's workers (Python, torch, sweeper): they start side
# by side, a round per `cpus` slots
RAY_PACK_S = 0.2  # per pack on Ray: Tune's dispatch and result round trip, the driver's writes
RAY_CLUSTER_START_S = 3.0  # connecting to an existing cluster (--address) and leaving it
LOCAL_START_S = 1.0  # the local executor: its first pack's warm-up in this process
LOCAL_PACK_S = 0.3  # per pack in this process: the driver's writes of its results
# A pack that trains beside others on one machine takes longer than alone (Ray's own processes
# and reports, shared caches and memory): the same four packs of quick.yaml took 2.5% and 6.6%
# longer on embedded Ray's two slots than one after another in one process (7 December). A
# probe times a pack alone; stored trials were timed as they ran.
SIDE_BY_SIDE = 1.05
PROBE_KEPT_S = 3600.0  # a probe's measurement is reused this long (`probed_step_cost`)


@dataclass(frozen=True)
class StepCost:
    """One model's cost in a pack, in seconds: a training step, an evaluation (its probes
    included), and its share of the pack's set-up (models, optimiser, data)."""

    step_s: float
    evaluation_s: float
    setup_s: float = 0.0

    def pack_seconds(self, pack: list[TrialSpec]) -> float:
        train = pack[0].train
        return len(pack) * (self.setup_s + self.step_s * train["steps"]
                            + self.evaluation_s * evaluations(train))


@dataclass(frozen=True)
class Parallelism:
    """How an executor runs packs: how many at once (`slots`), on how many threads each, what
    its start and stop cost (`start_s`) and what each pack adds (`per_pack_s`)."""

    executor: str
    slots: int
    threads: float
    start_s: float
    per_pack_s: float
    how: str  # said in the estimate's line
    side_by_side: float = 1.0  # a pack's time alone x this, where packs share this machine

    def to_json(self) -> dict[str, Any]:
        return {"executor": self.executor, "parallel": self.slots, "threads": self.threads,
                "start_stop_s": round(self.start_s, 3), "per_pack_s": round(self.per_pack_s, 3),
                "side_by_side": self.side_by_side}


@dataclass(frozen=True)
class Estimate:
    seconds: float  # start and stop + training
    training_s: float  # the pending packs on `parallelism.slots`, longest first
    basis: str  # stored trials or a timed probe (and of what)
    parallelism: Parallelism
    packs: int
    budget: int | None = None  # an adaptive search: the trials its budget allows (from it)
    # budget.stop: decided, charged the full budget (no stored trial says how early they
    # stop): what it prints is an upper bound
    decided: bool = False

    @property
    def workers(self) -> int:
        return self.parallelism.slots

    def line(self) -> str:
        p = self.parallelism
        upto = "up to " if self.budget is not None or self.decided else ""
        budget = (f"; from the search's budget of {self.budget} trials"
                  if self.budget is not None else "")
        if self.decided:
            budget += "; each trial charged the full step budget, which trials stop before " \
                      "once decided"
        packs = f"{self.packs} pack{'s' * (self.packs != 1)}"
        return (f"estimate: {upto}{duration(self.seconds)} with {p.how} (training "
                f"{duration(self.training_s)} in {packs} + start/stop {duration(p.start_s)}; "
                f"from {self.basis}{budget})")

    def to_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "training_s": round(self.training_s, 3),
                "workers": self.workers, "packs": self.packs, "basis": self.basis,
                "from_budget": self.budget is not None, "budget_trials": self.budget,
                "upper_bound_decided": self.decided,
                **self.parallelism.to_json()}


def load_factor() -> float:
    """How much slower than quiet this machine runs now: the last minute's load average over
    its CPUs, at least 1 (a machine with twice as much to run as cores starts processes about
    twice as slowly)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not every platform has one
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def parallelism(executor: str, sweep: Sweep, *, address: str | None = None,
                num_cpus: int | None = None, workers: int | None = None,
                load: float | None = None) -> Parallelism:
    """How `executor` ("local" or "ray", `sweeper.executors`) will schedule this sweep's packs,
    as it does: the local executor one pack at a time on one thread (`LocalExecutor`); Ray
    as many as its CPUs (`num_cpus`, else this machine's; a cluster's: `workers`) hold packs
    of `resources.cpu` (and GPUs of `resources.gpu`). `workers` overrides the slots."""
    scale = load_factor() if load is None else load
    if executor == "local":
        slots = workers or 1
        return Parallelism("local", slots, 1, LOCAL_START_S * scale, LOCAL_PACK_S * scale,
                           f"the local executor ({_slots(slots)} in this process)")
    cpu, gpu = sweep.resources["cpu"], sweep.resources["gpu"]
    cpus = num_cpus or os.cpu_count() or 1
    slots = int(cpus // max(cpu, 1e-9))
    if gpu and address is None:
        import torch

        slots = min(slots, int(torch.cuda.device_count() // gpu))
    slots = max(1, workers or slots)
    if address is not None:
        return Parallelism("ray", slots, cpu, RAY_CLUSTER_START_S * scale, RAY_PACK_S * scale,
                           f"Ray at {address} ({_slots(slots)}, assumed)")
    start = (RAY_START_S + RAY_WORKER_START_S * math.ceil(slots / cpus)) * scale
    return Parallelism("ray", slots, cpu, start, RAY_PACK_S * scale,
                       f"embedded Ray ({_slots(slots)}: {cpus:g} CPUs / {cpu:g} per pack)",
                       SIDE_BY_SIDE if slots > 1 else 1.0)


def _slots(n: int) -> str:
    return f"{n} pack{'s' * (n != 1)} at once"


def estimate_run(plan: Plan, stored_table, how: Parallelism, pack_size: int | None = None,
                 pack_bytes: int | None = None, probe: bool | str = True,
                 cost: StepCost | None = None,
                 say: Callable[[str], None] | None = None) -> Estimate | None:
    """The wall time of running `plan`'s pending trials with `how` (see the module's
    docstring): what `sweeper plan` prints and `sweeper run` compares with what it took.
    `stored_table`: the sweep's trials (pandas) or None. Without `probe` (the packs train
    elsewhere) only stored trials, or a given `cost`, estimate it (else None); `probe="cached"`:
    also a probe this host kept (`cached_step_cost`), never a new one (`sweeper plan`'s
    default: it answers in seconds). `say`: told a line before a probe trains. None when
    nothing trains."""
    from sweeper.packing import form_packs, longest_first

    budget = None
    if plan.adaptive:
        packs = longest_first(plan.strategy.budget_packs(plan))
        budget = sum(map(len, packs))
    else:
        packs = form_packs(plan.sharing.trainings, pack_size, how.slots, pack_bytes)
    if not packs:
        return None
    stored = _from_store(packs, stored_table)  # a pack's cost from stored trials, or None
    unpriced = [p for p, cost in zip(packs, stored) if cost is None]
    side = how.side_by_side if len(packs) > 1 else 1.0  # one pack trains alone
    basis = "stored trials of the same shape"
    priced: dict[int, float] = {}  # the others' costs (by the pack's id)
    if unpriced:
        if cost is None and not probe:
            return None
        if cost is None and probe == "cached":
            kept = [cached_step_cost(p, how.threads) for p in unpriced]
            if any(k is None for k in kept):
                return None
            probed = "a probe of this shape kept from the last hour"
            priced = {id(p): k.pack_seconds(p) * side for k, p in zip(kept, unpriced)}
        elif cost is None:
            costs = _probe_each_shape(unpriced, how.threads, say)
            shapes = "" if len(costs) == 1 else (
                f" of each of {len(costs)} shapes" if len(costs) <= PROBE_SHAPES else
                f" of {PROBE_SHAPES} of {len(costs)} shapes (the others charged the costliest)")
            probed = (f"a timed probe{shapes}: {PROBE_STEPS} and {2 * PROBE_STEPS} steps of "
                      f"{min(PROBE_MODELS, max(map(len, unpriced)))} models, evaluated 2 and 3 "
                      "times")
            priced = {id(p): costs[_shape_of(p)].pack_seconds(p) * side for p in unpriced}
        else:
            probed = f"a given cost ({cost.step_s:g} s a step, {cost.evaluation_s:g} s an " \
                     "evaluation)"
            priced = {id(p): cost.pack_seconds(p) * side for p in unpriced}
        if side != 1:
            probed += f", x{side:g} for packs side by side"
        basis = probed if len(unpriced) == len(packs) else (
            f"stored trials for {len(packs) - len(unpriced)} of {len(packs)} packs, "
            f"{probed} for the others")
    per_pack = [c if c is not None else priced[id(p)] for p, c in zip(packs, stored)]
    training = makespan([t + how.per_pack_s for t in per_pack], how.slots)
    decided = any(c is None and p[0].train.get("stop") == "decided"
                  for p, c in zip(packs, stored))
    return Estimate(how.start_s + training, training, basis, how, len(packs), budget, decided)


def _shape_of(pack: list[TrialSpec]) -> tuple:
    return _shape_columns(pack[0].flat())


def _probe_each_shape(packs: list[list[TrialSpec]], threads: float,
                      say: Callable[[str], None] | None = None) -> dict[tuple, StepCost]:
    """A probe of the largest pack of each shape (a four-head pack costs more a step than a
    one-head one: charging every pack the largest pack's cost overestimated quick.yaml, half
    of whose packs have one head, by 30%), for the `PROBE_SHAPES` shapes with the most models
    (a probe of a 14-model pack at the calibrated scale takes ~25 s on 2 cores); any other
    shape is charged the costliest probed shape's cost, an upper bound."""
    largest: dict[tuple, list[TrialSpec]] = {}
    models: dict[tuple, int] = {}
    for pack in packs:
        shape = _shape_of(pack)
        models[shape] = models.get(shape, 0) + len(pack)
        if len(pack) > len(largest.get(shape, ())):
            largest[shape] = pack
    probed = sorted(largest, key=lambda shape: -models[shape])[:PROBE_SHAPES]
    fresh = [s for s in probed if cached_step_cost(largest[s], threads) is None]
    if fresh and largest[fresh[0]][0].device == "cpu":  # a first build of the kernels before
        from sweeper.layers import native  # the probe, not timed in it

        native.ops()
    if fresh and say is not None:  # one line for all of them, before the first trains
        most = max(min(PROBE_MODELS, len(largest[s])) for s in fresh)
        say(f"estimate: timing a probe of {len(fresh)} pack shape"
            f"{'s' if len(fresh) > 1 else ''} (up to {most} models, {PROBE_STEPS} and "
            f"{2 * PROBE_STEPS} steps each; --no-estimate skips it)")
    costs = {shape: probed_step_cost(largest[shape], threads) for shape in probed}
    costliest = max(costs.values(), key=lambda c: c.step_s)
    return {shape: costs.get(shape, costliest) for shape in largest}


def evaluations(train: dict) -> int:
    """Evaluations of a training: at step 0, every `eval_every` steps, and at its last step."""
    steps, every = train["steps"], train["eval_every"]
    return steps // every + 1 + (steps % every > 0)


def _from_store(packs: list[list[TrialSpec]], stored) -> list[float | None]:
    """Each pack's cost from the stored trials of its shape (their median time per budget step,
    as they ran: side by side, stopped once decided), or None where none is stored."""
    if stored is None or not len(stored) or "wall_time_s" not in stored.columns:
        return [None] * len(packs)
    ok = stored[stored["status"] == "ok"]
    if "shared_with" in ok.columns:  # a shared row took no time of its own
        ok = ok[ok["shared_with"].isna()]
    times: dict[tuple, list[float]] = {}
    for row in ok.to_dict("records"):
        times.setdefault(_shape_columns(row), []).append(float(row["wall_time_s"])
                                                         / max(1, row["train.steps"]))
    out: list[float | None] = []
    for pack in packs:
        spec = pack[0]
        seen = times.get(_shape_columns(spec.flat()))
        out.append(statistics.median(seen) * spec.train["steps"] * len(pack) if seen else None)
    return out


def _shape_columns(flat: dict) -> tuple:
    keep = ("task.id", "model.id", "train.batch_size", "train.eval_every", "train.eval_size",
            "task.length", "task.content_tokens", "model.width", "model.heads", "model.dim",
            "task.samples", "task.vocab", "task.distractors", "task.classes")
    return tuple(flat.get(k) for k in keep)


def measure_step_cost(pack: list[TrialSpec], threads: float) -> StepCost:
    """Time short trainings of `pack` (up to `PROBE_MODELS` of its models: a batched step's
    cost per model falls as a pack grows, so the probe trains a pack the size the run does)
    here, on `threads` threads: a step's and an evaluation's cost per model on this machine as
    it is now. Each length is timed twice and the fastest kept (a moment's load from elsewhere
    is not the machine's speed); timings that contradict each other (more steps or more
    evaluations not taking longer: a burst of load on the shorter one) are taken again, up to
    `PROBE_ROUNDS` times, and if they still do, a step is charged its whole training's time
    per step (an upper bound) rather than nothing."""
    from sweeper.train import train_pack
    from sweeper.workers import pin_threads

    probe = pack[:PROBE_MODELS]
    pin_threads(threads)  # the threads a pack trains on
    times: dict[tuple[int, int], list[float]] = {}

    def timed(steps: int, eval_every: int) -> float:
        """The fastest training so far (probes at every evaluation: the costlier case)."""
        specs = [replace(s, train={**s.train, "steps": steps, "eval_every": eval_every,
                                   "probe_every": None, "stop": None, "stop_margin": None})
                 for s in probe]  # every step timed: no model leaves the probe
        seen = times.setdefault((steps, eval_every), [])
        for _ in range(2):
            start = time.perf_counter()
            train_pack(specs)
            seen.append(time.perf_counter() - start)
        return min(seen)

    n = PROBE_STEPS
    timed(1, 1)  # warm-up: imports, allocator (its time is not used)
    for _ in range(PROBE_ROUNDS):
        short = timed(n, n)  # set-up + n steps + 2 evaluations
        middle = timed(2 * n, n)  # set-up + 2n steps + 3 evaluations
        long = timed(2 * n, 2 * n)  # set-up + 2n steps + 2 evaluations
        if short < long < middle:
            break
    else:
        return StepCost(middle / (2 * n) / len(probe), 0.0, 0.0)
    evaluation = middle - long
    step = (long - short) / n
    setup = max(0.0, short - n * step - 2 * evaluation)
    return StepCost(step / len(probe), evaluation / len(probe), setup / len(probe))


def cached_step_cost(pack: list[TrialSpec], threads: float) -> StepCost | None:
    """The probe of this pack's shape kept in the cache (`probed_step_cost`), None if none."""
    seen = _read_probe_cache(probe_cache_path()).get(_probe_key(pack, threads))
    if seen is not None and 0 <= time.time() - seen["at"] < PROBE_KEPT_S:
        return StepCost(seen["step_s"], seen["evaluation_s"], seen["setup_s"])
    return None


def probed_step_cost(pack: list[TrialSpec], threads: float) -> StepCost:
    """`measure_step_cost`, reused for `PROBE_KEPT_S` from a cache file (`probe_cache_path`)
    when the same shape was probed on this host, with the same code, threads and kernels:
    `sweeper plan` then `sweeper run` probe once, and the run's training does not wait ~30 s
    for a second probe. A cache that cannot be read or written is ignored."""
    cached = cached_step_cost(pack, threads)
    if cached is not None:
        return cached
    cost = measure_step_cost(pack, threads)
    key, path = _probe_key(pack, threads), probe_cache_path()
    kept = _read_probe_cache(path)
    now = time.time()
    kept = {k: v for k, v in kept.items() if 0 <= now - v["at"] < PROBE_KEPT_S}
    kept[key] = {"at": now, "step_s": cost.step_s, "evaluation_s": cost.evaluation_s,
                 "setup_s": cost.setup_s}
    _write_probe_cache(path, kept)
    return cost


def probe_cache_path() -> str:
    """`$SWEEPER_CACHE_DIR/step_costs.json` (default: `$XDG_CACHE_HOME/sweeper`, else
    `~/.cache/sweeper`)."""
    root = os.environ.get("SWEEPER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sweeper")
    return os.path.join(root, "step_costs.json")


def _probe_key(pack: list[TrialSpec], threads: float) -> str:
    import socket

    import torch

    from sweeper.layers import native
    from sweeper.results.provenance import code_version

    return json.dumps([_shape_of(pack), min(PROBE_MODELS, len(pack)), threads,
                       socket.gethostname(), torch.__version__, native.enabled(),
                       code_version()], sort_keys=True, default=str)


def _read_probe_cache(path: str) -> dict[str, dict[str, float]]:
    try:
        with open(path) as f:
            kept = json.load(f)
        return {k: v for k, v in kept.items()
                if isinstance(v, dict) and {"at", "step_s", "evaluation_s", "setup_s"} <= set(v)}
    except (OSError, ValueError, AttributeError):
        return {}


def _write_probe_cache(path: str, kept: dict) -> None:
    import tempfile

    temp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(kept, f)
        os.replace(temp, path)  # whole or not at all: a concurrent reader sees one version
    except OSError:
        if temp is not None and os.path.exists(temp):
            os.unlink(temp)  # a full disk leaves no half-written temp file behind


def makespan(times: list[float], workers: int) -> float:
    """Longest first, each to the least loaded of `workers`: the most loaded one's time."""
    loads = [0.0] * max(1, workers)
    heapq.heapify(loads)
    for t in sorted(times, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + t)
    return max(loads)


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def estimate_for(plan: Plan, store, how: Parallelism, pack_size: int | None = None,
                 memory: int | None = None, probe: bool | str = True,
                 say: Callable[[str], None] | None = None) -> Estimate | None:
    """`estimate_run` of `plan` (its stored trials set) against `store`'s trials, with
    automatic packs cut to fit `memory` (the bytes the packs running at once may use
    together on this machine, `sweeper.admission.admit_here`) over the slots, as the run cuts
    them."""
    table = store.read(plan.sweep.name, "trials")
    return estimate_run(plan, None if table is None else table.to_pandas(), how, pack_size,
                        None if memory is None else memory // max(1, how.slots), probe,
                        say=say)

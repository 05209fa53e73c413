"""What a sweep will cost before it runs: `sweeper plan`'s estimate of its wall time.

Two sources, the better first:

- **stored trials of the same shape**: a stored trial's `wall_time_s` is its share of its
  pack's time (pack time / K); the pending trials of a shape take the median of that shape's
  stored ones, scaled by their step budget.
- **a timed probe**: two short trainings of two models of the largest pending pack (2 and 4
  steps, each with the evaluations at start and end), so that a step's and an evaluation's
  cost separate; a pack's time is then its models x (steps x step + evaluations x
  evaluation). Run in this process on the threads a pack gets (`resources.cpu`); it is an
  estimate, labelled so. Measured against the runs (2 workers, a loaded 2-core machine):
  quick 410 s estimated vs 498 s, snell_uniform 162 s vs 233 s; what it leaves out (Ray's start,
  each pack's set-up, the driver's writes) makes it err low by 20-30% on sweeps this short.

Packs are then put on the executor's workers longest first (each to the least loaded worker),
and the estimate is the most loaded worker's time.
"""

from __future__ import annotations

import heapq
import statistics
import time
from dataclasses import dataclass

from sweeper.spec import TrialSpec

PROBE_STEPS = 2
PROBE_MODELS = 2  # models in the probe's pack: per-model cost, extrapolated to full packs


@dataclass(frozen=True)
class Estimate:
    seconds: float  # wall time of the pending packs on `workers` workers
    basis: str  # "stored trials" or "timed probe" (and of what)
    workers: int

    def line(self) -> str:
        return (f"estimate: {_duration(self.seconds)} on {self.workers} worker"
                f"{'s' * (self.workers != 1)} (from {self.basis})")


def estimate(packs: list[list[TrialSpec]], workers: int, stored=None,
             threads: float = 1, probe: bool = True) -> Estimate | None:
    """The pending packs' wall time; `stored` is the sweep's trials table (pandas) or None.
    Without `probe` (the packs train elsewhere) only stored trials estimate it (else None)."""
    if not packs:
        return None
    per_pack = _from_store(packs, stored)
    basis = "stored trials of the same shape"
    if per_pack is None and not probe:
        return None
    if per_pack is None:
        per_pack = _from_probe(packs, threads)
        basis = (f"a timed probe: {PROBE_STEPS} and {2 * PROBE_STEPS} steps of "
                 f"{min(PROBE_MODELS, max(map(len, packs)))} models")
    return Estimate(_makespan(per_pack, workers), basis, workers)


def _from_store(packs: list[list[TrialSpec]], stored) -> list[float] | None:
    if stored is None or not len(stored) or "wall_time_s" not in stored.columns:
        return None
    ok = stored[stored["status"] == "ok"]
    if "shared_with" in ok.columns:  # a shared row took no time of its own
        ok = ok[ok["shared_with"].isna()]
    times: dict[tuple, list[float]] = {}
    for row in ok.to_dict("records"):
        times.setdefault(_shape_of_row(row), []).append(float(row["wall_time_s"])
                                                        / max(1, row["train.steps"]))
    out = []
    for pack in packs:
        spec = pack[0]
        seen = times.get(_shape_of_spec(spec))
        if not seen:
            return None
        out.append(statistics.median(seen) * spec.train["steps"] * len(pack))
    return out


def _shape_columns(flat: dict) -> tuple:
    keep = ("task.id", "model.id", "train.batch_size", "train.eval_every", "train.eval_size",
            "task.length", "task.content_tokens", "model.width", "model.heads", "model.dim",
            "task.samples", "task.vocab", "task.distractors", "task.classes")
    return tuple(flat.get(k) for k in keep)


def _shape_of_row(row: dict) -> tuple:
    return _shape_columns(row)


def _shape_of_spec(spec: TrialSpec) -> tuple:
    return _shape_columns(spec.flat())


def _from_probe(packs: list[list[TrialSpec]], threads: float) -> list[float]:
    from dataclasses import replace

    from sweeper.train import train_pack
    from sweeper.workers import pin_threads

    pin_threads(threads)
    probe = max(packs, key=len)[:PROBE_MODELS]

    def timed(steps: int) -> float:
        specs = [replace(s, train={**s.train, "steps": steps, "eval_every": steps})
                 for s in probe]
        start = time.perf_counter()
        train_pack(specs)
        return time.perf_counter() - start

    timed(1)  # warm-up: imports, allocator, TorchScript (its time is not used)
    short, long = timed(PROBE_STEPS), timed(2 * PROBE_STEPS)
    step = max(0.0, (long - short) / PROBE_STEPS) / len(probe)  # per model
    evaluation = max(0.0, short - step * len(probe) * PROBE_STEPS) / 2 / len(probe)
    out = []
    for pack in packs:
        train = pack[0].train
        evals = train["steps"] // train["eval_every"] + 1 + (train["steps"] % train["eval_every"]
                                                             > 0)
        out.append(len(pack) * (step * train["steps"] + evaluation * evals))
    return out


def _makespan(times: list[float], workers: int) -> float:
    """Longest first, each to the least loaded of `workers`: the most loaded one's time."""
    loads = [0.0] * max(1, workers)
    heapq.heapify(loads)
    for t in sorted(times, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + t)
    return max(loads)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"

"""What every worker process does before training: pin torch to its share of the cores."""

from __future__ import annotations

import traceback
from dataclasses import dataclass


def pin_threads(threads: float | int) -> int:
    """Use `threads` torch threads (at least 1) and flush denormals to zero.

    Oversubscribed threads turn a 240 steps/s model into 8 steps/s on 2 shared cores, and
    denormal floats late in training slow every op: both are ruled out here, not guessed.
    """
    import torch  # here, not at the top: a Ray driver imports this module and need not wait
    # for torch before Ray starts (`RayTuneExecutor.__enter__`)

    n = max(1, int(threads))
    torch.set_num_threads(n)
    torch.set_flush_denormal(True)
    return n


def fail_if_injected(seeds: list[int]) -> None:
    """Test hook: raise when `SWEEPER_FAIL_SEEDS` (comma-separated) names a seed of the pack.

    This is how the suite makes a trial raise on purpose inside a real Ray worker.
    """
    import os

    marked = {int(s) for s in os.environ.get("SWEEPER_FAIL_SEEDS", "").split(",") if s.strip()}
    hit = sorted(marked.intersection(seeds))
    if hit:
        raise RuntimeError(f"injected failure for seed {hit[0]} (SWEEPER_FAIL_SEEDS)")


def execute_pack(configs: list[dict], device: str, threads: float,
                 report=None) -> list:
    """Worker side of every executor: rebuild the specs, pin threads, train the pack."""
    from sweeper.spec import spec_from_config
    from sweeper.train import train_pack

    pin_threads(threads)
    specs = [spec_from_config(c, device) for c in configs]
    fail_if_injected([s.seed for s in specs])
    return train_pack(specs, report)


@dataclass
class PackOutcome:
    """What became of a pack on its worker: its results, or the error of its last attempt."""

    results: list | None
    error: str | None
    attempts: int


def execute_pack_with_retries(configs: list[dict], device: str, threads: float, retries: int,
                              report=None) -> PackOutcome:
    """`execute_pack`, run again up to `retries` times when the code raises.

    Errors of the code are caught here, on the worker, so that an executor sees only the loss
    of a worker itself (a dead node or process) as an error of its own, and retries that
    separately: a lost node never turns a trial into `failed`.
    """
    error = None
    for attempt in range(1, retries + 2):
        try:
            return PackOutcome(execute_pack(configs, device, threads, report), None, attempt)
        except Exception:  # noqa: BLE001 - any error of a trial is recorded, not raised
            error = traceback.format_exc(limit=3)
        if len(configs) > 1:  # outside the except block: no chained traceback in the error
            return _one_by_one(configs, device, threads, retries, attempt)
    return PackOutcome(None, error, retries + 1)


def _one_by_one(configs: list[dict], device: str, threads: float, retries: int,
                attempts: int) -> PackOutcome:
    """A pack that raised, trained again one trial at a time: a trial that raises fails alone
    (`TrialResult.failed`, with its error) and its pack-mates are stored as they trained (a
    trial trains alone exactly as in a pack: tests/test_families.py)."""
    from sweeper.spec import TrialResult, spec_from_config

    results = []
    for config in configs:
        alone = execute_pack_with_retries([config], device, threads, retries)
        if alone.error is None:
            results.extend(alone.results)
        else:
            results.append(TrialResult.failed(spec_from_config(config, device), alone.error))
        attempts = max(attempts, alone.attempts)
    return PackOutcome(results, None, attempts)

"""Where packs train, behind one protocol: in this process (`local`) or on Ray Tune (`ray`,
`sweeper.executors.ray_tune`, the one module of sweeper that imports Ray).

What trains is a strategy's business (`sweeper.strategies`); an executor only runs the packs a
strategy proposes, so every strategy runs on every executor, and nothing above this package
asks which executor it has. The contract of an `Executor`:

- `check(sweep, store)`: refuse, with a one-line `SweeperInputError`, what this executor
  cannot run (a CUDA device this machine lacks, a driver-local results path on a cluster, a
  scheduler it does not implement). Called before the executor starts and before anything is
  written.
- `with executor:` starts what it needs (Ray) and stops what it started; `capacity` and `run`
  are called inside.
- `capacity(sweep)`: how many packs of this sweep can train at once (at least 1); grid and
  random packs are sized for it (`packing.form_packs`).
- `run(sweep, strategy, sink)`: until `strategy.done`, ask the strategy for as many packs as
  there are free slots and train them (`sweeper.workers.execute_pack_with_retries` on the
  worker: errors of the code are retried there, up to `sweep.retries` times). Report each
  pack to `sink` on the driver, one call at a time, as it happens: `started` once, then
  exactly one of `finished` (results, possibly early-stopped), `failed` (the code raised on
  every attempt) or `lost` (its worker kept dying: nothing stored, pending for the next run).
  The sink stores the results, then tells the strategy (`sweeper.recording.Feedback`).
  An error while the sink stores a pack (`base.store_step`) ends `run`: a write error as it is,
  any other as a one-line `StoreStepError`; never a pack trained again because of it.
- While a pack trains, an executor may report the evaluation step its workers reached,
  `sink.progressed(specs, step)`, cheaply and throttled (the local executor from its report
  callback; Ray workers with a small `tune.report` at most every `PROGRESS_EVERY_S`): the
  progress line and `progress.json` show a long pack advancing. Progress never carries
  results: what is stored still comes only from `finished` / `failed`.

The protocol (`Executor`, `PackSink`) and the helpers every executor shares are in
`sweeper.executors.base`; `make_executor(name, ...)` is the one place that maps a name to a
class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweeper.executors.base import Executor

EXECUTORS = ("ray", "local")


def make_executor(name: str, *, address: str | None = None, num_cpus: int | None = None,
                  results_shared: bool = False, verbose: bool = False) -> Executor:
    """The executor called `name` ("ray" or "local"); the Ray keywords configure Ray only."""
    if name not in EXECUTORS:
        from sweeper.errors import UnknownNameError

        raise UnknownNameError("executor", name, EXECUTORS)
    if name == "local":
        from sweeper.executors.local import LocalExecutor

        return LocalExecutor(threads=1)
    from sweeper.executors.ray_tune import RayTuneExecutor

    return RayTuneExecutor(address, num_cpus, results_shared, verbose)

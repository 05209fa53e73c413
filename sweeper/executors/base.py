"""The executor protocol (`Executor`, and the `PackSink` executors report packs to) and what
every executor shares; the contract is in `sweeper.executors`' docstring. Apart from the
package's `__init__`, so that an executor module never imports the package that picks it."""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from sweeper.errors import StoreStepError
from sweeper.results.errors import ResultsWriteError

if TYPE_CHECKING:
    from sweeper.results import Store
    from sweeper.search_space import SweepFile
    from sweeper.spec import TrialResult, TrialSpec
    from sweeper.strategies import Strategy


class PackSink(Protocol):
    """What an executor reports packs to (driver side; `sweeper.recording.Feedback`)."""

    def started(self, specs: list[TrialSpec]) -> None: ...

    def finished(self, specs: list[TrialSpec], results: list[TrialResult], attempts: int = 1,
                 node_id: str | None = None) -> None: ...

    def failed(self, specs: list[TrialSpec], error: str, attempts: int) -> None: ...

    def lost(self, specs: list[TrialSpec], error: str) -> None: ...

    def progressed(self, specs: list[TrialSpec], step: int) -> None: ...


PROGRESS_EVERY_S = 2.0  # a worker's progress reports are at least this far apart


def progress_reporter(sink: PackSink, specs: list[TrialSpec]):
    """A `sweeper.train.Report` callback that tells `sink` of a pack's evaluation steps (in
    this process; None for a sink that does not take progress)."""
    progressed = getattr(sink, "progressed", None)
    if progressed is None:
        return None

    def report(step: int, rows: list) -> None:
        progressed(specs, step)

    return report


class Executor(Protocol):
    """See the module's docstring for the contract."""

    def check(self, sweep: SweepFile, store: Store) -> None: ...

    def starting(self) -> str | None:
        """A line saying what starting it waits for (Ray's start), or None: no silent wait."""

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: Any) -> None: ...

    def capacity(self, sweep: SweepFile) -> int: ...

    def run(self, sweep: SweepFile, strategy: Strategy, sink: PackSink) -> None: ...


@contextmanager
def store_step() -> Iterator[None]:
    """Where an executor hands a trained pack to its sink (stored, then told): any error there
    ends the sweep. A write error stays as it is; any other becomes a `StoreStepError` naming
    it in one line (why: its docstring). Executors let it out of `run` (Ray: at Tune's next step,
    not from a trial's callback, where Tune would take it for the trial's failure)."""
    try:
        yield
    except (ResultsWriteError, StoreStepError):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever it is, the sweep must stop
        raise StoreStepError(f"storing a trained pack failed: {_one_line(exc)}; the sweep "
                             "stopped (what was stored stays; the same command resumes)"
                             ) from exc


def _one_line(exc: BaseException) -> str:
    """`KeyError: 'x' (at recording.py:231)`: the error and where it was raised."""
    text = " ".join(str(exc).split())
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}{': ' + text if text else ''}{where}"


def nothing_proposed(strategy: Strategy) -> RuntimeError:
    """The error of a strategy that breaks its contract: nothing proposed, nothing out."""
    return RuntimeError(f"{type(strategy).__name__}.ask proposed nothing while no pack was "
                        "out and it was not done (see sweeper/strategies/base.py)")

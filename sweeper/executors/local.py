"""The in-process executor: one pack at a time in this process, retried on error."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeper.executors.base import PackSink, nothing_proposed, progress_reporter, store_step
from sweeper.executors.checks import check_local
from sweeper.workers import execute_pack_with_retries

if TYPE_CHECKING:
    from sweeper.results import Store
    from sweeper.search_space import SweepFile
    from sweeper.spec import TrialSpec
    from sweeper.strategies import Strategy


class LocalExecutor:
    """Trains the packs a strategy proposes here, one after another (capacity 1)."""

    def __init__(self, threads: int = 1, retries: int | None = None):
        self.threads, self.retries = threads, retries

    def check(self, sweep: SweepFile, store: Store) -> None:
        check_local(sweep)

    def starting(self) -> None:
        return None  # nothing to start: it trains in this process

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def capacity(self, sweep: SweepFile) -> int:
        return 1

    def run(self, sweep: SweepFile, strategy: Strategy, sink: PackSink) -> None:
        retries = sweep.retries if self.retries is None else self.retries
        while not strategy.done:
            packs = strategy.ask(1)
            if not packs:
                if strategy.done:
                    break
                raise nothing_proposed(strategy)
            for specs in packs:
                self._train(specs, sweep.device, retries, sink)

    def _train(self, specs: list[TrialSpec], device: str, retries: int, sink: PackSink) -> None:
        sink.started(specs)
        outcome = execute_pack_with_retries([s.config() for s in specs], device, self.threads,
                                            retries, progress_reporter(sink, specs))
        with store_step():
            if outcome.error is not None:
                sink.failed(specs, outcome.error, outcome.attempts)
            else:
                sink.finished(specs, outcome.results, outcome.attempts)

"""The in-process executor: packs one after another in this process, retried on error."""

from __future__ import annotations

from sweeper.runner import Recorder
from sweeper.search_space import SweepFile
from sweeper.spec import TrialSpec
from sweeper.workers import execute_pack_with_retries


class LocalExecutor:
    def __init__(self, threads: int = 1, retries: int | None = None):
        self.threads, self.retries = threads, retries

    def run_packs(self, packs: list[list[TrialSpec]], recorder: Recorder,
                  sweep: SweepFile) -> None:
        retries = sweep.retries if self.retries is None else self.retries
        for specs in packs:
            recorder.started(specs)
            outcome = execute_pack_with_retries([s.config() for s in specs], specs[0].device,
                                                self.threads, retries)
            if outcome.error is not None:
                recorder.failed(specs, outcome.error, outcome.attempts)
            else:
                recorder.finished(specs, outcome.results, outcome.attempts)

    def run_optuna(self, sweep: SweepFile, recorder: Recorder, store) -> None:
        from sweeper.errors import SweeperInputError

        raise SweeperInputError("search.type: optuna runs on Ray Tune's Optuna integration; "
                                "allowed with --executor local: grid, random")

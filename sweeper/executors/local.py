"""The in-process executor: packs one after another in this process, retried on error."""

from __future__ import annotations

import traceback

from sweeper.runner import Recorder
from sweeper.search_space import SweepFile
from sweeper.spec import TrialSpec
from sweeper.workers import execute_pack


class LocalExecutor:
    def __init__(self, threads: int = 1, retries: int | None = None):
        self.threads, self.retries = threads, retries

    def run_packs(self, packs: list[list[TrialSpec]], recorder: Recorder,
                  sweep: SweepFile) -> None:
        retries = sweep.retries if self.retries is None else self.retries
        for specs in packs:
            recorder.started(specs)
            configs = [s.config() for s in specs]
            for attempt in range(1, retries + 2):
                try:
                    results = execute_pack(configs, specs[0].device, self.threads)
                except Exception:  # noqa: BLE001 - any error of a trial is recorded, not raised
                    if attempt == retries + 1:
                        recorder.failed(specs, traceback.format_exc(limit=3), attempt)
                    continue
                recorder.finished(specs, results, attempt)
                break

    def run_optuna(self, sweep: SweepFile, recorder: Recorder, store) -> None:
        from sweeper.errors import SweeperInputError

        raise SweeperInputError("search.type: optuna runs on Ray Tune's Optuna integration; "
                                "allowed with --executor local: grid, random")

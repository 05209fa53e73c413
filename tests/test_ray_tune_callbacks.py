"""The Ray executor's driver side, fed the callback sequences Tune produces (no Ray started).

Tune's order of calls for a pack is not always start -> results -> complete: a trial Tune gives
up on may never have started (a reused actor on a dead node fails before its start), and the
pack must then be proposed again, counted once, and stored once. The real cluster test
(tests/test_cluster_sweeps.py, a node removed mid-sweep) hits these paths only by chance.
"""

from __future__ import annotations

import io
import json

import pytest
from sweep_helpers import TINY, fake_result, sweep_text

from sweeper.executors import ray_tune
from sweeper.plan import expand
from sweeper.recording import Feedback, Progress, Recorder
from sweeper.results import Store
from sweeper.search_space import parse_sweep
from sweeper.strategies.base import PlannedPacks


class Trial:
    def __init__(self, trial_id: str, num_failures: int = 1):
        self.trial_id, self.error_file, self.num_failures = trial_id, None, num_failures

    def get_error(self) -> str:
        return "ray.exceptions.ActorDiedError: the actor died (node lost)"


@pytest.fixture
def driver(tmp_path):
    """A searcher and store callback over a real store, for a sweep of four one-trial packs."""
    sweep = parse_sweep(sweep_text(TINY))
    specs = expand(sweep)
    store = Store.open(str(tmp_path / "results"))
    progress = Progress(len(specs), io.StringIO())
    strategy = PlannedPacks([[s] for s in specs])
    feedback = Feedback(Recorder(store, sweep.name, progress), strategy)
    searcher = ray_tune._StrategySearcher(strategy)
    return searcher, ray_tune._StoreCallback(searcher, feedback), store, progress, specs


def final(trial_id: str, specs) -> dict:
    return {"final": True, "attempts": 1, "node_id": "n1",
            "results": [json.loads(json.dumps(ray_tune.result_to_report(fake_result(s))))
                        for s in specs]}


def complete(searcher, callback, trial_id: str) -> None:
    trial = Trial(trial_id)
    callback.on_trial_start(0, [], trial)
    callback.on_trial_result(0, [], trial, final(trial_id, searcher.packs[trial_id]))
    callback.on_trial_complete(0, [], trial)


def test_a_trial_given_up_on_before_it_started_is_proposed_again_and_stored_once(driver):
    searcher, callback, store, progress, specs = driver
    for k in range(4):
        assert searcher.suggest(f"t{k}") is not None
    lost = searcher.packs["t0"]
    # Tune errors t0 without a start (its reused actor was on a dead node)
    callback.on_trial_error(0, [], Trial("t0"))
    assert searcher.suggest("t4") is not None
    assert searcher.packs["t4"] == lost  # the lost pack, as a new trial
    assert searcher.suggest("t5") is None  # the strategy is done, packs are out: wait
    for trial_id in ("t1", "t2", "t3", "t4"):
        complete(searcher, callback, trial_id)
    assert searcher.suggest("t6") == ray_tune.Searcher.FINISHED
    stored = store.read("tiny", "trials", ["trial_id", "status"])
    assert sorted(stored.column("trial_id").to_pylist()) == sorted(s.trial_id for s in specs)
    assert (progress.done, progress.failed, progress.running) == (4, 0, 0)
    assert callback.sink.packs == 4  # the pack started once, counted once


def test_a_pack_started_then_given_up_on_counts_as_running_once(driver):
    searcher, callback, store, progress, specs = driver
    searcher.suggest("t0")
    callback.on_trial_start(0, [], Trial("t0"))
    callback.on_trial_error(0, [], Trial("t0"))
    searcher.suggest("t1")
    complete(searcher, callback, "t1")
    assert (progress.done, progress.running) == (1, 0)


def test_a_pack_given_up_on_too_often_is_left_pending_and_told_as_lost(driver, monkeypatch):
    searcher, callback, store, progress, specs = driver
    told = []
    monkeypatch.setattr(searcher.strategy, "tell", lambda pack, results: told.append(results))
    searcher.suggest("t0")
    for attempt in range(ray_tune.LOST_PACK_RETRIES + 1):
        trial = Trial(f"t0-{attempt}")
        if attempt:
            assert searcher.suggest(trial.trial_id) is not None
        else:
            searcher.packs[trial.trial_id] = searcher.packs.pop("t0")
        callback.on_trial_start(0, [], trial)
        callback.on_trial_error(0, [], trial)
    assert told == [None] and callback.searcher.again == []
    assert progress.running == 0 and callback.sink.recorder.lost_trials == 1
    assert "left pending for the next run" in progress.stream.getvalue()
    assert "ActorDiedError" in progress.stream.getvalue()
    assert not store.stored_ids("tiny")


def test_a_store_that_cannot_write_ends_the_experiment_instead_of_failing_the_trial(driver):
    from sweeper.results.errors import ResultsWriteError

    searcher, callback, store, progress, specs = driver

    def full_disk(*args, **kwargs):
        raise ResultsWriteError("could not write part-x.parquet (No space left on device)")

    callback.sink.recorder.store.write_pack = full_disk
    searcher.suggest("t0")
    trial = Trial("t0")
    callback.on_trial_start(0, [], trial)
    callback.on_trial_result(0, [], trial, final("t0", searcher.packs["t0"]))
    callback.on_trial_complete(0, [], trial)  # Tune would count a raise here as a trial error
    with pytest.raises(ResultsWriteError, match="No space left"):
        callback.on_step_end(0, [])


def test_any_error_of_a_store_step_ends_the_experiment_once_and_stores_nothing_more(driver):
    """Not only write errors: a store step that raises anything (here a KeyError, as a
    completion Tune reports twice would raise) ends the run at the next step, never inside a
    trial's callback, where Tune would train the pack again for ever."""
    from sweeper.errors import StoreStepError

    searcher, callback, store, progress, specs = driver
    for trial_id in ("t0", "t1"):
        searcher.suggest(trial_id)
    complete(searcher, callback, "t0")
    callback.on_trial_complete(0, [], Trial("t0"))  # t0 again: its pack is no longer out
    complete(searcher, callback, "t1")  # the sweep is stopping: not stored
    with pytest.raises(StoreStepError, match=r"KeyError: 't0' \(at ray_tune.py:\d+\);"):
        callback.on_step_end(0, [])
    assert store.stored_ids("tiny") == {specs[0].trial_id}


def test_a_trial_tune_recovered_until_its_limit_is_not_proposed_again(driver):
    # a pack that kills every worker (the OOM killer) spends one budget, not one per trial
    searcher, callback, store, progress, specs = driver
    searcher.suggest("t0")
    callback.on_trial_start(0, [], Trial("t0"))
    callback.on_trial_error(0, [], Trial("t0", num_failures=ray_tune.LOST_PACK_RETRIES + 1))
    assert searcher.again == [] and callback.sink.recorder.lost_trials == 1
    assert progress.running == 0


def test_a_trial_whose_final_report_arrived_before_its_error_is_stored(driver):
    searcher, callback, store, progress, specs = driver
    searcher.suggest("t0")
    trial = Trial("t0")
    callback.on_trial_start(0, [], trial)
    callback.on_trial_result(0, [], trial, final("t0", searcher.packs["t0"]))
    callback.on_trial_error(0, [], trial)  # the node went before Tune saw the trial end
    assert searcher.again == [] and store.stored_ids("tiny") == {specs[0].trial_id}
    assert (progress.done, progress.running) == (1, 0)


def test_each_tune_step_keeps_the_drivers_progress_file_fresh_at_most_every_heartbeat(driver):
    import os

    from sweeper.recording import HEARTBEAT_S
    from sweeper.results.summary import PROGRESS_FILE

    searcher, callback, store, progress, specs = driver
    recorder = callback.sink.recorder
    path = store.path("tiny", PROGRESS_FILE)
    callback.on_step_end(0, [])  # nothing written for HEARTBEAT_S yet (ever): written
    assert os.path.exists(path)
    os.remove(path)
    callback.on_step_end(1, [])  # within HEARTBEAT_S of that write: not written again
    assert not os.path.exists(path)
    recorder._progress_at -= HEARTBEAT_S  # HEARTBEAT_S later
    callback.on_step_end(2, [])
    assert os.path.exists(path)


def test_a_stored_packs_tune_trial_keeps_no_trajectories(driver):
    """Tune keeps every finished trial's last result (in the driver and its experiment
    state): once the pack is stored, that is a small report, not the pack's trajectories."""
    from ray.tune.experiment import Trial as TuneTrial

    searcher, callback, store, progress, specs = driver
    searcher.suggest("t0")
    trial = TuneTrial("pack", stub=True, trial_id="t0")
    callback.on_trial_start(0, [], trial)
    report = final("t0", searcher.packs["t0"])
    trial.update_last_result(report)  # as Tune does before its callbacks
    callback.on_trial_result(0, [], trial, report)
    callback.on_trial_complete(0, [], trial)
    assert "results" not in trial.last_result and trial.last_result["node_id"] == "n1"
    assert len(store.read("tiny", "trajectories")) > 0  # stored first

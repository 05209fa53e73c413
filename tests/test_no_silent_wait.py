"""No silent wait: `plan` answers from what is stored or probed already unless asked to probe,
a probe says so before it trains, a run with nothing to run starts no executor, and `status`
knows a sweep whose driver has started before its first write."""

from __future__ import annotations

import json

import pytest
from sweep_helpers import cli, variant, write_sweep

import sweeper
from sweeper.results import Store
from sweeper.results.lease import acquire


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(cache))
    return cache


def test_plan_answers_without_a_probe_unless_asked(tmp_path, empty_cache):
    path = write_sweep(tmp_path / "s.yaml", variant(budget={"steps": 20}))
    ray = ["--executor", "ray"]  # two slots: two packs (alone, one pack trains locally)
    rc, out, err = cli(["plan", path, "--results", tmp_path / "r", *ray])
    assert rc == 0 and "estimate: none yet" in out and "--probe" in out
    assert "timing a probe" not in err and not (empty_cache / "step_costs.json").exists()
    rc, out, err = cli(["plan", path, "--results", tmp_path / "r", "--probe", "--json", *ray])
    assert rc == 0 and json.loads(out)["estimate"]["seconds"] > 0
    assert err.count("estimate: timing a probe of 2 pack shapes (up to 2 models") == 1
    rc, out, err = cli(["plan", path, "--results", tmp_path / "r", *ray])  # from the cache
    assert rc == 0 and "kept from the last hour" in out and "timing a probe" not in err


def test_a_run_with_nothing_to_run_starts_no_executor(tmp_path, monkeypatch):
    from sweeper.executors.ray_tune import RayTuneExecutor

    sweep = variant(seeds=1, budget={"steps": 10})
    assert sweeper.run(sweep, results=str(tmp_path), executor="local", estimate=False).ran == 2

    def refuse(self):
        raise AssertionError("Ray was started for a run with nothing to run")

    monkeypatch.setattr(RayTuneExecutor, "__enter__", refuse)
    again = sweeper.run(sweep, results=str(tmp_path), executor="ray")
    assert again.ran == 0 and again.status == {"ok": 2}


def test_status_knows_a_sweep_whose_driver_has_started_before_its_first_write(tmp_path):
    store = Store.open(str(tmp_path))
    with acquire(store, "early"):
        rc, out, err = cli(["status", "early", "--results", tmp_path])
        assert rc == 0 and out.startswith("early: starting: a driver (") and err == ""
        rc, out, _ = cli(["status", "early", "--results", tmp_path, "--json"])
        assert rc == 0 and json.loads(out)["driver"] == "starting"
    rc, _, err = cli(["status", "early", "--results", tmp_path])
    assert rc == 2 and "no sweep of that name" in err


def test_a_finished_optuna_study_starts_no_executor(tmp_path, monkeypatch):
    from sweeper.executors.ray_tune import RayTuneExecutor

    search = {"type": "optuna", "trials": 2, "objective": "best_accuracy",
              "direction": "maximize"}
    sweep = variant(name="opt", seeds=1, budget={"steps": 10}, search=search,
                    axes={"task": {"hardness": {"uniform": [0.0, 1.0]}}})
    assert sweeper.run(sweep, results=str(tmp_path), executor="local", estimate=False).ran == 2

    def refuse(self):
        raise AssertionError("Ray was started for a finished study")

    monkeypatch.setattr(RayTuneExecutor, "__enter__", refuse)
    again = sweeper.run(sweep, results=str(tmp_path), executor="ray")
    assert again.ran == 0 and again.best_trial is not None
    bigger = variant(**{**sweep, "search": {**search, "trials": 3}})
    with pytest.raises(AssertionError, match="finished study"):  # one more cell: it starts
        sweeper.run(bigger, results=str(tmp_path), executor="ray", estimate=False)


def test_a_finished_study_that_proposed_a_cell_twice_has_nothing_pending(tmp_path):
    search = {"type": "optuna", "trials": 4, "objective": "best_accuracy",
              "direction": "maximize"}
    sweep = variant(name="twice", seeds=1, budget={"steps": 10}, search=search,
                    axes={"task": {"hardness": {"choice": [0.0, 1.0]}}})
    path = write_sweep(tmp_path / "twice.yaml", sweep)
    result = sweeper.run(path, results=str(tmp_path / "r"), executor="local", estimate=False)
    assert result.ran <= 2  # four proposals of two cells: some cell twice, stored once
    rc, out, err = cli(["status", path, "--results", tmp_path / "r", "--json"])
    status = json.loads(out)
    assert rc == 0 and status["pending"] == 0 and status["state"] == "finished", status


def test_a_sweep_of_one_pack_trains_in_this_process_and_says_so(tmp_path, monkeypatch):
    from sweeper.executors.ray_tune import RayTuneExecutor

    def refuse(self):
        raise AssertionError("Ray was started for one pack")

    monkeypatch.setattr(RayTuneExecutor, "__enter__", refuse)
    path = write_sweep(tmp_path / "one.yaml", variant(seeds=1, budget={"steps": 10}, **{
        "axes.task.cooccurrence": {"grid": [0.5]}}))
    rc, out, err = cli(["run", path, "--results", tmp_path / "r", "--no-estimate"])
    assert rc == 0 and err.count("one pack to train (1 model): training it in this "
                                 "process") == 1, err
    rc, out, err = cli(["plan", path, "--results", tmp_path / "r2", "--no-estimate"])
    assert rc == 0 and "one pack to train" in err
    many = write_sweep(tmp_path / "many.yaml", variant(name="many", seeds=1, pack_size=1,
                                                       budget={"steps": 10}))
    with pytest.raises(AssertionError, match="Ray was started"):  # two packs: Ray, as before
        cli(["run", many, "--results", tmp_path / "r", "--no-estimate"])


def test_one_cell_of_many_seeds_stays_on_ray_where_ray_would_cut_it_in_packs(tmp_path):
    """Counted as Ray would cut the packs for this machine's slots: here two slots, so two
    packs (one process would train them one after another); a pack of more threads than the
    local executor gives stays on Ray too."""
    import os

    import yaml

    from sweeper.api import choose_executor
    from sweeper.plan import make_plan
    from sweeper.results import Store
    from sweeper.search_space import parse_sweep

    store = Store.open(str(tmp_path))
    sweep = parse_sweep(yaml.safe_dump(variant(seeds=16, **{"axes.task.cooccurrence": {
        "grid": [0.5]}})))
    chosen, _ = choose_executor(None, sweep, make_plan(sweep, set()), store, None, None)
    assert chosen == ("ray" if (os.cpu_count() or 1) > 1 else "local")
    threads = parse_sweep(yaml.safe_dump(variant(seeds=1, resources={"cpu": 2})))
    assert choose_executor(None, threads, make_plan(threads, set()), store, None,
                           None)[0] == "ray"

"""Search strategies apart from executors: the registry, grid/random packs, a strategy written
in the tests driving the local executor, and Optuna on the local executor with its study in
the sweep's folder (stored trials, the study opened by optuna.load_study, resume after an
interruption continuing the same study, nothing stored trained twice)."""

from __future__ import annotations

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState
from strategy_helpers import ScriptedStrategy
from sweep_helpers import all_files, cli, fake_results, variant, write_sweep

import sweeper
import sweeper.workers
from sweeper.errors import UnknownNameError
from sweeper.executors.local import LocalExecutor
from sweeper.packing import form_packs
from sweeper.plan import expand, make_plan
from sweeper.results import Store
from sweeper.results.reading import search_facts
from sweeper.runner import run_sweep
from sweeper.search_space import load_sweep, parse_sweep
from sweeper.spec import spec_from_config
from sweeper.strategies import STRATEGIES, Context, make_strategy, strategy_class
from sweeper.strategies.grid import GridStrategy
from sweeper.strategies.optuna import STUDY_FILE

OPTUNA = {"type": "optuna", "trials": 3, "objective": "best_accuracy", "direction": "maximize",
          "seed": 0}
RANGES = {"task": {"hardness": {"uniform": [0.0, 1.0]}}, "model": {"heads": {"choice": [1, 2]}}}


def _optuna_sweep(tmp_path, name="opt", **changes):
    return write_sweep(tmp_path / f"{name}.yaml",
                       variant(**{"name": name, "axes": RANGES, "search": OPTUNA, **changes}))


def _study(results, name="opt") -> optuna.Study:
    return optuna.load_study(study_name=name,
                             storage=f"sqlite:///{results / name / STUDY_FILE}")


def _states(study: optuna.Study) -> list[str]:
    return [t.state.name for t in study.get_trials(deepcopy=False)]


@pytest.fixture
def trained(monkeypatch):
    """The trial ids of every pack trained in this process, in order (repeats kept)."""
    seen: list[str] = []
    real = sweeper.workers.execute_pack

    def counting(configs, device, threads, report=None):
        seen.extend(spec_from_config(c).trial_id for c in configs)
        return real(configs, device, threads, report)

    monkeypatch.setattr(sweeper.workers, "execute_pack", counting)
    return seen


# -- the registry and the planned strategies ----------------------------------------------------
def test_every_search_type_has_one_strategy_that_reads_its_section():
    for kind in STRATEGIES:
        rules = strategy_class(kind)
        assert rules.section_keys[0] == "type" and callable(rules.read_search)
    assert strategy_class("grid") is GridStrategy
    with pytest.raises(UnknownNameError,
                       match="search.type 'boundry'.*allowed: boundary, grid, optuna"):
        strategy_class("boundry")


@pytest.mark.parametrize("search", sorted(STRATEGIES))
def test_the_manifest_records_what_the_strategy_says_of_its_search(search):
    """`analysis` reads the search's facts, never its type; a manifest without them (written
    before they were recorded) is read with the same facts."""
    rules = strategy_class(search)
    facts = {"search_draws_cells": rules.draws_cells,
             "search_samples_level_set": rules.samples_level_set,
             "search_adaptive": rules.adaptive}
    assert search_facts({"search": search}) == facts
    assert search_facts({"search": search, **facts}) == facts
    assert search_facts({"search": search, "search_draws_cells": not rules.draws_cells}
                        )["search_draws_cells"] is (not rules.draws_cells)


def test_grid_strategy_hands_out_the_pending_packs_once(tmp_path):
    sweep = parse_sweep(write_sweep(tmp_path / "t.yaml", variant(seeds=3)).read_text())
    specs = expand(sweep)
    stored = {s.trial_id for s in specs[:2]}
    store = Store.open(f"memory://{tmp_path.name}")
    strategy = make_strategy(Context(make_plan(sweep, stored), store, pack_size=1, workers=1))
    assert strategy.planned == 4 and not strategy.done
    first = strategy.ask(3)
    assert len(first) == 3 and not strategy.done
    rest = strategy.ask(3)
    assert len(rest) == 1 and strategy.done and strategy.ask(1) == []
    handed = [s.trial_id for pack in first + rest for s in pack]
    # each once, in any order (packs go longest first)
    assert sorted(handed) == sorted(s.trial_id for s in specs[2:])
    auto = make_strategy(Context(make_plan(sweep, stored), store, pack_size=None, workers=2))
    assert auto.ask(10) == form_packs(specs[2:], None, 2)


def test_a_strategy_written_in_the_tests_drives_the_local_executor(tmp_path, monkeypatch):
    """Plugged in where every strategy is (the registry), run by `run_sweep` on the local
    executor: its second round waits for the first to be told; everything stored once."""
    monkeypatch.setitem(STRATEGIES, "grid", "strategy_helpers:ScriptedStrategy")
    sweep = load_sweep(str(write_sweep(tmp_path / "t.yaml", variant(seeds=2))))
    store = Store.open(str(tmp_path / "r"))
    summary = run_sweep(sweep, store, LocalExecutor())
    strategy = ScriptedStrategy.last
    strategy.check_rounds()
    assert strategy.closed
    assert [e[2] for e in strategy.events if e[0] == "tell"] == [("ok",)] * 4
    assert summary["ran"] == 4 and summary["packs"] == 4
    assert store.stored_ids(sweep.name) == {s.trial_id for s in expand(sweep)}


# -- Optuna on the local executor ---------------------------------------------------------------
def test_optuna_on_the_local_executor_stores_its_trials_and_its_study(tmp_path, trained):
    sweep_file = _optuna_sweep(tmp_path)
    results = tmp_path / "results"
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0, err
    assert "ran 6 trials" in out and "stored: 6 ok" in out
    trials = pd.read_parquet(results / "opt" / "trials")
    assert len(trials) == 6 and trials["trial_id"].is_unique
    assert sorted(trained) == sorted(trials["trial_id"])  # each trained once
    study = _study(results)
    assert _states(study) == ["COMPLETE"] * 3
    by_id = trials.set_index("trial_id")
    for trial in study.trials:  # the value told is the mean over the cell's stored seeds
        rows = by_id.loc[trial.user_attrs["trial_ids"]]
        assert len(rows) == 2 and set(rows["seed"]) == {0, 1}
        assert rows["task.hardness"].iloc[0] == trial.params["task.hardness"]
        assert trial.value == pytest.approx(rows["best_accuracy"].mean())
    names = {p.relative_to(results).as_posix() for p in all_files(results)}
    assert {"opt/manifest.json", f"opt/{STUDY_FILE}"} <= names
    views = {"opt/manifest.json", f"opt/{STUDY_FILE}", "opt/lease.json", "opt/progress.json"}
    assert all(n.endswith(".parquet") for n in names - views)

    # the study's best trial is the run's last line, and the SweepResult's
    best = study.best_trial
    params = ", ".join(f"{k}={v!r}" for k, v in best.params.items())
    assert out.rstrip().splitlines()[-1] == (
        f"optuna best of best_accuracy (maximize): {best.value:.4g} at Optuna trial "
        f"{best.number} ({params}); trial ids {', '.join(best.user_attrs['trial_ids'])}")
    assert best.value == max(t.value for t in study.trials)

    # Again: nothing new. A larger budget: the same study grows by one cell.
    rc, out, _ = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0 and "ran 0 trials" in out and f"Optuna trial {best.number} " in out
    again = sweeper.run(str(sweep_file), results=str(results), executor="local")
    assert again.ran == 0 and again.best_trial == again.to_json()["best_trial"] == {
        "objective": "best_accuracy", "direction": "maximize", "value": best.value,
        "number": best.number, "params": best.params, "proposed": best.params,
        "trial_ids": best.user_attrs["trial_ids"]}
    ranked = again.best("best_accuracy", n=6, by="trial")  # the same trials, one by one
    cell = ranked[ranked["trial_id"].isin(best.user_attrs["trial_ids"])]
    assert cell["best_accuracy"].mean() == pytest.approx(best.value)
    # per configuration (the default with seeds): Optuna's value of its best trial, first
    assert again.best("best_accuracy").iloc[0]["mean_best_accuracy"] == pytest.approx(best.value)
    assert "best trial" in again._repr_html_() and again.best_trial_text() in repr(again)
    write_sweep(sweep_file, variant(**{"name": "opt", "axes": RANGES,
                                       "search": {**OPTUNA, "trials": 4}}))
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0 and "ran 2 trials" in out, err
    again = _study(results)
    assert again._study_id == study._study_id and _states(again) == ["COMPLETE"] * 4
    assert len(trained) == len(set(trained)) == 8


def test_a_changed_direction_is_refused_before_the_study_is_touched(tmp_path):
    sweep_file = _optuna_sweep(tmp_path, search={**OPTUNA, "trials": 1})
    results = tmp_path / "results"
    assert cli(["run", sweep_file, "--results", results, "--executor", "local"])[0] == 0
    _optuna_sweep(tmp_path, search={**OPTUNA, "trials": 2, "direction": "minimize"})
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "search.direction" in err and "allowed" in err
    assert _states(_study(results)) == ["COMPLETE"]


def test_an_interrupted_optuna_sweep_continues_the_same_study(tmp_path, trained, monkeypatch):
    """Interrupted while its second cell trains (that trial left RUNNING, nothing of it
    stored): the next run tells it FAIL, trains its cell first, then the rest of the budget."""
    sweep = load_sweep(str(_optuna_sweep(tmp_path)))
    store = Store.open(str(tmp_path / "results"))
    counting = sweeper.workers.execute_pack

    def interrupted(configs, *args, **kw):
        if len(trained) == 2:
            raise KeyboardInterrupt
        return counting(configs, *args, **kw)

    monkeypatch.setattr(sweeper.workers, "execute_pack", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, store, LocalExecutor())
    first = _study(tmp_path / "results")
    assert _states(first) == ["COMPLETE", "RUNNING"]
    assert len(store.stored_ids("opt")) == 2
    interrupted_cell = first.trials[1].params

    monkeypatch.setattr(sweeper.workers, "execute_pack", counting)
    summary = run_sweep(sweep, store, LocalExecutor())
    assert summary["ran"] == 4
    study = _study(tmp_path / "results")
    assert study._study_id == first._study_id
    assert _states(study) == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    assert study.trials[2].params == interrupted_cell  # trained first on resume
    stored = store.stored_ids("opt")
    assert len(trained) == len(set(trained)) == len(stored) == 6  # nothing trained twice
    told = {i for t in study.trials if t.state == TrialState.COMPLETE
            for i in t.user_attrs["trial_ids"]}
    assert told == stored


def test_a_run_killed_between_storing_and_telling_is_told_from_the_store(tmp_path, trained,
                                                                          monkeypatch):
    from sweeper.strategies.optuna import OptunaStrategy

    sweep = load_sweep(str(_optuna_sweep(tmp_path, search={**OPTUNA, "trials": 2})))
    store = Store.open(str(tmp_path / "results"))
    tell = OptunaStrategy.tell

    def dies(self, pack, results):
        raise KeyboardInterrupt

    monkeypatch.setattr(OptunaStrategy, "tell", dies)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, store, LocalExecutor())
    assert _states(_study(tmp_path / "results")) == ["RUNNING"]
    assert len(store.stored_ids("opt")) == 2  # stored, not told

    monkeypatch.setattr(OptunaStrategy, "tell", tell)
    assert run_sweep(sweep, store, LocalExecutor())["ran"] == 2  # only the second cell
    study = _study(tmp_path / "results")
    assert _states(study) == ["COMPLETE", "COMPLETE"]
    rows = store.read("opt", "trials").to_pandas().set_index("trial_id")
    first = study.trials[0]
    assert first.value == pytest.approx(rows.loc[first.user_attrs["trial_ids"],
                                                 "best_accuracy"].mean())
    assert len(trained) == len(set(trained)) == 4


def test_a_cell_proposed_again_is_told_from_the_store_not_trained(tmp_path, trained):
    """One possible cell and a budget of three: trained once, told three times."""
    sweep = load_sweep(str(_optuna_sweep(
        tmp_path, axes={"model": {"heads": {"choice": [2]}}})))
    summary = run_sweep(sweep, Store.open(str(tmp_path / "results")), LocalExecutor())
    assert summary["ran"] == 2 and summary["packs"] == 1 and len(trained) == 2
    study = _study(tmp_path / "results")
    assert _states(study) == ["COMPLETE"] * 3
    assert len({t.value for t in study.trials}) == 1


def test_a_cell_out_already_is_told_with_its_pack(tmp_path):
    """Two slots, one possible cell: one pack; both Optuna trials get its value."""
    sweep = load_sweep(str(_optuna_sweep(
        tmp_path, axes={"model": {"heads": {"choice": [2]}}}, search={**OPTUNA, "trials": 2})))
    store = Store.open(f"memory://{tmp_path.name}")
    strategy = make_strategy(Context(make_plan(sweep, set()), store, None, 2))
    try:
        packs = strategy.ask(2)
        assert len(packs) == 1 and strategy.done
        (pack,) = packs
        results = fake_results(pack)
        strategy.tell(pack, results)
        values = [t.value for t in strategy.study.trials]
        assert [t.state for t in strategy.study.trials] == [TrialState.COMPLETE] * 2
        assert values[0] == values[1] == pytest.approx(
            sum(r.outcomes["best_accuracy"] for r in results) / 2)
    finally:
        strategy.close()


def test_a_lost_pack_is_told_fail_and_stays_pending(tmp_path):
    sweep = load_sweep(str(_optuna_sweep(tmp_path, search={**OPTUNA, "trials": 1})))
    strategy = make_strategy(Context(make_plan(sweep, set()),
                                     Store.open(f"memory://{tmp_path.name}"), None, 1))
    try:
        (pack,) = strategy.ask(1)
        strategy.tell(pack, None)
        assert strategy.done and strategy.counted() == 0
        assert [t.state for t in strategy.study.trials] == [TrialState.FAIL]
    finally:
        strategy.close()


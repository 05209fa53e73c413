"""Boundary search (issue 17): the posterior and the selection on hand-built grids (no
training), then the strategy through `run_sweep` on the local executor with packs that return
chosen outcomes (resume after a kill with the same proposals, a larger budget or more cells
continuing from the store, the stopping rules, nothing stored or out proposed again), one tiny
real training from the command line, and one tiny sweep on Ray."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from sweep_helpers import REPO, cli, fake_result, variant, write_sweep

import sweeper.workers
from sweeper.executors.local import LocalExecutor
from sweeper.plan import expand, make_plan
from sweeper.results import ResultsInputError, Store, wilson_interval
from sweeper.results.levelset import share_posterior
from sweeper.runner import run_sweep
from sweeper.search_space import SweepFileError, load_sweep, parse_sweep
from sweeper.spec import spec_from_config
from sweeper.strategies import Context, make_strategy
from sweeper.strategies.boundary import BoundarySearch, BoundaryStrategy, Settings, initial_cells

C_VALUES = [0.0, 0.25, 0.5, 0.75, 1.0]  # N = 4..8 at length 4: five different tasks


# -- hand-built grids: the posterior --------------------------------------------------------------
def _counts(size: int, cells: dict[int, tuple[int, int]]):
    k, n = np.zeros(size), np.zeros(size)
    for c, (successes, seeds) in cells.items():
        k[c], n[c] = successes, seeds
    return k, n, n.astype(int)


def test_the_initial_cells_are_a_coarse_sub_grid_with_the_ends():
    assert initial_cells((6, 6)) == [0, 2, 5, 12, 14, 17, 30, 32, 35]
    assert initial_cells((9,)) == [0, 3, 5, 8]
    assert initial_cells((2,)) == [0, 1] and initial_cells((1,)) == [0]
    assert len(initial_cells((6, 6, 4))) == 3 * 3 * 2


def test_an_unsampled_cell_between_clear_cells_is_decided_from_its_neighbours():
    k, n, _ = _counts(9, {0: (8, 8), 3: (8, 8), 5: (4, 8), 8: (0, 8)})
    post = share_posterior((9,), k, n, target=0.5)
    decided = post.decided(0.5, 0.1)
    assert decided[[0, 1, 2, 3]].all() and (post.side(0.5)[[0, 1, 2, 3]] == 1).all()
    assert decided[8] and post.side(0.5)[8] == -1
    assert not decided[5] and post.straddle(0.5)[5] > 0  # 4 of 8: straddles
    assert list(post.sampled) == [c in (0, 3, 5, 8) for c in range(9)]
    # nothing sampled: the prior, centred on the target, decides nothing
    empty = share_posterior((3, 3), np.zeros(9), np.zeros(9), target=0.3)
    assert not empty.decided(0.3, 0.1).any() and np.allclose(empty.median, 0.3)


def test_the_smooth_posterior_is_the_wilson_interval_of_pooled_counts():
    k, n, _ = _counts(3, {0: (4, 4)})
    post = share_posterior((3,), k, n, model="smooth")
    low, high = wilson_interval([4, 2], [4, 2])
    assert post.low[:2] == pytest.approx(low) and post.high[:2] == pytest.approx(high)
    assert (post.low[2], post.high[2]) == (0.0, 1.0)  # nothing to borrow: undecided


def test_counts_that_cannot_be_are_refused():
    with pytest.raises(ResultsInputError, match="successes <= n"):
        share_posterior((2,), [3, 0], [2, 0])
    with pytest.raises(ResultsInputError, match="allowed: 4"):
        share_posterior((2, 2), [0], [0])
    with pytest.raises(ResultsInputError, match="model"):
        share_posterior((2,), [0, 0], [0, 0], model="svm")


# -- hand-built grids: what is proposed -----------------------------------------------------------
def test_the_initial_sub_grid_is_proposed_first_in_grid_order():
    search = BoundarySearch((9,), Settings(trials=100, max_seeds=8))
    k, n, used = _counts(9, {})
    proposals = search.propose(6, k, n, used, set(), 100)
    assert [c for c, _ in proposals][:4] == [0, 3, 5, 8]
    assert all(count == 2 for _, count in proposals)


def test_more_seeds_where_it_straddles_new_cells_next_to_the_other_side_none_where_clear():
    k, n, used = _counts(9, {0: (8, 8), 3: (8, 8), 5: (4, 8), 8: (0, 8)})
    wanted = BoundarySearch((9,), Settings(trials=100, max_seeds=16)).wanted(k, n, used)
    assert wanted[0] == 5  # the most straddling cell first
    assert 6 in wanted  # unsampled, between 4 of 8 and 0 of 8
    assert not {0, 1, 2, 3, 8} & set(wanted)  # their intervals clear 0.5 +- 0.1
    capped = BoundarySearch((9,), Settings(trials=100, max_seeds=8)).wanted(k, n, used)
    assert capped == [6]  # cell 5 has had its 8 seeds: the refinement cap


def test_the_budget_and_the_cells_out_bound_a_round():
    search = BoundarySearch((9,), Settings(trials=100, max_seeds=8))
    k, n, used = _counts(9, {})
    assert search.propose(4, k, n, used, {0, 5}, 3) == [(3, 2), (8, 1)]
    assert search.propose(4, k, n, used, set(), 0) == []


def test_proposals_are_a_function_of_the_counts():
    k, n, used = _counts(36, {0: (2, 2), 2: (1, 2), 5: (0, 2), 12: (2, 2), 14: (0, 2),
                              17: (0, 2), 30: (2, 2), 32: (2, 2), 35: (1, 2)})
    first = BoundarySearch((6, 6), Settings(trials=288)).propose(5, k, n, used, set(), 50)
    again = BoundarySearch((6, 6), Settings(trials=288)).propose(5, k.copy(), n.copy(),
                                                                 used.copy(), set(), 50)
    assert first == again and len(first) == 5
    assert not {c for c, _ in first} & {c for c in range(36) if used[c] >= 8}


# -- the strategy, with packs that return chosen outcomes ----------------------------------------
def _truth(spec) -> bool:
    """learned where c >= 0.75, never where c <= 0.25, seeds 0 and 2 of c = 0.5."""
    c = spec.task_params["cooccurrence"]
    return c >= 0.75 or (c == 0.5 and spec.seed % 2 == 0)


@pytest.fixture
def trained(monkeypatch):
    """Packs return `_truth` outcomes without training; every trial id trained, in order."""
    seen: list[str] = []

    def fake(configs, device, threads, report=None):
        specs = [spec_from_config(c, device) for c in configs]
        seen.extend(s.trial_id for s in specs)
        return [fake_result(s, offset=0.9 if _truth(s) else 0.0) for s in specs]

    monkeypatch.setattr(sweeper.workers, "execute_pack", fake)
    return seen


def _sweep(tmp_path, name="bnd", c_values=C_VALUES, **search):
    data = variant(**{"name": name, "seeds": 4, "axes.task.cooccurrence": {"grid": c_values},
                      "search": {"type": "boundary", "outcome": "learned", "trials": 20,
                                 **search}})
    return load_sweep(str(write_sweep(tmp_path / f"{name}-{len(c_values)}.yaml", data)))


def _stored(store, name="bnd") -> pd.DataFrame:
    trials = store.read(name, "trials").to_pandas()
    assert trials["trial_id"].is_unique  # every trial stored once
    return trials


def test_it_stops_when_every_reachable_cell_is_decided(tmp_path, trained):
    sweep = _sweep(tmp_path, trials=20)
    store = Store.open(str(tmp_path / "r"))
    summary = run_sweep(sweep, store, LocalExecutor())
    assert summary["search_end"].startswith("boundary search: stopped, every reachable cell "
                                            "decided")
    trials = _stored(store)
    assert len(trials) == len(trained) < 20  # not every unit was needed
    assert set(trials["trial_id"]) <= {s.trial_id for s in expand(sweep)}
    strategy = make_strategy(Context(make_plan(sweep, set(trials["trial_id"])), store, None, 1))
    assert strategy.done and strategy.stopped == "decided" and strategy.ask(1) == []
    state = strategy.state()
    assert state["above"] + state["below"] + state["undecided"] == 5
    assert state["reachable_undecided"] == 0 and state["trials"] == len(trials)


def test_it_stops_when_the_budget_is_spent_and_says_so_on_stderr(tmp_path, trained):
    results = tmp_path / "r"
    sweep_file = write_sweep(tmp_path / "b.yaml", variant(**{
        "name": "bnd", "seeds": 4, "axes.task.cooccurrence": {"grid": C_VALUES},
        "search": {"type": "boundary", "outcome": "learned", "trials": 5}}))
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0, err
    last = [line for line in err.splitlines() if line.startswith("boundary search")]
    assert len(last) == 1 and "the trial budget is spent" in last[0]
    assert "5 of 5 trials" in last[0]
    assert len(trained) == 5 and len(_stored(Store.open(str(results)))) == 5
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0 and "the trial budget is spent" in err, (out, err)
    assert len(trained) == 5  # nothing more


def test_a_killed_boundary_sweep_resumes_with_the_same_proposals(tmp_path, trained,
                                                                monkeypatch):
    """Killed while its fourth pack trains (nothing of it stored): the next run proposes that
    pack again and then exactly what an uninterrupted run proposed; every trial stored once."""
    sweep = _sweep(tmp_path)
    whole = Store.open(str(tmp_path / "whole"))
    run_sweep(sweep, whole, LocalExecutor())
    uninterrupted = list(trained)
    assert len(uninterrupted) >= 10
    trained.clear()

    fake = sweeper.workers.execute_pack
    packs = []

    def killed(configs, *args, **kw):
        packs.append(len(configs))
        if len(packs) == 4:
            raise KeyboardInterrupt
        return fake(configs, *args, **kw)

    monkeypatch.setattr(sweeper.workers, "execute_pack", killed)
    store = Store.open(str(tmp_path / "resumed"))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, store, LocalExecutor())
    stored_before = set(_stored(store)["trial_id"])
    assert len(stored_before) == sum(packs[:3]) and trained == uninterrupted[:len(trained)]
    monkeypatch.setattr(sweeper.workers, "execute_pack", fake)
    summary = run_sweep(sweep, store, LocalExecutor())
    assert trained == uninterrupted  # the same units, in the same order
    assert summary["already_stored"] == len(stored_before)
    assert set(_stored(store)["trial_id"]) == set(_stored(whole)["trial_id"])


def test_a_larger_budget_or_more_cells_continue_from_the_store(tmp_path, trained):
    whole = Store.open(str(tmp_path / "whole"))
    run_sweep(_sweep(tmp_path, trials=12), whole, LocalExecutor())
    uninterrupted = list(trained)
    trained.clear()

    store = Store.open(str(tmp_path / "r"))
    run_sweep(_sweep(tmp_path, trials=6), store, LocalExecutor())
    assert len(trained) == 6
    summary = run_sweep(_sweep(tmp_path, trials=12), store, LocalExecutor())
    assert summary["already_stored"] == 6 and trained == uninterrupted

    # Three cells first, then all five: the stored cells count, none is trained again.
    trained.clear()
    small = Store.open(str(tmp_path / "cells"))
    three = _sweep(tmp_path, c_values=[0.0, 0.5, 1.0], trials=40)
    run_sweep(three, small, LocalExecutor())
    first = list(trained)
    five = _sweep(tmp_path, trials=40)
    strategy = make_strategy(Context(make_plan(five, set(first)), small, None, 1))
    assert set(strategy.known) == set(first)  # the stored trials of the old cells
    run_sweep(five, small, LocalExecutor())
    assert len(trained) == len(set(trained))
    assert set(_stored(small)["trial_id"]) == set(trained)


def test_proposals_never_repeat_a_stored_or_out_trial(tmp_path):
    """Three slots, packs told out of order, some of them lost; then a new strategy on what
    was stored: no trial id is proposed while stored or out."""
    sweep = _sweep(tmp_path, trials=40)
    store = Store.open(f"memory://{tmp_path.name}")
    strategy = make_strategy(Context(make_plan(sweep, set()), store, None, 3))
    assert isinstance(strategy, BoundaryStrategy)
    stored: set[str] = set()
    out: list = []
    rounds = 0
    while not strategy.done and rounds < 40:
        rounds += 1
        for pack in strategy.ask(3 - len(out)):
            ids = {s.trial_id for s in pack}
            assert not ids & stored and not ids & {s.trial_id for p in out for s in p}
            assert all(s.task_params == pack[0].task_params for s in pack)  # one cell a pack
            out.append(pack)
        if not out:
            break
        pack = out.pop()  # the newest first
        if rounds % 5 == 0:
            strategy.tell(pack, None)  # lost: nothing stored, proposed again later
            continue
        results = [fake_result(s, offset=0.9 if _truth(s) else 0.0) for s in pack]
        store.write_pack(sweep.name, results)
        stored.update(r.trial_id for r in results)
        strategy.tell(pack, results)
    assert strategy.done and not out and len(stored) <= 40
    again = make_strategy(Context(make_plan(sweep, stored), store, None, 3))
    assert set(again.known) == stored
    proposed = [s.trial_id for pack in again.ask(3) for s in pack]
    assert not set(proposed) & stored


def test_two_strategies_on_one_store_propose_the_same_units(tmp_path, trained):
    sweep = _sweep(tmp_path, trials=8)
    store = Store.open(str(tmp_path / "r"))
    run_sweep(sweep, store, LocalExecutor())
    wider = _sweep(tmp_path, trials=30)
    stored = store.stored_ids("bnd")
    asked = []
    for _ in range(2):
        strategy = make_strategy(Context(make_plan(wider, stored), store, None, 4))
        asked.append([[s.trial_id for s in pack] for pack in strategy.ask(4)])
    assert asked[0] == asked[1] and asked[0]
    assert not {t for pack in asked[0] for t in pack} & stored


# -- the sweep file -----------------------------------------------------------------------------
BASE = variant(**{"name": "b", "axes.task.cooccurrence": {"grid": [0.0, 0.5]}, "seeds": 4})


@pytest.mark.parametrize("search, field", [
    ({"type": "boundary"}, "search.trials"),
    ({"type": "boundary", "trials": 4, "target": 1.0}, "search.target"),
    ({"type": "boundary", "trials": 4, "margin": 0.7}, "search.margin"),
    ({"type": "boundary", "trials": 4, "outcome": "attention"}, "search.outcome"),
    ({"type": "boundary", "trials": 4, "max_seeds": 5}, "search.max_seeds"),
    ({"type": "boundary", "trials": 4, "seeds_per_proposal": 0}, "search.seeds_per_proposal"),
    ({"type": "boundary", "trials": 4, "max_seeds": 2, "seeds_per_proposal": 3},
     "search.seeds_per_proposal"),
    ({"type": "boundary", "trials": 4, "model": "svm"}, "search.model"),
    ({"type": "boundary", "trials": 4, "seed": 1}, "search.seed"),
])
def test_bad_boundary_keys_are_one_line_naming_the_field(search, field):
    with pytest.raises(SweepFileError) as info:
        parse_sweep(yaml_text({**BASE, "search": search}))
    message = str(info.value)
    assert message.startswith(field) and "\n" not in message and "allowed" in message


def test_a_boundary_search_needs_grid_axes():
    data = variant(**{"axes.task.hardness": {"uniform": [0.0, 1.0]},
                      "search": {"type": "boundary", "trials": 4}})
    with pytest.raises(SweepFileError, match="grid or choice axes with search boundary"):
        parse_sweep(yaml_text(data))


def test_defaults_and_every_boundary_key_is_documented():
    sweep = parse_sweep(yaml_text({**BASE, "search": {"type": "boundary", "trials": 4}}))
    assert sweep.search.outcome == "attention_learned"  # the copy family's phase outcome
    assert (sweep.search.target, sweep.search.margin, sweep.search.model) == (0.5, 0.1, "gp")
    page = (REPO / "docs" / "sweep-files.md").read_text()
    section = page[page.index("{type: boundary"):]
    for key in BoundaryStrategy.section_keys[1:]:  # after type
        assert re.search(rf"`{key}`", section), key


def yaml_text(data) -> str:
    from sweep_helpers import sweep_text

    return sweep_text(data)


# -- real training --------------------------------------------------------------------------------
def test_a_tiny_boundary_sweep_trains_from_the_command_line(tmp_path):
    sweep_file = write_sweep(tmp_path / "b.yaml", variant(**{
        "name": "bnd-real", "seeds": 3, "search": {"type": "boundary", "trials": 4}}))
    results = tmp_path / "r"
    rc, out, _ = cli(["plan", sweep_file, "--results", results])
    assert rc == 0 and "boundary search (attention_learned share vs 0.5 +- 0.1" in out
    rc, out, err = cli(["run", sweep_file, "--results", results, "--executor", "local"])
    assert rc == 0, err
    assert "ran 4 trials" in out and "boundary search: stopped" in err
    manifest = Store.open(str(results)).read_manifest("bnd-real")
    assert manifest["search"] == "boundary" and manifest["trials_expanded"] == 4
    assert manifest["search_draws_cells"] and manifest["search_samples_level_set"]


@pytest.mark.ray
@pytest.mark.slow
def test_a_boundary_sweep_runs_on_ray(tmp_path, monkeypatch):
    import shutil
    import tempfile

    from sweeper.executors.ray_tune import RayTuneExecutor

    ray_tmp = tempfile.mkdtemp(prefix="rbd_", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    try:
        sweep = _sweep(tmp_path, name="ray-bnd", c_values=[0.0, 0.5, 1.0], trials=6)
        store = Store.open(str(tmp_path / "results"))
        with RayTuneExecutor(num_cpus=2) as executor:
            summary = run_sweep(sweep, store, executor)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert summary["ran"] == 6 and summary["search_end"].startswith("boundary search: stopped")
    trials = _stored(store, "ray-bnd")
    assert len(trials) == 6 and trials["node_id"].notna().all()
    assert set(trials["trial_id"]) <= {s.trial_id for s in expand(sweep)}


# -- the phase diagram ----------------------------------------------------------------------------
def test_the_phase_diagram_of_a_boundary_sweep_shows_its_sampling(tmp_path, trained):
    import analysis
    from analysis import plots
    from analysis.phase import phase_from_results

    sweep_file = write_sweep(tmp_path / "p.yaml", variant(**{
        "name": "bnd", "seeds": 4, "axes.task.cooccurrence": {"grid": C_VALUES},
        "axes.task.hardness": {"grid": [0.0, 0.5, 1.0]},
        "search": {"type": "boundary", "outcome": "learned", "trials": 14}}))
    assert cli(["run", sweep_file, "--results", tmp_path / "r", "--executor", "local"])[0] == 0
    results = analysis.load(str(tmp_path / "r"), "bnd")
    phase = phase_from_results(results, "task.cooccurrence", "task.hardness", outcome="learned")
    view = phase.sampling
    assert view is not None and (view.target, view.margin, view.model) == (0.5, 0.1, "gp")
    assert phase.x_values == C_VALUES and phase.y_values == [0.0, 0.5, 1.0]  # the whole grid
    assert len(view.cells) == len(phase.cells) == 15
    assert list(view.cells["sampled"]) == list(phase.cells["n_trials"] > 0)
    assert 0 < view.cells["sampled"].sum() < 15  # some cells were never trained
    assert ((view.cells["share_low"] <= view.cells["share"])
            & (view.cells["share"] <= view.cells["share_high"])).all()
    assert len(view.boundary) > 0  # c = 0.25 | 0.5 at least: learned above, not below
    fig = plots.phase_figure(phase)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("posterior boundary" in text for text in labels)
    # a grid sweep's diagram has no sampling view (its figure is as before)
    grid_file = write_sweep(tmp_path / "g.yaml", variant(name="grid-of-it"))
    assert cli(["run", grid_file, "--results", tmp_path / "r", "--executor", "local"])[0] == 0
    grid = phase_from_results(analysis.load(str(tmp_path / "r"), "grid-of-it"),
                              "task.cooccurrence", "seed", outcome="learned")
    assert grid.sampling is None
    assert not any("posterior" in t.get_text()
                   for t in plots.phase_figure(grid).legends[0].get_texts())

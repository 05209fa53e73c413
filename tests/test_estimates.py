"""Honest estimates (issue 27): the estimate counts the executor's parallelism and its start
and stop, adaptive searches are estimated from their budget, and a run says what it took
against the estimate made before it trained (the same function `sweeper plan` uses).

No assertion here depends on this machine's speed: the per-step cost and the load are fixed
(`measure_step_cost`, `load_factor`), and the tests check the structure and the arithmetic."""

from __future__ import annotations

import dataclasses
import json

import pytest
from sweep_helpers import TINY, cli, variant, write_sweep

import sweeper
import sweeper.estimate as est
from sweeper.plan import make_plan
from sweeper.search_space import parse_sweep

COST = est.StepCost(step_s=0.01, evaluation_s=0.05)


@pytest.fixture
def fixed_cost(monkeypatch, tmp_path_factory):
    """A step of 0.01 s and an evaluation of 0.05 s per model, and a quiet machine: the
    estimate's arithmetic, not this machine's speed (kept in a probe cache of its own)."""
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path_factory.mktemp("probe_cache")))
    monkeypatch.setattr(est, "measure_step_cost", lambda pack, threads: COST)
    monkeypatch.setattr(est, "load_factor", lambda: 1.0)


def _sweep(**changes):
    return parse_sweep(json.dumps(variant(**changes)))


def test_local_runs_one_pack_at_a_time_and_ray_its_cpus_over_each_packs_cpus():
    sweep = _sweep(**{"resources": {"cpu": 2}})
    local = est.parallelism("local", sweep, load=1.0)
    ray = est.parallelism("ray", sweep, num_cpus=8, load=1.0)
    assert (local.slots, local.threads) == (1, 1)
    assert (ray.slots, ray.threads) == (4, 2)
    assert local.start_s == est.LOCAL_START_S
    assert ray.start_s == est.RAY_START_S + est.RAY_WORKER_START_S  # 4 workers, side by side
    assert ray.side_by_side == est.SIDE_BY_SIDE and local.side_by_side == 1
    assert est.parallelism("ray", sweep, num_cpus=8, workers=3, load=1.0).slots == 3
    assert est.parallelism("ray", sweep, num_cpus=8, load=2.0).start_s == 2 * ray.start_s


def test_the_estimate_is_start_plus_packs_longest_first_on_the_slots():
    sweep = _sweep(**{"seeds": 4, "pack_size": 2})
    plan = make_plan(sweep, set())
    how = est.Parallelism("ray", 2, 1, start_s=10.0, per_pack_s=1.0, how="two slots")
    got = est.estimate_run(plan, None, how, sweep.pack_size, cost=COST)
    # 2 cells (two shapes) x 4 seeds in packs of 2: 4 packs of 2 models, 20 steps and 3
    # evaluations each: 2 x (0.2 + 0.15) = 0.7 s, + 1 s per pack; two at a time
    assert got.packs == 4
    assert got.training_s == pytest.approx(2 * 1.7)
    assert got.seconds == pytest.approx(10.0 + 2 * 1.7)
    one = est.estimate_run(plan, None, est.Parallelism("local", 1, 1, 1.0, 1.0, "one"),
                           sweep.pack_size, cost=COST)
    assert one.seconds == pytest.approx(1.0 + 4 * 1.7)
    # as a slot frees it takes the next pack, longest first: 5+3 | 4+3+3
    assert est.makespan([3, 5, 3, 4, 3], 2) == 10


def test_stored_trials_price_their_shapes_and_the_rest_is_probed_and_charged_side_by_side():
    """A pack whose shape has stored trials costs what they took (as they ran: side by side);
    the others are priced by the probe (here a given cost), times SIDE_BY_SIDE where packs share
    the machine, and the line says which packs came from which."""
    import pandas as pd

    sweep = _sweep(**{"seeds": 4, "pack_size": 2})
    plan = make_plan(sweep, set())
    shapes = sorted({est._shape_columns(s.flat()) for s in plan.specs}, key=str)
    assert len(shapes) == 2
    stored_shape = [s for s in plan.specs if est._shape_columns(s.flat()) == shapes[0]]
    stored = pd.DataFrame([{**s.flat(), "status": "ok", "wall_time_s": 2.0}
                           for s in stored_shape])
    side = est.Parallelism("ray", 2, 1, 0.0, 0.0, "two slots", side_by_side=1.5)
    got = est.estimate_run(plan, stored, side, sweep.pack_size, cost=COST)
    # the stored shape: 2 models x 2.0 s a pack (their time over the same steps); the other
    # shape: 0.7 s a pack alone, x 1.5 side by side
    assert got.packs == 4
    per_pack = sorted([2 * 2.0] * 2 + [0.7 * 1.5] * 2, reverse=True)
    assert got.training_s == pytest.approx(est.makespan(per_pack, 2))
    assert got.basis == ("stored trials for 2 of 4 packs, a given cost (0.01 s a step, 0.05 s "
                         "an evaluation), x1.5 for packs side by side for the others")
    assert not got.decided
    alone = est.estimate_run(plan, None, est.Parallelism("ray", 2, 1, 0.0, 0.0, "two slots"),
                             sweep.pack_size, cost=COST)
    assert alone.training_s == pytest.approx(2 * 0.7)
    assert est.parallelism("ray", sweep, num_cpus=2, load=1.0).side_by_side == est.SIDE_BY_SIDE
    assert est.parallelism("ray", sweep, num_cpus=1, load=1.0).side_by_side == 1
    assert est.parallelism("ray", sweep, address="ray://h:1", load=1.0).side_by_side == 1


def _plan_json(path, results, *extra):
    rc, out, err = cli(["plan", path, "--results", results, "--json", "--probe", *extra])
    assert rc == 0, err
    return json.loads(out)


def test_plan_counts_the_executors_parallelism_and_start(tmp_path, fixed_cost):
    path = write_sweep(tmp_path / "tiny.yaml", variant(**{
        "axes.task.hardness": {"grid": [0.0, 1.0]}, "seeds": 3}))
    results = str(tmp_path / "r")
    local = _plan_json(path, results, "--executor", "local")["estimate"]
    ray = _plan_json(path, results, "--executor", "ray", "--num-cpus", "2")["estimate"]
    assert (local["executor"], local["parallel"], ray["executor"], ray["parallel"]) == (
        "local", 1, "ray", 2)
    assert local["start_stop_s"] == est.LOCAL_START_S
    assert ray["start_stop_s"] == est.RAY_START_S + est.RAY_WORKER_START_S
    for got in (local, ray):
        assert got["seconds"] == pytest.approx(got["start_stop_s"] + got["training_s"], abs=1e-2)
        assert not got["from_budget"]
    # local: one slot trains every pack in turn; Ray's two slots split them
    assert local["training_s"] > ray["training_s"]
    rc, out, _ = cli(["plan", path, "--results", results, "--executor", "local", "--probe"])
    assert rc == 0 and "with the local executor (1 pack at once in this process)" in out
    rc, out, _ = cli(["plan", path, "--results", results, "--num-cpus", "2", "--probe"])
    assert rc == 0 and "with embedded Ray (2 packs at once: 2 CPUs / 1 per pack)" in out
    assert "start/stop" in out


def test_plan_of_an_optuna_sweep_is_estimated_from_its_budget(tmp_path, fixed_cost):
    path = write_sweep(tmp_path / "opt.yaml", variant(**{
        "search": {"type": "optuna", "trials": 3, "objective": "best_accuracy"},
        "axes.task.hardness": {"uniform": [0.0, 1.0]}}))
    got = _plan_json(path, str(tmp_path / "r"), "--executor", "local")["estimate"]
    # 3 cells x 2 seeds: three packs of every seed, 2 x (0.2 + 0.15) s each + the local costs
    assert (got["from_budget"], got["budget_trials"], got["packs"]) == (True, 6, 3)
    assert got["training_s"] == pytest.approx(3 * (0.7 + est.LOCAL_PACK_S), abs=1e-2)
    rc, out, _ = cli(["plan", path, "--results", str(tmp_path / "r"), "--executor", "local",
                      "--probe"])
    assert rc == 0 and "estimate: up to" in out and "from the search's budget of 6 trials" in out


def test_plan_of_a_boundary_sweep_is_estimated_from_its_budget(tmp_path, fixed_cost):
    path = write_sweep(tmp_path / "b.yaml", variant(**{
        "search": {"type": "boundary", "trials": 10, "seeds_per_proposal": 2},
        "axes.task.hardness": {"grid": [0.0, 0.5, 1.0]}, "seeds": 4}))
    got = _plan_json(path, str(tmp_path / "r"), "--executor", "local")["estimate"]
    # a budget of 10 of the 2 x 3 cells x 4 seeds: five proposals of 2 seeds
    assert (got["from_budget"], got["budget_trials"], got["packs"]) == (True, 10, 5)
    assert got["training_s"] == pytest.approx(5 * (0.7 + est.LOCAL_PACK_S), abs=1e-2)


def test_boundary_budget_packs_take_the_cells_in_turn_and_skip_what_is_stored():
    from sweeper.strategies.boundary import BoundaryStrategy

    sweep = _sweep(**{"search": {"type": "boundary", "trials": 7, "seeds_per_proposal": 2},
                      "seeds": 4})
    plan = make_plan(sweep, set())
    c0, c1 = plan.specs[:4], plan.specs[4:]
    packs = BoundaryStrategy.budget_packs(plan)
    assert packs == [c0[:2], c1[:2], c0[2:], c1[2:3]]  # 7 trials, cells in turn
    stored = make_plan(sweep, {c0[0].trial_id, c0[1].trial_id})
    assert BoundaryStrategy.budget_packs(stored) == [c0[2:], c1[:2], c1[2:3]]


def test_a_run_says_what_it_took_against_the_plans_estimate(tmp_path, fixed_cost):
    path = write_sweep(tmp_path / "tiny.yaml", {**TINY, "seeds": 1})
    results = str(tmp_path / "r")
    planned = _plan_json(path, results, "--executor", "local")["estimate"]
    result = sweeper.run(str(path), results=results, executor="local")
    assert result.ran == 2
    assert result.estimate.to_json() == planned  # the same function, the same inputs
    assert result.taken_s >= result.seconds > 0
    assert (f"took {result.taken_s:.0f} s (estimated {result.estimate.seconds:.0f} s)"
            in result.summary())
    data = result.to_json()
    assert data["taken_s"] == round(result.taken_s, 3)
    assert data["estimate"]["seconds"] == planned["seconds"]
    assert data["estimate"]["executor"] == "local"
    again = sweeper.run(str(path), results=results, executor="local")
    assert again.estimate is None and again.to_json()["estimate"] is None  # nothing to train


def test_run_json_carries_estimated_and_taken_seconds(tmp_path, fixed_cost):
    path = write_sweep(tmp_path / "tiny.yaml", {**TINY, "seeds": 1, "name": "cli"})
    rc, out, err = cli(["run", path, "--results", tmp_path / "r", "--executor", "local",
                        "--json"])
    assert rc == 0, err
    data = json.loads(out)
    assert data["taken_s"] > 0 and data["estimate"]["seconds"] > 0
    assert data["estimate"]["executor"] == "local" and data["estimate"]["parallel"] == 1


def test_the_probe_separates_a_packs_set_up_from_its_steps_and_evaluations(monkeypatch):
    """Three timings (n steps evaluated twice, 2n steps evaluated three times and twice) give
    the set-up, a step and an evaluation apart; with two, the set-up was counted once per
    evaluation, and a 400-step run evaluated 41 times was estimated at about twice its time.
    The trainings here are a clock that charges a known cost, so the arithmetic is exact."""
    import sweeper.train

    setup, step, evaluation = 0.4, 0.02, 0.05  # per model
    clock = [0.0]

    def fake_training(specs):
        train = specs[0].train
        clock[0] += len(specs) * (setup + step * train["steps"]
                                  + evaluation * est.evaluations(train))

    monkeypatch.setattr(sweeper.train, "train_pack", fake_training)
    monkeypatch.setattr(est.time, "perf_counter", lambda: clock[0])
    pack = make_plan(_sweep(), set()).specs[:3]
    cost = est.measure_step_cost(pack, threads=1)
    assert (cost.setup_s, cost.step_s, cost.evaluation_s) == pytest.approx(
        (setup, step, evaluation))
    train = {**pack[0].train, "steps": 400, "eval_every": 10}
    long_run = [dataclasses.replace(s, train=train) for s in pack]
    assert cost.pack_seconds(long_run) == pytest.approx(3 * (setup + 400 * step + 41 * evaluation))


def test_a_probe_is_reused_for_the_same_shape_and_redone_for_another(monkeypatch, tmp_path):
    """`sweeper plan` then `sweeper run` probe once: the measurement is kept (per shape, host,
    code, threads) for an hour in the cache dir; another shape, other threads or an hour later
    probe again."""
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path))
    probes = []

    def counted(pack, threads):
        probes.append((len(pack), threads))
        return COST

    monkeypatch.setattr(est, "measure_step_cost", counted)
    pack = make_plan(_sweep(), set()).specs[:3]
    assert est.probed_step_cost(pack, 1) == COST
    assert est.probed_step_cost(pack, 1) == COST
    assert len(probes) == 1
    est.probed_step_cost(pack, 2)  # other threads
    wider = make_plan(_sweep(**{"fixed.model.width": 16}), set()).specs[:3]
    est.probed_step_cost(wider, 1)  # another shape
    assert len(probes) == 3
    later = est.time.time() + est.PROBE_KEPT_S + 1
    monkeypatch.setattr(est.time, "time", lambda: later)
    est.probed_step_cost(pack, 1)
    assert len(probes) == 4


def test_a_damaged_probe_cache_is_probed_over_and_rewritten(monkeypatch, tmp_path):
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(est, "measure_step_cost", lambda pack, threads: COST)
    (tmp_path / "step_costs.json").write_text("[1, 2")
    pack = make_plan(_sweep(), set()).specs[:3]
    assert est.probed_step_cost(pack, 1) == COST
    kept = json.loads((tmp_path / "step_costs.json").read_text())
    assert [v["step_s"] for v in kept.values()] == [COST.step_s]


def _charged_training(monkeypatch, setup, step, evaluation, burst):
    """train_pack as a clock that charges a known cost, plus `burst(steps, eval_every)` s."""
    import sweeper.train

    clock = [0.0]

    def fake_training(specs):
        train = specs[0].train
        clock[0] += len(specs) * (setup + step * train["steps"]
                                  + evaluation * est.evaluations(train))
        clock[0] += burst(train["steps"], train["eval_every"])

    monkeypatch.setattr(sweeper.train, "train_pack", fake_training)
    monkeypatch.setattr(est.time, "perf_counter", lambda: clock[0])


def test_a_burst_of_load_on_the_probes_short_training_is_timed_again(monkeypatch):
    """The first estimate of quick.yaml measured a step at 0 s (its short trainings both ran
    during a burst of load from elsewhere, as long as its long ones) and said 117 s for a run
    of 454 s. Timings that contradict each other are taken again."""
    n = est.PROBE_STEPS
    calls = []

    def burst(steps, every):
        calls.append((steps, every))
        return 5.0 if calls.count((n, n)) <= 2 and (steps, every) == (n, n) else 0.0

    _charged_training(monkeypatch, 0.4, 0.02, 0.05, burst)
    pack = make_plan(_sweep(), set()).specs[:3]
    cost = est.measure_step_cost(pack, threads=1)
    assert (cost.setup_s, cost.step_s, cost.evaluation_s) == pytest.approx((0.4, 0.02, 0.05))
    assert calls.count((n, n)) == 4


def test_a_probe_that_stays_contradictory_charges_whole_trainings_not_nothing(monkeypatch):
    n = est.PROBE_STEPS
    _charged_training(monkeypatch, 0.4, 0.02, 0.05,
                      lambda steps, every: 5.0 if (steps, every) == (n, n) else 0.0)
    pack = make_plan(_sweep(), set()).specs[:3]
    cost = est.measure_step_cost(pack, threads=1)
    middle = 3 * (0.4 + 2 * n * 0.02 + 3 * 0.05)
    assert cost.step_s == pytest.approx(middle / (2 * n) / 3) and cost.step_s > 0.02


def test_run_with_no_estimate_trains_without_probing(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(est, "measure_step_cost", lambda *a: pytest.fail("probe ran"))
    path = write_sweep(tmp_path / "tiny.yaml", {**TINY, "seeds": 1, "name": "unprobed"})
    rc, out, err = cli(["run", path, "--results", tmp_path / "r", "--executor", "local",
                        "--no-estimate"])
    assert rc == 0, err
    assert "(no estimate)" in out and "ran 2 trials" in out


def test_each_shape_is_probed_and_charged_its_own_cost(monkeypatch, tmp_path):
    """quick.yaml's one-head packs cost less a step than its four-head ones; charging every
    pack the largest pack's cost overestimated its local run by 30%."""
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(est, "load_factor", lambda: 1.0)
    probed = {}

    def by_heads(pack, threads):
        heads = pack[0].flat()["model.heads"]
        probed[heads] = len(pack)
        return est.StepCost(step_s=0.01 * heads, evaluation_s=0.0)

    monkeypatch.setattr(est, "measure_step_cost", by_heads)
    plan = make_plan(_sweep(**{"axes.model.heads": {"grid": [1, 4]}}), set())
    how = est.parallelism("local", plan.sweep)
    estimate = est.estimate_run(plan, None, how, pack_size=None)
    assert sorted(probed) == [1, 4] and "of each of 2 shapes" in estimate.basis
    steps = plan.specs[0].train["steps"]
    trials = {h: sum(s.flat()["model.heads"] == h for s in plan.sharing.trainings) for h in (1, 4)}
    training = sum(trials[h] * 0.01 * h * steps for h in (1, 4))
    assert estimate.training_s == pytest.approx(training + estimate.packs * est.LOCAL_PACK_S)


def test_past_the_probe_cap_the_other_shapes_are_charged_the_costliest(monkeypatch, tmp_path):
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(est, "PROBE_SHAPES", 2)
    probed = []

    def by_heads(pack, threads):
        probed.append(pack[0].flat()["model.heads"])
        return est.StepCost(step_s=0.01 * pack[0].flat()["model.heads"], evaluation_s=0.0)

    monkeypatch.setattr(est, "measure_step_cost", by_heads)
    plan = make_plan(_sweep(**{"axes.model.heads": {"grid": [1, 2, 4, 8]}}), set())
    packs = [[s] for s in plan.sharing.trainings]
    costs = est._probe_each_shape(packs, 1)
    shapes = {est._shape_of(p) for p in packs}
    assert len(probed) == 2 and len(costs) == len(shapes) > 2
    costliest = max(probed) * 0.01
    assert sorted(c.step_s for c in costs.values()) == pytest.approx(sorted(
        [0.01 * h for h in probed] + [costliest] * (len(shapes) - 2)))

"""What is stored is what was trained: a value asked for that the task trains as another (copy
realises c in steps of 1/L) is named before anything trains, refused with --strict, stored as
trained with the asked value beside it; an Optuna search proposes on the trained grid, so its
study, the store and the run's best line hold one number."""

from __future__ import annotations

import json
import math

import optuna
import pandas as pd
import pyarrow.parquet as pq
import pytest
from sweep_helpers import DELETE, cli, variant, write_sweep

from sweeper.cells import cell_specs, realised_values, trained_step
from sweeper.overrides import sweep_from


def _trials(results, sweep: str):
    import analysis

    return analysis.load(str(results), sweep).trials


def test_a_grid_value_trained_as_another_is_named_refused_when_strict_and_stored_beside(
        tmp_path):
    """c = 0.25 at L = 6 trains as N = 6 + round(1.5) = 8 content tokens, c = 1/3."""
    data = variant(**{"fixed.task.length": 6, "axes.task.cooccurrence": {"grid": [0.0, 0.25]},
                      "seeds": 1, "budget": {"steps": 10}})
    path = write_sweep(tmp_path / "s.yaml", data)
    results = tmp_path / "r"

    rc, _, err = cli(["plan", path, "--results", results, "--no-estimate", "--strict"])
    assert rc == 2 and not results.exists()
    assert err.strip().splitlines()[-1].startswith(
        "sweeper plan: error: task.cooccurrence: got 0.25, which trains as 0.333333 (the task "
        "trains it in steps of 1/6 here)")
    rc, _, err = cli(["run", path, "--results", results, "--executor", "local", "--strict"])
    assert rc == 2 and not (results / "tiny").exists()

    rc, _, err = cli(["plan", path, "--results", results, "--no-estimate"])
    assert rc == 0
    notes = [line for line in err.splitlines() if "trains as" in line]
    assert notes == ["note: task.cooccurrence = 0.25 trains as 0.333333 (the task trains it in "
                     "steps of 1/6 here); the trials store 0.333333 and keep 0.25 in their "
                     "requested column (--strict refuses)"]

    rc, _, err = cli(["run", path, "--results", results, "--executor", "local",
                      "--no-estimate"])
    assert rc == 0 and any("0.25 trains as 0.333333" in line for line in err.splitlines())
    trials = _trials(results, "tiny").set_index("task.vocab")
    assert trials.loc[8, "task.cooccurrence"] == pytest.approx(1 / 3)
    assert json.loads(trials.loc[8, "requested"]) == {"task.cooccurrence": 0.25}
    assert trials.loc[6, "task.cooccurrence"] == 0.0 and pd.isna(trials.loc[6, "requested"])


def test_values_that_train_as_asked_carry_no_requested_value():
    sweep = sweep_from(variant(**{"fixed.task.length": 8,
                                  "axes.task.cooccurrence": {"grid": [0.0, 0.25, 0.5]}}))
    specs = [s for c in (0.0, 0.25, 0.5) for s in cell_specs(sweep, {"task.cooccurrence": c})]
    assert all(s.requested == () for s in specs) and realised_values(specs, sweep) == []


def test_the_trained_step_is_declared_by_the_task_and_none_where_another_axis_moves_it():
    uniform, search = {"uniform": [0.05, 0.95]}, {"type": "random", "trials": 2}
    fixed = sweep_from(variant(**{"fixed.task.length": 6, "axes.task.cooccurrence": uniform,
                                  "search": search}))
    assert trained_step(fixed, fixed.axes[0]) == pytest.approx(1 / 6)
    moved = sweep_from(variant(**{"axes.task.cooccurrence": uniform, "search": search,
                                  "fixed.task.length": DELETE,
                                  "axes.task.length": {"grid": [6, 8]}}))
    assert trained_step(moved, next(a for a in moved.axes if a.name == "cooccurrence")) is None
    by_vocab = sweep_from(variant(**{"fixed.task.vocab": 12, "fixed.task.length": 6,
                                     "axes": {"task": {"hardness": uniform}},
                                     "search": search}))
    assert trained_step(by_vocab, by_vocab.axes[0]) is None  # not a realised parameter


def _optuna_sweep(tmp_path, **changes):
    data = variant(**{"name": "opt", "fixed.task.length": 6, "seeds": 1,
                      "budget": {"steps": 10},
                      "axes": {"task": {"cooccurrence": {"uniform": [0.05, 0.95]}}},
                      "search": {"type": "optuna", "trials": 6, "objective": "best_accuracy",
                                 "direction": "maximize", "seed": 3}, **changes})
    return write_sweep(tmp_path / "opt.yaml", data)


def test_optuna_proposes_on_the_trained_grid_so_study_store_and_best_line_agree(tmp_path):
    path, results = _optuna_sweep(tmp_path), tmp_path / "r"
    rc, out, _ = cli(["run", path, "--results", results, "--executor", "local",
                      "--no-estimate"])
    assert rc == 0
    trials = _trials(results, "opt").set_index("trial_id")
    assert trials["requested"].isna().all()  # every proposal trained as proposed
    study = optuna.load_study(study_name="opt",
                              storage=f"sqlite:///{results / 'opt' / 'optuna.db'}")
    finished = [t for t in study.trials if t.user_attrs.get("trial_ids")]
    assert len(finished) == 6
    for t in finished:
        (tid,) = t.user_attrs["trial_ids"]
        proposed, stored = t.params["task.cooccurrence"], trials.loc[tid, "task.cooccurrence"]
        assert math.isclose(proposed, stored, rel_tol=1e-12)  # k * (1/6) against k/6
        assert round(proposed * 6) in range(1, 6) and "trained" not in t.user_attrs
    best = [line for line in out.splitlines() if line.startswith("optuna best")]
    value = float(best[0].split("task.cooccurrence=")[1].split(")")[0])
    assert math.isclose(value, study.best_trial.params["task.cooccurrence"], rel_tol=1e-12)
    assert "proposed" not in best[0]


def test_a_proposal_off_the_grid_is_stored_as_trained_and_the_study_is_told(tmp_path):
    """With L an axis too, c's grid depends on the proposal: the trained value goes to the
    store and to the Optuna trial's `trained` user attribute; the best line prints it."""
    path, results = _optuna_sweep(tmp_path, **{
        "fixed.task.length": DELETE, "axes": {"task": {"cooccurrence": {"uniform": [0.05, 0.95]},
                          "length": {"grid": [5, 6]}}}}), tmp_path / "r"
    rc, out, _ = cli(["run", path, "--results", results, "--executor", "local",
                      "--no-estimate"])
    assert rc == 0
    trials = _trials(results, "opt").set_index("trial_id")
    study = optuna.load_study(study_name="opt",
                              storage=f"sqlite:///{results / 'opt' / 'optuna.db'}")
    told = [t for t in study.trials if "trained" in t.user_attrs]
    assert told
    proposals: dict[str, set] = {}  # two proposals may train as one trial: the first is kept
    for t in told:
        (tid,) = t.user_attrs["trial_ids"]
        assert t.user_attrs["trained"]["task.cooccurrence"] == \
            trials.loc[tid, "task.cooccurrence"]
        proposals.setdefault(tid, set()).add(t.params["task.cooccurrence"])
    for tid, asked in proposals.items():
        assert json.loads(trials.loc[tid, "requested"])["task.cooccurrence"] in asked
    best = study.best_trial
    line = next(x for x in out.splitlines() if x.startswith("optuna best"))
    trained = best.user_attrs.get("trained", {}).get("task.cooccurrence",
                                                     best.params["task.cooccurrence"])
    assert f"task.cooccurrence={trained!r}" in line


def test_the_requested_column_is_part_of_every_trials_file(tmp_path):
    path = write_sweep(tmp_path / "s.yaml", variant(**{"seeds": 1, "budget": {"steps": 10}}))
    assert cli(["run", path, "--results", tmp_path / "r", "--executor", "local",
                "--no-estimate"])[0] == 0
    (part,) = (tmp_path / "r" / "tiny" / "trials").rglob("*.parquet")
    assert "requested" in pq.read_schema(part).names


RANDOM_C = {"type": "random", "trials": 10, "seed": 0}


def test_a_random_search_draws_on_the_task_s_grid_inside_the_range_and_says_how_many_cells(
        tmp_path):
    """c from uniform [0.05, 0.95] at L = 6: every draw is a multiple of 1/6 inside the range
    (never 0, which a draw of 0.06 would train as), nothing moves, and the plan says how many
    of the 10 draws are distinct."""
    from sweeper.plan import make_plan

    data = variant(**{"fixed.task.length": 6, "seeds": 1, "search": RANDOM_C,
                      "axes": {"task": {"cooccurrence": {"uniform": [0.05, 0.95]}}}})
    sweep = sweep_from(data)
    plan = make_plan(sweep, set())
    values = [s.task_params["cooccurrence"] for s in plan.specs]
    assert all(0.05 <= v <= 0.95 and round(v * 6) == pytest.approx(v * 6) for v in values)
    assert all(s.requested == () for s in plan.specs)
    path = write_sweep(tmp_path / "r.yaml", data)
    rc, _, err = cli(["plan", path, "--results", tmp_path / "r", "--no-estimate"])
    assert rc == 0 and f"note: 10 cells drawn, {len(values)} distinct" in err
    log = {**data, "axes": {"task": {"cooccurrence": {"loguniform": [0.05, 0.95]}}}}
    logged = make_plan(sweep_from(log), set()).specs
    assert all(0.05 <= s.task_params["cooccurrence"] <= 0.95 and s.requested == ()
               for s in logged)


def test_a_range_holding_no_value_the_task_trains_at_is_refused(tmp_path):
    data = variant(**{"fixed.task.length": 6, "seeds": 1, "search": RANDOM_C,
                      "axes": {"task": {"cooccurrence": {"uniform": [0.2, 0.3]}}}})
    path = write_sweep(tmp_path / "n.yaml", data)
    rc, _, err = cli(["plan", path, "--results", tmp_path / "r", "--no-estimate"])
    assert rc == 2 and err.count("\n") == 1 and not (tmp_path / "r").exists()
    assert "axes.task.cooccurrence.uniform: got [0.2, 0.3], which holds no value the task " \
           "trains at (it trains task.cooccurrence in steps of 1/6 here)" in err


def test_an_optuna_log_range_off_the_grid_is_said(tmp_path):
    path, results = _optuna_sweep(tmp_path, **{
        "axes": {"task": {"cooccurrence": {"loguniform": [0.05, 0.95]}}}}), tmp_path / "r"
    rc, _, err = cli(["plan", path, "--results", results, "--no-estimate"])
    assert rc == 0 and "note: task.cooccurrence is proposed loguniform, off the grid the " \
                       "task trains it on" in err

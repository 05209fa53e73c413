"""The calibrated budget: the copy family records the scale its claims were calibrated at and
the budgets (train.steps) for which they hold; `sweeper plan`, `sweeper run` and `sweeper.run`
warn, on one line and before anything trains, when a sweep at that scale runs outside them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sweep_helpers import DELETE, cli, variant, write_sweep

import sweeper
from sweeper.admission import calibration_warnings
from sweeper.families import family_of
from sweeper.plan import make_plan
from sweeper.search_space import load_sweep, parse_sweep

SPACES = Path(__file__).resolve().parents[1] / "search_spaces"
SCALE = family_of("copy-v1").calibrations[0]
LOW, HIGH = SCALE.steps
# the calibrated scale, one cell, one seed: cheap enough to train a few steps here
AT_SCALE = variant(**{"name": "at_scale", "fixed.task": {"length": 16},
                      "fixed.model": {"width": 32},
                      "fixed.train": {"batch_size": 128, "lr": 0.003, "eval_every": 10,
                                      "eval_size": 16},
                      "axes": {}, "seeds": 1, "budget.steps": 10})
MEASURING = {"snell_scale", "snell_budget"}  # they measure what happens outside the range


def _warnings(path: Path) -> list[str]:
    sweep = load_sweep(path)
    return calibration_warnings(sweep, make_plan(sweep, set()).specs)


def test_the_copy_family_records_its_scale_and_a_budget_range_around_400_steps():
    assert SCALE.scale["task.length"] == 16 and SCALE.scale["model.width"] == 32
    assert LOW <= 400 <= HIGH  # the budget the scale was chosen at (snell_scale)
    assert "snell_budget.yaml" in SCALE.measured_by
    quick = make_plan(load_sweep(SPACES / "quick.yaml"), set()).specs
    assert all(SCALE.at_scale(s.flat()) for s in quick)
    paper = make_plan(load_sweep(SPACES / "snell_copy.yaml"), set()).specs
    assert not any(SCALE.at_scale(s.flat()) for s in paper)


@pytest.mark.parametrize("path", sorted(SPACES.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_shipped_sweep_is_warned_only_when_it_measures_beyond_the_range(path):
    warned = _warnings(path)
    assert bool(warned) == (path.stem in MEASURING), warned


def test_plan_warns_on_one_line_naming_the_budgets_outside_the_range_and_why(tmp_path):
    steps = variant(AT_SCALE, **{"budget": DELETE,
                                 "axes.train.steps": {"grid": [LOW - 10, 400, 1200]}})
    rc, out, err = cli(["plan", write_sweep(tmp_path / "steps.yaml", steps), "--results",
                        tmp_path, "--no-estimate"])
    assert rc == 0 and out
    line, = [e for e in err.splitlines() if "calibrated range" in e]
    assert line.startswith(f"warning: train.steps: {LOW - 10}, 1200 outside copy's "
                           f"calibrated range {LOW}-{HIGH}")
    assert "task.length 16, model.width 32" in line
    assert f"under {LOW} steps" in line and f"over {HIGH} steps" in line
    assert "token accuracy no longer needs attention" in line
    assert "snell_budget.yaml" in line


@pytest.mark.parametrize("argv", [["quick.yaml"], ["snell_copy.yaml", "--set", "budget.steps=1200"],
                                  ["quick.yaml", "--set", "model.width=48",
                                   "--set", "budget.steps=1200"]],
                         ids=["quick", "paper-scale-1200", "wider-1200"])
def test_plan_says_nothing_of_calibration_inside_the_range_or_at_another_scale(argv,
                                                                                  tmp_path):
    rc, _, err = cli(["plan", SPACES / argv[0], *argv[1:], "--results", tmp_path,
                      "--no-estimate", "--json"])
    assert rc == 0 and "calibrated" not in err


def test_run_warns_before_training_and_still_runs_from_the_cli_and_from_python(tmp_path):
    path = write_sweep(tmp_path / "at_scale.yaml", AT_SCALE)
    rc, _, err = cli(["run", path, "--results", tmp_path / "cli", "--executor", "local"])
    assert rc == 0
    assert f"warning: train.steps: 10 outside copy's calibrated range {LOW}-{HIGH}" in err
    assert err.index("calibrated range") < err.index("1/1 trials")  # before it trains
    stream = io.StringIO()
    result = sweeper.run(AT_SCALE, results=str(tmp_path / "api"), executor="local",
                         stream=stream)
    assert result.ran == 1 and "calibrated range" in stream.getvalue()


def test_a_search_without_specs_up_front_is_judged_by_its_fixed_settings():
    optuna = {"type": "optuna", "trials": 3, "objective": "best_accuracy",
              "direction": "maximize", "seed": 0}
    fixed = variant(AT_SCALE, **{"search": optuna, "budget.steps": 1200,
                                 "axes.task.hardness": {"uniform": [0.0, 1.0]}})
    assert calibration_warnings(parse_sweep(_yaml(fixed)), []) != []
    searched = variant(fixed, **{"budget": DELETE, "axes.train.steps": {"int": [100, 1200]}})
    assert calibration_warnings(parse_sweep(_yaml(searched)), []) == []


def _yaml(data: dict) -> str:
    import yaml

    return yaml.safe_dump(data)


def test_the_docs_quote_the_range_the_family_records():
    docs = Path(__file__).resolve().parents[1] / "docs"
    quoted = f"{LOW}-{HIGH} steps"
    for page in ("results.md", "sweep-files.md"):
        assert quoted in (docs / page).read_text(), page

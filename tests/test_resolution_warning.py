"""Warn before an empty picture: when the seeds a cell will have can never resolve it in the
phase diagram (at its defaults), `sweeper plan`, `sweeper run` and `sweeper.run` say so on one
line before anything trains, with both remedies; only where cells are judged by a yes/no
outcome (an Optuna search that optimises a number is not)."""

from __future__ import annotations

import io

import pytest
from sweep_helpers import TINY, cli, sweep_text, variant, write_sweep

import sweeper
from sweeper.admission import resolution_warnings
from sweeper.results.cells import seeds_to_resolve
from sweeper.search_space import parse_sweep

NEEDED = seeds_to_resolve()  # 4 at the phase diagram's defaults


def _lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "cannot resolve a cell" in line]


def test_run_with_two_seeds_warns_in_one_line_before_training_naming_both_remedies(tmp_path):
    rc, out, err = cli(["run", write_sweep(tmp_path / "tiny.yaml", TINY), "--results",
                        tmp_path, "--executor", "local"])
    assert rc == 0, err
    line, = _lines(err)
    assert line.startswith("warning: 2 seeds per cell cannot resolve a cell")
    assert f"use seeds: {NEEDED} or more" in line and f"--set seeds={NEEDED}" in line
    assert "sweeper phase --min-seeds" in line
    assert err.index(line) < err.index("trials:") if "trials:" in err else True


@pytest.mark.parametrize("seeds", [1, 2, 3])
def test_sweeper_run_warns_for_every_count_of_seeds_below_what_a_cell_needs(tmp_path, seeds):
    stream = io.StringIO()
    sweeper.run(variant(seeds=seeds, **{"budget.steps": 10}), results=tmp_path,
                executor="local", stream=stream)
    line, = _lines(stream.getvalue())
    assert line.startswith(f"warning: {seeds} seed{'s' * (seeds != 1)} per cell")


def test_no_warning_once_a_cell_has_the_seeds_it_needs(tmp_path):
    rc, _, err = cli(["plan", write_sweep(tmp_path / "four.yaml", variant(seeds=NEEDED)),
                      "--results", tmp_path, "--no-estimate"])
    assert rc == 0 and not _lines(err), err


def _optuna(objective: str) -> dict:
    return variant(seeds=2, search={"type": "optuna", "trials": 4, "objective": objective},
                   axes={"task": {"cooccurrence": {"uniform": [0.0, 1.0]}}})


def test_an_optuna_search_warns_only_when_its_objective_is_a_yes_no_outcome():
    assert resolution_warnings(parse_sweep(sweep_text(_optuna("attention_learned"))))
    number = parse_sweep(sweep_text(_optuna("attention_steps")))
    assert resolution_warnings(number) == []


def test_plan_of_an_optuna_search_of_a_number_says_nothing_of_seeds(tmp_path):
    path = write_sweep(tmp_path / "opt.yaml", _optuna("attention_steps"))
    rc, _, err = cli(["plan", path, "--results", tmp_path, "--no-estimate"])
    assert rc == 0 and not _lines(err), err

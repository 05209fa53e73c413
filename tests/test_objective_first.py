"""An Optuna search is shown by its declared objective: the run's cell table holds the value its
study is told for each cell, best first; its history counts cells as Optuna counts trials; a
yes/no objective is what its maps draw."""

from __future__ import annotations

import json

import optuna
import pyarrow.fs as pafs
import pytest
from sweep_helpers import cli, variant, write_sweep

OPTUNA = {"type": "optuna", "trials": 4, "objective": "best_accuracy", "direction": "maximize",
          "seed": 1}


def _study(results, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name,
                             storage=f"sqlite:///{results / name / 'optuna.db'}")


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    root = tmp_path_factory.mktemp("objective")
    data = variant(**{"name": "opt", "seeds": 2, "budget": {"steps": 20}, "search": OPTUNA,
                      "axes": {"task": {"hardness": {"uniform": [0.0, 1.0]}}}})
    path = write_sweep(root / "opt.yaml", data)
    rc, out, err = cli(["run", path, "--results", root / "r", "--executor", "local",
                        "--no-estimate", "--json"])
    assert rc == 0, err
    return root / "r", json.loads(out)


def test_the_run_table_is_the_objective_per_cell_best_first_as_the_study_is_told(searched):
    results, summary = searched
    assert summary["objective"] == "best_accuracy" and summary["direction"] == "maximize"
    study = _study(results, "opt")
    told = {t.params["task.hardness"]: t.value for t in study.trials
            if t.state == optuna.trial.TrialState.COMPLETE}
    cells = summary["cells"]
    assert [c["objective"] for c in cells] == sorted((c["objective"] for c in cells),
                                                     reverse=True)
    for cell in cells:
        assert cell["n"] == 2
        (value,) = [v for h, v in told.items()  # (the JSON keeps 10 digits)
                    if h == pytest.approx(cell["task.hardness"], abs=1e-9)]
        assert cell["objective"] == pytest.approx(value)
    rc, out, _ = cli(["run", results.parent / "opt.yaml", "--results", results,
                      "--executor", "local", "--no-estimate"])
    assert rc == 0 and "best_accuracy (maximize, mean)" in out


def test_the_history_has_one_point_per_optuna_trial(searched):
    from analysis.dashboard.data import SweepView

    results, _ = searched
    view = SweepView(pafs.LocalFileSystem(), str(results), "opt")
    view.state()
    history = view.search()["history"]
    completed = [t for t in _study(results, "opt").trials
                 if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(history["objective"]) == len({round(t.params["task.hardness"], 12)
                                              for t in completed})
    assert history["trials"] == [2] * len(history["objective"])
    assert max(history["best"]) == pytest.approx(max(t.value for t in completed))


def test_a_yes_no_objective_is_the_outcome_its_maps_draw(tmp_path):
    data = variant(**{"name": "optl", "seeds": 1, "budget": {"steps": 10},
                      "search": {**OPTUNA, "trials": 2, "objective": "learned"},
                      "axes": {"task": {"hardness": {"uniform": [0.0, 1.0]}}}})
    path = write_sweep(tmp_path / "optl.yaml", data)
    assert cli(["run", path, "--results", tmp_path / "r", "--executor", "local",
                "--no-estimate"])[0] == 0
    manifest = json.loads((tmp_path / "r" / "optl" / "manifest.json").read_text())
    assert (manifest["outcome"], manifest["objective"]) == ("learned", "learned")

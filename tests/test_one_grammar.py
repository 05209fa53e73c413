"""One grammar in the Python API: a loaded `Results` asks the commands' questions with the
commands' arguments and short names (`where`, `best`, `phase`), as `sweeper query --where`,
`sweeper best` and `sweeper phase` do."""

from __future__ import annotations

import pytest
from sweep_helpers import run_local, variant

import analysis
from analysis.best import best_trials
from analysis.errors import AnalysisInputError


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return run_local(tmp_path_factory.mktemp("grammar"), variant(**{
        "name": "g", "axes.model.heads": {"grid": [1, 2]}, "seeds": 2, "budget": {"steps": 10}}))


def test_results_where_narrows_as_query_does_and_composes(root):
    res = analysis.load(str(root), "g")
    ones = res.where("heads == 1")
    assert len(ones.trials) == 4 and (ones.trials["model.heads"] == 1).all()
    both = ones.where("seed == 0")
    assert len(both.trials) == 2 and (both.trials["seed"] == 0).all()
    with pytest.raises(AnalysisInputError):
        res.where("heads ==")


def test_results_best_is_sweeper_best_over_what_is_loaded(root):
    ones = analysis.load(str(root), "g").where("model.heads == 1")
    mine = ones.best("accuracy")
    assert mine.equals(best_trials(root, "g", metric="accuracy", where="(model.heads == 1)"))
    assert "mean_final_accuracy" in mine.columns and (mine["seeds"] == 2).all()
    assert len(ones.best("accuracy", by="trial", n=10)) == 4


def test_results_phase_takes_short_names(root):
    res = analysis.load(str(root), "g")
    phase = res.phase("cooccurrence", "heads")
    assert (phase.x, phase.y) == ("task.cooccurrence", "model.heads")
    with pytest.raises(AnalysisInputError, match="^x id: ambiguous"):
        res.phase("id", "heads")

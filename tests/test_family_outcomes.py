"""A new outcome touches the family only: declared as `OutcomeRule`s, it is stored with each
trial, recomputed by `analysis` at other thresholds, queried and drawn as a phase diagram,
with no edit to sweeper or analysis.

The example family here is copy's task under a new id with two outcomes of its own: loss_below
(the first step with loss < its own threshold `loss_level`) and loss_low (whether that
happened, a success outcome that phase diagrams can draw).
"""

from __future__ import annotations

import pandas as pd
import pytest
from sweep_helpers import TINY_STEPS, cli

import analysis
from sweeper.cli import main
from sweeper.families import _TASK_FAMILY, FAMILIES, TASKS, families, register_family
from sweeper.families.base import Family
from sweeper.families.copy import COPY_OUTCOMES, copy_metrics
from sweeper.families.copy import task as copy_task
from sweeper.registry import Entry
from sweeper.results import (
    OUTCOME_COLUMNS,
    OutcomeRule,
    Store,
    Thresholds,
    outcome_columns,
    recompute_outcomes,
    trials_schema,
)
from sweeper.spec import TrialResult, make_spec

LOSS_BELOW = OutcomeRule("loss_below", "first_below", "loss", "loss_level", default=0.5)
LOSS_LOW = OutcomeRule("loss_low", "success", "loss", "loss_level", steps="loss_below",
                       label="loss low: loss")
TASK = Entry("lowloss-copy-v1", copy_task.make_copy, copy_task.PARAMS,
             check=copy_task.check, canonical=copy_task.canonical)
FAMILY = Family(name="lowloss-copy", doc="copy, judged by its loss", tasks=(TASK,),
                models=("seq2seq",),
                experiment="sweeper.families.copy.experiment:CopyExperiment",
                metrics=copy_metrics(), phase_outcome="loss_low",
                outcomes=(*COPY_OUTCOMES, LOSS_BELOW, LOSS_LOW))


@pytest.fixture
def family():
    families()  # the built-ins and plugins first, as in any process
    register_family(FAMILY)
    yield FAMILY
    FAMILIES.pop(FAMILY.name)
    _TASK_FAMILY.pop(TASK.id)
    TASKS.entries.pop(TASK.id)


def _result(length: int, seed: int, losses: list[float]) -> TrialResult:
    spec = make_spec(TASK.id, "seq2seq", {"length": length}, {"width": 8},
                     {"steps": TINY_STEPS[-1], "eval_every": TINY_STEPS[1]}, seed=seed)
    trajectory = {"step": list(TINY_STEPS)}
    for metric in spec.metrics:
        values = [0.2] * len(TINY_STEPS)
        trajectory[metric.name] = [[v] for v in values] if metric.per_item else values
    trajectory["loss"] = losses
    return TrialResult(spec, "ok", trajectory, spec.outcomes(trajectory), 0.1)


def test_the_family_rules_are_computed_and_stored(family, tmp_path):
    falls = _result(4, 0, [2.0, 0.4, 0.1][:len(TINY_STEPS)])
    stays = _result(4, 1, [2.0, 1.0, 0.9][:len(TINY_STEPS)])
    assert falls.outcomes["loss_below"] == TINY_STEPS[1] and falls.outcomes["loss_low"] is True
    assert stays.outcomes["loss_below"] is None and stays.outcomes["loss_low"] is False
    assert falls.outcomes["attention_learned"] is False  # copy's rules still apply
    schema = trials_schema(falls.column_types(), falls.metrics, family.outcome_rules)
    assert outcome_columns(family.outcome_rules) == (*OUTCOME_COLUMNS, "regime", "loss_below",
                                                     "loss_low")
    assert str(schema.field("loss_below").type) == "int64"
    assert str(schema.field("loss_low").type) == "bool"
    Store.open(str(tmp_path)).write_pack("low", [falls, stays])
    stored = analysis.load(tmp_path, "low").trials.set_index("seed")
    assert stored.loc[0, "loss_below"] == TINY_STEPS[1] and stored.loc[0, "loss_low"]
    assert pd.isna(stored.loc[1, "loss_below"]) and not stored.loc[1, "loss_low"]


def test_analysis_recomputes_queries_and_draws_the_new_outcome(family, tmp_path):
    results = [_result(length, seed, losses)
               for length, losses in ((4, [2.0, 0.4, 0.1]), (6, [2.0, 0.8, 0.6]))
               for seed in range(3)]
    Store.open(str(tmp_path)).write_pack("low", results)
    res = analysis.load(tmp_path, "low")
    stored = res.trials.set_index("trial_id")
    again = analysis.recompute_outcomes(res.trajectories, res.trials).set_index("trial_id")
    for column in ("loss_below", "loss_low", "learned", "attention_learned"):
        pd.testing.assert_series_equal(stored[column], again.loc[stored.index, column],
                                       check_dtype=False)
    lenient = analysis.with_outcomes(res.trials, res.trajectories,
                                     Thresholds(others={"loss_level": 0.9}))
    assert lenient["loss_low"].all()
    low = analysis.query_frame(tmp_path, "low", where="loss_low == true",
                               columns=["task.length", "loss_below"])
    assert set(low["task.length"]) == {4}
    phase = analysis.compute_phase(res.trials, "task.length", "seed", outcome="loss_low",
                                   min_seeds=1)
    assert phase.outcome == "loss_low"
    assert set(phase.cells["successes"]) == {0, 1}


def test_the_cli_draws_the_new_outcome_with_its_label(family, tmp_path, capsys):
    results = [_result(length, seed, losses)
               for length, losses in ((4, [2.0, 0.4, 0.1]), (6, [2.0, 0.8, 0.6]))
               for seed in range(3)]
    Store.open(str(tmp_path)).write_pack("low", results)
    with pytest.raises(SystemExit):
        main(["phase", "--outcome", "nope"])
    assert "choose from 'attention_learned', 'learned', 'loss_low'" in capsys.readouterr().err
    rc, out, err = cli(["phase", tmp_path / "low", "--x", "task.length", "--y", "seed",
                        "--outcome", "loss_low", "--min-seeds", "1",
                        "-o", tmp_path / "low.svg"])
    assert rc == 0, err
    assert "loss_low, 6 cells" in out
    phase = analysis.phase_from_results(analysis.load(tmp_path, "low"), "task.length", "seed",
                                        outcome="loss_low", min_seeds=1)
    assert phase.success_text() == "loss low: loss < 0.5"
    assert "p(loss low: loss &lt; 0.5)" in (tmp_path / "low.svg").read_text()


def test_results_evaluates_rules_it_is_given_without_the_families():
    rows = pd.DataFrame({"trial_id": ["a"] * 3, "step": [0, 10, 20],
                         "accuracy": [0.1, 0.5, 0.99], "loss": [2.0, 0.3, 0.1]})
    out = recompute_outcomes(rows, rules=(LOSS_BELOW,)).iloc[0]
    assert out["loss_below"] == 10 and out["steps_to_learn"] == 20
    assert pd.isna(out["attention_learned"])  # a contract column no rule given fills
    stricter = recompute_outcomes(rows, thresholds=Thresholds(others={"loss_level": 0.2}),
                                  rules=(LOSS_BELOW,)).iloc[0]
    assert stricter["loss_below"] == 20


def test_a_family_whose_phase_outcome_is_not_one_of_its_successes_is_refused():
    bad = Family(name="bad", doc="", tasks=(), models=(), experiment="x:y",
                 metrics=copy_metrics(), phase_outcome="attention_learned")
    with pytest.raises(ValueError, match="phase outcome 'attention_learned'"):
        register_family(bad)

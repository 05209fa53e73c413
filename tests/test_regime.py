"""The regime of a copy run: which solution it found (aligned, offset, diffuse, not copying...),
declared by the copy family as one category rule, stored with every trial, recomputed at other
thresholds, queried, and drawn as a map of the phase diagram's cells."""

from __future__ import annotations

import io
import math

import pandas as pd
import pyarrow.parquet as pq
import pytest
from sweep_helpers import cli, variant, write_sweep

import analysis
from sweeper.families import families
from sweeper.families.copy import REGIME
from sweeper.results import (
    DEFAULT_THRESHOLDS,
    Category,
    Condition,
    OutcomeRule,
    ResultsInputError,
    Thresholds,
    recompute_outcomes,
    trial_outcomes,
    trials_schema,
)

try:
    from analysis_fixtures import trials_frame
    from synthetic_stores import write_copy_sweep
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import trials_frame
    from tests.synthetic_stores import write_copy_sweep

L = 16  # S = 17 source positions: uniform attention puts 1/17 on each
NEW_METRICS = ("attn_offset", "attn_peak_mass", "attn_concentration")


def regime(final: dict, earlier: dict | None = None,
           thresholds: Thresholds = DEFAULT_THRESHOLDS) -> str | None:
    """The regime of a copy trajectory logged at steps 0 and 100, `final` at step 100."""
    copy = families()["copy"]
    start = {"accuracy": 0.05, "attn_acc": 0.0, "attn_offset": 0.0,
             "attn_peak_mass": 1 / (L + 1), **(earlier or {})}
    columns = {"step": [0, 100]}
    for metric in copy.metrics:
        values = [start.get(metric.name, 0.0), final.get(metric.name, 0.0)]
        columns[metric.name] = [[v] for v in values] if metric.per_item else values
    for row, values in enumerate((start, final)):
        if "attn_concentration" not in values:  # from the peak mass, as the experiment logs
            columns["attn_concentration"][row] = values.get("attn_peak_mass", 0.0) * (L + 1)
    return trial_outcomes(columns, copy.metrics, copy.outcome_rules,
                          thresholds=thresholds)["regime"]


# -- the rule on hand-built trajectories --------------------------------------------------
def test_a_run_whose_best_head_aligns_is_aligned_whatever_its_token_accuracy():
    assert regime({"accuracy": 0.99, "attn_acc": 0.97, "attn_peak_mass": 0.9}) == "aligned"
    assert regime({"accuracy": 0.40, "attn_acc": 0.95, "attn_peak_mass": 0.9}) == "aligned"


def test_a_copier_attending_three_ahead_is_offset_not_aligned():
    # the 1,200-step failures: token accuracy 0.98, attention accuracy ~0, aligned mass 0.043
    final = {"accuracy": 0.98, "attn_acc": 0.001, "attn_mass": 0.043, "attn_offset": 3.0,
             "attn_peak_mass": 0.25}
    assert regime(final) == "offset"


def test_a_copier_whose_attention_stays_near_uniform_is_diffuse():
    final = {"accuracy": 0.97, "attn_acc": 0.0, "attn_offset": -2.0,
             "attn_peak_mass": 1.5 / (L + 1)}  # a peak below twice uniform's 1/S
    assert regime(final) == "diffuse"


def test_a_copier_concentrated_on_the_aligned_word_below_the_threshold_is_partly_aligned():
    final = {"accuracy": 0.97, "attn_acc": 0.6, "attn_offset": 0.0, "attn_peak_mass": 0.5}
    assert regime(final) == "partly_aligned"


def test_a_run_below_the_token_accuracy_threshold_that_did_not_align_is_not_copying():
    final = {"accuracy": 0.66, "attn_acc": 0.02, "attn_offset": 4.0, "attn_peak_mass": 0.3}
    assert regime(final) == "not_copying"


def test_the_final_evaluation_decides_not_the_best_one():
    aligned_then_lost = regime({"accuracy": 0.97, "attn_acc": 0.1, "attn_peak_mass": 0.05},
                               earlier={"attn_acc": 0.95})
    assert aligned_then_lost == "diffuse"


def test_the_thresholds_are_parameters_of_the_analysis():
    final = {"accuracy": 0.96, "attn_acc": 0.85, "attn_offset": 2.0, "attn_peak_mass": 0.2}
    assert regime(final) == "offset"  # concentration 3.4 >= 2
    assert regime(final, thresholds=Thresholds(concentration=4)) == "diffuse"
    assert regime(final, thresholds=Thresholds(attention_learned=0.8)) == "aligned"
    assert regime(final, thresholds=Thresholds(accuracy=0.97)) == "not_copying"


def test_a_metric_that_is_not_a_number_at_the_end_leaves_the_regime_unknown():
    assert regime({"accuracy": 0.98, "attn_acc": 0.0, "attn_peak_mass": math.nan}) is None


def test_trajectories_from_before_the_peak_metrics_give_an_unknown_regime_not_an_error():
    rows = pd.DataFrame({"trial_id": ["a", "a", "b"], "step": [0, 10, 10],
                         "accuracy": [0.1, 0.99, 0.5], "attn_acc": [0.0, 0.95, 0.0]})
    out = recompute_outcomes(rows, rules=(REGIME,))
    assert out["regime"].isna().all() and str(out["regime"].dtype) == "string"


def test_regime_is_a_string_column_of_the_trials_table():
    copy = families()["copy"]
    schema = trials_schema({}, copy.metrics, copy.outcome_rules)
    assert str(schema.field("regime").type) == "string"
    assert REGIME.values == ("aligned", "not_copying", "offset", "partly_aligned", "diffuse")
    assert set(REGIME.metrics) == {"attn_acc", "accuracy", "attn_concentration", "attn_offset"}


def test_a_category_rule_must_name_categories_and_a_concentration_below_one_is_refused():
    with pytest.raises(ValueError, match="names its categories"):
        OutcomeRule("r", "category")
    with pytest.raises(ValueError, match="except a category rule"):
        OutcomeRule("r", "category", "accuracy", "accuracy", categories=(Category("x"),))
    with pytest.raises(ValueError, match="operator"):
        Condition("accuracy", "=>", 0.5)
    with pytest.raises(ResultsInputError, match="concentration threshold"):
        Thresholds(concentration=0.5)


# -- stored, queried, drawn ---------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A synthetic copy sweep in which most failures copy without aligning."""
    root = tmp_path_factory.mktemp("regime")
    write_copy_sweep(root, "copy", copiers=0.8, heads=(1, 4), hardness=(0.0, 1.0), seeds=6)
    return root


def test_the_stored_regime_is_what_the_analysis_recomputes(store):
    res = analysis.load(store, "copy")
    again = analysis.recompute_outcomes(res.trajectories, res.trials).set_index("trial_id")
    stored = res.trials.set_index("trial_id")["regime"]
    assert set(stored.dropna()) >= {"aligned", "offset", "diffuse", "not_copying"}
    pd.testing.assert_series_equal(stored.astype(object), again.loc[stored.index, "regime"]
                                   .astype(object), check_names=False)
    aligned = res.trials["regime"] == "aligned"
    assert res.trials.loc[aligned, "attention_learned"].all()


def test_query_selects_trials_by_regime(store):
    rc, out, err = cli(["query", store / "copy", "--where", "regime == 'offset'",
                        "--columns", "regime,final_attn_offset", "--format", "csv"])
    assert rc == 0, err
    rows = pd.read_csv(io.StringIO(out))
    expected = analysis.load(store, "copy").trials["regime"].eq("offset").sum()
    assert len(rows) == expected > 0
    assert set(rows["regime"]) == {"offset"} and (rows["final_attn_offset"] >= 2).all()


def test_the_phase_diagram_counts_each_cells_regimes_and_labels_them(store):
    res = analysis.load(store, "copy")
    phase = analysis.phase_from_results(res, "task.cooccurrence", "task.hardness",
                                        "model.heads")
    table = phase.trial_regimes
    assert phase.regime_column == "regime" and phase.regime_codes["not_copying"] == "NC"
    assert len(table) == len(phase.cells)  # every cell of the grid
    names = list(REGIME.values)
    assert (table[names].sum(axis=1) == table["n"]).all()
    counted = res.trials[res.trials["status"].isin(("ok", "diverged"))]
    assert table["n"].sum() == counted["regime"].notna().sum()
    for row in table[table["n"] > 0].itertuples(index=False):
        counts = {n: getattr(row, n) for n in names}
        assert row.top == max(names, key=lambda n: (counts[n], -names.index(n)))
        parts = dict(part.split(" ") for part in row.label.split(", "))
        assert {phase.regime_codes[n]: str(c) for n, c in counts.items() if c} == parts


def test_hand_counted_cells_get_their_most_common_regime():
    trials = trials_frame({(1, 0.0, 0.0): (0, 5), (1, 0.5, 0.0): (4, 4)})
    trials["regime"] = ["offset", "offset", "offset", "diffuse", "not_copying",
                        "aligned", "aligned", "aligned", None]
    phase = analysis.compute_phase(trials, "task.cooccurrence", "task.hardness", "model.heads")
    table = phase.trial_regimes.set_index("task.cooccurrence")
    assert table.loc[0.0, "top"] == "offset" and table.loc[0.0, "label"] == "O 3, NC 1, D 1"
    assert table.loc[0.5, "top"] == "aligned" and table.loc[0.5, "n"] == 3  # None: unknown


def test_sweeper_phase_view_regime_draws_the_map_and_writes_the_counts(store, tmp_path):
    png, cells = tmp_path / "regime.png", tmp_path / "regime.csv"
    rc, out, err = cli(["phase", store / "copy", "--x", "task.cooccurrence", "--y",
                        "task.hardness", "--view", "regime", "-o", png, "--cells", cells])
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(cells)
    assert {"model.heads", "n", "aligned", "offset", "diffuse", "top", "label"} <= set(table)
    assert f"regime of {table['n'].sum()} seeds" in out
    rc, strict, _ = cli(["phase", store / "copy", "--x", "task.cooccurrence", "--y",
                         "task.hardness", "--view", "regime", "-o", png,
                         "--concentration-threshold", "100"])
    assert rc == 0 and "offset 0" in strict and "offset 0" not in out


def test_an_old_store_without_the_peak_metrics_reads_with_regime_null(tmp_path):
    write_copy_sweep(tmp_path, "old", heads=(1,), hardness=(0.0,), seeds=3)
    write_copy_sweep(tmp_path, "new", heads=(1,), hardness=(0.0,), seeds=3)
    dropped = {*NEW_METRICS, "regime", *(f"{w}_{m}" for m in NEW_METRICS
                                        for w in ("final", "best"))}
    for path in (tmp_path / "old").glob("*/part-*.parquet"):  # as written before them
        table = pq.read_table(path)
        pq.write_table(table.drop_columns([c for c in table.column_names if c in dropped]),
                       path)
    old = analysis.load(tmp_path, "old")
    assert "regime" not in old.trials.columns
    phase = analysis.phase_from_results(old, "task.cooccurrence", "seed", facet=None)
    assert phase.trial_regimes["n"].sum() == 0 and phase.trial_regimes["top"].isna().all()
    both = analysis.load(tmp_path, ["old", "new"])  # an old sweep beside a new one
    known = both.trials.groupby("sweep")["regime"].count()
    assert known["old"] == 0 and known["new"] == len(both.trials) // 2


def test_a_search_cannot_optimise_a_regime_which_is_not_a_number(tmp_path):
    search = {"type": "optuna", "trials": 2, "objective": "regime", "direction": "maximize"}
    path = write_sweep(tmp_path / "s.yaml", variant(search=search))
    rc, _, err = cli(["plan", path])
    assert rc == 2 and "search.objective: got 'regime'" in err

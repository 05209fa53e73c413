"""The lottery baseline: what independent heads would give, beside what averaged heads give."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import compute_phase, wilson_interval
from analysis.phase import heads_aligned, is_head_axis
from sweeper.results.stats import lottery_rate

try:
    from analysis_fixtures import small_copy_sweep, trials_frame
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import small_copy_sweep, trials_frame

X, Y, F = "task.cooccurrence", "task.hardness", "model.heads"

# (heads, c, h): (successes, seeds)
GRID = {
    (1, 0.0, 0.0): (5, 10), (4, 0.0, 0.0): (10, 10),   # p1 = 0.5: lottery 0.9375
    (1, 0.5, 0.0): (0, 40), (4, 0.5, 0.0): (40, 40),   # far beyond the lottery (0 -> 1)
    (1, 1.0, 0.0): (40, 40), (4, 1.0, 0.0): (0, 40),   # far below it
    (1, 0.0, 1.0): (1, 2), (4, 0.0, 1.0): (10, 10),    # too few one-head seeds to call
}


def row(frame: pd.DataFrame, heads: int, c: float, h: float) -> pd.Series:
    match = frame[(frame[F] == heads) & (frame[X] == c) & (frame[Y] == h)]
    assert len(match) == 1
    return match.iloc[0]


@pytest.fixture(scope="module")
def phase():
    return compute_phase(trials_frame(GRID), X, Y, F)


def test_half_one_head_rate_predicts_0_9375_for_four_heads_with_the_wilson_bounds(phase):
    lot = row(phase.lottery, 4, 0.0, 0.0)
    low, high = wilson_interval(5, 10)
    assert lot["p_base"] == 0.5 and lot["heads_base"] == 1
    assert lot["p_lottery"] == pytest.approx(0.9375)
    assert lot["lottery_low"] == pytest.approx(1 - (1 - float(low)) ** 4)
    assert lot["lottery_high"] == pytest.approx(1 - (1 - float(high)) ** 4)
    assert lot["p"] == 1.0 and lot["n"] == 10
    assert not lot["beyond_lottery"] and not lot["below_lottery"]  # 10/10 is within reach
    # and nothing 10 seeds could show would refute it: not "as lottery" but "cannot tell"
    assert lot["power"] < 0.8 and lot["verdict"].startswith("cannot tell: needs >= ")


def test_far_above_is_beyond_far_below_is_below_and_few_seeds_are_neither(phase):
    assert row(phase.lottery, 4, 0.5, 0.0)["beyond_lottery"]
    assert row(phase.lottery, 4, 1.0, 0.0)["below_lottery"]
    thin = row(phase.lottery, 4, 0.0, 1.0)
    assert not thin["beyond_lottery"] and not thin["below_lottery"]
    assert thin["verdict"] == "insufficient: fewer than 3 seeds"  # 2 one-head seeds
    assert row(phase.lottery, 4, 0.5, 0.0)["verdict"] == "beyond lottery"
    assert len(phase.lottery) == 6  # every (x, y) of the grid at H = 4; H = 1 is the base
    assert phase.lottery["p_lottery"].isna().sum() == 2  # grid points with no trials


def test_lottery_rate_is_the_identity_at_the_reference_and_scales_by_ratio():
    assert lottery_rate(0.3, 1) == pytest.approx(0.3)
    assert lottery_rate(0.5, 8, 2) == pytest.approx(1 - 0.5**4)
    assert is_head_axis("model.heads", [1, 2, 4]) and not is_head_axis("model.heads", [0.5])
    assert not is_head_axis("model.classifier", ["fc", "tc"]) and not is_head_axis(None)


def test_no_head_facet_gives_an_empty_lottery_and_the_same_other_tables():
    trials = trials_frame(GRID)
    plain = compute_phase(trials, X, Y)
    assert plain.lottery.empty and {X, Y, "p_lottery", "beyond_lottery"} <= set(
        plain.lottery.columns)
    other = trials.rename(columns={F: "model.classifier"})
    faceted = compute_phase(other, X, Y, "model.classifier")
    assert faceted.lottery.empty
    heads = compute_phase(trials, X, Y, F)
    pd.testing.assert_frame_equal(faceted.cells.rename(columns={"model.classifier": F}),
                                  heads.cells)
    pd.testing.assert_frame_equal(faceted.recovery.rename(columns={"model.classifier": F}),
                                  heads.recovery)


def test_heads_aligned_counts_a_hand_built_set():
    trials = pd.DataFrame({
        F: [4] * 6 + [1] * 3, "status": ["ok"] * 5 + ["failed"] + ["ok"] * 3,
        "attention_heads": [0, 1, 1, 2, None, 4, 1, 0, 1]})
    table = heads_aligned(trials, [F]).set_index(F)
    assert table.loc[4, "n"] == 4 and table.loc[1, "n"] == 3  # null and failed left out
    assert table.loc[4, [0, 1, 2]].tolist() == [1, 2, 1]
    assert table.loc[1, [0, 1, 2]].tolist() == [1, 2, 0]
    assert list(table.columns) == ["n", 0, 1, 2]  # the failed run's 4 is not counted


def test_the_lottery_map_draws_and_refuses_a_sweep_without_heads(phase, tmp_path):
    from analysis import AnalysisInputError, plots

    fig = plots.lottery_figure(phase)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 1 and "lottery" in titles[0]
    for name in ("lottery.png", "lottery.svg"):
        path = plots.save(fig, tmp_path / name)
        assert path.stat().st_size > 1000
    with pytest.raises(AnalysisInputError, match="does not count heads"):
        plots.lottery_figure(compute_phase(trials_frame(GRID), X, Y))


def test_cli_phase_view_lottery_draws_the_map_writes_the_table_and_counts_heads(tmp_path,
                                                                              capsys):
    from analysis.cli import main

    small_copy_sweep(tmp_path, cooccurrence=(0.0, 1.0), hardness=(0.0,), heads=(1, 4), seeds=4,
                     failed=0.0, diverged=0.0)
    argv = ["phase", str(tmp_path / "copy"), "--x", "task.cooccurrence", "--y",
            "task.hardness", "--facet", "model.heads", "--view", "lottery",
            "-o", str(tmp_path / "lottery.svg"), "--cells", str(tmp_path / "lottery.csv")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "lottery from model.heads = 1" in out and "heads aligned" in out
    assert (tmp_path / "lottery.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    table = pd.read_csv(tmp_path / "lottery.csv")
    assert len(table) == 2 and (table["model.heads"] == 4).all()
    no_facet = argv[:6] + ["--facet", "none", *argv[8:]]
    assert main(no_facet) == 2
    assert "does not count heads" in capsys.readouterr().err


def test_recovery_between_head_counts_is_tested_cell_by_cell_with_its_power(phase):
    rec = phase.recovery.set_index([X, Y])
    assert rec.loc[(0.5, 0.0), "verdict"] == "more learn"  # 0/40 -> 40/40
    assert rec.loc[(1.0, 0.0), "verdict"] == "fewer learn"  # 40/40 -> 0/40
    thin = rec.loc[(0.0, 1.0)]  # 1 of 2 against 10 of 10: no test could call it
    assert thin["verdict"] == "insufficient: fewer than 3 seeds" and thin["power"] < 0.8
    half = rec.loc[(0.0, 0.0)]  # 5 of 10 against 10 of 10: p = 0.03, but power 0.2 is short
    assert half["verdict"] == "more learn" and half["power"] < 0.8

"""The phase-diagram data object on synthetic trials with known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_stores import copy_configs, topic_configs

from analysis import AnalysisInputError, compute_phase, wilson_interval
from analysis.phase import default_axes, representative_cells

try:
    from analysis_fixtures import trials_frame
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import trials_frame

X, Y, F = "task.cooccurrence", "task.hardness", "model.heads"

# (heads, c, h): (successes, seeds); (1, 1.0, 1.0) has no trials at all.
GRID = {
    (1, 0.0, 0.0): (0, 10), (1, 0.5, 0.0): (10, 10), (1, 1.0, 0.0): (5, 10),
    (1, 0.0, 1.0): (1, 2), (1, 0.5, 1.0): (0, 10),
    (4, 0.0, 0.0): (10, 10), (4, 0.5, 0.0): (10, 10), (4, 1.0, 0.0): (10, 10),
    (4, 0.0, 1.0): (10, 10), (4, 0.5, 1.0): (5, 10), (4, 1.0, 1.0): (0, 10),
}


@pytest.fixture(scope="module")
def phase():
    return compute_phase(trials_frame(GRID), X, Y, F)


def cell(phase, heads, c, h) -> pd.Series:
    cells = phase.cells
    row = cells[(cells[F] == heads) & (cells[X] == c) & (cells[Y] == h)]
    assert len(row) == 1
    return row.iloc[0]


# ---------------------------------------------------------------- Wilson intervals

@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0),
    (1, 3, 0.0615, 0.7923), (3, 4, 0.3006, 0.9544), (3, 3, 0.4385, 1.0), (4, 4, 0.5101, 1.0),
])
def test_wilson_interval_matches_hand_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert float(lo) == pytest.approx(low, abs=1e-4)
    assert float(hi) == pytest.approx(high, abs=1e-4)


def test_wilson_interval_of_no_seeds_is_nan_and_confidence_widens_it():
    lo, hi = wilson_interval(0, 0)
    assert math.isnan(lo) and math.isnan(hi)
    narrow = wilson_interval(5, 10, confidence=0.5)
    wide = wilson_interval(5, 10, confidence=0.99)
    assert wide[0] < narrow[0] < 0.5 < narrow[1] < wide[1]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_holds_the_estimate(kn):
    k, n = kn
    lo, hi = (float(v) for v in wilson_interval(k, n))
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    mirrored = wilson_interval(n - k, n)
    assert float(mirrored[0]) == pytest.approx(1 - hi, abs=1e-12)


# ---------------------------------------------------------------- cells and states

def test_full_grid_with_every_axis_value(phase):
    assert phase.x_values == [0.0, 0.5, 1.0]
    assert phase.y_values == [0.0, 1.0]
    assert phase.facet_values == [1, 4]
    assert len(phase.cells) == 2 * 3 * 2
    assert phase.base == 1


@pytest.mark.parametrize(("key", "p", "state"), [
    ((1, 0.0, 0.0), 0.0, "failed"), ((1, 0.5, 0.0), 1.0, "learned"),
    ((1, 1.0, 0.0), 0.5, "unreliable"), ((1, 0.0, 1.0), 0.5, "insufficient"),
    ((1, 0.5, 1.0), 0.0, "failed"), ((1, 1.0, 1.0), None, "missing"),
    ((4, 0.0, 0.0), 1.0, "learned"), ((4, 0.5, 1.0), 0.5, "unreliable"),
    ((4, 1.0, 1.0), 0.0, "failed"),
])
def test_probabilities_and_states(phase, key, p, state):
    row = cell(phase, *key)
    assert row["state"] == state
    if p is None:
        assert row["n_trials"] == 0 and row["n"] == 0 and math.isnan(row["p"])
        assert math.isnan(row["p_low"]) and math.isnan(row["p_high"])
    else:
        k, n = GRID[key]
        assert (row["successes"], row["n"]) == (k, n)
        assert row["p"] == pytest.approx(p)
        lo, hi = wilson_interval(k, n)
        assert (row["p_low"], row["p_high"]) == pytest.approx((float(lo), float(hi)))


def test_medians_of_steps_to_learn_and_attention_onset(phase):
    # learned seeds 0..k-1 learn at 10 (seed + 1) and have an onset at 5 (seed + 1)
    row = cell(phase, 1, 0.5, 0.0)
    assert row["median_steps_to_learn"] == 55.0
    assert row["median_attention_onset"] == 27.5
    row = cell(phase, 1, 1.0, 0.0)
    assert (row["median_steps_to_learn"], row["median_attention_onset"]) == (30.0, 15.0)
    assert math.isnan(cell(phase, 1, 0.0, 0.0)["median_steps_to_learn"])


def test_insufficient_cells_are_marked_not_guessed(phase):
    row = cell(phase, 1, 0.0, 1.0)
    assert row["state"] == "insufficient" and row["n"] == 2
    assert not phase.boundary[[f"{X}_a", f"{Y}_a"]].eq([0.0, 1.0]).all(axis=1).any()
    more = compute_phase(trials_frame(GRID), X, Y, F, min_seeds=1)
    assert cell(more, 1, 0.0, 1.0)["state"] == "unreliable"


def test_recovered_cells_failed_with_one_head_and_learned_with_more(phase):
    recovered = phase.cells[phase.cells["recovered"]]
    assert [tuple(r) for r in recovered[[F, X, Y]].itertuples(index=False)] == [(4, 0.0, 0.0)]
    # 4 heads learned at (0.5, 0) too, but one head had not failed there
    assert cell(phase, 4, 0.5, 0.0)["state"] == "learned"
    assert not cell(phase, 4, 0.5, 0.0)["recovered"]
    # failing with one head and only unreliable with four is not recovered
    assert not cell(phase, 4, 0.5, 1.0)["recovered"]


def test_recovery_map_is_p_heads_minus_p_one_head(phase):
    rec = phase.recovery.set_index([X, Y])
    assert set(phase.recovery[F]) == {4}
    assert rec.loc[(0.0, 0.0), "delta"] == pytest.approx(1.0)
    assert rec.loc[(0.5, 0.0), "delta"] == pytest.approx(0.0)
    assert rec.loc[(1.0, 0.0), "delta"] == pytest.approx(0.5)
    assert rec.loc[(0.5, 1.0), "delta"] == pytest.approx(0.5)
    assert math.isnan(rec.loc[(0.0, 1.0), "delta"])  # one head has too few seeds
    assert math.isnan(rec.loc[(1.0, 1.0), "delta"])  # one head has no trials


def _segments(phase, heads):
    b = phase.boundary[phase.boundary[F] == heads]
    return {((r[f"{X}_a"], r[f"{Y}_a"]), (r[f"{X}_b"], r[f"{Y}_b"])) for _, r in b.iterrows()}


def test_boundary_segments_between_adjacent_sampled_cells(phase):
    assert _segments(phase, 1) == {((0.0, 0.0), (0.5, 0.0)), ((0.5, 0.0), (0.5, 1.0))}
    assert _segments(phase, 4) == {((1.0, 0.0), (1.0, 1.0))}
    seg = phase.boundary[phase.boundary[F] == 4].iloc[0]
    assert (seg.edge_x0, seg.edge_y0, seg.edge_x1, seg.edge_y1) == (1.5, 0.5, 2.5, 0.5)
    seg = phase.boundary[(phase.boundary[F] == 1) & (phase.boundary[f"{Y}_b"] == 0.0)].iloc[0]
    assert (seg.edge_x0, seg.edge_y0, seg.edge_x1, seg.edge_y1) == (0.5, -0.5, 0.5, 0.5)
    assert ((phase.boundary["p_a"] - 0.5) * (phase.boundary["p_b"] - 0.5) < 0).all()


def test_boundary_never_crosses_a_missing_cell():
    # p = 0 at c = 0 and p = 1 at c = 1, nothing sampled at c = 0.5 (h = 0)
    grid = {(1, 0.0, 0.0): (0, 5), (1, 1.0, 0.0): (5, 5), (1, 0.5, 1.0): (5, 5)}
    phase = compute_phase(trials_frame(grid), X, Y, None)
    assert cell_state(phase, 0.5, 0.0) == "missing"
    pairs = {(r[f"{X}_a"], r[f"{X}_b"]) for _, r in phase.boundary.iterrows()}
    assert (0.0, 1.0) not in pairs and len(phase.boundary) == 0


def cell_state(phase, c, h):
    cells = phase.cells
    return cells[(cells[X] == c) & (cells[Y] == h)]["state"].item()


def test_no_facet_gives_one_panel_and_no_recovery():
    phase = compute_phase(trials_frame(GRID), X, Y)
    assert phase.facet is None and phase.facet_values == [None]
    assert F not in phase.cells.columns and len(phase.cells) == 6
    assert phase.recovery.empty
    pooled = cell_state(phase, 0.0, 0.0)  # 0/10 with one head + 10/10 with four
    assert pooled == "unreliable"


def test_statuses_counted_and_excluded():
    frame = trials_frame({(1, 0.0, 0.0): (4, 4)})
    failed = frame.iloc[:3].assign(status="failed", learned=pd.NA,
                                   trial_id=["f1", "f2", "f3"])
    diverged = frame.iloc[:2].assign(status="diverged", learned=False,
                                     trial_id=["d1", "d2"])
    phase = compute_phase(pd.concat([frame, failed, diverged]), X, Y, F)
    row = phase.cells.iloc[0]
    assert (row["n_trials"], row["n"], row["successes"]) == (9, 6, 4)
    assert phase.excluded == {"status failed": 3}


def test_pooled_columns_are_reported():
    frame = trials_frame({(1, 0.0, 0.0): (2, 4)})
    frame["train.lr"] = [1e-3, 1e-3, 1e-2, 1e-2]
    frame["model.width"] = 64
    assert compute_phase(frame, X, Y, F).pooled == ["train.lr"]


def test_grid_and_state_counts(phase):
    p = phase.grid("p", 4).astype(float)
    assert p.shape == (2, 3)
    assert p[0].tolist() == [1.0, 1.0, 1.0] and p[1].tolist() == [1.0, 0.5, 0.0]
    counts = phase.state_counts()
    assert counts.loc[1].to_dict() == {"learned": 1, "failed": 2, "unreliable": 1,
                                       "insufficient": 1, "missing": 1}
    assert int(counts.to_numpy().sum()) == len(phase.cells)


def test_representative_cells_show_every_head_count_where_heads_help(phase):
    cells = representative_cells(phase)
    assert cells == [{F: 1, X: 0.0, Y: 0.0}, {F: 4, X: 0.0, Y: 0.0}]


@pytest.mark.parametrize(("args", "message"), [
    ((X, "task.hardnes", F), "did you mean 'task.hardness'"),
    ((X, X, F), "must differ"),
])
def test_bad_axes_raise_input_errors(args, message):
    with pytest.raises(AnalysisInputError, match=message):
        compute_phase(trials_frame(GRID), *args)


def test_bad_base_and_settings_raise_input_errors():
    with pytest.raises(AnalysisInputError, match="not a value of model.heads"):
        compute_phase(trials_frame(GRID), X, Y, F, base=2)
    with pytest.raises(AnalysisInputError, match="min_seeds"):
        compute_phase(trials_frame(GRID), X, Y, F, min_seeds=0)


def test_default_axes_follow_the_swept_columns():
    copy = copy_configs(seeds=1)
    assert default_axes(copy) == (X, Y, F)
    topic = topic_configs(seeds=1)
    assert default_axes(topic) == (X, "task.distractors", "model.classifier")
    one_axis = copy_configs(hardness=(0.0,), heads=(1,), seeds=1)
    assert default_axes(one_axis)[:2] == (X, Y)  # the fixed hardness gives a one-row grid


def test_string_facet_and_numpy_bools():
    frame = trials_frame({("fc", 0.0, 0.0): (3, 3), ("tl", 0.0, 0.0): (0, 3)},
                         facet="model.classifier")
    frame["learned"] = np.array(frame["learned"], dtype=bool)
    phase = compute_phase(frame, X, Y, "model.classifier")
    assert phase.base == "fc" and phase.facet_values == ["fc", "tl"]
    assert phase.recovery["delta"].tolist() == [-1.0]

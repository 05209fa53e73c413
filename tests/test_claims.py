"""The papers' claims at a reduced scale, with fixed seeds and generous margins (issue 6).

Each claim trains real models through `train_pack`; the numbers in the comments were measured
here and are what the margins leave room around.
"""

from __future__ import annotations

import pytest

from sweeper.spec import make_spec
from sweeper.train import train_pack

pytestmark = pytest.mark.slow
SEEDS = range(8)


def _copy(cooccurrence: float, heads: int) -> list:
    """The faithful small scale (search_spaces/snell_scale.yaml): L = 16, d = 32, 400 steps."""
    specs = [make_spec("copy-v1", "seq2seq", {"length": 16, "cooccurrence": cooccurrence},
                       {"width": 32, "heads": heads},
                       {"steps": 400, "eval_every": 20, "batch_size": 128, "eval_size": 128,
                        "lr": 3e-3}, seed=s) for s in SEEDS]
    return train_pack(specs)


@pytest.fixture(scope="module")
def copy_runs():
    return {(c, h): _copy(c, h) for c, h in ((0.0, 1), (0.5, 1), (0.0, 4))}


def _attention_learned(results) -> int:
    return sum(bool(r.outcomes["attention_learned"]) for r in results)


def test_single_head_attention_learns_in_fewer_seeds_on_hard_than_on_easy_data(copy_runs):
    # measured: hard 5 of 8, easy 8 of 8
    assert _attention_learned(copy_runs[(0.0, 1)]) < _attention_learned(copy_runs[(0.5, 1)])


def test_more_heads_learn_to_attend_in_at_least_as_many_seeds_on_hard_data(copy_runs):
    # measured: 1 head 5 of 8, 4 heads 8 of 8
    assert _attention_learned(copy_runs[(0.0, 4)]) >= _attention_learned(copy_runs[(0.0, 1)])


def test_every_copy_that_learned_did_it_by_attending(copy_runs):
    # at this scale copying needs attention: token accuracy 0.95 comes with attention 0.9
    for results in copy_runs.values():
        for r in results:
            if r.outcomes["learned"]:
                assert r.outcomes["attention_learned"], (r.spec.seed, r.outcomes)


def test_ktiw_comes_before_attention_on_easy_data(copy_runs):
    for r in copy_runs[(0.5, 1)]:
        assert r.outcomes["ktiw_onset"] is not None and r.outcomes["attention_onset"] is not None
        assert r.outcomes["ktiw_onset"] <= r.outcomes["attention_onset"]


@pytest.fixture(scope="module")
def topic_runs():
    runs = {}
    for classifier in ("fc", "tc"):
        specs = [make_spec("topic-v1", "kq-attention",
                           {"vocab": 2000, "samples": 3000, "distractors": 10},
                           {"classifier": classifier}, {"steps": 800, "eval_every": 20},
                           seed=s) for s in range(2)]
        runs[classifier] = train_pack(specs)
    return runs


def test_fc_leaves_the_loss_plateau_before_tc(topic_runs):
    # measured (m = 10, 2,000 words, 3,000 sentences): fc leaves at steps 500 and 350, tc at
    # 1,300 and 1,250 (after this test's budget)
    for fc, tc in zip(topic_runs["fc"], topic_runs["tc"]):
        assert fc.outcomes["plateau_exit"] is not None
        assert tc.outcomes["plateau_exit"] is None or \
            fc.outcomes["plateau_exit"] < tc.outcomes["plateau_exit"]


def test_identity_residual_stays_under_one_percent_after_the_transient(topic_runs):
    for r in topic_runs["fc"] + topic_runs["tc"]:
        late = [v for v, s in zip(r.trajectory["identity_residual"], r.trajectory["step"])
                if s >= 200]
        assert max(late) < 0.01


# -- the hardness axis changes the data only --------------------------------------------------
HARD_SEEDS = range(16)


def _fully_hard(cooccurrence: float, output_bias: str = "log_frequency") -> list:
    """h = 1: every sequence permutes tokens 0..L-1 whatever c is; c > 0 only adds output
    classes that are never targets. The audit's scale (L = 8, d = 32, 200 steps)."""
    specs = [make_spec("copy-v1", "seq2seq",
                       {"length": 8, "cooccurrence": cooccurrence, "hardness": 1.0},
                       {"width": 32, "output_bias": output_bias},
                       {"steps": 200, "eval_every": 20, "batch_size": 64, "eval_size": 64,
                        "lr": 3e-3}, seed=s) for s in HARD_SEEDS]
    return train_pack(specs)


def test_at_full_hardness_co_occurrence_changes_nothing_but_unused_classes():
    # With nn.Linear's output bias, c = 1 learned 0 of 16 against 11 of 16 at c = 0 on the
    # same data (the never-target classes' initial mass saturated the readout). With the bias
    # at the log target frequency, measured here: c = 0 15, c = 1 13 of 16. Two binomial
    # shares of 16 differ by more than 0.4 with probability about 2% when they are equal.
    shares = {c: sum(bool(r.outcomes["learned"]) for r in _fully_hard(c)) / len(HARD_SEEDS)
              for c in (0.0, 1.0)}
    assert abs(shares[0.0] - shares[1.0]) <= 0.4, shares

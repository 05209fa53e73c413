"""sweeper.results.stats: intervals, exact tests and their power, against known tables, scipy's
own tests, and simulation; and verdicts that say "cannot tell" when the power is short."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sp

from sweeper.results import stats as S


@pytest.mark.parametrize("k, n, low, high", [
    (0, 10, 0.0, 0.3085), (10, 10, 0.6915, 1.0), (1, 60, 0.000422, 0.0894),
    (26, 32, 0.6356, 0.9279), (5, 20, 0.0866, 0.4910),  # Clopper-Pearson tables
])
def test_exact_interval_is_clopper_pearson(k, n, low, high):
    got = S.exact_interval(k, n)
    assert got == pytest.approx((low, high), abs=2e-4)
    assert all(np.isnan(S.exact_interval(0, 0)))


def test_fisher_rejection_regions_agree_with_scipy_on_every_table_of_small_groups():
    for n1, n2 in ((1, 1), (4, 4), (7, 12), (16, 9), (25, 25)):
        rejects = S._fisher_rejects(n1, n2, 0.05)
        for k1 in range(n1 + 1):
            for k2 in range(n2 + 1):
                p = sp.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]])[1]
                assert rejects[k1, k2] == (p <= 0.05), (n1, k1, n2, k2, p)


@pytest.mark.parametrize("n1, n2, k1, k2, alpha", [
    (2, 14, 2, 2, 0.05), (14, 2, 2, 2, 0.05), (19, 1, 0, 1, 0.05), (1, 39, 1, 1, 0.05),
    (2, 38, 1, 0, 0.05), (22, 3, 0, 2, 0.01), (3, 3, 0, 3, 0.1), (1, 14, 1, 2, 0.2),
])
def test_fisher_rejection_at_a_p_value_equal_to_alpha_is_scipys(n1, n2, k1, k2, alpha):
    """Tables whose exact p-value is alpha as a fraction (91/1820 = 1/20): the vectorised
    table's rounding must not decide them differently from the p-value scipy prints."""
    p = sp.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]])[1]
    assert S._fisher_rejects(n1, n2, alpha)[k1, k2] == (p <= alpha), p


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs():
    for m in range(1, 30):
        for k in range(m + 1):
            p = sp.binomtest(k, m, 0.5).pvalue
            assert S.mcnemar_p(k, m - k) == pytest.approx(p)
            assert S._mcnemar_rejects(m, 0.05)[k] == (p <= 0.05)
    assert S.mcnemar_p(0, 0) == 1.0


def _simulated(reject, draw, runs: int = 20_000) -> float:
    rng = np.random.default_rng(7)
    return float(np.mean([reject(*draw(rng)) for _ in range(runs)]))


def test_power_by_enumeration_matches_simulation():
    fisher = S.rates_power(20, 0.8, 20, 0.4)
    sim = _simulated(lambda a, b: sp.fisher_exact([[a, 20 - a], [b, 20 - b]])[1] <= 0.05,
                     lambda r: (r.binomial(20, 0.8), r.binomial(20, 0.4)), 4000)
    assert fisher == pytest.approx(sim, abs=0.025)

    def mcnemar(r):
        kinds = r.multinomial(40, [0.3, 0.05, 0.65])  # first only, second only, concordant
        return kinds[0], kinds[1]
    power = S.mcnemar_power(40, 0.3, 0.05)
    assert power == pytest.approx(_simulated(lambda a, b: S.mcnemar_p(a, b) <= 0.05, mcnemar),
                                  abs=0.015)


@pytest.mark.parametrize("p_base, heads", [(0.1, 4), (0.5, 4), (0.66, 4), (0.3, 8), (0.9, 2)])
def test_the_lottery_test_keeps_its_level_where_the_lottery_holds(p_base, heads):
    """Its size, computed exactly at rates that obey the lottery, is at most alpha: a valid
    test (the supremum over the nuisance rate makes it conservative, never liberal)."""
    expected = float(S.lottery_rate(p_base, heads))
    for n in (4, 16, 32):
        assert S.lottery_power(n, p_base, n, expected, heads) <= 0.05 + 1e-9


def test_the_lottery_test_fires_where_interval_overlap_could_not():
    """0 of 8 one-head seeds against 8 of 8 four-head seeds: the old Wilson-overlap rule said
    "as lottery"; the exact test rejects."""
    result = S.compare_lottery(0, 8, 8, 8, heads=4)
    assert result.significant and result.verdict == "beyond lottery"
    assert S.compare_lottery(8, 8, 0, 8, heads=4).verdict == "below lottery"


def test_a_verdict_without_power_says_cannot_tell_and_how_many_seeds_it_needs():
    """4 seeds a cell (the quick sweep): p1 = 3/4, four heads 4/4. The lottery predicts 0.996;
    nothing this design could observe refutes it, so it says so instead of "as lottery"."""
    result = S.compare_lottery(3, 4, 4, 4, heads=4)
    assert not result.significant and result.power < S.POWER
    assert result.verdict.startswith("cannot tell: needs ")
    assert "as lottery" not in result.verdict
    rates = S.compare_rates(27, 32, 31, 32)  # 8 bad against 7 bad + 1 good, shipped seeds
    assert rates.verdict.startswith("cannot tell: needs >= ") and rates.needed > 32
    assert S.compare_rates(rates.needed and 0, 0, 0, 0).verdict.startswith("cannot tell")


def test_a_powered_null_result_says_as_expected_and_needed_is_where_power_crosses():
    """Large groups with equal rates: not significant, power >= 0.8 at 0.2: "no difference"."""
    result = S.compare_rates(100, 200, 100, 200)
    assert not result.significant and result.power >= S.POWER
    assert result.verdict == "no difference"
    n = result.needed
    assert S.rates_power(n, 0.7, n, 0.5) >= S.POWER or S.rates_power(n, 0.3, n, 0.5) >= S.POWER
    assert min(S.rates_power(n - 1, q, n - 1, 0.5) for q in (0.7, 0.3)) < S.POWER


def test_paired_verdicts_come_from_the_discordant_pairs():
    beyond = S.compare_paired(5, 21, 0, 6, higher="beyond lottery", lower="below lottery",
                              same="as lottery", unit="trials")
    assert beyond.verdict == "beyond lottery" and beyond.p_value == pytest.approx(2 * 0.5**21)
    small = S.compare_paired(2, 1, 0, 1, unit="trials")
    assert small.verdict.startswith("cannot tell: needs >= ") and small.verdict.endswith("trials")
    assert S.compare_paired(150, 0, 0, 50, same="as lottery").verdict == "as lottery"
    # 5 discordant pairs all one way, 40 pairs: powered against a difference the other way
    # only; against the observed heads-only rate plus 0.2 it is not: no "as lottery"
    lean = S.compare_paired(20, 0, 5, 15, same="as lottery")
    assert not lean.significant and lean.power < S.POWER and lean.verdict != "as lottery"


def test_detectable_effect_shrinks_with_seeds():
    small, large = S.detectable_effect(16), S.detectable_effect(64)
    assert small is not None and large is not None and large < small
    assert S.detectable_effect(8) is None  # 8 seeds a group: not even 0.5 against 1.0


def test_plan_of_a_sweep_with_a_head_axis_says_what_its_seeds_can_detect(tmp_path, capsys):
    from pathlib import Path

    from sweeper.cli import main

    spaces = Path(__file__).resolve().parents[1] / "search_spaces"
    assert main(["plan", str(spaces / "quick.yaml"), "--no-estimate", "--results",
                 str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "power: 4 seeds a cell detect no difference between two values of model.heads" in err
    assert main(["plan", str(spaces / "snell_multihead.yaml"), "--no-estimate", "--results",
                 str(tmp_path)]) == 0
    line = [x for x in capsys.readouterr().err.splitlines() if x.startswith("power:")][0]
    assert f"detect a difference of {S.detectable_effect(32):g} or more" in line
    assert main(["plan", str(spaces / "snell_uniform.yaml"), "--no-estimate", "--results",
                 str(tmp_path)]) == 0
    assert "power:" not in capsys.readouterr().err  # no head axis: nothing to say

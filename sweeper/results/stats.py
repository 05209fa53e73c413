"""Intervals, exact tests and their power: the one home of every verdict sweeper prints.

A comparison that did not reject says "as expected" only if it could have rejected: each test
here comes with its power against a stated effect, computed exactly by enumerating every
outcome the design could have produced (no normal approximation), and the number of seeds it
would need to reach `POWER`. Where the power is short the verdict is "cannot tell: needs >= N".

Tests (scipy.stats underneath; the enumerations reuse its distributions):

- `compare_paired`: exact McNemar, the two-sided binomial test of the discordant pairs at 1/2.
  For outcomes paired by design (a model and its heads alone on the same base and data seed;
  the same trial at two budgets). Assumes pairs independent of each other; the two outcomes of
  one pair may depend on each other in any way.
- `compare_rates`: Fisher's exact test of two independent binomial samples (conditional on the
  total successes; scipy.stats.fisher_exact). Assumes independent trials within and between
  the two groups (distinct trainings: a shared training counts once).
- `compare_lottery`: the H-head rate against the lottery 1 - (1 - p)^(H/h) from an h-head rate
  p measured on independent trials: an exact unconditional test (Barnard's construction) of
  H0: q_H = q_h^(H/h) (q = 1 - p) with statistic |p_H - lottery(p_h)|, its p-value the
  supremum of P(T >= t_obs) over the nuisance q_h in a 99.9% interval of the observed h-head
  count (a grid of `NUISANCE_GRID` points and the observable rates), plus 0.001 (Berger and
  Boos 1994: valid, and far more powerful than the supremum over every rate).
- `exact_interval`: Clopper-Pearson.

Power is computed at the observed nuisance rates with the stated `effect` (an absolute
difference in success probability, `EFFECT` by default) added in whichever direction fits in
[0, 1] (the smaller power where both fit), at level `ALPHA`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np

ALPHA = 0.05
POWER = 0.8
EFFECT = 0.2
MAX_N = 512  # seeds per group beyond which "needs" says "more than"
# the lottery test's: each size searched enumerates a table over a grid of nuisance rates
# (O(grid n^2)), seconds a size at 512
LOTTERY_MAX_N = 128
# the sizes its `needed` is searched over (a ladder every cell shares, so a diagram builds each
# size's table once whatever its cells' rates): the first that reaches the power, to plan with
LOTTERY_SIZES = (2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112,
                 128)
NUISANCE_GRID = 201
BERGER_BOOS = 0.001  # the nuisance's confidence set leaves out this much (Berger and Boos 1994)


def _scipy_stats():
    from scipy import stats  # imported when a test runs: listing and planning stay fast

    return stats


def exact_interval(k, n, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval for k successes in n trials (NaN, NaN when n = 0)."""
    k, n = int(k), int(n)
    if n == 0:
        return (float("nan"), float("nan"))
    ci = _scipy_stats().binomtest(k, n).proportion_ci(confidence, method="exact")
    return (float(ci.low), float(ci.high))


def mean_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """Student's t interval for the mean of `values` (seeds of one configuration), assuming
    them independent draws whose mean is near normal; (NaN, NaN) with fewer than two, and the
    mean itself twice when they are all equal."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return (float("nan"), float("nan"))
    mean, sem = float(x.mean()), float(_scipy_stats().sem(x))
    if sem == 0:
        return (mean, mean)
    low, high = _scipy_stats().t.interval(confidence, len(x) - 1, loc=mean, scale=sem)
    return (float(low), float(high))


@dataclass(frozen=True)
class Comparison:
    """One test's result and whether it could have come out the other way.

    estimate: the observed difference (first minus second, observed minus expected); p_value;
    power: the probability this design rejects when the true difference is +-effect; needed:
    the smallest group size (pairs, or seeds per group) whose power reaches POWER at that
    effect, None where more than MAX_N; higher / lower / same: the words of the verdict.
    """

    test: str
    n: int
    estimate: float
    p_value: float
    power: float
    effect: float
    # the group size that reaches POWER, or how to find it: searched only when asked (a
    # verdict that cannot tell), since each step enumerates every outcome of a larger design
    needs: int | None | Callable[[], int | None]
    higher: str
    lower: str
    same: str
    alpha: float = ALPHA
    unit: str = "seeds"
    max_n: int = MAX_N  # the largest size `needed` is searched to

    @property
    def needed(self) -> int | None:
        if callable(self.needs):
            object.__setattr__(self, "needs", self.needs())  # frozen: computed once
        return self.needs

    @property
    def significant(self) -> bool:
        return bool(self.p_value <= self.alpha)

    @property
    def verdict(self) -> str:
        if self.significant:
            return self.higher if self.estimate > 0 else self.lower
        if self.power >= POWER:
            return self.same
        needs = f">= {self.needed}" if self.needed is not None else f"> {self.max_n}"
        return f"cannot tell: needs {needs} {self.unit}"

    def as_dict(self) -> dict:
        return {"test": self.test, "n": self.n, "estimate": self.estimate,
                "p_value": self.p_value, "power": self.power, "effect": self.effect,
                "needed": self.needed, "verdict": self.verdict}


def _needed(power_at, target: float = POWER, start: int = 2,
            max_n: int = MAX_N) -> int | None:
    """The smallest n (searched by doubling, then bisection) whose power reaches target; None
    beyond max_n. Exact tests' power is not monotone in n (it saw-tooths): this is the first
    crossing the search meets, a size to plan with, not a guarantee at every larger n."""
    lo, hi = start - 1, start
    while power_at(hi) < target:
        lo, hi = hi, hi * 2
        if hi > max_n:
            return None if power_at(max_n) < target else max_n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= target else (mid, hi)
    return hi


def _sides(p: float, effect: float) -> list[float]:
    """The alternatives p +- effect that lie in [0, 1]."""
    return [q for q in (p + effect, p - effect) if 0.0 <= q <= 1.0]


# ---------------------------------------------------------------- paired (McNemar)

@lru_cache(maxsize=4096)
def _mcnemar_rejects(m: int, alpha: float) -> np.ndarray:
    """For m discordant pairs, which counts k of one kind the exact test rejects at alpha."""
    if m == 0:
        return np.zeros(1, dtype=bool)
    binom = _scipy_stats().binom
    k = np.arange(m + 1)
    p = np.minimum(1.0, 2 * np.minimum(binom.cdf(k, m, 0.5), binom.sf(k - 1, m, 0.5)))
    return p <= alpha * (1 + 1e-9)


def mcnemar_p(first_only: int, second_only: int) -> float:
    """Exact McNemar: the two-sided binomial test of the discordant pairs at 1/2."""
    m = first_only + second_only
    return 1.0 if m == 0 else float(_scipy_stats().binomtest(first_only, m, 0.5).pvalue)


def mcnemar_power(n: int, first_only: float, second_only: float, alpha: float = ALPHA) -> float:
    """P(the exact McNemar test rejects) for n pairs whose discordant kinds have probabilities
    first_only and second_only: the discordant count m ~ Bin(n, first_only + second_only), and
    given m the first kind ~ Bin(m, first_only / (first_only + second_only))."""
    binom = _scipy_stats().binom
    d = first_only + second_only
    if d <= 0:
        return 0.0
    ms = np.arange(n + 1)
    weight = binom.pmf(ms, n, min(d, 1.0))
    share = first_only / d
    inside = np.array([binom.pmf(np.arange(m + 1), m, share)[_mcnemar_rejects(m, alpha)].sum()
                       for m in ms])
    return float(np.dot(weight, inside))


def compare_paired(both: int, first_only: int, second_only: int, neither: int, *,
                   effect: float = EFFECT, alpha: float = ALPHA,
                   higher: str = "first higher", lower: str = "first lower",
                   same: str = "no difference", unit: str = "pairs") -> Comparison:
    """Paired binary outcomes (first, second) counted by kind; the power is against a
    difference of `effect` between the two rates in either direction, each discordant kind
    kept at its observed rate and the other raised by `effect` (the smaller of the two powers:
    a design that could see an effect one way only is not called powered)."""
    n = both + first_only + second_only + neither
    estimate = (first_only - second_only) / n if n else float("nan")
    b, c = (first_only / n, second_only / n) if n else (0.0, 0.0)
    sides = [(c + effect, c), (b, b + effect)]  # first higher by effect; second higher
    sides = [(x, y) for x, y in sides if x + y <= 1.0] or [(effect, 0.0)]

    def power_at(size: int) -> float:
        return min(mcnemar_power(size, x, y, alpha) for x, y in sides)

    return Comparison("exact McNemar", n, estimate, mcnemar_p(first_only, second_only),
                      power_at(n) if n else 0.0, effect, partial(_needed, power_at), higher, lower,
                      same, alpha, unit)


# ---------------------------------------------------------------- two rates (Fisher)

@lru_cache(maxsize=256)
def _fisher_rejects(n1: int, n2: int, alpha: float) -> np.ndarray:
    """[n1 + 1, n2 + 1]: which tables (k1 of n1, k2 of n2) Fisher's exact test rejects, its
    two-sided p-value summing the tables no more likely than the observed one given the
    margins (scipy's definition, the same relative tolerance).

    Every table's probability given its margins is the hypergeometric
    C(n1, k1) C(n2, k2) / C(n1 + n2, k1 + k2), computed at once from log-gammas (one scipy
    call per margin costs a diagram of 250 seeds a cell seconds); the test is then taken along
    each anti-diagonal (tables of one total)."""
    pmf = _hypergeometric_tables(n1, n2)
    rejects = np.zeros((n1 + 1, n2 + 1), dtype=bool)
    for total in range(n1 + n2 + 1):
        k1 = np.arange(max(0, total - n2), min(n1, total) + 1)
        probabilities = pmf[k1, total - k1]
        ordered = np.sort(probabilities)
        p = np.cumsum(ordered)[np.searchsorted(ordered, probabilities * (1 + 1e-7),
                                               side="right") - 1]
        p = np.minimum(p, 1.0)
        rejects[k1, total - k1] = p <= alpha
        # p within the table's rounding of alpha (an exact tie: p = alpha as a fraction, as
        # 91/1820 = 1/20): scipy's own p-value decides, as it does for the test printed
        for k in k1[np.abs(p - alpha) <= 1e-9 * alpha]:
            table = [[k, n1 - k], [total - k, n2 - total + k]]
            rejects[k, total - k] = _scipy_stats().fisher_exact(table)[1] <= alpha
    return rejects


def _hypergeometric_tables(n1: int, n2: int) -> np.ndarray:
    """[n1 + 1, n2 + 1]: P(k1, k2 | k1 + k2) for groups of n1 and n2 (the margins fixed)."""
    from scipy.special import gammaln

    def log_choose(n: int, k: np.ndarray) -> np.ndarray:
        return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)

    k1, k2 = np.arange(n1 + 1), np.arange(n2 + 1)
    log_total = log_choose(n1 + n2, np.arange(n1 + n2 + 1))
    return np.exp(log_choose(n1, k1)[:, None] + log_choose(n2, k2)[None, :]
                  - log_total[k1[:, None] + k2[None, :]])


def rates_power(n1: int, p1: float, n2: int, p2: float, alpha: float = ALPHA) -> float:
    """P(Fisher's exact test rejects) for k1 ~ Bin(n1, p1), k2 ~ Bin(n2, p2), by enumeration."""
    binom = _scipy_stats().binom
    w1, w2 = binom.pmf(np.arange(n1 + 1), n1, p1), binom.pmf(np.arange(n2 + 1), n2, p2)
    return float(w1 @ _fisher_rejects(n1, n2, alpha) @ w2)


def compare_rates(k1: int, n1: int, k2: int, n2: int, *, effect: float = EFFECT,
                  alpha: float = ALPHA, higher: str = "first higher",
                  lower: str = "first lower", same: str = "no difference",
                  unit: str = "seeds") -> Comparison:
    """The first group's rate against the second's (Fisher's exact test); power against the
    second's observed rate +- effect, `needed` with both groups of one size."""
    if n1 == 0 or n2 == 0:
        return Comparison("Fisher's exact", n1 + n2, float("nan"), 1.0, 0.0, effect,
                          partial(_needed, lambda n: min(rates_power(n, p, n, 0.5, alpha)
                                                         for p in _sides(0.5, effect))),
                          higher, lower, same, alpha, unit)
    p2 = k2 / n2
    p_value = float(_scipy_stats().fisher_exact([[k1, n1 - k1], [k2, n2 - k2]])[1])

    def power(m1: int, m2: int) -> float:
        return min((rates_power(m1, q, m2, p2, alpha) for q in _sides(p2, effect)),
                   default=0.0)

    return Comparison("Fisher's exact", n1 + n2, k1 / n1 - p2, p_value, power(n1, n2), effect,
                      partial(_rates_needed, p2, effect, alpha), higher, lower, same, alpha,
                      unit)


@lru_cache(maxsize=1024)
def _rates_needed(p2: float, effect: float, alpha: float) -> int | None:
    """`compare_rates`'s needed: it depends on the second group's rate alone (cells of one
    size share a few rates, so a diagram searches each once)."""
    def power(m: int) -> float:
        return min((rates_power(m, q, m, p2, alpha) for q in _sides(p2, effect)), default=0.0)

    return _needed(power)


# ---------------------------------------------------------------- the lottery

HEAD_AXIS_NAMES = ("heads", "n_heads", "num_heads")  # a column named model.heads counts heads


def counts_heads(column: str | None) -> bool:
    """Whether a column counts heads by its name (`model.heads`, `*.n_heads`): only then is a
    lottery of independent heads a baseline for it."""
    return column is not None and column.rsplit(".", 1)[-1] in HEAD_AXIS_NAMES


def lottery_rate(p, heads, base_heads=1) -> np.ndarray:
    """The success rate of `heads` independent heads when `base_heads` of them succeed at rate
    p: 1 - (1 - p)^(heads / base_heads). Monotone in p, so it maps interval bounds to bounds."""
    p, ratio = np.asarray(p, dtype=float), np.asarray(heads, float) / float(base_heads)
    return 1.0 - (1.0 - p) ** ratio


def _lottery_statistic(n_base: int, n: int, ratio: float) -> np.ndarray:
    """[n_base + 1, n + 1]: |k/n - lottery(k_base/n_base)| for every outcome."""
    base = lottery_rate(np.arange(n_base + 1) / n_base, ratio)
    return np.abs(np.arange(n + 1)[None, :] / n - base[:, None])


@lru_cache(maxsize=256)
def _lottery_p_values(n_base: int, n: int, ratio: float) -> np.ndarray:
    """[n_base + 1, n + 1]: the exact unconditional p-value of every outcome (module doc),
    Berger and Boos's: the supremum over nuisance rates inside the observed base count's
    (1 - BERGER_BOOS) Clopper-Pearson interval, plus BERGER_BOOS (valid at every level; the
    supremum over all rates would let rates far from the data, where the lottery map is steep
    and the statistic noisy, drown the test's power)."""
    stats = _scipy_stats()
    t = _lottery_statistic(n_base, n, ratio).ravel()
    order = np.argsort(-t, kind="stable")
    sorted_t = t[order]
    last_of_tie = np.searchsorted(-sorted_t, -sorted_t, side="right") - 1
    ks = np.arange(n_base + 1)
    low = np.where(ks == 0, 0.0, stats.beta.ppf(BERGER_BOOS / 2, ks, n_base - ks + 1))
    high = np.where(ks == n_base, 1.0, stats.beta.ppf(1 - BERGER_BOOS / 2, ks + 1, n_base - ks))
    grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, NUISANCE_GRID), ks / n_base, low,
                                     high]))  # the intervals' ends: where the supremum sits
    p = np.zeros((n_base + 1, n + 1))
    # [grid, outcomes]: each distribution at every nuisance rate, in one call each
    base_pmf = stats.binom.pmf(ks[None, :], n_base, grid[:, None])
    pmf = stats.binom.pmf(np.arange(n + 1)[None, :], n, lottery_rate(grid, ratio)[:, None])
    for q, w_base, w in zip(grid, base_pmf, pmf):
        w = np.outer(w_base, w)
        at_least = np.cumsum(w.ravel()[order])[last_of_tie]  # P(T >= t) in sorted order
        inside = (low <= q) & (q <= high)  # [n_base + 1]: outcomes whose interval holds q
        np.maximum(p, np.where(inside[:, None], _unsort(at_least, order).reshape(p.shape), 0.0),
                   out=p)
    return np.minimum(p + BERGER_BOOS, 1.0)


def _unsort(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(values)
    out[order] = values
    return out


def lottery_p(k_base: int, n_base: int, k: int, n: int, ratio: float) -> float:
    return float(_lottery_p_values(n_base, n, float(ratio))[k_base, k])


def lottery_power(n_base: int, p_base: float, n: int, p: float, ratio: float,
                  alpha: float = ALPHA) -> float:
    binom = _scipy_stats().binom
    rejects = _lottery_p_values(n_base, n, float(ratio)) <= alpha
    w_base = binom.pmf(np.arange(n_base + 1), n_base, p_base)
    return float(w_base @ rejects @ binom.pmf(np.arange(n + 1), n, p))


def compare_lottery(k_base: int, n_base: int, k: int, n: int, heads: float,
                    base_heads: float = 1, *, effect: float = EFFECT,
                    alpha: float = ALPHA) -> Comparison:
    """k of n H-head trials against the lottery from k_base of n_base h-head trials (module
    doc); power with the h-head rate at its observed value and the H-head rate the lottery's
    +- effect; `needed`: seeds per head count, both of one size."""
    ratio = float(heads) / float(base_heads)
    words = ("beyond lottery", "below lottery", "as lottery")
    if n == 0 or n_base == 0:
        return Comparison("exact unconditional (lottery)", n + n_base, float("nan"), 1.0, 0.0,
                          effect, None, *words, alpha)
    p_base = k_base / n_base
    expected = float(lottery_rate(p_base, ratio))

    def power(m_base: int, m: int) -> float:
        return min((lottery_power(m_base, p_base, m, q, ratio, alpha)
                    for q in _sides(expected, effect)), default=0.0)

    return Comparison("exact unconditional (lottery)", n + n_base, k / n - expected,
                      lottery_p(k_base, n_base, k, n, ratio), power(n_base, n), effect,
                      partial(_lottery_needed, p_base, ratio, effect, alpha), *words,
                      alpha, max_n=LOTTERY_MAX_N)


@lru_cache(maxsize=1024)
def _lottery_needed(p_base: float, ratio: float, effect: float, alpha: float) -> int | None:
    """`compare_lottery`'s needed, once per base rate and head ratio: the first of
    LOTTERY_SIZES whose power reaches POWER (None: not even LOTTERY_MAX_N)."""
    expected = float(lottery_rate(p_base, ratio))

    def power(m: int) -> float:
        return min((lottery_power(m, p_base, m, q, ratio, alpha)
                    for q in _sides(expected, effect)), default=0.0)

    return next((m for m in LOTTERY_SIZES if power(m) >= POWER), None)


def power_note(seeds: int, what: str) -> str:
    """One line for `sweeper plan`: the smallest difference `seeds` a group can detect."""
    effect = detectable_effect(seeds)
    needed = compare_rates(0, 0, 0, 0).needed
    if effect is None:
        return (f"power: {seeds} seeds a cell detect no difference between {what} (Fisher's "
                f"exact, {POWER:.0%} power, from a rate of 0.5); {needed} seeds a cell detect "
                f"{EFFECT:g}: every comparison will print 'cannot tell'")
    return (f"power: {seeds} seeds a cell detect a difference of {effect:g} or more between "
            f"{what} (Fisher's exact, {POWER:.0%} power, from a rate of 0.5); {EFFECT:g} needs "
            f"{needed} seeds a cell")


def detectable_effect(n: int, p: float = 0.5, alpha: float = ALPHA,
                      power: float = POWER) -> float | None:
    """The smallest difference from a rate p that two groups of n seeds detect with Fisher's
    exact test at `power` (a grid of 0.01), None if not even a difference to 0 or 1 is."""
    for effect in np.arange(0.01, 1.0, 0.01):
        sides = _sides(p, float(effect))
        if sides and max(rates_power(n, q, n, p, alpha) for q in sides) >= power:
            return round(float(effect), 2)
    return None

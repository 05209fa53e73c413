"""Where the success share of a grid's cells crosses a target: a posterior over every cell's
share from the counts of the cells sampled so far, and the level-set decisions made from it.

The boundary search (`sweeper.strategies.boundary`) samples with it, the phase diagram
(`analysis.phase`) draws it, the benchmark (`benchmarks/boundary.py`) measures it: one
definition. numpy only, like the rest of `sweeper.results`; every input is a count of a cell
(successes and counted seeds: `sweeper.results.cell_stats`), so nothing here re-derives an
outcome.

A grid is a tuple of axis lengths; cells are numbered in C order (the last axis varies
fastest, as `itertools.product` of the axes' values). Two models of the share, both sharing
strength between neighbouring cells (a cell's own seeds are few):

- `gp` (default): a Gaussian-process classifier. The logit of the share is a GP over the cells'
  grid indices (squared-exponential kernel, one length scale in grid steps, plus a constant
  term for the overall level), prior mean at the target; binomial likelihood of each cell's
  counts; Laplace approximation (Rasmussen & Williams 2006, algorithms 3.1-3.2). Length scale
  and amplitude are chosen from a small fixed grid by the approximate evidence, so a sharp
  boundary gets a short length scale and a flat region a long one. Unsampled cells get a
  posterior from the sampled ones around them.
- `smooth`: a beta-binomial per cell whose prior borrows half the counts of its face
  neighbours; the interval is the Wilson interval (`wilson_interval`) of the pooled counts.

Decisions follow LSE (Gotovos et al. 2013): with a target t and a margin m, a cell is *above*
once its interval's lower end exceeds t - m, *below* once its upper end is under t + m, else
undecided. The straddle score (Bryan et al. 2005: z sigma - |mu - t|, here on the share's
interval: min(high - t, t - low)) is positive exactly for intervals that contain t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from sweeper.results.cells import wilson_interval
from sweeper.results.errors import ResultsInputError

MODELS = ("gp", "smooth")
CONFIDENCE = 0.95
# The GP's hyperparameter grid (length scale in grid steps, amplitude of the logit), chosen
# from by the Laplace evidence; the constant term lets the whole grid sit above or below t.
LENGTH_SCALES = (0.8, 1.4, 2.5)
AMPLITUDES = (1.5, 3.0)
CONSTANT = 1.0
NUGGETS = (0.3, 1.0)  # sd of each cell's own deviation from the smooth surface (logit units)
SMOOTH_WEIGHT = 0.5  # the share of a face neighbour's counts a cell borrows (model smooth)


@dataclass(frozen=True)
class SharePosterior:
    """Per cell (C order over `shape`): the share's posterior median and interval, and which
    cells were sampled. `length_scale` and `amplitude` are the GP's chosen hyperparameters
    (None for the smooth model)."""

    shape: tuple[int, ...]
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray
    sampled: np.ndarray  # bool: the cell has counted seeds
    confidence: float = CONFIDENCE
    model: str = "gp"
    length_scale: float | None = None
    amplitude: float | None = None

    def side(self, target: float) -> np.ndarray:
        """+1 where the median is at or above the target, -1 below: the cell's class."""
        return np.where(self.median >= target, 1, -1)

    def decided(self, target: float, margin: float) -> np.ndarray:
        """Which cells' intervals clear the target within the margin (LSE)."""
        return (self.low > target - margin) | (self.high < target + margin)

    def straddle(self, target: float) -> np.ndarray:
        """How far the interval reaches past the target on its shorter side (> 0: straddles)."""
        return np.minimum(self.high - target, target - self.low)


def grid_coordinates(shape: Sequence[int]) -> np.ndarray:
    """(cells, axes) grid indices of every cell, C order."""
    return np.indices(tuple(shape)).reshape(len(shape), -1).T.astype(float)


def share_posterior(shape: Sequence[int], successes: Sequence[float], n: Sequence[float], *,
                    target: float = 0.5, model: str = "gp",
                    confidence: float = CONFIDENCE) -> SharePosterior:
    """The posterior over every cell's success share, from per-cell counts (arrays of the
    grid's size, C order; n = 0 for a cell without counted seeds)."""
    shape = tuple(int(s) for s in shape)
    size = math.prod(shape)
    k = np.asarray(successes, dtype=float).reshape(-1)
    n = np.asarray(n, dtype=float).reshape(-1)
    if k.size != size or n.size != size:
        raise ResultsInputError(f"counts: got {k.size} and {n.size} cells; allowed: {size} "
                                f"(the grid {shape})")
    if np.any(n < 0) or np.any(k < 0) or np.any(k > n):
        raise ResultsInputError("counts: allowed: 0 <= successes <= n in every cell")
    if not 0 < target < 1:
        raise ResultsInputError(f"target: got {target!r}; allowed: a share in (0, 1)")
    if model == "gp":
        return _gp_posterior(shape, k, n, target, confidence)
    if model == "smooth":
        return _smooth_posterior(shape, k, n, confidence)
    raise ResultsInputError(f"model: got {model!r}; allowed: {', '.join(MODELS)}")


# -- the smooth model ----------------------------------------------------------------------
def face_neighbours(shape: Sequence[int]) -> list[np.ndarray]:
    """Per cell, the flat indices of the cells one grid step away along one axis."""
    coords = np.indices(tuple(shape)).reshape(len(shape), -1).T
    flat = np.arange(len(coords)).reshape(tuple(shape))
    out = []
    for c in coords:
        near = []
        for axis, length in enumerate(shape):
            for step in (-1, 1):
                j = c.copy()
                j[axis] += step
                if 0 <= j[axis] < length:
                    near.append(flat[tuple(j)])
        out.append(np.asarray(near, dtype=int))
    return out


def _smooth_posterior(shape, k, n, confidence) -> SharePosterior:
    pooled_k, pooled_n = k.copy(), n.copy()
    for i, near in enumerate(face_neighbours(shape)):
        pooled_k[i] += SMOOTH_WEIGHT * k[near].sum()
        pooled_n[i] += SMOOTH_WEIGHT * n[near].sum()
    low, high = wilson_interval(pooled_k, pooled_n, confidence)
    median = (pooled_k + 1) / (pooled_n + 2)
    empty = pooled_n == 0
    return SharePosterior(shape, median, np.where(empty, 0.0, low), np.where(empty, 1.0, high),
                          n > 0, confidence, "smooth")


# -- the GP classifier ---------------------------------------------------------------------
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * x))  # exact, and no overflow warnings


def _kernel(a: np.ndarray, b: np.ndarray, length: float, amplitude: float) -> np.ndarray:
    d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    return amplitude**2 * np.exp(-d2 / (2 * length**2)) + CONSTANT**2


@dataclass
class _Fit:
    evidence: float
    grad: np.ndarray  # d log p(k | f) / df at the mode
    sqrt_w: np.ndarray
    chol: np.ndarray  # of B = I + W^1/2 K W^1/2


def _laplace(K: np.ndarray, k: np.ndarray, n: np.ndarray, mean: float) -> _Fit:
    """The Laplace approximation of a binomial-logit GP (R&W algorithm 3.1, with Newton steps
    halved while the objective does not rise). Deterministic: a cold start every time."""
    m = len(k)
    a = np.zeros(m)
    g = np.zeros(m)  # f - mean at the current point

    def objective(a: np.ndarray, g: np.ndarray) -> float:
        f = g + mean
        return float(-0.5 * a @ g + (k * f - n * np.logaddexp(0, f)).sum())

    current = objective(a, g)
    for _ in range(100):
        pi = _sigmoid(g + mean)
        w = n * pi * (1 - pi)
        sw = np.sqrt(w)
        L = np.linalg.cholesky(np.eye(m) + sw[:, None] * K * sw[None, :])
        b = w * g + (k - n * pi)
        a_new = b - sw * np.linalg.solve(L.T, np.linalg.solve(L, sw * (K @ b)))
        step = a_new - a
        for _ in range(30):
            trial = a + step
            value = objective(trial, K @ trial)
            if value >= current - 1e-12:
                break
            step = step / 2
        a, g = trial, K @ trial
        if abs(value - current) < 1e-10:
            current = value
            break
        current = value
    pi = _sigmoid(g + mean)
    w = n * pi * (1 - pi)
    sw = np.sqrt(w)
    L = np.linalg.cholesky(np.eye(m) + sw[:, None] * K * sw[None, :])
    evidence = objective(a, g) - float(np.log(np.diag(L)).sum())
    return _Fit(evidence, k - n * pi, sw, L)


def _gp_posterior(shape, k, n, target, confidence) -> SharePosterior:
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    mean = math.log(target / (1 - target))
    coords = grid_coordinates(shape)
    sampled = n > 0
    if not sampled.any():
        sd = math.sqrt(AMPLITUDES[-1] ** 2 + CONSTANT**2 + NUGGETS[-1] ** 2)
        size = len(coords)
        return SharePosterior(shape, np.full(size, target), np.full(size, _sigmoid(mean - z * sd)),
                              np.full(size, _sigmoid(mean + z * sd)), sampled, confidence, "gp",
                              None, AMPLITUDES[-1])
    x, ks, ns = coords[sampled], k[sampled], n[sampled]
    best = None
    for length in LENGTH_SCALES:
        for amplitude in AMPLITUDES:
            for nugget in NUGGETS:
                K = _kernel(x, x, length, amplitude) + nugget**2 * np.eye(len(x))
                fit = _laplace(K, ks, ns, mean)
                if best is None or fit.evidence > best[0].evidence + 1e-9:
                    best = (fit, length, amplitude, nugget)
    fit, length, amplitude, nugget = best
    cross = _kernel(coords, x, length, amplitude)  # (cells, sampled)
    cross[np.flatnonzero(sampled), np.arange(len(x))] += nugget**2  # a cell's own deviation
    mu = mean + cross @ fit.grad
    v = np.linalg.solve(fit.chol, fit.sqrt_w[:, None] * cross.T)
    var = np.maximum(amplitude**2 + CONSTANT**2 + nugget**2 - (v**2).sum(0), 1e-12)
    sd = np.sqrt(var)
    return SharePosterior(shape, _sigmoid(mu), _sigmoid(mu - z * sd), _sigmoid(mu + z * sd),
                          sampled, confidence, "gp", length, amplitude)

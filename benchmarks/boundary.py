"""How many trials the boundary search saves, and what it gets wrong, against the full grid and
random sampling: a table, not a timing.

Cases (ground truths with known per-cell success probabilities; 8 seeds per cell in the full
grid):

- synthetic, each over 2 axes (12 x 12 cells) and over 3 axes (6 x 6 x 4): `smooth` (a
  logistic ramp across a tilted plane, width ~ 2 cells), `sharp` (a step between 0.05 and
  0.95 along a curved boundary), `wide` (a noisy, wide transition: a slow ramp plus noise, many
  cells near the target), `fine` (the sharp step with fine structure: a notch one cell wide
  and an island of one cell);
- `snell_phase`: the real sweep `search_spaces/snell_phase.yaml` (5 x 6 x 2 cells x 8 seeds,
  L = 16, d = 32), replayed: a proposed (cell, seed) unit's outcome is that seed's stored
  attention_learned (`benchmarks/snell_phase_outcomes.csv`, the stored trials' outcomes, so
  this runs anywhere); the repetitions permute each cell's seeds.

Per case and repetition, the same seed outcomes feed every sampler: the full grid (all 8 seeds
of every cell; a cell's class is k/n >= target), the boundary search (`sweeper.strategies.
boundary.BoundarySearch`, the code a sweep runs, asked for `--workers` packs per round as an
executor with that many slots would; a cell's class is its posterior median >= target) and
random sampling of as many (cell, seed) units as the boundary search used, classified with the
same posterior. Misclassified: cells on the wrong side of the target, against the ground truth
(synthetic: the true probability; snell_phase: the full grid's k/8) - `all` counts every cell,
`clear` only cells whose truth is more than the margin from the target (the cells LSE promises
to get right; the rest are within the margin, either side allowed).

    python benchmarks/boundary.py                       # the table, 10 repetitions
    python benchmarks/boundary.py --reps 3 --cases sharp-2d snell_phase --models gp smooth
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# One BLAS thread: the posterior's small solves (tens of cells) only lose to thread start-up,
# and lose badly (x40 measured) on a machine whose cores are busy. Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeper.results.levelset import grid_coordinates, share_posterior  # noqa: E402
from sweeper.strategies.boundary import BoundarySearch, Settings  # noqa: E402

HERE = Path(__file__).resolve().parent
REAL_CSV = HERE / "snell_phase_outcomes.csv"
SEEDS = 8


@dataclass
class Case:
    name: str
    shape: tuple[int, ...]
    truth: np.ndarray  # per cell: the true success probability (synthetic) or k/8 (real)
    outcomes: np.ndarray | None = None  # (cells, seeds) stored outcomes (real replay)


# -- ground truths ---------------------------------------------------------------------------
def _unit(shape: tuple[int, ...]) -> np.ndarray:
    """Cell coordinates scaled to [0, 1] per axis."""
    coords = grid_coordinates(shape)
    return coords / np.maximum(np.array(shape, dtype=float) - 1, 1)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def synthetic(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    u = _unit(shape)
    x, y = u[:, 0], u[:, 1]
    z = u[:, 2] if u.shape[1] > 2 else np.zeros_like(x)
    step = 1 / (max(shape[:2]) - 1)  # one cell along x or y
    if kind == "smooth":  # a ramp across a tilted plane, ~2 cells from 0.27 to 0.73
        return _sigmoid((x + 0.6 * y + 0.3 * z - 0.95) / (1.0 * step))
    level = 0.35 + 0.3 * y**2 + 0.2 * z  # a curved boundary x = level(y, z)
    if kind == "sharp":
        return np.where(x >= level, 0.95, 0.05)
    if kind == "wide":  # a slow ramp (0.2 -> 0.8 over half the grid) with noise
        rng = np.random.default_rng(7)
        p = _sigmoid((x - level) / 0.18) + rng.normal(0, 0.05, size=x.shape)
        return np.clip(p, 0.02, 0.98)
    if kind == "fine":  # the sharp step with a one-cell notch and a one-cell island
        above = x >= level
        notch = (np.abs(y - 0.5) < step / 2) & (x >= level - 3 * step)
        island = (np.abs(x - 0.15) < step / 2) & (np.abs(y - 0.8) < step / 2)
        if u.shape[1] > 2:
            island &= z < 0.5
        return np.where(above & ~notch | island, 0.95, 0.05)
    raise ValueError(kind)


def real_case() -> Case:
    import pandas as pd

    frame = pd.read_csv(REAL_CSV)
    axes = ["cooccurrence", "hardness", "heads"]
    values = [sorted(frame[a].unique()) for a in axes]
    shape = tuple(len(v) for v in values)
    outcomes = np.zeros((math.prod(shape), SEEDS))
    for row in frame.itertuples(index=False):
        index = np.ravel_multi_index(tuple(values[i].index(getattr(row, a))
                                           for i, a in enumerate(axes)), shape)
        outcomes[index, row.seed] = row.attention_learned
    return Case("snell_phase", shape, outcomes.mean(1), outcomes)


def cases() -> list[Case]:
    out = []
    for kind in ("smooth", "sharp", "wide", "fine"):
        for label, shape in (("2d", (12, 12)), ("3d", (6, 6, 4))):
            out.append(Case(f"{kind}-{label}", shape, synthetic(kind, shape)))
    out.append(real_case())
    return out


# -- one repetition ----------------------------------------------------------------------------
def seed_outcomes(case: Case, rep: int) -> np.ndarray:
    """(cells, seeds) outcomes of this repetition: drawn from the truth, or the stored ones
    with each cell's seeds permuted (repetition 0: as stored)."""
    rng = np.random.default_rng(1000 + rep)
    if case.outcomes is None:
        return (rng.random((case.truth.size, SEEDS)) < case.truth[:, None]).astype(float)
    if rep == 0:
        return case.outcomes
    return np.array([row[rng.permutation(SEEDS)] for row in case.outcomes])


def run_boundary(case: Case, outcomes: np.ndarray, settings: Settings, workers: int):
    """The search asked for `workers` packs a round, each told before the next round."""
    search = BoundarySearch(case.shape, settings)
    size = case.truth.size
    successes, counted = np.zeros(size), np.zeros(size)
    used = np.zeros(size, dtype=int)
    rounds = 0
    while True:
        left = settings.trials - int(used.sum())
        batch = search.propose(workers, successes, counted, used, set(), left)
        if not batch:
            break
        rounds += 1
        for cell, count in batch:
            draws = outcomes[cell, used[cell]:used[cell] + count]
            successes[cell] += draws.sum()
            counted[cell] += len(draws)
            used[cell] += len(draws)
    post = search.posterior(successes, counted)
    stopped = "budget" if int(used.sum()) >= settings.trials else "decided"
    return int(used.sum()), post.side(settings.target) > 0, stopped, rounds, int((used > 0).sum())


def run_random(case: Case, outcomes: np.ndarray, trials: int, settings: Settings, rep: int):
    rng = np.random.default_rng(2000 + rep)
    size = case.truth.size
    units = rng.choice(size * SEEDS, size=trials, replace=False)
    successes, counted = np.zeros(size), np.zeros(size)
    for u in units:
        cell, seed = divmod(int(u), SEEDS)
        successes[cell] += outcomes[cell, seed]
        counted[cell] += 1
    post = share_posterior(case.shape, successes, counted, target=settings.target,
                           model=settings.model)
    return post.side(settings.target) > 0


def errors(above: np.ndarray, case: Case, target: float, margin: float) -> tuple[int, int]:
    truth = case.truth >= target
    wrong = above != truth
    clear = np.abs(case.truth - target) > margin
    return int(wrong.sum()), int((wrong & clear).sum())


# -- the table ---------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--models", nargs="*", default=["gp", "smooth"],
                        help="posterior models of the boundary search to compare")
    parser.add_argument("--target", type=float, default=0.5)
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--budget", type=float, default=0.25,
                        help="the trial budget as a share of the full grid's trials")
    parser.add_argument("--seeds-per-proposal", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4, help="packs asked for per round")
    args = parser.parse_args(argv)

    chosen = [c for c in cases() if not args.cases or c.name in args.cases]
    print(f"boundary search vs full grid vs random sampling; target {args.target:g}, margin "
          f"{args.margin:g}, {SEEDS} seeds per cell, budget {args.budget:g} of the full grid, "
          f"{args.seeds_per_proposal} seeds per proposal, {args.workers} packs per round, "
          f"{args.reps} repetitions (means; misclassified: all cells / cells clear of the "
          "margin)\n")
    header = ("| case | cells | full grid trials | full grid misclassified | sampler | trials "
              "| ratio | misclassified | random, same trials | stopped (decided/budget) "
              "| cells sampled | s/run |")
    print(header)
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|")
    total = {}
    for case in chosen:
        cells = case.truth.size
        full = cells * SEEDS
        grid_wrong = []
        for rep in range(args.reps):
            outcomes = seed_outcomes(case, rep)
            grid_wrong.append(errors(outcomes.mean(1) >= args.target, case, args.target,
                                     args.margin))
        for model in args.models:
            settings = Settings(target=args.target, margin=args.margin,
                                trials=int(args.budget * full),
                                seeds_per_proposal=args.seeds_per_proposal, max_seeds=SEEDS,
                                model=model)
            used, wrong, rand_wrong, stops, sampled, seconds = [], [], [], [], [], []
            for rep in range(args.reps):
                outcomes = seed_outcomes(case, rep)
                start = time.perf_counter()
                n, above, stopped, _, cells_sampled = run_boundary(case, outcomes, settings,
                                                                   args.workers)
                seconds.append(time.perf_counter() - start)
                used.append(n)
                stops.append(stopped)
                sampled.append(cells_sampled)
                wrong.append(errors(above, case, args.target, args.margin))
                rand_wrong.append(errors(run_random(case, outcomes, n, settings, rep), case,
                                         args.target, args.margin))
            mean_used = float(np.mean(used))
            row = (case.name, cells, full, _pair(grid_wrong), model, f"{mean_used:.0f}",
                   f"{mean_used / full:.2f}", _pair(wrong), _pair(rand_wrong),
                   f"{stops.count('decided')}/{stops.count('budget')}",
                   f"{np.mean(sampled):.0f}", f"{np.mean(seconds):.1f}")
            print("| " + " | ".join(map(str, row)) + " |")
            agg = total.setdefault(model, [0.0, 0, 0.0, 0])
            agg[0] += mean_used
            agg[1] += full
            agg[2] += float(np.mean([w[0] for w in wrong]))
            agg[3] += cells
            sys.stdout.flush()
    print()
    for model, (x, y, m, c) in total.items():
        print(f"{model}: over all cases, trials {x:.0f} of {y} (ratio {x / y:.2f}), "
              f"misclassified {m:.1f} of {c} cells")
    model = args.models[0]
    x, y, m, c = total[model]
    print(f"boundary: trials {x:.0f} of {y} (ratio {x / y:.2f}), misclassified {m:.1f} of {c} "
          "cells")
    return 0


def _pair(values: list[tuple[int, int]]) -> str:
    return f"{np.mean([v[0] for v in values]):.1f} / {np.mean([v[1] for v in values]):.1f}"


if __name__ == "__main__":
    sys.exit(main())

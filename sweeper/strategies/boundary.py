"""Boundary search: trials where a cell's success share is still unsure of its side of a target.

The candidate cells are the grid axes' combinations (as grid search has them); a unit is one
(cell, seed), an ordinary trial spec (`cells.cell_specs`), so resume and exactly-once work
through the store as for every search. Each `ask(n)` proposes up to n packs, one per cell, of
`seeds_per_proposal` new seeds each:

1. first the cells of a coarse sub-grid (`initial_cells`: every third value of each axis, the
   ends included), so that the whole grid is seen once;
2. then, from the posterior over every cell's share (`sweeper.results.levelset`: a GP
   classifier by default, sharing strength between neighbouring cells, so unsampled cells have
   one too), the undecided cells (their interval straddles target +- margin) that have seeds
   left under `max_seeds`, and the unsampled cells next to a cell on the other side of the
   target, most straddling first. A cell whose interval clears target +- margin gets nothing
   more.

It stops when no such cell is left (every reachable cell decided: `stopped == "decided"`) or
when `search.trials` trials are stored or out (`stopped == "budget"`); `conclusion()` is the
line the run ends with. Proposals are a function of what is stored (and what is out), nothing
else: a killed and resumed sweep proposes the same units, and a file with more cells or a
larger budget continues from the store. Outcomes come from the store's trials through
`sweeper.results.cell_stats` (counted seeds, successes), the same definition as every summary.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sweeper.numbers import check_float, check_int, shown
from sweeper.results import cell_stats
from sweeper.results.levelset import MODELS, SharePosterior, face_neighbours, share_posterior
from sweeper.results.words import count
from sweeper.spec import TrialResult, TrialSpec
from sweeper.strategies.base import Context, Pack, Plan, SearchRules, read_trials
from sweeper.strategies.grid import grid_cells
from sweeper.sweep_fields import (
    Axis,
    Search,
    SweepFileError,
    fail,
    int_at,
    number_at,
    suggest_plain,
)

if TYPE_CHECKING:
    from sweeper.families import Family
    from sweeper.sweep_fields import Sweep

INITIAL_STRIDE = 3


def initial_cells(shape: Sequence[int]) -> list[int]:
    """The coarse sub-grid sampled first (flat C-order indices, ascending): per axis of L
    values, ceil((L - 1) / 3) + 1 evenly spread indices, the ends included."""
    per_axis = []
    for length in shape:
        count = math.ceil((length - 1) / INITIAL_STRIDE) + 1
        per_axis.append(sorted({int(round(v)) for v in np.linspace(0, length - 1, count)}))
    flat = np.arange(math.prod(shape)).reshape(tuple(shape))
    return sorted(int(flat[idx]) for idx in itertools.product(*per_axis))


@dataclass(frozen=True)
class Settings:
    """The search's keys (`search:` in the sweep file; docs/sweep-files.md)."""

    target: float = 0.5
    margin: float = 0.1
    trials: int = 100  # the trial budget: (cell, seed) units stored or out
    seeds_per_proposal: int = 2
    max_seeds: int = 8  # the refinement cap: most seeds one cell gets
    model: str = "gp"


class BoundarySearch:
    """The sampler on a grid of `shape`, apart from trial specs: counts in, units out.

    `successes[c]`, `counted[c]`: the counted seeds of cell c and how many succeeded;
    `used[c]`: seed positions of cell c stored (any status) or out. Everything it proposes is
    a function of these (and of which cells are out), so it is deterministic.
    """

    def __init__(self, shape: Sequence[int], settings: Settings):
        self.shape = tuple(int(s) for s in shape)
        self.size = math.prod(self.shape)
        self.settings = settings
        self.initial = initial_cells(self.shape)
        self._neighbours: list[np.ndarray] | None = None
        self._cache: tuple[bytes, SharePosterior] | None = None

    @property
    def neighbours(self) -> list[np.ndarray]:
        if self._neighbours is None:
            self._neighbours = face_neighbours(self.shape)
        return self._neighbours

    def posterior(self, successes: np.ndarray, counted: np.ndarray) -> SharePosterior:
        key = np.concatenate([successes, counted]).astype(np.int64).tobytes()
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, share_posterior(self.shape, successes, counted,
                                                target=self.settings.target,
                                                model=self.settings.model))
        return self._cache[1]

    def wanted(self, successes: np.ndarray, counted: np.ndarray, used: np.ndarray
               ) -> list[int]:
        """The cells that want more seeds, most wanted first: unsampled cells of the initial
        sub-grid (in grid order), then undecided cells with seeds left and unsampled cells
        next to a cell on the other side of the target, by straddle score."""
        s = self.settings
        room = used < s.max_seeds
        first = [c for c in self.initial if used[c] == 0]
        post = self.posterior(successes, counted)
        undecided = ~post.decided(s.target, s.margin)
        side = post.side(s.target)
        frontier = np.zeros(self.size, dtype=bool)
        for c in np.flatnonzero((used == 0) & room):
            frontier[c] = bool(np.any(side[self.neighbours[c]] != side[c]))
        chosen = set(first)
        rest = [int(c) for c in np.flatnonzero((undecided | frontier) & room) if c not in chosen]
        score = np.round(post.straddle(s.target), 9)
        rest.sort(key=lambda c: (-score[c], c))
        return first + rest

    def propose(self, n: int, successes: np.ndarray, counted: np.ndarray, used: np.ndarray,
                out_cells: set[int], budget_left: int) -> list[tuple[int, int]]:
        """Up to n (cell, how many new seeds) of cells not out, within the budget."""
        proposals = []
        for c in self.wanted(successes, counted, used):
            if len(proposals) >= n or budget_left <= 0:
                break
            if c in out_cells:
                continue
            count = min(self.settings.seeds_per_proposal, self.settings.max_seeds - int(used[c]),
                        budget_left)
            proposals.append((c, count))
            budget_left -= count
        return proposals


def settings_of(sweep: Sweep) -> Settings:
    search = sweep.search
    cap = search.max_seeds or len(sweep.seeds)
    return Settings(search.target, search.margin, search.trials,
                    min(search.seeds_per_proposal or 2, cap), cap, search.model)


class BoundaryStrategy(SearchRules):
    """The boundary search on the sweep's grid, told what its packs measured."""

    adaptive = True  # its candidates are the grid's specs; which of them train, it decides
    draws_cells = True  # a sample of the grid's cells
    samples_level_set = True
    section_keys = ("type", "trials", "outcome", "target", "margin", "seeds_per_proposal",
                    "max_seeds", "model")

    @classmethod
    def seeds_per_cell(cls, search: Search, seeds: tuple[int, ...]) -> int:
        """Its refinement cap (`max_seeds`), at most the sweep's seeds."""
        return min(len(seeds), search.max_seeds) if search.max_seeds else len(seeds)

    @classmethod
    def read_search(cls, raw: dict, axes: tuple[Axis, ...], family: Family,
                    seeds: tuple[int, ...]) -> Search:
        """The grid axes' cells are its candidates; trials is its budget; outcome, target and
        margin say which boundary; max_seeds and seeds_per_proposal how it refines."""
        cls.check_axes(axes, "boundary")
        if not axes:
            raise fail("axes", None, "at least one grid axis for search boundary")
        trials = read_trials(raw)
        outcome = raw.get("outcome", family.phase_outcome)
        outcomes = tuple(r.column for r in family.outcome_rules if r.kind == "success")
        if outcome not in outcomes:
            raise SweepFileError(f"search.outcome: got {shown(outcome)}"
                                 f"{suggest_plain(outcome, outcomes)}; allowed: "
                                 f"{', '.join(outcomes)} (a success outcome of {family.name})")
        target = check_float(raw.get("target", 0.5), "search.target", 0, 1, low_open=True,
                             high_open=True, allowed="a success share > 0 and < 1",
                             error=SweepFileError)
        margin = number_at(raw.get("margin", 0.1), "search.margin", 0, high=0.5)
        cap = raw.get("max_seeds")  # None: every seed of `seeds` (so adding seeds extends it)
        if cap is not None:
            cap = check_int(cap, "search.max_seeds", 1, len(seeds), error=SweepFileError,
                            allowed=f"an integer >= 1 and <= {len(seeds)} (the sweep's seeds)")
        per = raw.get("seeds_per_proposal")  # None: 2, or the cap when it is 1
        if per is not None:
            per = int_at(per, "search.seeds_per_proposal", 1)
            if per > (cap or len(seeds)):
                raise fail("search.seeds_per_proposal", per, f"an integer >= 1 and <= "
                           f"{cap or len(seeds)} (the seeds a cell may get)")
        model = raw.get("model", "gp")
        if model not in MODELS:
            raise fail("search.model", model, " or ".join(MODELS))
        return Search("boundary", trials, outcome=outcome, target=float(target),
                      margin=margin, seeds_per_proposal=per, max_seeds=cap, model=model)

    @classmethod
    def cells(cls, sweep: Sweep) -> list[dict[str, Any]]:
        return grid_cells(sweep)

    @classmethod
    def budget(cls, sweep: Sweep, specs: list[TrialSpec]) -> int:
        return min(sweep.search.trials, len(specs))

    @classmethod
    def fixed_packs(cls, sweep: Sweep, specs: list[TrialSpec], pack_size: int | None,
                    need: int) -> tuple[str, int, int]:
        """A pack is a proposal's seeds."""
        n = settings_of(sweep).seeds_per_proposal
        return "search.seeds_per_proposal", n, n * need

    @classmethod
    def budget_packs(cls, plan: Plan) -> list[list[TrialSpec]]:
        """What is left of the budget as proposals of `seeds_per_proposal` pending seeds, the
        candidate cells taken in turn (grid order, round after round): the search's own choice
        of cells depends on what it measures, its pack sizes and their mix of shapes do not."""
        per, seeds = settings_of(plan.sweep).seeds_per_proposal, len(plan.sweep.seeds)
        left = plan.budget - (len(plan.specs) - len(plan.pending))
        cells = [[s for s in plan.specs[i:i + seeds] if s.trial_id not in plan.stored]
                 for i in range(0, len(plan.specs), seeds)]
        packs: list[list[TrialSpec]] = []
        while left > 0 and any(cells):
            for cell in cells:
                if left <= 0:
                    break
                pack, cell[:] = cell[:min(per, left)], cell[min(per, left):]
                if pack:
                    packs.append(pack)
                    left -= len(pack)
        return packs

    @classmethod
    def describe(cls, plan: Plan) -> tuple[dict[str, Any], str]:
        """Its candidates, budget and first proposals."""
        sweep = plan.sweep
        s = settings_of(sweep)
        shape = [len(a.values) for a in sweep.axes]
        cells, per = len(plan.specs) // len(sweep.seeds), len(sweep.seeds)
        stored = sum(1 for spec in plan.specs if spec.trial_id in plan.stored)
        outcome = sweep.search.outcome or sweep.family.phase_outcome
        first = len(initial_cells(shape))
        data = {"sweep": sweep.name, "search": sweep.search.type, "adaptive": True,
                "trials": plan.budget, "candidates": len(plan.specs), "cells": cells,
                "stored": stored, "initial_cells": first}
        text = (f"{sweep.name}: boundary search ({outcome} share vs {s.target:g} +- "
                f"{s.margin:g}, {sweep.search.model} posterior): "
                f"{count(cells, 'candidate cell')} x {count(per, 'seed')} = "
                f"{count(len(plan.specs), 'trial')}, of which up to {plan.budget} run "
                f"({count(s.seeds_per_proposal, 'seed')} per proposal, at most {s.max_seeds} "
                f"per cell), first the {count(first, 'cell')} of a coarse sub-grid; "
                f"{stored} stored")
        return data, text

    def __init__(self, sweep: Sweep, cells: list[dict[str, Any]],
                 units: list[list[TrialSpec]], known: dict[str, tuple[str, Any]]):
        self.sweep = sweep
        self.candidates = cells  # the grid's cells, in grid order
        self.units = units  # per cell, its spec of each seed position (sweep.seeds order)
        self.outcome = sweep.search.outcome or sweep.family.phase_outcome
        self.search = BoundarySearch([len(a.values) for a in sweep.axes], settings_of(sweep))
        self.settings = self.search.settings
        self._position = {s.trial_id: (c, i) for c, specs in enumerate(units)
                          for i, s in enumerate(specs)}
        self.known = {t: v for t, v in known.items() if t in self._position}
        self.out: dict[tuple[str, ...], int] = {}  # a pack's ids -> its cell
        self.out_ids: set[str] = set()
        self.proposed: list[tuple[str, ...]] = []  # every pack proposed in this run, in order
        self.stopped: str | None = None
        self.planned: int | None = max(0, self.budget_left())

    @classmethod
    def start(cls, context: Context) -> BoundaryStrategy:
        sweep = context.sweep
        cells = grid_cells(sweep)
        per = len(sweep.seeds)
        specs = context.plan.specs
        units = [specs[i * per:(i + 1) * per] for i in range(len(cells))]
        return cls(sweep, cells, units, stored_results(context.store, sweep,
                                                       sweep.search.outcome
                                                       or sweep.family.phase_outcome))

    # -- state --------------------------------------------------------------------------------
    def counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per cell: successes, counted seeds (`sweeper.results.cell_stats`), seed positions
        stored or out."""
        size = len(self.candidates)
        successes, counted = np.zeros(size), np.zeros(size)
        used = np.zeros(size, dtype=int)
        for tid in list(self.known) + sorted(self.out_ids):
            used[self._position[tid][0]] += 1
        if self.known:
            ids = list(self.known)
            frame = pd.DataFrame({
                "_cell": [self._position[t][0] for t in ids],
                "status": [self.known[t][0] for t in ids],
                self.outcome: pd.array([self.known[t][1] for t in ids], dtype="boolean")})
            stats = cell_stats(frame, ["_cell"], self.outcome, steps=None)
            cells = stats["_cell"].to_numpy(dtype=int)
            successes[cells] = stats["successes"].to_numpy(dtype=float)
            counted[cells] = stats["n"].to_numpy(dtype=float)
        return successes, counted, used

    def budget_left(self) -> int:
        return self.settings.trials - len(self.known) - len(self.out_ids)

    def posterior(self) -> SharePosterior:
        successes, counted, _ = self.counts()
        return self.search.posterior(successes, counted)

    def _wanted(self) -> list[int]:
        return self.search.wanted(*self.counts())

    # -- the protocol ------------------------------------------------------------------------
    def ask(self, n: int) -> list[Pack]:
        if self.done:
            return []
        successes, counted, used = self.counts()
        out_cells = set(self.out.values())
        packs = []
        for cell, wanted in self.search.propose(n, successes, counted, used, out_cells,
                                                self.budget_left()):
            free = [s for s in self.units[cell]
                    if s.trial_id not in self.known and s.trial_id not in self.out_ids]
            pack = free[:wanted]
            ids = tuple(s.trial_id for s in pack)
            self.out[ids] = cell
            self.out_ids.update(ids)
            self.proposed.append(ids)
            packs.append(pack)
        return packs

    def tell(self, pack: Pack, results: list[TrialResult] | None) -> None:
        ids = tuple(s.trial_id for s in pack)
        self.out.pop(ids, None)
        self.out_ids.difference_update(ids)
        for r in results or []:  # None: lost with its worker, nothing stored, proposed again
            self.known[r.trial_id] = (r.status, r.outcomes.get(self.outcome))

    @property
    def done(self) -> bool:
        if self.budget_left() <= 0:
            self.stopped = "budget"
            return True
        if not self.out and not self._wanted():
            self.stopped = "decided"
            return True
        return False

    def close(self) -> None:
        pass

    # -- the end of a run --------------------------------------------------------------------
    def state(self) -> dict[str, int | str | None]:
        """What the search knows now: cells above / below / undecided, sampled, trials."""
        successes, counted, used = self.counts()
        post = self.search.posterior(successes, counted)
        s = self.settings
        decided = post.decided(s.target, s.margin)
        side = post.side(s.target)
        wanted = set(self.search.wanted(successes, counted, used))
        return {"cells": len(self.candidates), "sampled": int((used > 0).sum()),
                "above": int((decided & (side > 0)).sum()),
                "below": int((decided & (side < 0)).sum()),
                "undecided": int((~decided).sum()),
                "undecided_at_cap": int((~decided & (used >= s.max_seeds)).sum()),
                "reachable_undecided": len(wanted),
                "trials": len(self.known) + len(self.out_ids), "budget": s.trials,
                "stopped": self.stopped}

    def conclusion(self) -> str:
        """The line a run of this search ends with: why it stopped, and where it stands."""
        self.done  # noqa: B018 - sets `stopped` from the state as it is now
        st = self.state()
        s = self.settings
        where = (f"{count(st['cells'], 'cell')}: {st['above']} above, {st['below']} below, "
                 f"{st['undecided']} undecided; {st['sampled']} sampled; {st['trials']} of "
                 f"{count(st['budget'], 'trial')}")
        if st["stopped"] == "decided":
            cap = (f" ({st['undecided_at_cap']} undecided at the cap of "
                   f"{count(s.max_seeds, 'seed')})"
                   if st["undecided_at_cap"] else "")
            return (f"boundary search: stopped, every reachable cell decided{cap}; "
                    f"{self.outcome} share vs {s.target:g} +- {s.margin:g}: {where}")
        if st["stopped"] == "budget":
            return (f"boundary search: stopped, the trial budget is spent "
                    f"({_cells(st['reachable_undecided'])} still wanted seeds); "
                    f"{self.outcome} share vs {s.target:g} +- {s.margin:g}: {where}")
        return (f"boundary search: interrupted ({_cells(st['reachable_undecided'])} still "
                f"want seeds); {where}")


def _cells(count: int) -> str:
    return f"{count} cell{'s' * (count != 1)}"


def stored_results(store, sweep: Sweep, outcome: str) -> dict[str, tuple[str, Any]]:
    """trial id -> (status, outcome) of every stored trial of the sweep."""
    data = store.dataset(sweep.name, "trials")
    if data is None:
        return {}
    names = set(data.schema.names)
    columns = ["trial_id", "status"] + ([outcome] if outcome in names else [])
    frame = data.to_table(columns=columns).to_pandas()
    values = (frame[outcome].astype("boolean") if outcome in frame.columns
              else pd.Series(pd.NA, index=frame.index, dtype="boolean"))
    return {tid: (status, None if pd.isna(v) else bool(v))
            for tid, status, v in zip(frame["trial_id"], frame["status"], values)}

"""The strategy protocol: what proposes packs to train and learns from their results.

A strategy decides *what* trains; an executor (`sweeper.executors`) decides *where*. The two
meet only through this protocol, so every strategy runs on every executor:

    strategy = make_strategy(context)          # sweeper.strategies: picked by search.type
    while not strategy.done:                   # (the executor's loop, in spirit)
        for pack in strategy.ask(free_slots):  # packs of TrialSpecs that share tensor shapes
            ... train it somewhere ...
            strategy.tell(pack, results)       # after the Recorder has stored them
    strategy.close()

The contract:

- `start(context)` (a classmethod) builds the strategy from the sweep and what is stored; it
  may refuse bad input with a `SweeperInputError` before anything is written.
- `ask(n)` returns at most n new packs. No trial id it proposes is stored or already out, so
  nothing stored is ever trained again. An empty list means "nothing until a pack that is
  out is told"; it is allowed only while some pack is out (or once `done`).
- `tell(pack, results)` is called exactly once for every pack `ask` returned, on the driver,
  after the pack's results were stored: `results` holds one `TrialResult` per spec (status
  ok, diverged, failed or stopped), or is None when the pack's worker was lost and nothing was
  stored (the pack stays pending for the next run).
- `done` is True once the strategy will propose nothing more in this run; executors then stop
  asking and wait for the packs that are out.
- `planned` is how many trials it expects to train in this run (the progress line's total),
  None when it cannot say.
- `close()` releases what it holds (a database connection); called once, also after errors.

What a search type decides before its strategy starts is on the strategy class, as
classmethods and class attributes (`SearchRules`), so that the plan, memory admission and
`sweeper plan` ask the type instead of branching on it: its cells (`cells`), whether they are
known up front (`specs_up_front`) and must differ (`distinct_cells`), whether it is
`adaptive`, its `budget` of trials, the pack size it fixes (`fixed_packs`) and how `sweeper
plan` describes an adaptive search (`describe`).

A strategy is deterministic given what is stored (and, for Optuna, the sweep's study), and it
never writes results: the Recorder stays their single writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sweeper.packing import form_packs
from sweeper.spec import TrialResult, TrialSpec
from sweeper.sweep_fields import Axis, Plan, Search, Sweep, fail, int_at

if TYPE_CHECKING:
    from sweeper.cells import Cell
    from sweeper.families import Family
    from sweeper.results import Store

Pack = list[TrialSpec]


@dataclass(frozen=True)
class Context:
    """What a strategy starts from: the run's plan (the sweep, what is stored, and for grid
    and random every spec), the store, and how packs are to be sized."""

    plan: Plan
    store: Store
    pack_size: int | None  # None: packs sized for `workers` (packing.form_packs)
    workers: int  # packs the executor can train at once
    pack_bytes: int | None = None  # memory one pack may use (None: not limited here)

    @property
    def sweep(self) -> Sweep:
        return self.plan.sweep

    @property
    def stored(self) -> set[str]:
        """Trial ids stored before this run."""
        return self.plan.stored


class Strategy(Protocol):
    """See the module's docstring for the contract."""

    planned: int | None

    @classmethod
    def start(cls, context: Context) -> Strategy: ...

    def ask(self, n: int) -> list[Pack]: ...

    def tell(self, pack: Pack, results: list[TrialResult] | None) -> None: ...

    @property
    def done(self) -> bool: ...

    def close(self) -> None: ...


class SearchRules:
    """A search type's rules before its strategy starts (see the module's docstring); the
    defaults are those of a search that plans every pack up front (grid)."""

    adaptive = False  # what trains is decided while the sweep runs
    specs_up_front = True  # its cells, hence its specs, are known before it runs
    distinct_cells = True  # two cells that are the same trials are refused
    draws_cells = False  # its cells are a sample, not a grid to tabulate (in the manifest)
    samples_level_set = False  # it samples where an outcome's share crosses a target (same)
    section_keys: tuple[str, ...] = ("type",)  # the keys its `search:` section takes
    samples_ranges = False  # its axes may be ranges (uniform, loguniform, int), not only values

    @classmethod
    def read_search(cls, raw: dict, axes: tuple[Axis, ...], family: Family,
                    seeds: tuple[int, ...]) -> Search:
        """Its `search:` section (keys already checked against `section_keys`), or one line
        naming the field; here: a search over the axes' values with no options."""
        cls.check_axes(axes, raw["type"])
        return Search(raw["type"])

    @classmethod
    def check_axes(cls, axes: tuple[Axis, ...], kind: str) -> None:
        if cls.samples_ranges:
            return
        for axis in axes:
            if axis.kind not in ("grid", "choice"):
                raise fail(f"axes.{axis.path}.{axis.kind}", list(axis.values),
                           f"grid or choice axes with search {kind} (use search random or "
                           "optuna to sample ranges)")

    @classmethod
    def cells_to_plan(cls, axes: tuple[Axis, ...], search: Search) -> tuple[int, str]:
        """How many cells planning expands, and how to say it, from the file alone (nothing
        expanded): here every combination of the axes' values."""
        cells = 1
        for axis in axes:
            cells *= len(axis.values)
        return cells, " x ".join(f"{len(a.values)} ({a.path})" for a in axes) or "1 cell"

    @classmethod
    def cells(cls, sweep: Sweep) -> list[Cell] | None:
        """Its cells in a fixed order; None when it proposes them while it runs."""
        return None

    @classmethod
    def budget(cls, sweep: Sweep, specs: list[TrialSpec]) -> int:
        """The most trials it stores (the manifest's trials_expanded): here every spec."""
        return len(specs)

    @classmethod
    def fixed_packs(cls, sweep: Sweep, specs: list[TrialSpec], pack_size: int | None,
                    need: int) -> tuple[str, int, int] | None:
        """(the setting, its value, the largest pack's bytes) when the sweep fixes its packs'
        size (here a pack size), None for automatic packs; `need`: one trial's bytes."""
        if not pack_size:
            return None
        largest = max(sum(s.memory_bytes() for s in p) for p in form_packs(specs, pack_size))
        return "--pack-size/pack_size", pack_size, largest

    @classmethod
    def nothing_left(cls, plan: Plan, store: Store) -> bool:
        """Whether a run would train nothing, known before any executor starts (a run with
        nothing to run starts no Ray): every trial of a plan laid out up front stored; an
        adaptive search answers for itself."""
        if cls.adaptive or not plan.specs:
            return False
        return not plan.with_stored(store.done_ids(plan.sweep.name)).pending

    @classmethod
    def budget_packs(cls, plan: Plan) -> list[Pack]:
        """An adaptive search's estimate (`sweeper.estimate`): packs that stand for what its
        budget still allows, as it packs them; here none (a planned search's packs are known)."""
        return []

    @classmethod
    def judged_outcome(cls, search: Search, family: Family) -> str | None:
        """The outcome its cells are judged by (a yes/no or a number): the search's `outcome`,
        else the family's phase outcome."""
        return search.outcome or family.phase_outcome

    @classmethod
    def seeds_per_cell(cls, search: Search, seeds: tuple[int, ...]) -> int:
        """The most seeds any of its cells gets: here every seed of the sweep."""
        return len(seeds)

    @classmethod
    def describe(cls, plan: Plan) -> tuple[dict[str, Any], str] | None:
        """What `sweeper plan` says of an adaptive search (its JSON and its line); None: the
        plan's trials are listed."""
        return None


def read_trials(raw: dict) -> int:
    """search.trials of a search that draws its cells: how many it draws."""
    return int_at(raw.get("trials"), "search.trials", 1, 1_000_000)


def drawn_cells(search: Search) -> tuple[int, str]:
    """`cells_to_plan` of a search that draws `search.trials` cells."""
    return search.trials or 0, f"{search.trials} search.trials"


class PlannedPacks(SearchRules):
    """A strategy whose packs are all known before the run starts (grid and random search):
    every pending spec that trains (`plan.Sharing`: not those that share an equivalent trial's
    training), packed by `packing.form_packs`, handed out in order; results teach it nothing.
    `planned` counts the trials stored in the end, those that share a training included."""

    def __init__(self, packs: list[Pack], shared: int = 0):
        self._packs = list(packs)
        self._next = 0
        self.planned: int | None = sum(len(p) for p in self._packs) + shared

    @classmethod
    def start(cls, context: Context) -> PlannedPacks:
        sharing = context.plan.sharing
        return cls(form_packs(sharing.trainings, context.pack_size, context.workers,
                              context.pack_bytes), sharing.saved)

    @property
    def packs(self) -> list[Pack]:
        """Every pack of the run, in the order `ask` hands them out."""
        return list(self._packs)

    def ask(self, n: int) -> list[Pack]:
        packs = self._packs[self._next:self._next + max(0, n)]
        self._next += len(packs)
        return packs

    def tell(self, pack: Pack, results: list[TrialResult] | None) -> None:
        """Nothing to learn: a lost pack stays pending in the store for the next run."""

    @property
    def done(self) -> bool:
        return self._next >= len(self._packs)

    def close(self) -> None:
        pass

"""What to run: expand a sweep file into trial specs, drop those already stored, say which
pending trials share a training.

Pure and deterministic (no Ray, no clock): the same file always gives the same specs in the same
order. The search type's strategy says which cells there are (`sweeper.strategies`: the grid's
product, random draws, none up front for a search that proposes cells while it runs), its
budget and whether it is adaptive; the plan keeps what every strategy shares: the cells' specs
(`sweeper.cells.cell_specs`), what is stored, the sharing of equivalent trainings, and the
sweep's identity (`sweeper.identity`), computed once per run. Packs: `sweeper.packing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sweeper.cells import Cell, cell_specs, check_trainable_ranges, realised_values, trained_step
from sweeper.errors import SweeperInputError
from sweeper.search_space import SweepFile, SweepFileError
from sweeper.spec import TrialSpec
from sweeper.strategies import strategy_class


def cells(sweep: SweepFile) -> list[Cell]:
    """The cells of a search whose cells are known up front, in a fixed order (its strategy
    draws them: `sweeper.strategies`)."""
    found = strategy_class(sweep.search.type).cells(sweep)
    if found is None:
        raise SweeperInputError(f"search.type: got {sweep.search.type!r}; cells are known in "
                                "advance only for grid, random and boundary")
    return found


def expand(sweep: SweepFile) -> list[TrialSpec]:
    """Every spec of a search whose cells are known up front, duplicates (same trial id)
    dropped.

    Two cells that are the same trials (e.g. co-occurrences that round to one vocabulary at a
    length) are refused, naming both, where the strategy's cells must differ (a grid's); a
    random search may draw one cell twice.
    """
    distinct = strategy_class(sweep.search.type).distinct_cells
    seen: dict[str, dict] = {}
    specs = []
    for cell in cells(sweep):
        for spec in cell_specs(sweep, cell):
            if spec.trial_id not in seen:
                seen[spec.trial_id] = cell
                specs.append(spec)
            elif distinct and seen[spec.trial_id] != cell:
                raise SweepFileError(
                    f"axes: the cells {seen[spec.trial_id]} and {cell} are the same trials "
                    f"(their effective task is {dict(spec.task_params)}); allowed: grid values "
                    "that give different tasks")
    return specs


@dataclass(frozen=True)
class Sharing:
    """Which pending trials train, and which take the result of an equivalent one.

    Trials with one training id (`TrialSpec.training_id`: they differ only in parameters that
    change nothing, such as copy's hardness at c = 0) train one model: the first of them in the
    plan's order trains (or the one already stored), the others are stored as rows of their own
    that name it in `shared_with` and carry its outcomes; its trajectory is stored once.
    """

    trainings: list[TrialSpec]  # pending trials that train, in the plan's order
    shares: dict[str, list[TrialSpec]]  # a training's trial id -> pending trials sharing it
    shares_stored: dict[str, list[TrialSpec]]  # a stored trial's id -> pending trials sharing it

    @property
    def saved(self) -> int:
        """Trainings this plan does not run: pending trials that share another's."""
        return sum(map(len, self.shares.values())) + sum(map(len, self.shares_stored.values()))


def share_trainings(specs: list[TrialSpec], stored: set[str]) -> Sharing:
    """Group the pending specs by training id (see `Sharing`); `stored`: trial ids stored."""
    trains: dict[str, TrialSpec] = {}  # training id -> the trial that trains it
    for spec in specs:
        if spec.trial_id in stored:
            trains.setdefault(spec.training_id, spec)
    stored_trainings = set(trains)
    trainings: list[TrialSpec] = []
    shares: dict[str, list[TrialSpec]] = {}
    shares_stored: dict[str, list[TrialSpec]] = {}
    for spec in specs:
        if spec.trial_id in stored:
            continue
        key = spec.training_id
        if key not in trains:
            trains[key] = spec
            trainings.append(spec)
            continue
        into = shares_stored if key in stored_trainings else shares
        into.setdefault(trains[key].trial_id, []).append(spec)
    return Sharing(trainings, shares, shares_stored)


@dataclass
class Plan:
    sweep: SweepFile
    specs: list[TrialSpec]  # everything the file expands to (cells known up front; boundary:
    # its candidates, cell by cell in grid order, each cell's seeds in file order); [] when the
    # strategy proposes its cells while it runs
    stored: set[str]  # trial ids already in the store

    @property
    def strategy(self) -> type:
        """The strategy class of the sweep's search type (its rules: `sweeper.strategies`)."""
        return strategy_class(self.sweep.search.type)

    @property
    def pending(self) -> list[TrialSpec]:
        return [s for s in self.specs if s.trial_id not in self.stored]

    @cached_property
    def sharing(self) -> Sharing:
        """The pending trials that train and those that share an equivalent training (a search
        that plans its packs up front; an adaptive search trains what it proposes)."""
        if self.adaptive:
            return Sharing(self.pending, {}, {})
        return share_trainings(self.specs, self.stored)

    @property
    def adaptive(self) -> bool:
        """Whether what trains is decided while the sweep runs."""
        return self.strategy.adaptive

    @property
    def budget(self) -> int:
        """The most trials the sweep stores (the manifest's trials_expanded)."""
        return self.strategy.budget(self.sweep, self.specs)

    @cached_property
    def identity(self) -> dict[str, Any]:
        """The sweep's identity (`sweeper.identity.identity`), computed once per plan."""
        from sweeper.identity import identity

        return identity(self.sweep)

    def with_stored(self, stored: set[str]) -> Plan:
        """The same expansion against another set of stored trial ids (expanded once a run)."""
        plan = Plan(self.sweep, self.specs, set(stored))
        if "identity" in self.__dict__:
            plan.__dict__["identity"] = self.identity
        return plan


def plan_progress(plan: Plan, store: Any, name: str, progress: dict | None) -> Any:
    """Where sweep `name` stands against this plan (`sweeper.results.summary.sweep_progress`,
    the one definition): its stored trials per status and ids, the driver's `progress` file.
    A plan with its specs up front counts the trials it lacks by id; an adaptive one by its
    budget, unless its search says nothing is left (an Optuna study whose budget is spent
    stores fewer trials than it when it proposed a cell twice: none of them is pending)."""
    from sweeper.results.summary import sweep_progress

    unstored = (len(plan.with_stored(store.stored_ids(name)).pending)
                if plan.specs and not plan.adaptive else None)
    if plan.adaptive and strategy_class(plan.sweep.search.type).nothing_left(plan, store):
        unstored = 0
    return sweep_progress(store.status_counts(name), progress, planned=plan.budget,
                          unstored=unstored, adaptive=plan.adaptive)


def make_plan(sweep: SweepFile, stored: set[str]) -> Plan:
    check_trainable_ranges(sweep)  # a range with no value the task trains at: refused
    rules = strategy_class(sweep.search.type)
    return Plan(sweep, expand(sweep) if rules.specs_up_front else [], stored)


# -- values asked for that train as others, said before anything trains ---------------------
def off_grid_notes(sweep: SweepFile) -> list[str]:
    """Range axes of a parameter the task trains on a grid that no fixed step can propose on
    (log-uniform, or a step that another axis moves): said before anything trains."""
    from sweeper.families import TASKS

    entry = TASKS.get(sweep.task)
    lines = []
    snaps = strategy_class(sweep.search.type).specs_up_front  # random draws on the grid
    for axis in sweep.axes:
        if axis.group != "task" or axis.kind not in ("uniform", "loguniform"):
            continue
        kinds = ("uniform", "loguniform") if snaps else ("uniform",)
        if trained_step(sweep, axis, kinds) is not None:
            continue
        if axis.name in entry.realisation_steps(sweep.fixed.get("task", {})) or any(
                axis.name in entry.realisation_steps({**sweep.fixed.get("task", {}),
                                                      a.name: v})
                for a in sweep.axes if a.group == "task" for v in a.values):
            lines.append(f"note: {axis.path} is proposed {axis.kind}, off the grid the task "
                         "trains it on: each trial stores the trained value, the proposed "
                         "one in its requested column")
    return lines


SHOWN_REALISED = 12  # lines `realised_notes` writes before it counts the rest


def _drawn_twice(specs: list[TrialSpec], sweep: SweepFile) -> list[str]:
    """A search that draws its cells up front (random) and drew some twice (a grid axis, or a
    range the task trains on a grid): how many cells it trains, said."""
    rules = strategy_class(sweep.search.type)
    drawn = sweep.search.trials
    cells = len(specs) // max(1, len(sweep.seeds))
    if not (rules.draws_cells and rules.specs_up_front and drawn) or cells >= drawn:
        return []
    return [f"note: {drawn} cells drawn, {cells} distinct (some drawn twice: a grid axis, or a "
            "range the task trains on a grid); the sweep trains those"]


def realised_notes(specs: list[TrialSpec], sweep: SweepFile, strict: bool = False) -> list[str]:
    """One line per value asked for that trains as another (at most SHOWN_REALISED, then how
    many more); with `strict`, the first is refused instead (SweepFileError, exit 2)."""
    found = realised_values(specs, sweep)
    if strict and found:
        raise SweepFileError(found[0].refusal())
    lines = off_grid_notes(sweep) + _drawn_twice(specs, sweep) + [
        r.line() for r in found[:SHOWN_REALISED]]
    if len(found) > SHOWN_REALISED:
        lines.append(f"note: {len(found) - SHOWN_REALISED} more values asked for train as "
                     "others (their trials' requested column keeps them)")
    return lines

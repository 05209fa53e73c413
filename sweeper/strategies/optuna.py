"""Optuna search through Optuna's own ask/tell API, on any executor.

A cell (one value per axis) is one Optuna trial, trained as one pack of its pending seeds; its
value is `sweeper.results.objective.objective_value` of `search.objective` over the cell's
counted seeds (statuses ok and diverged, as `sweeper.results.counted`). A cell whose trials
all failed is told FAIL, one stopped by the scheduler PRUNED, one whose worker was lost FAIL
(nothing is stored: the next run proposes again).

Where the study lives. On a local results root the study is `<root>/<sweep>/optuna.db`
(SQLite, study name = the sweep's name): `optuna.load_study(study_name=NAME,
storage="sqlite:///<root>/<sweep>/optuna.db")` or `optuna-dashboard sqlite:///...` open it,
while the sweep runs or after. Running the sweep again continues the same study:

- trials a killed run left RUNNING are told from the store when their cell was stored (the run
  died between storing and telling), else told FAIL and their cell enqueued, so this run trains
  it first;
- cells stored but unknown to the study (its file deleted, or stored before it existed) are
  added to it as finished trials.

The Parquet store stays the record; the study is the searcher's memory. Elsewhere (an object
store such as s3://, or memory://) SQLite cannot live beside the results, so each run builds an
in-memory study from the stored cells (the same adding as above) and continues from there.

`search.trials` is the study's size: a trial counts once its cell's trials are stored, whatever
their status, so a re-run proposes only what is missing. A cell whose trials are all stored
already is told from the store without training; one that is out already is told with it.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

from sweeper.cells import cell_specs, trained_step
from sweeper.errors import SweeperInputError
from sweeper.numbers import shown
from sweeper.results import COUNTED_STATUSES, counted, outcome_columns
from sweeper.results.files import NOTHING_WRITTEN, could_not_write
from sweeper.results.layout import STUDY_FILE
from sweeper.results.objective import objective_value
from sweeper.results.store import STORE_KEPT
from sweeper.results.words import count
from sweeper.spec import TrialResult
from sweeper.strategies.base import Context, Pack, Plan, SearchRules, drawn_cells, read_trials
from sweeper.sweep_fields import Axis, Search, SweepFileError, fail, int_at, suggest_plain

if TYPE_CHECKING:
    from sweeper.families import Family
    from sweeper.results import Store
    from sweeper.sweep_fields import Sweep

FINISHED = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)


def study_storage(store: Store, sweep: str) -> str | None:
    """The study's storage URL beside a local sweep's results; None for other roots."""
    if not store.is_local:
        return None
    return f"sqlite:///{os.path.join(store.path(sweep), STUDY_FILE)}"


@contextlib.contextmanager
def study_writes(path: str | None, made: bool = False) -> Iterator[None]:
    """Writes to the study's file (`path`; None: a study in memory) on a full disk or in a
    read-only folder: one line (ResultsWriteError, exit 1), as any write of the sweep's.
    `made`: the file did not exist before, so a failed start removes it."""
    from sqlalchemy.exc import OperationalError

    try:
        yield
    except (OperationalError, optuna.exceptions.StorageInternalError) as exc:
        if path is None:
            raise
        if made:
            with contextlib.suppress(OSError):
                os.unlink(path)
        cause = getattr(exc, "orig", None) or exc.__cause__ or exc  # sqlite's own words
        raise could_not_write(path, cause, NOTHING_WRITTEN if made else STORE_KEPT) from exc


def distribution(axis: Axis, step: float | None = None) -> BaseDistribution:
    """The axis as Optuna's distribution; `step`: the spacing the task trains a float range at
    (`sweeper.cells.trained_step`), so that a proposal is a value that trains as proposed (its
    ends moved in to the first and last such values)."""
    if axis.kind in ("grid", "choice"):
        return CategoricalDistribution(list(axis.values))
    low, high = axis.values
    if axis.kind == "int":
        return IntDistribution(int(low), int(high))
    if step is not None:
        first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
        if last > first:
            return FloatDistribution(first * step, last * step, step=step)
    return FloatDistribution(float(low), float(high), log=axis.kind == "loguniform")


def trained_values(spec: Any) -> dict[str, Any]:
    """The values of a cell's spec that train as other than proposed (`TrialSpec.requested`):
    path -> the trained value, kept on the Optuna trial as its `trained` user attribute."""
    return {path: _plain(spec.value(path)) for path, _ in spec.requested}


def _fits(params: dict[str, Any], distributions: dict[str, BaseDistribution]) -> bool:
    """Whether a point lies in the current search space (the axes may have changed)."""
    if set(params) != set(distributions):
        return False
    try:
        return all(d._contains(d.to_internal_repr(params[k])) for k, d in distributions.items())
    except (ValueError, TypeError):
        return False


def _plain(value: Any) -> Any:
    """A Python scalar from a pandas/numpy one (trial ids hash Python values)."""
    return value.item() if hasattr(value, "item") else value


def _sampler_seed(seed: int, trials: int) -> int:
    """The sampler's seed for a run that finds `trials` in the study: a resumed run must not
    replay the random start of the run before it (same proposals, all of them stored)."""
    return int(np.random.SeedSequence([seed, trials]).generate_state(1)[0])


@dataclass(frozen=True)
class _Stored:
    """What the study needs of one stored trial."""

    status: str
    counted: bool  # a seed of its cell (`sweeper.results.counted`)
    value: Any  # the objective's outcome (None: a step outcome never reached, or not counted)
    steps: int


def _stored_trials(store: Store, sweep: Sweep) -> tuple[dict[str, _Stored], Any]:
    """Every stored trial of the sweep, and the frame they came from (None when empty)."""
    data = store.dataset(sweep.name, "trials")
    if data is None:
        return {}, None
    objective = sweep.search.objective
    wanted = ["trial_id", "status", "learned", "train.steps", objective,
              *(a.column for a in sweep.axes)]
    names = set(data.schema.names)
    frame = data.to_table(columns=list(dict.fromkeys(c for c in wanted if c in names))
                          ).to_pandas()
    ok = counted(frame).to_numpy()
    values = frame[objective].astype(object).where(frame[objective].notna(), None)
    trials = {tid: _Stored(status, bool(keep), _plain(value), int(steps))
              for tid, status, value, steps, keep in zip(
                  frame["trial_id"], frame["status"], values, frame["train.steps"], ok)}
    return trials, frame


class OptunaStrategy(SearchRules):
    """Cells proposed by an Optuna study, told what their packs measured."""

    adaptive = True
    specs_up_front = False  # its cells are proposed while it runs
    draws_cells = True
    section_keys = ("type", "trials", "objective", "direction", "seed")
    samples_ranges = True

    @classmethod
    def read_search(cls, raw: dict, axes: tuple[Axis, ...], family: Family,
                    seeds: tuple[int, ...]) -> Search:
        """trials, seed, and an objective: an outcome of the family or a metric's final or
        best value, maximised or minimised."""
        trials = read_trials(raw)
        seed = int_at(raw.get("seed", 0), "search.seed", 0)
        names = {r.column for r in family.outcome_rules if r.is_category}  # not a number
        objectives = tuple(c for c in outcome_columns(family.outcome_rules) if c not in names) + \
            tuple(f"{w}_{m.name}" for m in family.scalar_metrics() for w in ("final", "best"))
        objective = raw.get("objective")
        if objective not in objectives:
            raise SweepFileError(f"search.objective: got {shown(objective)}"
                                 f"{suggest_plain(objective, objectives)}; allowed: "
                                 f"{', '.join(objectives)}")
        direction = raw.get("direction", "maximize")
        if direction not in ("maximize", "minimize"):
            raise fail("search.direction", direction, "maximize or minimize")
        if not axes:
            raise fail("axes", None, "at least one axis for search optuna")
        return Search("optuna", trials, objective, direction, seed)

    @classmethod
    def judged_outcome(cls, search: Search, family: Family) -> str | None:
        """Its objective: a number or a yes/no the study maximises or minimises."""
        return search.objective

    @classmethod
    def cells_to_plan(cls, axes: tuple[Axis, ...], search: Search) -> tuple[int, str]:
        return drawn_cells(search)

    @classmethod
    def budget(cls, sweep: Sweep, specs: list) -> int:
        return sweep.search.trials * len(sweep.seeds)

    @classmethod
    def fixed_packs(cls, sweep: Sweep, specs: list, pack_size: int | None,
                    need: int) -> tuple[str, int, int]:
        """A pack is a proposed cell's seeds."""
        return "seeds", len(sweep.seeds), len(sweep.seeds) * need

    @classmethod
    def budget_packs(cls, plan: Plan) -> list[Pack]:
        """What is left of the budget as cells drawn from the axes as random search draws them
        (`search.seed`; the study's first proposals are such draws too), one pack of every seed
        each, as the study packs them."""
        from sweeper.strategies.random import draw

        sweep = plan.sweep
        rng = np.random.default_rng(sweep.search.seed)
        left = sweep.search.trials - len(plan.stored) // max(1, len(sweep.seeds))
        return [cell_specs(sweep, {a.path: draw(a, rng) for a in sweep.axes})
                for _ in range(max(0, left))]

    @classmethod
    def nothing_left(cls, plan: Plan, store: Store) -> bool:
        """Its study (beside a local sweep's results) has `search.trials` finished trials whose
        cells are stored, as `counted` counts: the run would propose nothing. Read without
        writing; a study elsewhere (in memory) is built by the run: False."""
        name = plan.sweep.name
        url = study_storage(store, name)
        if url is None or not os.path.isfile(store.path(name, STUDY_FILE)):
            return False
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = optuna.storages.RDBStorage(url)
        try:
            study = optuna.load_study(study_name=name, storage=storage)
            stored = store.stored_ids(name)
            counted = sum(1 for t in study.get_trials(deepcopy=False, states=FINISHED)
                          if t.user_attrs.get("trial_ids")
                          and all(i in stored for i in t.user_attrs["trial_ids"]))
        except (KeyError, ValueError):  # no study of that name in the file
            return False
        finally:
            storage.remove_session()
            storage.engine.dispose()
        return counted >= plan.sweep.search.trials

    @classmethod
    def describe(cls, plan: Plan) -> tuple[dict[str, Any], str]:
        """Its budget: cells x seeds."""
        sweep, search = plan.sweep, plan.sweep.search
        budget = plan.budget
        data = {"sweep": sweep.name, "search": search.type, "trials": budget,
                "stored": len(plan.stored), "adaptive": True}
        text = (f"{sweep.name}: adaptive search ({search.type}, {search.objective} "
                f"{search.direction}): up to {count(search.trials, 'cell')} x "
                f"{count(len(sweep.seeds), 'seed')} = {count(budget, 'trial')}; "
                f"{len(plan.stored)} stored")
        return data, text

    def __init__(self, sweep: Sweep, study: optuna.Study, storage: Any,
                 stored: dict[str, _Stored], study_file: str | None = None):
        self.sweep, self.study, self._storage = sweep, study, storage
        self.study_file = study_file  # on a local disk: writes to it fail in one line
        self.distributions = {a.path: distribution(a, trained_step(sweep, a))
                              for a in sweep.axes}
        self._trials = stored  # trial id -> what is stored (this run's tells added)
        self._out: dict[tuple[str, ...], list[int]] = {}  # a cell's ids -> its trial numbers
        self._cell_of: dict[tuple[str, ...], tuple[str, ...]] = {}  # a pack's ids -> its cell's
        self.remaining = 0
        self.planned: int | None = 0

    # -- starting: open the study, settle what a killed run left ------------------------------
    @classmethod
    def start(cls, context: Context) -> OptunaStrategy:
        sweep, store = context.sweep, context.store
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        stored, frame = _stored_trials(store, sweep)
        url = study_storage(store, sweep.name)
        path = None if url is None else store.path(sweep.name, STUDY_FILE)
        with study_writes(path, made=path is not None and not os.path.exists(path)):
            if url is not None:
                os.makedirs(store.path(sweep.name), exist_ok=True)
                storage = optuna.storages.RDBStorage(url)
            else:
                storage = optuna.storages.InMemoryStorage()
            study = optuna.create_study(study_name=sweep.name, storage=storage,
                                        direction=sweep.search.direction, load_if_exists=True)
            strategy = cls(sweep, study, storage, stored, path)
            try:
                strategy._check_direction(url)
                strategy._settle_running()
                strategy._add_unknown_cells(frame)
            except BaseException:
                strategy.close()
                raise
        study.sampler = optuna.samplers.TPESampler(
            seed=_sampler_seed(sweep.search.seed, len(study.trials)))
        strategy.remaining = max(0, sweep.search.trials - strategy.counted())
        strategy.planned = strategy.remaining * len(sweep.seeds)
        return strategy

    def _check_direction(self, url: str | None) -> None:
        have = self.study.direction.name.lower()
        if have != self.sweep.search.direction:
            raise SweeperInputError(
                f"search.direction: got {self.sweep.search.direction!r}, but the sweep's study "
                f"({url}) was made to {have}; allowed: {have!r}, or a new sweep name")

    def _settle_running(self) -> None:
        """Trials a killed run left RUNNING: told from the store if their cell was stored,
        else told FAIL, their cell enqueued to be trained first."""
        for trial in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            ids = tuple(trial.user_attrs.get("trial_ids", ()))
            if ids and all(i in self._trials for i in ids):
                self._finish(trial.number, *self._measure(ids))
                continue
            self.study.tell(trial.number, state=TrialState.FAIL)
            if _fits(trial.params, self.distributions):
                self.study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})

    def _add_unknown_cells(self, frame: Any) -> None:
        """Stored cells the study has never seen (no trial names their ids) become finished
        trials of it: all of them for an in-memory study, a lost study file's otherwise."""
        columns = [a.column for a in self.sweep.axes]
        if frame is None or not set(columns) <= set(frame.columns):
            return
        known = {i for t in self.study.get_trials(deepcopy=False)
                 for i in t.user_attrs.get("trial_ids", ())}
        for key, _ in frame.groupby(columns, sort=True):
            cell = {a.path: _plain(v) for a, v in zip(self.sweep.axes, key)}
            if not _fits(cell, self.distributions):
                continue
            try:
                ids = tuple(s.trial_id for s in cell_specs(self.sweep, cell))
            except SweeperInputError:
                continue
            if known.intersection(ids):
                continue
            state, value = self._measure(ids)
            self.study.add_trial(optuna.trial.create_trial(
                params=cell, distributions=self.distributions, state=state,
                value=value if state == TrialState.COMPLETE else None,
                user_attrs={"trial_ids": list(ids), "from_store": True}))
            known.update(ids)

    def best_trial(self) -> dict[str, Any] | None:
        """The study's best finished trial (Optuna's `study.best_trial`: one cell, its value the
        objective over the cell's seeds) as plain data for the run's summary
        (`SweepResult.best_trial`); None while no trial of the study has completed."""
        try:
            best = self.study.best_trial
        except ValueError:  # no COMPLETE trial yet
            return None
        search = self.sweep.search
        proposed = {k: _plain(v) for k, v in best.params.items()}
        return {"objective": search.objective, "direction": search.direction,
                "value": float(best.value), "number": best.number,
                "params": {**proposed, **best.user_attrs.get("trained", {})},
                "proposed": proposed,
                "trial_ids": [str(i) for i in best.user_attrs.get("trial_ids", ())]}

    def counted(self) -> int:
        """Finished trials of the study whose cells are stored: what `search.trials` counts."""
        return sum(1 for t in self.study.get_trials(deepcopy=False, states=FINISHED)
                   if t.user_attrs.get("trial_ids")
                   and all(i in self._trials for i in t.user_attrs["trial_ids"]))

    # -- the protocol ------------------------------------------------------------------------
    def ask(self, n: int) -> list[Pack]:
        packs: list[Pack] = []
        with study_writes(self.study_file):
            while len(packs) < n and self.remaining > 0:
                self.remaining -= 1
                pack = self._propose()
                if pack is not None:
                    packs.append(pack)
        return packs

    def _propose(self) -> Pack | None:
        """One new Optuna trial: its cell's pending seeds, or None when there is nothing to
        train for it (stored already: told now; out already: told with that pack)."""
        trial = self.study.ask(self.distributions)
        cell = {path: trial.params[path] for path in self.distributions}
        try:
            specs = cell_specs(self.sweep, cell)
        except SweeperInputError as exc:  # a point of the ranges that makes no valid trial
            trial.set_user_attr("error", str(exc))
            self.study.tell(trial.number, state=TrialState.FAIL)
            print(f"warning: optuna proposed an invalid cell: {exc}", file=sys.stderr)
            return None
        ids = tuple(s.trial_id for s in specs)
        trial.set_user_attr("trial_ids", list(ids))
        trained = trained_values(specs[0]) if specs else {}
        if trained:  # off the task's grid (a step that depends on another axis): said
            trial.set_user_attr("trained", trained)
        if ids in self._out:
            self._out[ids].append(trial.number)
            return None
        pending = [s for s in specs if s.trial_id not in self._trials]
        if not pending:
            self._finish(trial.number, *self._measure(ids))
            return None
        self._out[ids] = [trial.number]
        self._cell_of[tuple(s.trial_id for s in pending)] = ids
        return pending

    def tell(self, pack: Pack, results: list[TrialResult] | None) -> None:
        with study_writes(self.study_file):
            self._tell(pack, results)

    def _tell(self, pack: Pack, results: list[TrialResult] | None) -> None:
        ids = self._cell_of.pop(tuple(s.trial_id for s in pack))
        numbers = self._out.pop(ids)
        if results is None:  # lost with its worker: nothing stored, the next run proposes
            for number in numbers:
                self.study.tell(number, state=TrialState.FAIL)
            return
        objective = self.sweep.search.objective
        for r in results:
            keep = r.status in COUNTED_STATUSES and r.outcomes.get("learned") is not None
            self._trials[r.trial_id] = _Stored(r.status, keep, r.outcomes.get(objective),
                                               int(r.spec.train["steps"]))
        state, value = self._measure(ids)
        for number in numbers:
            self._finish(number, state, value)

    @property
    def done(self) -> bool:
        return self.remaining <= 0

    def close(self) -> None:
        if isinstance(self._storage, optuna.storages.RDBStorage):
            self._storage.remove_session()
            self._storage.engine.dispose()

    # -- measuring a cell --------------------------------------------------------------------
    def _measure(self, ids: tuple[str, ...]) -> tuple[TrialState, float | None]:
        rows = [self._trials[i] for i in ids if i in self._trials]
        if any(r.status == "stopped" for r in rows):
            return TrialState.PRUNED, None
        objective = self.sweep.search.objective
        steps = rows[0].steps if rows else 0
        value = objective_value([{objective: r.value} for r in rows if r.counted], objective,
                                steps, self.sweep.family.outcome_rules)
        return (TrialState.FAIL, None) if math.isnan(value) else (TrialState.COMPLETE, value)

    def _finish(self, number: int, state: TrialState, value: float | None) -> None:
        if state == TrialState.COMPLETE:
            self.study.tell(number, value)
        else:
            self.study.tell(number, state=state)

"""The cell summary and the progress file: what a dashboard (or a sampler) reads of a sweep
without rescanning its trajectories.

`RESULTS/<sweep>/cells.parquet` holds one row per *configuration* (a cell at the finest grain:
every config column, `task.*`, `model.*`, `train.*`, but not `seed`) with additive counts:
trials per status and, per success outcome, the counted seeds, successes and the sum of the
successes' steps. Any coarser cell (a pair of axes and a facet, pooled over the rest) is a sum
of these rows, so a phase diagram for any axes comes from this one small file
(`analysis.phase.phase_from_summary`), by the one counting rule of `sweeper.results.cells`.

Its writer is the sweep's single writer (`sweeper.recording.Recorder`, `SummaryWriter`): each
committed pack's counts are kept aside, folded in and written whole (temporary name and rename,
or one put) at most every SUMMARY_EVERY_S and at the run's end. The file's metadata names the
packs it covers (by their files' names; a merged file holds the packs its metadata lists), so
a reader can tell whether it is current: the rows of packs it does not cover (a summary a few
seconds behind, a crash, a store written by an older sweeper) are read and added; a covered
pack that is gone (quarantine) makes the reader rebuild it from the trials table
(`current_summary`). Trajectories are never read for it.

`RESULTS/<sweep>/progress.json` is the running driver's view (throttled, written whole): trials
done, failed, running and planned, and each running pack's step (`write_progress`).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sweeper.results.cells import counted, wilson_interval
from sweeper.results.layout import part_name
from sweeper.results.reading import current_names, part_files, to_frame
from sweeper.results.rules import SUCCESS_OUTCOMES

SUMMARY_FILE = "cells.parquet"
PROGRESS_FILE = "progress.json"
SUMMARY_VERSION = 2  # 2: shared rows counted apart, with the columns they differ in
CONFIG_PREFIXES = ("task.", "model.", "train.", "optim.")
STATUSES = ("ok", "diverged", "failed", "stopped")
COUNT_COLUMNS = ("n_trials", *STATUSES)


def config_columns(columns: Iterable[str]) -> list[str]:
    """The columns that make a configuration (everything swept or fixed but the seed)."""
    return [c for c in columns if c.startswith(CONFIG_PREFIXES)]


def outcome_columns(outcome: str) -> tuple[str, str, str]:
    """The summary's three columns of a success outcome: counted seeds, successes, and the
    sum of the successes' steps (e.g. learned_n, learned_successes, learned_steps)."""
    return f"{outcome}_n", f"{outcome}_successes", f"{outcome}_steps"


def shared_columns(outcome: str) -> tuple[str, str, str]:
    """The summary's columns of a success outcome over the rows that share another trial's
    training: counted, successes, steps (subtracted where a cell pools over what they differ
    in: `summary_cells`)."""
    return tuple(f"{c}_shared" for c in outcome_columns(outcome))


def _shared_over(trials: pd.DataFrame, keys: list[str]) -> list[list[str]]:
    """Per row, the configuration columns in which a shared row differs from the trial whose
    training it shares (stored in the same pack, so in the same rows); [] for its own."""
    if "shared_with" not in trials.columns or "trial_id" not in trials.columns:
        return [[] for _ in range(len(trials))]
    by_id = trials.drop_duplicates("trial_id").set_index("trial_id")
    out = []
    for i, source in enumerate(trials["shared_with"]):
        if not isinstance(source, str):
            out.append([])
        elif source not in by_id.index:
            out.append([])  # its source in another batch: assume the same cell
        else:
            row, src = trials.iloc[i], by_id.loc[source]
            out.append([k for k in keys if not _same(row[k], src[k])])
    return out


def _same(a: object, b: object) -> bool:
    missing = pd.isna(a) if not isinstance(a, (list, np.ndarray)) else False
    other = pd.isna(b) if not isinstance(b, (list, np.ndarray)) else False
    return bool(missing and other) or (not missing and not other and a == b)


def contributions(trials: pd.DataFrame) -> pd.DataFrame:
    """Per-configuration counts of some trials rows (any status), one row per configuration."""
    keys = config_columns(trials.columns)
    status = trials["status"] if "status" in trials.columns else pd.Series("ok", trials.index)
    work = pd.DataFrame({"n_trials": 1}, index=trials.index)
    for s in STATUSES:
        work[s] = (status == s).astype("int64")
    shared = (trials["shared_with"].notna() if "shared_with" in trials.columns
              else pd.Series(False, trials.index))
    work["n_shared"] = shared.astype("int64")  # rows that share an equivalent trial's training
    work["shared_over"] = _shared_over(trials, keys)
    for outcome, steps in SUCCESS_OUTCOMES.items():
        if outcome not in trials.columns:
            continue
        n, k, total = outcome_columns(outcome)
        is_counted = counted(trials, outcome)
        success = is_counted & trials[outcome].astype("boolean").fillna(False)
        work[n] = is_counted.astype("int64")
        work[k] = success.astype("int64")
        step = (pd.to_numeric(trials[steps], errors="coerce").astype(float)
                if steps in trials.columns else pd.Series(np.nan, trials.index))
        work[total] = step.where(success, 0.0).fillna(0.0)
        for name, value in zip(shared_columns(outcome), (work[n], work[k], work[total])):
            work[name] = value.where(shared, 0)
    for key in keys:
        work[key] = trials[key]
    if "trial_id" in trials.columns:
        work["trial_ids"] = [[t] for t in trials["trial_id"]]
        packs = trials["pack_id"] if "pack_id" in trials.columns else pd.Series(None, trials.index)
        work["packs"] = [[p] if isinstance(p, str) else [] for p in packs]
    return _sum(work, keys)


# per configuration: its trials, the packs holding them, the columns its shared rows differ in
LIST_COLUMNS = ("trial_ids", "packs", "shared_over")


def _sum(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    lists = [c for c in LIST_COLUMNS if c in frame.columns]
    counts = [c for c in frame.columns if c not in keys and c not in lists]
    if not keys:
        return frame[counts].sum().to_frame().T
    grouped = frame.groupby(keys, dropna=False, sort=True)
    out = grouped[counts].sum()
    for column in lists:
        joined = grouped[column].agg(lambda parts: [v for part in parts
                                                    for v in (part if part is not None else [])])
        out[column] = joined if column == "trial_ids" else joined.map(
            lambda v: sorted(set(v)))  # packs, shared_over: sets
    return out.reset_index()


@dataclass
class CellSummary:
    """Per-configuration counts and the trials files they cover (names, not paths)."""

    cells: pd.DataFrame
    files: set[str] = field(default_factory=set)
    # trials whose failed row a later attempt superseded, taken out of the counts (`supersede`)
    superseded: set[str] = field(default_factory=set)

    @classmethod
    def empty(cls) -> CellSummary:
        return cls(pd.DataFrame({c: pd.Series(dtype="int64") for c in COUNT_COLUMNS}), set())

    @property
    def trials(self) -> int:
        return int(self.cells["n_trials"].sum()) if len(self.cells) else 0

    def supersede(self, ids: Iterable[str]) -> None:
        """Take the failed rows of trials a later attempt stored out of the counts (once per
        trial: `superseded`), as every reader of the trials does (`sweeper.results.store.
        without_superseded`)."""
        ids = set(ids) - self.superseded
        if not ids or "trial_ids" not in self.cells.columns:
            self.superseded |= ids
            return
        for i, listed in enumerate(self.cells["trial_ids"]):
            gone = [t for t in listed if t in ids]
            if gone:
                self.cells.at[self.cells.index[i], "trial_ids"] = [t for t in listed
                                                                   if t not in ids]
                for column in ("n_trials", "failed"):
                    self.cells.at[self.cells.index[i], column] -= len(gone)
        self.superseded |= ids

    def add(self, trials: pd.DataFrame, files: Iterable[str]) -> None:
        """Add the rows of newly committed trials files (the packs they hold in `files`)."""
        self.add_counts(contributions(trials) if len(trials) else None, files)

    def add_counts(self, new: pd.DataFrame | None, files: Iterable[str]) -> None:
        """Add per-configuration counts (`contributions`, of any number of packs at once)."""
        if new is not None and len(new):
            both = pd.concat([self.cells, new], ignore_index=True) if len(self.cells) else new
            keys = config_columns(both.columns)
            counts = [c for c in both.columns if c not in keys and c not in LIST_COLUMNS]
            both[counts] = both[counts].fillna(0)
            for column in LIST_COLUMNS:
                if column in both.columns:
                    both[column] = [list(v) if v is not None and not (
                        isinstance(v, float) and math.isnan(v)) else [] for v in both[column]]
            self.cells = _sum(both, keys)
        self.files |= set(files)

    def table(self) -> pa.Table:
        frame = self.cells
        for column in frame.columns:
            if column in COUNT_COLUMNS or column.endswith(("_n", "_successes", "_n_shared",
                                                           "_successes_shared")):
                frame[column] = frame[column].astype("int64")
        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = {"version": SUMMARY_VERSION, "files": sorted(self.files),
                "superseded": sorted(self.superseded), "trials": self.trials,
                "updated": dt.datetime.now(dt.timezone.utc).isoformat()}
        return table.replace_schema_metadata({b"sweeper.summary": json.dumps(meta).encode()})

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        pq.write_table(self.table(), buffer)
        return buffer.getvalue()


def read_summary(fs: pafs.FileSystem, folder: str) -> CellSummary | None:
    """The summary file of a sweep folder, or None (absent, or not readable: then a reader
    rebuilds it from the trials)."""
    path = f"{folder}/{SUMMARY_FILE}"
    try:
        if fs.get_file_info(path).type != pafs.FileType.File:
            return None
        table = pq.read_table(path, filesystem=fs)
        meta = json.loads((table.schema.metadata or {}).get(b"sweeper.summary", b"{}"))
    except (pa.ArrowException, OSError, ValueError):
        return None
    if meta.get("version") != SUMMARY_VERSION:
        return None
    return CellSummary(to_frame(table), set(meta.get("files", [])),
                       set(meta.get("superseded", [])))


def trial_file_names(fs: pafs.FileSystem, folder: str) -> set[str]:
    """The `part-*.parquet` names in a sweep's trials folder (one listing, no file opened)."""
    return set(part_files(fs, f"{folder}/trials"))


def current_summary(fs: pafs.FileSystem, folder: str, committed: Iterable[str],
                    summary: CellSummary | None = None, read_trials=None,
                    packs: Mapping[str, frozenset[str]] | None = None,
                    superseded: frozenset[str] = frozenset()) -> tuple[CellSummary, bool]:
    """The summary brought up to date with the committed trials files (names): from `summary`
    (or the file), adding the packs it lacks; rebuilt from every trials file when a pack it
    covers is gone (quarantine). `packs`: the packs each file holds (`FolderScan.packs`; by
    default each holds itself), so that a merged file is covered by the packs it merged, and
    of a file that merged packs the summary has and packs it lacks only the rows of the
    latter are read (by their `pack_id`). `superseded` (`FolderScan.superseded`): trials
    whose failed rows a later attempt superseded, left out (`CellSummary.supersede`).
    `read_trials(names) -> DataFrame` reads trials files (default: pyarrow, whole files).
    Returns (summary, changed)."""
    holds = {n: (packs or {}).get(n) or frozenset((n,)) for n in committed}
    every = frozenset().union(*holds.values())
    if summary is None:
        summary = read_summary(fs, folder)
    if read_trials is None:
        def read_trials(names):
            return read_trial_files(fs, folder, names)
    if summary is None or summary.files - every:
        fresh = CellSummary.empty()
        fresh.add(current_rows(read_trials(sorted(holds)), superseded), every)
        fresh.superseded = set(superseded)
        return fresh, True
    lacking = every - summary.files
    if not lacking and not superseded - summary.superseded:
        return summary, False
    summary.supersede(superseded)  # failed rows the summary has, superseded since
    if lacking:
        summary.add(current_rows(rows_of_packs(read_trials, holds, lacking), superseded), lacking)
    return summary, True


def current_rows(trials: pd.DataFrame, superseded: frozenset[str]) -> pd.DataFrame:
    """Trials rows without the failed rows a later attempt superseded."""
    if not superseded or "trial_id" not in trials.columns or "status" not in trials.columns:
        return trials
    return trials[~((trials["status"] == "failed") & trials["trial_id"].isin(superseded))]


def rows_of_packs(read_trials, holds: Mapping[str, frozenset[str]],
                  wanted: frozenset[str]) -> pd.DataFrame:
    """The trials rows of the `wanted` packs, from the files that hold them (`holds`: name ->
    packs): a file holding only wanted packs read whole, one that merged others too read and
    cut to the wanted packs' rows (by `pack_id`)."""
    whole = sorted(n for n, held in holds.items() if held <= wanted)
    part = sorted(n for n, held in holds.items() if held & wanted and not held <= wanted)
    frames = [read_trials(whole)] if whole else []
    if part:
        rows = read_trials(part)
        frames.append(rows[rows["pack_id"].map(part_name).isin(wanted)])
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def read_trial_files(fs: pafs.FileSystem, folder: str, names: Sequence[str]) -> pd.DataFrame:
    """Trials files of a sweep, by name, as one frame (legacy column names made current)."""
    tables = []
    for name in names:
        try:
            tables.append(pq.read_table(f"{folder}/trials/{name}", filesystem=fs))
        except FileNotFoundError:
            raise  # listed, then gone (a merge's input deleted): the caller lists again
        except (pa.ArrowException, OSError, ValueError):
            continue  # a damaged file: the commit scan warns of it and recovery moves it
    if not tables:
        return pd.DataFrame({"status": pd.Series(dtype=str)})
    table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables],
                             promote_options="permissive")
    return to_frame(current_names(table))


# The most seconds a running writer leaves packs out of cells.parquet (a reader adds what it
# lacks from the trials files, so a lagging summary costs a reader a few packs' rows)
SUMMARY_EVERY_S = 5.0


class SummaryWriter:
    """Keeps a sweep's cells.parquet current as its single writer commits packs.

    `add(pack, records)` after the pack's trials file is written: the pack's counts are kept
    aside, and folded in and written at most every `every_s` seconds (and by `write()`, at
    the run's end), so that a pack costs the same at 100,000 stored trials as at 100: the
    summary is neither regrouped nor rewritten per pack. The first call brings the file up to
    date with what is stored (reading only the packs it lacks)."""

    def __init__(self, store, sweep: str, every_s: float = SUMMARY_EVERY_S):
        self.store, self.sweep, self.every_s = store, sweep, every_s
        self.summary: CellSummary | None = None
        self.pending: list[pd.DataFrame] = []  # counts of packs not folded in yet
        self.pending_packs: set[str] = set()
        self.pending_superseded: set[str] = set()
        self._written_at = time.monotonic()

    def _start(self) -> None:
        fs, folder = self.store.fs, self.store.path(self.sweep)
        scan = self.store.scan(self.sweep)
        committed = [p.rsplit("/", 1)[1] for p in scan.files["trials"]]
        self.summary, _ = current_summary(fs, folder, committed, packs=scan.packs,
                                          superseded=scan.superseded)

    def add(self, pack: str, records: Sequence, attempts: int = 1,
            node_id: str | None = None, write: bool = True,
            supersedes: Sequence[str] = ()) -> None:
        """supersedes: trials of this pack stored as failed before (their failed rows
        stop counting)."""
        from sweeper.results.records import trials_table

        name = part_name(pack)
        if self.summary is None:
            self._start()  # the store already holds this pack: it is read with the rest
        self.pending_superseded |= set(supersedes)
        if name not in self.summary.files and name not in self.pending_packs:
            table = trials_table(records, self.sweep, pack, attempts, node_id)
            self.pending.append(contributions(to_frame(table)))
            self.pending_packs.add(name)
        if write and time.monotonic() - self._written_at >= self.every_s:
            self.write()

    def fold(self) -> CellSummary:
        """The summary with every pack added so far."""
        if self.summary is None:
            self._start()
        self.summary.supersede(self.pending_superseded)  # before the packs that supersede
        if self.pending:
            self.summary.add_counts(pd.concat(self.pending, ignore_index=True),
                                    self.pending_packs)
            self.pending, self.pending_packs = [], set()
        self.pending_superseded = set()
        return self.summary

    def write(self) -> None:
        """Write cells.parquet whole now, with every pack added."""
        self._written_at = time.monotonic()
        self.store._put(self.store.path(self.sweep, SUMMARY_FILE), self.fold().to_bytes())


# -- cells from the summary ------------------------------------------------------------------
def summary_cells(summary: pd.DataFrame, axes: Sequence[str], outcome: str,
                  confidence: float = 0.95) -> pd.DataFrame:
    """Cells of `axes` (pooled over every other configuration column) from summary rows, with
    the columns of `sweeper.results.cell_stats` (median_steps: the mean over the successes,
    since a median does not add up; NaN without successes) and n_shared (trials that share an
    equivalent trial's training). As `cell_stats`, a shared training is one seed of its cell:
    where a cell pools over every column in which a configuration's shared rows differ from
    their source (copy's hardness at c = 0, pooled), those rows are not counted again."""
    n, k, total = outcome_columns(outcome)
    axes = list(axes)
    work = summary[[*axes, "n_trials", "failed"]].copy()
    within = _shared_within(summary, axes)
    for name, column, shared in zip(("n", "successes", "steps"), (n, k, total),
                                    shared_columns(outcome)):
        own = summary[column] if column in summary.columns else 0
        again = summary[shared].where(within, 0) if shared in summary.columns else 0
        work[name] = own - again
    work["n_shared"] = summary["n_shared"] if "n_shared" in summary.columns else 0
    sums = ["n_trials", "n", "successes", "steps", "failed", "n_shared"]
    if axes:
        cells = work.groupby(axes, dropna=False, sort=True)[sums].sum().reset_index()
    else:
        cells = work[sums].sum().to_frame().T
    with np.errstate(divide="ignore", invalid="ignore"):
        cells["p"] = np.where(cells["n"] > 0, cells["successes"] / cells["n"].clip(lower=1),
                              np.nan)
        cells["median_steps"] = np.where(cells["successes"] > 0,
                                         cells["steps"] / cells["successes"].clip(lower=1),
                                         np.nan)
    cells["p_low"], cells["p_high"] = wilson_interval(cells["successes"], cells["n"], confidence)
    from sweeper.results.cells import CELL_COLUMNS

    return cells[[*axes, *CELL_COLUMNS, "n_shared"]]


def _shared_within(summary: pd.DataFrame, axes: Sequence[str]) -> pd.Series:
    """Per configuration, whether its shared rows fall in their source's cell of `axes` (they
    differ from it only in columns the cells pool over)."""
    if "shared_over" not in summary.columns:
        return pd.Series(False, index=summary.index)
    return summary["shared_over"].map(
        lambda over: over is not None and not set(list(over)) & set(axes))


# -- progress ----------------------------------------------------------------------------------
def progress_bytes(progress: dict) -> bytes:
    return json.dumps({**progress, "updated": dt.datetime.now(dt.timezone.utc).isoformat()},
                      indent=1).encode()


# A progress file older than this, still "running", is a stalled driver. A live one rewrites
# it at every pack's start and end, at its evaluations (at most once a second) and, on Ray, at
# least every recording.HEARTBEAT_S.
LIVE_S = 60.0


def driver_state(progress: dict | None) -> tuple[str, float | None]:
    """What a sweep's driver is doing, from its progress file: "running", "stalled" (a
    running file that stopped moving: the driver was killed or lost), "finished" (it ended,
    finished or interrupted) or "stored" (no progress file: results only); and the file's
    age in seconds (None without one). A driver stopped by a signal writes "interrupted".
    `sweep_progress` adds what the plan says (trials of a grid still pending: interrupted)."""
    if not progress:
        return "stored", None
    age = None
    try:
        updated = dt.datetime.fromisoformat(progress["updated"])
        age = (dt.datetime.now(dt.timezone.utc) - updated).total_seconds()
    except (KeyError, TypeError, ValueError):
        pass
    state = progress.get("state", "finished")
    if state == "running" and age is not None and age > LIVE_S:
        state = "stalled"
    return state, age


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep stands against its whole plan, across runs and resumes: trials stored
    (done: with an outcome; failed), running now, and pending (planned, neither stored nor
    running); beside it the driver's state and its running packs."""

    state: str  # running, stalled, finished, interrupted, stored (`sweep_progress`)
    stored: int
    done: int
    failed: int
    running: int
    pending: int | None  # None: the plan's size is not known
    planned: int | None  # the whole plan (every run of it), None when not known
    age_s: float | None = None  # the progress file's age
    updated: str | None = None  # when the driver last wrote it
    packs: list = field(default_factory=list)  # the running packs (progress.json's)

    def to_json(self) -> dict:
        return {"state": self.state, "stored": self.stored, "done": self.done,
                "failed": self.failed, "running": self.running, "pending": self.pending,
                "planned": self.planned, "age_s": self.age_s, "updated": self.updated,
                "packs": list(self.packs)}

    def line(self) -> str:
        """'18 done, 0 failed, 9 running, 9 pending' (running when any; no driver state)."""
        running = f", {self.running} running" if self.running else ""
        pending = "" if self.pending is None else f", {self.pending} pending"
        return f"{self.done} done, {self.failed} failed{running}{pending}"


def sweep_progress(counts: dict[str, int], progress: dict | None, *, planned: int | None,
                   unstored: int | None = None, adaptive: bool = False,
                   running: int | None = None) -> SweepProgress:
    """The one definition of a sweep's progress, shared by `sweeper status`, the run's
    progress line, `sweeper.run`'s result and the dashboard.

    `counts`: trials stored per status (every run's); `progress`: the driver's progress file
    (`read_progress`; None: results only); `planned`: the trials of the sweep's whole plan
    (an adaptive search: its budget); `unstored`: the plan's trials with no stored row when the
    caller expanded the plan (default: planned - stored). Running trials come from the progress
    file while its driver runs, and are not pending. The state is the driver's
    (`driver_state`), but a driver that ended with trials of a grid plan pending (an older
    sweeper wrote "finished" when a signal stopped it) is `interrupted`: an adaptive search
    may end before its budget on its own. `running`: the driver's own count (its progress
    line), instead of the file's."""
    stored = sum(int(n) for n in counts.values())
    failed = int(counts.get("failed", 0))
    state, age = driver_state(progress)
    progress = progress or {}
    if running is None:
        running = max(0, int(progress.get("running", 0) or 0)) if state == "running" else 0
    if unstored is None and planned is not None:
        unstored = max(0, int(planned) - stored)
    pending = None
    if unstored is not None:
        running = min(running, unstored)
        pending = unstored - running
    if state == "finished" and pending and not adaptive:
        state = "interrupted"
    elif state == "interrupted" and pending == 0 and not running and not adaptive:
        state = "finished"  # a signal during its last pack: every trial of the plan is stored
    return SweepProgress(state, stored, stored - failed, failed, running, pending,
                         None if planned is None else int(planned), age,
                         progress.get("updated"),
                         list(progress.get("packs", [])) if state == "running" else [])


def manifest_progress(counts: dict[str, int], progress: dict | None,
                      manifest: dict) -> SweepProgress:
    """`sweep_progress` against the plan the manifest recorded (its trial count and whether
    its search is adaptive): for a reader that does not expand the sweep file (the
    dashboard)."""
    from sweeper.results.reading import search_facts

    planned = manifest.get("trials_expanded")
    return sweep_progress(counts, progress,
                          planned=planned if isinstance(planned, int) else None,
                          adaptive=search_facts(manifest)["search_adaptive"])


def read_progress(fs: pafs.FileSystem, folder: str) -> dict | None:
    """The driver's last progress of a sweep (None when it never wrote one, or wrote something
    that is not a JSON object: a view, never a record, so a damaged one is no progress)."""
    path = f"{folder}/{PROGRESS_FILE}"
    try:
        if fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with fs.open_input_stream(path) as stream:
            progress = json.loads(stream.read().decode())
    except (pa.ArrowException, OSError, ValueError, RecursionError):
        return None
    return progress if isinstance(progress, dict) else None

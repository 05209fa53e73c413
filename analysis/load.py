"""Read a sweep's trials and trajectories from the store, with filters pushed down to the scan.

Layout (docs/data-model.md): RESULTS/<sweep>/manifest.json, trials/part-*.parquet and
trajectories/part-*.parquet, a trials file and a trajectories file per pack, named
`part-<pack_id>.parquet`, or merged into `part-compact-*.parquet`.

Reading one trial's trajectory must not read the sweep. Row-group statistics on `trial_id` are
not enough for that: a pack's trial ids are hashes spread over the whole id space, so every
pack file's [min, max] range covers almost any id. So trajectories are pruned in two steps:
by file name (only the files of the packs that hold the selected trials, plus compacted files),
then by the Parquet statistics of those files' row groups (which do work in compacted files
sorted by trial_id).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from sweeper.results import check_sweep_name, pack_of_file
from sweeper.results.conformance import Footer, unified_schema
from sweeper.results.errors import python_arguments
from sweeper.results.reading import (
    current_names,
    list_sweeps,
    read_manifest,
    to_frame,
    warn_damaged,
)
from sweeper.results.schema import resolve_column
from sweeper.results.store import conforming, scan_folder, without_superseded
from sweeper.results.words import count

from . import where as where_lang
from .errors import AnalysisInputError, unknown_column

_FORMAT = ds.ParquetFileFormat()


# ---------------------------------------------------------------- locations

@dataclass
class Sweep:
    """One sweep folder: where it is and which Parquet files it holds."""
    name: str
    filesystem: pafs.FileSystem
    path: str
    manifest: dict
    files: dict[str, list[str]]
    _fragments: dict[str, ds.ParquetFileFragment] = field(default_factory=dict, repr=False)
    _checked: dict[str, Footer] = field(default_factory=dict, repr=False)  # footers read
    _accepted: set[str] = field(default_factory=set, repr=False)  # trajectories files read
    # failed trials a later attempt stored (their failed rows do not count: sweeper.results)
    superseded: frozenset[str] = frozenset()
    # what every committed trials file's outcomes were derived by (`rules_stamp`), None when
    # they differ or one does not say
    outcomes_stamp: str | None = None

    def readable(self, paths: Iterable[str]) -> list[str]:
        """The trajectories files among `paths` that are whole Parquet files of the table's
        schema (`sweeper.results.store.conforming`, the files read before voting too); a
        damaged or foreign one is left out of this sweep with a one-line warning. A footer is
        read when its file is first wanted, never for the whole sweep."""
        paths = list(paths)
        damaged: dict[str, str] = {}
        wanted = dict.fromkeys([*sorted(self._accepted), *paths])
        accepted = conforming(self.filesystem, wanted, "trajectories", self._checked, damaged,
                              lambda p: self.fragments([p])[0].physical_schema)
        for path, why in damaged.items():
            warn_damaged(path, why)
        if damaged:
            self.files["trajectories"] = [f for f in self.files["trajectories"]
                                          if f not in damaged]
        self._accepted = set(accepted)
        return [p for p in paths if p in accepted]

    def fragments(self, paths: Iterable[str]) -> list[ds.ParquetFileFragment]:
        """Fragments for paths; each file's footer is read at most once per Sweep."""
        out = []
        for p in paths:
            if p not in self._fragments:
                self._fragments[p] = _FORMAT.make_fragment(p, filesystem=self.filesystem)
            out.append(self._fragments[p])
        return out


def resolve_root(results: str | os.PathLike,
                 filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """A results root as (filesystem, path): a local path, or any pyarrow.fs URI (s3://...)."""
    if filesystem is not None:
        return filesystem, str(results).rstrip("/")
    text = os.fspath(results)
    if "://" in text:
        from sweeper.results.reading import open_uri

        return open_uri(text, field="RESULTS")  # asked once, within a timeout: no hang
    return pafs.LocalFileSystem(), os.path.abspath(text)


def open_sweeps(results: str | os.PathLike, sweep: str | Sequence[str] | None = None,
                filesystem: pafs.FileSystem | None = None) -> list[Sweep]:
    """Locate the sweeps and list their files (no Parquet file is opened here)."""
    fs, root = resolve_root(results, filesystem)
    if sweep is None:
        if fs.get_file_info(f"{root}/trials").type == pafs.FileType.Directory:
            root, sweep = root.rsplit("/", 1)  # results is itself a sweep folder
        else:
            found = list_sweeps(fs, root)
            if len(found) != 1:
                raise AnalysisInputError(
                    f"give sweep=: {root!r} holds {len(found)} sweeps: {', '.join(found)}")
            sweep = found[0]
    names = [sweep] if isinstance(sweep, str) else list(sweep)
    if not names:
        raise AnalysisInputError("no sweep given")
    return [_open_sweep(fs, root, name) for name in dict.fromkeys(names)]


def _open_sweep(fs: pafs.FileSystem, root: str, name: str) -> Sweep:
    check_sweep_name(name, "sweep")
    folder = f"{root}/{name}"
    if fs.get_file_info(folder).type != pafs.FileType.Directory:
        found = list_sweeps(fs, root)
        raise AnalysisInputError(
            f"no sweep {name!r} under {root!r}; available sweeps: {', '.join(found) or '(none)'}")
    scan = _scan(fs, folder)
    stamps = {(scan.footers[p].schema.metadata or {}).get(b"sweeper.outcome_rules")
              for p in scan.files["trials"]}
    stamp = stamps.pop().decode() if len(stamps) == 1 and None not in stamps else None
    return Sweep(name, fs, folder, read_manifest(fs, folder, reader=True) or {}, scan.files,
                 superseded=scan.superseded, outcomes_stamp=stamp)


def sweep_files(fs: pafs.FileSystem, folder: str) -> dict[str, list[str]]:
    """Both tables' committed files (full paths), by the store's one commit rule; files that
    cannot be read are skipped with a one-line warning (`sweeper run` moves them aside)."""
    return _scan(fs, folder).files


def _scan(fs: pafs.FileSystem, folder: str):
    scan = scan_folder(fs, folder, trajectories=False)  # those: checked when read
    for path, why in scan.damaged.items():
        warn_damaged(path, why)
    return scan


# ---------------------------------------------------------------- scanning

def _unify(schemas: Sequence[pa.Schema]) -> pa.Schema:
    """Several sweeps' schemas as one (a sweep's own files agree: `sweeper.results`)."""
    try:
        return unified_schema(list(schemas))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise AnalysisInputError(f"the sweeps' files disagree on column types: {exc}") from exc


def _strip(schema: pa.Schema) -> pa.Schema:
    return schema.remove_metadata()


def file_schema(sweep: Sweep, paths: Sequence[str]) -> pa.Schema:
    """The unified schema of some of a sweep's files (reads their footers)."""
    return _unify([_strip(f.physical_schema) for f in sweep.fragments(paths)])


def _with_fields(schema: pa.Schema, wanted: Iterable[pa.Field]) -> pa.Schema:
    """Add fields the files lack: a scan then yields nulls for them instead of failing."""
    for f in wanted:
        if schema.get_field_index(f.name) < 0:
            schema = schema.append(f)
    return schema


def scan(sweep: Sweep, paths: Sequence[str], schema: pa.Schema, columns: Sequence[str] | None,
         filter: pc.Expression | None) -> pa.Table:
    """Read columns of the rows matching filter from some of a sweep's files.

    pyarrow skips row groups whose statistics exclude the filter and reads only the
    projected column chunks.
    """
    cols = list(columns) if columns is not None else schema.names
    if not paths:
        return pa.schema([schema.field(c) for c in cols]).empty_table()
    dataset = ds.FileSystemDataset(sweep.fragments(paths), schema, _FORMAT, sweep.filesystem)
    return dataset.to_table(columns=cols, filter=filter)


def files_for_packs(paths: Sequence[str], packs: set[str] | None) -> list[str]:
    """The files that can hold rows of these packs: their own files and any compacted file."""
    if packs is None:
        return list(paths)
    return [p for p in paths if (pack := pack_of_file(p)) is None or pack in packs]


# ---------------------------------------------------------------- the plan of a load

@dataclass
class _Plan:
    """Where and columns, split by the table they belong to."""
    trial_filter: where_lang.Node | None = None
    trajectory_filter: where_lang.Node | None = None
    trial_columns: list[str] | None = None
    trajectory_columns: list[str] | None = None


def _split_where(text: str | None, trial_names: set[str],
                 trajectory_names) -> tuple[where_lang.Node | None, where_lang.Node | None]:
    """Each top-level `and` term goes to the table holding its columns.

    Terms on trajectory columns select trajectory rows; they do not filter trials.
    """
    if text is None:
        return None, None
    on_trials, on_trajectories = [], []
    for term in where_lang.conjuncts(_short_names_resolved(where_lang.parse(text), trial_names,
                                                           trajectory_names)):
        names = where_lang.names(term)
        if names <= trial_names:
            on_trials.append(term)
            continue
        known = trajectory_names()
        for name in names - trial_names - known:
            raise unknown_column(name, trial_names | known, "where")
        if names & trial_names - {"trial_id"}:
            mixed = ", ".join(sorted(names & trial_names))
            raise AnalysisInputError(
                f"where: one condition mixes trials columns ({mixed}) with trajectories columns "
                f"({', '.join(sorted(names - trial_names))}); join them with 'and' at the top "
                "level, or use an SQL query")
        on_trajectories.append(term)
    return where_lang.join_and(on_trials), where_lang.join_and(on_trajectories)


def _short_names_resolved(node: where_lang.Node, trial_names: set[str],
                          trajectory_names) -> where_lang.Node:
    """Names of neither table resolved as query's --columns are (`heads` -> `model.heads`)."""
    unknown = where_lang.names(node) - trial_names
    if unknown:
        unknown -= trajectory_names()
    if not unknown:
        return node
    available = sorted(trial_names | trajectory_names())
    return where_lang.renamed(node, {n: resolve_column(n, available, "where", "",
                                                       AnalysisInputError) for n in unknown})


def _split_columns(columns: Sequence[str] | None, trial_names: set[str],
                   trajectory_names) -> tuple[list[str] | None, list[str] | None]:
    if columns is None:
        return None, None
    columns = list(dict.fromkeys(columns))
    on_trials = [c for c in columns if c in trial_names]
    rest = [c for c in columns if c not in trial_names]
    known = trajectory_names() if rest else set()
    for name in rest:
        if name not in known:
            raise unknown_column(name, trial_names | known, "columns")
    on_trajectories = [c for c in columns if c in known or c in ("trial_id", "step")]
    return on_trials, on_trajectories


# ---------------------------------------------------------------- results

class Results:
    """The trials (read at once) and trajectories (read on first use) of one or more sweeps.

    `trials` and `trajectories` carry a `sweep` column: the name of the folder each row was
    read from. Use `read_trajectories` to read the trajectories of chosen trials only.
    """

    def __init__(self, sweeps: list[Sweep], trials: pd.DataFrame, packs: pd.DataFrame,
                 plan: _Plan, selected: bool, trial_schema: pa.Schema):
        self.sweeps = sweeps
        self.trials = trials
        self._packs = packs  # sweep, trial_id, pack_id, shared_with of every selected trial
        self._plan = plan
        self._selected = selected  # False: every trial, no need to list ids
        self._trial_schema = trial_schema
        self._trajectory_types: dict[str, pa.DataType] | None = None
        self._trajectories: pd.DataFrame | None = None
        # where it was loaded from (root, sweep names, where, filesystem): `where`, `best`
        self._source: tuple = (None, [s.name for s in sweeps], None, None)

    def __repr__(self) -> str:
        names = ", ".join(repr(s.name) for s in self.sweeps)
        statuses = (self.trials["status"].value_counts().sort_index()
                    if "status" in self.trials.columns else None)
        status = "" if statuses is None or statuses.empty else " (" + ", ".join(
            f"{n} {s}" for s, n in statuses.items()) + ")"
        files = sum(len(s.files["trajectories"]) for s in self.sweeps)
        read = ("read" if self.trajectories_read
                else f"unread, in {count(files, 'file')}")
        from .swept import swept_columns  # (it reads the families' words: loaded late)

        varying = swept_columns(self.trials, self.manifests)
        return (f"<Results of sweep{'s' * (len(self.sweeps) > 1)} {names}: "
                f"{count(len(self.trials), 'trial')}{status}; varying: "
                f"{', '.join(varying) or 'nothing'}; "
                f"trajectories {read}>")

    # -- the commands' questions, asked of what is loaded (one grammar: the same arguments and
    # short names as `sweeper query --where`, `best` and `phase`)
    def where(self, condition: str) -> Results:
        """These sweeps again with `condition` added (`and`) to the filter they were loaded
        with: `res.where("model.heads == 1")`."""
        root, names, where, filesystem = self._source
        both = condition if not where else f"({where}) and ({condition})"
        return load(root, names, where=both, filesystem=filesystem)

    def best(self, metric: str, mode: str | None = None, n: int = 5, by: str | None = None):
        """`sweeper best` over these trials (`analysis.ranking`, as `analysis.best`):
        configurations by their mean over seeds, or trials with `by="trial"`; `metric` may be
        a short name (`accuracy`: final_accuracy)."""
        from sweeper.results.schema import resolve_column

        from .errors import unknown_column
        from .ranking import check_metric, default_mode, lower_is_better, rank
        from .swept import swept_columns

        trials = self.trials
        column = resolve_column(metric, trials.columns, "metric", error=AnalysisInputError)
        if column not in trials.columns:
            raise unknown_column(column, trials.columns, "metric")
        yes_no = check_metric(trials, column, metric)
        lead = ["sweep"] if "sweep" in trials.columns and trials["sweep"].nunique() > 1 else []
        keys = [*lead, *swept_columns(trials, self.manifests)]
        order = [c for c in [*keys, "seed"] if c in trials.columns]  # as `sweeper best` reads
        trials = trials.sort_values(order, kind="stable", na_position="last",
                                    ignore_index=True) if order else trials
        return rank(trials, column, keys, mode=mode or default_mode(column, lower_is_better()),
                    n=n, by=by, yes_no=yes_no)

    def phase(self, x: str, y: str, facet: str | None = None, **kwargs):
        """`sweeper phase` of these trials (`analysis.phase.phase_from_results`; short names
        such as `heads` accepted)."""
        from .phase import phase_from_results

        return phase_from_results(self, x, y, facet, **kwargs)

    @property
    def trajectories_read(self) -> bool:
        """Whether the trajectories have been read (`trajectories` reads them on first use)."""
        return self._trajectories is not None

    @property
    def manifests(self) -> dict[str, dict]:
        return {s.name: s.manifest for s in self.sweeps}

    @property
    def manifest(self) -> dict:
        """The manifest of the one sweep loaded (see `manifests` for several)."""
        if len(self.sweeps) != 1:
            raise AnalysisInputError(
                f"{len(self.sweeps)} sweeps are loaded; use .manifests[name]")
        return self.sweeps[0].manifest

    @property
    def filters_trajectories(self) -> bool:
        """Whether `where` had terms on trajectories columns (they select trajectory rows)."""
        return self._plan.trajectory_filter is not None

    @property
    def trial_columns(self) -> list[str]:
        return sorted(set(self._trial_schema.names) | {"sweep"})

    @property
    def trajectory_columns(self) -> list[str]:
        return sorted(self.trajectory_types()) + ["sweep"]

    def trajectory_types(self) -> dict[str, pa.DataType]:
        """Column types of the trajectories, from the first file of each sweep."""
        if self._trajectory_types is None:
            schemas = [file_schema(s, s.readable(s.files["trajectories"])[:1])
                       for s in self.sweeps]
            unified = _unify([x for x in schemas if len(x)])
            self._trajectory_types = {f.name: f.type for f in unified}
        return self._trajectory_types

    @property
    def trajectories(self) -> pd.DataFrame:
        """The selected trials' trajectories (rows sorted by trial_id, step within a file)."""
        if self._trajectories is None:
            ids = None if not self._selected else self._packs
            self._trajectories = self._read(ids, self._plan.trajectory_columns,
                                            self._plan.trajectory_filter)
        return self._trajectories

    def read_trajectories(self, trial_ids: Iterable[str] | None = None,
                          columns: Sequence[str] | None = None,
                          where: str | None = None) -> pd.DataFrame:
        """Trajectories of some of the loaded trials, reading only the files that hold them."""
        packs = self._packs
        if trial_ids is not None:
            packs = packs[packs["trial_id"].isin(set(_id_list(trial_ids)))]
        elif not self._selected:
            packs = None
        node = where_lang.parse(where) if where is not None else None
        names = set(columns or ()) | (where_lang.names(node) if node is not None else set())
        if names - {"sweep", "trial_id", "step"}:
            types = self.trajectory_types()
            for name in sorted(names - set(types) - {"sweep"}):
                raise unknown_column(name, [*types, "sweep"], "trajectories")
        return self._read(packs, columns, node)

    def _read(self, packs: pd.DataFrame | None, columns: Sequence[str] | None,
              node: where_lang.Node | None) -> pd.DataFrame:
        shared = self._packs if packs is None else packs
        shared = shared[shared["shared_with"].notna()][["sweep", "trial_id", "shared_with"]]
        requested = packs
        if packs is not None and not shared.empty:  # read the trainings they share too
            sources = shared.drop(columns="trial_id").rename(columns={"shared_with": "trial_id"})
            sources = sources.merge(self._packs[["sweep", "trial_id", "pack_id"]], how="left")
            packs = pd.concat([packs, sources], ignore_index=True)
        tables = [self._read_sweep(s, packs, columns, node) for s in self.sweeps]
        frame = to_frame(pa.concat_tables(tables, promote_options="permissive"))
        return _copy_shared(frame, shared, requested)

    def _read_sweep(self, sweep: Sweep, packs: pd.DataFrame | None,
                    columns: Sequence[str] | None, node: where_lang.Node | None) -> pa.Table:
        """One sweep's trajectory rows; when a file listed at `load()` is gone (merged into
        another since, while the sweep runs or at its end), the sweep is listed again."""
        try:
            return self._read_sweep_once(sweep, packs, columns, node)
        except FileNotFoundError:
            scan = _scan(sweep.filesystem, sweep.path)
            sweep.files = {t: list(paths) for t, paths in scan.files.items()}
            sweep._accepted = set()
            return self._read_sweep_once(sweep, packs, columns, node)

    def _read_sweep_once(self, sweep: Sweep, packs: pd.DataFrame | None,
                         columns: Sequence[str] | None,
                         node: where_lang.Node | None) -> pa.Table:
        paths, ids = sweep.files["trajectories"], None
        if packs is not None:
            mine = packs[packs["sweep"] == sweep.name]
            ids = mine["trial_id"].unique().tolist()
            pack_ids = None if mine["pack_id"].isna().any() else set(mine["pack_id"])
            paths = files_for_packs(paths, pack_ids) if ids else []
        paths = sweep.readable(paths)
        types = self.trajectory_types() if (columns is not None or node is not None) else {}
        schema = file_schema(sweep, paths) if paths else pa.schema(
            [pa.field("trial_id", pa.string()), pa.field("step", pa.int32())])
        wanted = ["trial_id", "step", *[c for c in columns or [] if c not in ("trial_id", "step")]]
        schema = _with_fields(schema, [pa.field(c, types.get(c, pa.float64())) for c in wanted
                                       if c != "sweep"])
        expr = _and(where_lang.to_expression(node, {f.name: f.type for f in schema})
                    if node is not None else None,
                    _isin("trial_id", ids) if ids is not None else None)
        cols = None if columns is None else [c for c in wanted if c != "sweep"]
        table = scan(sweep, paths, schema, cols, expr)
        return _add_sweep(table, sweep.name)


def _copy_shared(frame: pd.DataFrame, shared: pd.DataFrame,
                 requested: pd.DataFrame | None) -> pd.DataFrame:
    """The trajectories of trials that share another's training (`shared_with`: stored once,
    under the trial that trained) as rows of their own; a training read only for them is left
    out again."""
    if shared.empty or frame.empty:
        return frame
    copies = shared.rename(columns={"trial_id": "_as", "shared_with": "trial_id"})
    copies = copies.merge(frame, on=["sweep", "trial_id"])
    copies["trial_id"] = copies.pop("_as")
    out = pd.concat([frame, copies[frame.columns]], ignore_index=True)
    if requested is not None:
        keys = ["sweep", "trial_id"]  # vectorised: a trajectory table has millions of rows
        out = out[pd.MultiIndex.from_frame(out[keys]).isin(
            pd.MultiIndex.from_frame(requested[keys]))]
    return out.sort_values(["sweep", "trial_id", "step"], kind="stable").reset_index(drop=True)


def _id_list(trial_ids: Iterable[str] | str) -> list[str]:
    """Trial ids as a list; one id given as a plain string is one id, not 16 characters."""
    return [trial_ids] if isinstance(trial_ids, str) else [str(i) for i in trial_ids]


def _and(a: pc.Expression | None, b: pc.Expression | None) -> pc.Expression | None:
    if a is None:
        return b
    return a if b is None else a & b


def _isin(column: str, values: Sequence[str]) -> pc.Expression:
    return pc.field(column).isin(pa.array(list(values), pa.string()))


def _add_sweep(table: pa.Table, name: str) -> pa.Table:
    """Set the `sweep` column to the folder's name (the key shared by both tables)."""
    column = pa.array([name] * table.num_rows, pa.string())
    if "sweep" in table.column_names:
        return table.set_column(table.column_names.index("sweep"), "sweep", column)
    return table.add_column(0, "sweep", column)


# ---------------------------------------------------------------- load

@python_arguments
def load(results: str | os.PathLike, sweep: str | Sequence[str] | None = None, *,
         where: str | None = None, columns: Sequence[str] | None = None,
         trial_ids: Iterable[str] | None = None,
         filesystem: pafs.FileSystem | None = None) -> Results:
    """Load one or more sweeps from a results root (a local path or a pyarrow.fs URI).

    where: a condition such as ``'model.heads == 1 and task.hardness > 0.5'`` (see
    `analysis.where`). Top-level `and` terms on trials columns select trials; terms on
    trajectories columns (``'step >= 100'``) select trajectory rows. columns: the columns to
    read, from either table (trial_id, sweep and step always come along). trial_ids: read only
    these trials. Unknown columns raise AnalysisInputError listing the available ones.
    A file a merge replaced that is deleted while this reads (a running sweep's merges, the
    run's end) makes it list the sweeps again, once.
    """
    if trial_ids is not None and not isinstance(trial_ids, (str, bytes)):
        trial_ids = list(trial_ids)  # read twice if it must list again
    try:
        return _load(results, sweep, where, columns, trial_ids, filesystem)
    except FileNotFoundError:
        return _load(results, sweep, where, columns, trial_ids, filesystem)


def _load(results, sweep, where, columns, trial_ids, filesystem) -> Results:
    sweeps = open_sweeps(results, sweep, filesystem)
    trial_schema = _unify([file_schema(s, s.files["trials"]) for s in sweeps])
    trial_names = set(trial_schema.names) | {"sweep"}
    trajectory_names = _lazy_names(sweeps)
    plan = _Plan()
    plan.trial_filter, plan.trajectory_filter = _split_where(where, trial_names, trajectory_names)
    plan.trial_columns, plan.trajectory_columns = _split_columns(columns, trial_names,
                                                                 trajectory_names)
    ids = None if trial_ids is None else sorted(set(_id_list(trial_ids)))
    trials, packs = _read_trials(sweeps, trial_schema, plan, ids)
    selected = plan.trial_filter is not None or ids is not None
    out = Results(sweeps, trials, packs, plan, selected, trial_schema)
    out._source = (results, [s.name for s in sweeps], where, filesystem)
    return out


def _lazy_names(sweeps: list[Sweep]):
    """A function giving the trajectories' column names, reading footers only if called."""
    cache: list[set[str]] = []

    def names() -> set[str]:
        if not cache:
            schemas = [file_schema(s, s.readable(s.files["trajectories"])[:1]) for s in sweeps]
            cache.append(set().union(*(x.names for x in schemas)) | {"sweep"})
        return cache[0]
    return names


def _read_trials(sweeps: list[Sweep], schema: pa.Schema, plan: _Plan,
                 ids: list[str] | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    types = {f.name: f.type for f in schema}
    node = plan.trial_filter
    expr = _and(where_lang.to_expression(node, types) if node is not None else None,
                _isin("trial_id", ids) if ids is not None else None)
    if len(schema) == 0:
        empty = pd.DataFrame({"sweep": pd.Series(dtype=str), "trial_id": pd.Series(dtype=str)})
        return empty, empty.assign(pack_id=pd.Series(dtype=str), shared_with=pd.Series(dtype=str))
    wanted = plan.trial_columns
    internal = [c for c in ("trial_id", "pack_id", "shared_with") if c in types]
    cols = None if wanted is None else list(dict.fromkeys(
        [*internal, *[c for c in wanted if c in types]]))
    tables = [_add_sweep(scan(s, s.files["trials"], schema, cols,
                              _and(expr, without_superseded(s.superseded))), s.name)
              for s in sweeps]
    frame = _dedupe(to_frame(current_names(pa.concat_tables(tables,
                                                            promote_options="permissive"))))
    for column in ("pack_id", "shared_with"):  # shared_with: absent in older stores
        if column not in frame:
            frame[column] = pd.Series(pd.NA, index=frame.index, dtype="str")
    packs = frame[["sweep", "trial_id", "pack_id", "shared_with"]]
    if wanted is not None:
        keep = ["sweep", "trial_id", *[c for c in wanted if c not in ("sweep", "trial_id")]]
        frame = frame[keep]
    return frame.reset_index(drop=True), packs.reset_index(drop=True)


def _dedupe(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep one row per (sweep, trial_id): the store promises it, phase counts rely on it."""
    dup = frame.duplicated(["sweep", "trial_id"])
    if dup.any():
        warnings.warn(f"{int(dup.sum())} trial rows are stored more than once; keeping the first",
                      stacklevel=3)
        frame = frame[~dup]
    return frame

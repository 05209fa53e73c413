"""SQL over a sweep through DuckDB, filtered queries through `load`, and output formats.

DuckDB sees two views, `trials` and `trajectories`, over the sweep's committed Parquet files
(the store's commit rule, `sweeper.results.committed_files`: never a glob, so a crash in a
compaction or a pack half written is never counted): ``read_parquet`` over the explicit file
list for local folders, pyarrow datasets (scanned with pushdown) for other filesystems such as
S3, so no DuckDB extension has to be downloaded. Dotted column names
need double quotes in SQL: ``SELECT "model.heads", avg(learned::INT) FROM trials GROUP BY 1``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from sweeper.results.errors import python_arguments
from sweeper.results.reading import to_frame
from sweeper.results.schema import resolve_column
from sweeper.results.store import without_superseded

from .errors import AnalysisInputError
from .load import Sweep, file_schema, load, open_sweeps
from .swept import swept_columns

FORMATS = ("table", "csv", "json")
_EMPTY = {"trials": "SELECT NULL::VARCHAR AS sweep, NULL::VARCHAR AS trial_id WHERE false",
          "trajectories": "SELECT NULL::VARCHAR AS trial_id, NULL::INTEGER AS step WHERE false"}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _source(con: duckdb.DuckDBPyConnection, sweep: Sweep, table: str) -> str | None:
    """A FROM clause over one table of one sweep, or None when it has no files."""
    files = sweep.files[table] if table == "trials" else sweep.readable(sweep.files[table])
    if not files:
        return None
    superseded = sweep.superseded if table == "trials" else frozenset()
    if isinstance(sweep.filesystem, pafs.LocalFileSystem):
        listed = ", ".join(_quote(f) for f in files)
        source = f"read_parquet([{listed}], union_by_name = true)"
        if superseded:  # failed rows of trials a later attempt stored (sweeper.results)
            ids = ", ".join(_quote(i) for i in sorted(superseded))
            source = (f"(SELECT * FROM {source} WHERE NOT (status = 'failed' AND trial_id IN "
                      f"({ids})))")
        return source
    name = f"_arrow_{table}_{len(con.execute('SHOW TABLES').fetchall())}"
    dataset = ds.FileSystemDataset(sweep.fragments(files), file_schema(sweep, files),
                                   ds.ParquetFileFormat(), sweep.filesystem)
    gone = without_superseded(superseded)
    con.register(name, dataset if gone is None else dataset.filter(gone))
    return name


def _with_shared(stored: str, by_sweep: bool) -> str:
    """The stored trajectories plus, for each trial that shares an equivalent trial's training
    (`shared_with`), that training's rows under its own trial id (stored once, read as its)."""
    same_sweep = " AND t.sweep = s.sweep" if by_sweep else ""
    return (f"SELECT * FROM {stored} UNION ALL BY NAME "
            f"SELECT t.* REPLACE (s.trial_id AS trial_id) FROM {stored} AS t "
            f"JOIN (SELECT sweep, trial_id, shared_with FROM trials "
            f"WHERE shared_with IS NOT NULL) AS s ON t.trial_id = s.shared_with{same_sweep}")


def connect(results: str | os.PathLike, sweep: str | Sequence[str] | None = None, *,
            filesystem: pafs.FileSystem | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with views `trials` and `trajectories`.

    With several sweeps, `trajectories` gets a `sweep` column (trials already have one).
    """
    sweeps = open_sweeps(results, sweep, filesystem)
    con = duckdb.connect()
    for table in ("trials", "trajectories"):
        parts = []
        for s in sweeps:
            source = _source(con, s, table)
            if source is None:
                continue
            label = f"{_quote(s.name)} AS sweep, " if table == "trajectories" and len(
                sweeps) > 1 else ""
            parts.append(f"SELECT {label}* FROM {source}")
        body = " UNION ALL BY NAME ".join(parts) if parts else _EMPTY[table]
        if table == "trajectories" and "shared_with" in _columns(con, "trials"):
            con.execute(f"CREATE VIEW _stored_trajectories AS {body}")
            body = _with_shared("_stored_trajectories", len(sweeps) > 1)
        con.execute(f"CREATE VIEW {table} AS {body}")
    _lock_down(con, [s.path for s in sweeps if isinstance(s.filesystem, pafs.LocalFileSystem)])
    return con


def _lock_down(con: duckdb.DuckDBPyConnection, folders: Sequence[str]) -> None:
    """Queries may read the sweeps' folders and nothing else, and write no file (no COPY TO,
    no read_csv('/etc/...')); the settings are then locked against SET."""
    listing = ", ".join(_quote(f.rstrip("/") + "/") for f in folders)
    con.execute(f"SET allowed_directories = [{listing}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _arrow(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    """The result as an Arrow table (the method's name changed in DuckDB 1.4)."""
    if hasattr(relation, "to_arrow_table"):
        return relation.to_arrow_table()
    return relation.arrow()


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]


@python_arguments
def sql(results: str | os.PathLike, query: str, sweep: str | Sequence[str] | None = None, *,
        filesystem: pafs.FileSystem | None = None) -> pd.DataFrame:
    """Run one SQL query over the views; a bad query raises a one-line AnalysisInputError."""
    con = connect(results, sweep, filesystem=filesystem)
    try:
        relation = con.sql(query)
        return pd.DataFrame() if relation is None else to_frame(_arrow(relation))
    except duckdb.Error as exc:
        raise _sql_error(con, exc) from exc
    finally:
        con.close()


def _sql_error(con: duckdb.DuckDBPyConnection, exc: duckdb.Error) -> AnalysisInputError:
    first = " ".join(str(exc).split("\n")[0].split())
    listing = "; ".join(f"{t}: {', '.join(_columns(con, t))}" for t in ("trials", "trajectories"))
    return AnalysisInputError(
        f"SQL error: {first}; tables trials and trajectories (quote dotted names, "
        f'"model.heads"); available columns: {listing}')


DEFAULT = "default"  # query_frame's columns: what `sweeper query` prints without --columns
FINAL_METRICS = ("final_loss", "final_accuracy")  # and the final value of the outcome's metric


@python_arguments
def query_frame(results: str | os.PathLike, sweep: str | Sequence[str] | None = None, *,
                where: str | None = None, columns: Sequence[str] | str | None = None,
                table: str = "trials", limit: int | None = None, only: bool = False,
                filesystem: pafs.FileSystem | None = None) -> pd.DataFrame:
    """Rows of one table, filtered by a where string and projected to columns, sorted by the
    sweep's swept columns and the seed.

    columns: None, every column; a list, the swept columns (so that a row names its cell) then
    those (short names resolved: `heads` is model.heads), and the trial id (and, for
    trajectories, the step) that name the row; `only`: exactly those, no swept columns;
    DEFAULT, for the trials table, the swept columns, seed, status, the family's outcome and
    its step, a few final metrics (`default_columns`), and the trial id (every column of the
    trajectories). For table='trajectories', columns may also name trials columns
    (model.heads): they are joined onto each trajectory row.
    """
    if table not in ("trials", "trajectories"):
        raise AnalysisInputError(f"unknown table {table!r}; allowed: trials, trajectories")
    if isinstance(columns, str):
        if columns != DEFAULT:
            raise AnalysisInputError(f"columns: got {columns!r}; allowed: a list of column "
                                     f"names, {DEFAULT!r} or None (every column)")
        columns = None if table == "trajectories" else default_columns(
            load(results, sweep, filesystem=filesystem))
    asked = None
    if columns is not None:
        asked, columns = _with_context(results, sweep, columns, table, filesystem)
    res = load(results, sweep, where=where, columns=columns, filesystem=filesystem)
    whole = res if where is None else load(results, sweep, columns=[
        c for c in res.trial_columns if c.startswith(CONFIG_GROUPS)], filesystem=filesystem)
    varying = set(_swept(whole.trials, whole.manifests))
    swept = [c for c in res.trials.columns if c in varying]  # in the store's column order
    if table == "trials":
        if res.filters_trajectories:
            raise AnalysisInputError(
                "where names trajectories columns: query them with table 'trajectories'")
        wanted_traj = [c for c in columns or () if c not in res.trial_columns]
        if wanted_traj:
            raise AnalysisInputError(
                f"{', '.join(wanted_traj)}: trajectories columns; query table 'trajectories'")
        frame = _in_context(res.trials, swept, asked, only=only)
    else:
        frame = _in_context(_trajectories_with(res, columns), swept, asked, ["step"], only)
    return frame.head(limit) if limit is not None else frame


CONFIG_GROUPS = ("task.", "model.", "train.")


def _with_context(results, sweep, columns: Sequence[str], table: str,
                  filesystem, field: str = "--columns") -> tuple[list[str], list[str]]:
    """The wanted columns with unprefixed names resolved (`heads` -> `model.heads`), and what
    to read: those, the seed and every config column, so that the swept ones can be shown
    (`_in_context` drops the rest)."""
    sweeps = open_sweeps(results, sweep, filesystem)
    names = [n for s in sweeps for n in file_schema(s, s.files["trials"]).names]
    if table == "trajectories":
        names += [n for s in sweeps if s.readable(s.files["trajectories"])
                  for n in file_schema(s, s.readable(s.files["trajectories"])).names]
    available = list(dict.fromkeys(names))
    resolved = [_resolve(c, available, table, field) for c in columns]
    config = [c for c in available if c.startswith(CONFIG_GROUPS) and c not in resolved]
    return resolved, list(dict.fromkeys([*resolved, "seed", *config]))


def _resolve(name: str, available: Sequence[str], table: str, field: str = "--columns") -> str:
    every_step = (" (or query table 'trajectories' for every logged step)"
                  if table == "trials" else "")
    return resolve_column(name, available, field, every_step, AnalysisInputError)


def default_columns(res) -> list[str]:
    """What `sweeper query` shows of a trial unless told: the swept columns (not the ones a
    family derives from them), seed, status, `shared_with` where some trial shares an
    equivalent one's training (so that two identical rows are not read as two seeds), the
    outcome the sweep's family draws and its step, and the final loss, accuracy and outcome
    metric."""
    from .outcomes import outcome_rules
    from .phase import default_outcome

    trials = res.trials
    outcome = default_outcome(res)
    rule = next((r for r in outcome_rules(trials) if r.column == outcome), None)
    shared = ("shared_with" in trials.columns  # a marker where trials share a training
              and trials["shared_with"].notna().any())
    wanted = [*_swept(trials, res.manifests), "seed", "status",
              *(["shared_with"] if shared else []), outcome,
              *([rule.steps, *FINAL_METRICS, f"final_{rule.metric}"] if rule else FINAL_METRICS)]
    return [c for c in dict.fromkeys(wanted) if c and c in trials.columns]


def sweep_manifests(results, sweep, filesystem=None) -> dict[str, dict]:
    """The manifests of the sweeps named (as `load` opens them), without reading a table."""
    return {s.name: s.manifest for s in open_sweeps(results, sweep, filesystem)}


def _swept(trials: pd.DataFrame, manifests: Mapping[str, Mapping] | None = None) -> list[str]:
    """The sweep's axes as stored (`analysis.swept.swept_columns`: not the columns derived from
    them)."""
    return swept_columns(trials, manifests)


def _in_context(frame: pd.DataFrame, swept: Sequence[str], asked: Sequence[str] | None,
                then: Sequence[str] = (), only: bool = False) -> pd.DataFrame:
    """Rows sorted by the swept config columns (`_swept`) and the seed; when columns were
    chosen, the swept ones (unless `only`), those, and what names a row: the trial id after
    them (a trajectory row: the trial id and `then`, the step, before them), the sweep first
    when rows come from several."""
    swept = [c for c in swept if c in frame.columns]
    order = [c for c in ["sweep", *swept, "seed", *then] if c in frame.columns]
    if order and len(frame):
        frame = frame.sort_values(order, kind="stable", na_position="last",
                                  ignore_index=True)
    if asked is None:
        return frame
    lead = ["sweep"] if "sweep" in frame.columns and frame["sweep"].nunique() > 1 else []
    asked = list(asked) if only else [*swept, *asked]
    shown = [*lead, "trial_id", *then, *asked] if then else [*lead, *asked, "trial_id"]
    return frame[[c for c in dict.fromkeys(shown) if c in frame.columns]]


def _trajectories_with(res, columns: Sequence[str] | None) -> pd.DataFrame:
    frame = res.trajectories
    if columns is None:
        return frame
    trial_cols = [c for c in columns if c in res.trials.columns and c not in frame.columns]
    if trial_cols:
        frame = frame.merge(res.trials[["sweep", "trial_id", *trial_cols]],
                            on=["sweep", "trial_id"], how="left")
    order = ["sweep", "trial_id", "step", *[c for c in columns if c not in (
        "sweep", "trial_id", "step")]]
    return frame[[c for c in dict.fromkeys(order) if c in frame.columns]]


# ---------------------------------------------------------------- output

def _plain(value: object) -> object:
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def format_frame(frame: pd.DataFrame, fmt: str = "table") -> str:
    """The rows as an aligned text table, CSV, or a JSON list of records (nulls as null)."""
    if fmt not in FORMATS:
        raise AnalysisInputError(f"unknown format {fmt!r}; allowed: {', '.join(FORMATS)}")
    lists = [c for c in frame.columns if frame[c].dtype == object]
    if lists:
        frame = frame.assign(**{c: frame[c].map(_plain) for c in lists})
    if fmt == "json":
        return frame.to_json(orient="records") + "\n"
    if fmt == "csv":
        return frame.to_csv(index=False)
    if frame.empty:
        return f"(no rows; columns: {', '.join(map(str, frame.columns))})\n"
    return frame.to_string(index=False) + "\n"

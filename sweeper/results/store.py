"""The store: one folder per sweep under a results root, behind one small interface.

The contract (every backend keeps it; `tests/test_store_contract.py` checks each one):

- Layout and commit rule: `sweeper.results.layout`. A pack is written as two files named by
  its pack id: its trajectories first, then its trials file, which commits it
  (`committed_files`). A reader never counts a trajectories file without its trials file.
- Files are immutable and written whole: a temporary name then a rename on local disks, a
  single put on object stores. A reader never sees half a file.
- A trial id is stored at most once: `write_pack` is called by one writer per sweep (the
  driver's `Recorder`), which skips ids already stored.
- Merges (`merge_tiers` beside readers, by the writer as it writes; `compact()` under the
  lease) write a merged pair whose trials file names the files it replaces in its metadata, so
  a crash in the middle loses and doubles no row; `merge_tiers` leaves the inputs a grace
  period for readers that listed them, `recover()` and `compact()` delete them at once.
  `recover()` also deletes orphaned trajectories and temporary files, and moves damaged and
  foreign files (`conformance`) to the sweep's `quarantine/`.
- Every file carries `sweeper.schema_version` (the tables' version) and `sweeper.provenance`
  (package versions, host, time, git commit and dirty flag) in its Parquet metadata.

Backends: `FileStore` (a local path or any pyarrow.fs URI: s3://bucket/prefix?...) and
`MemoryStore` (the same code over an in-memory filesystem, for tests). `Store.open(uri)`
picks one: "memory://NAME" is a process-wide in-memory root.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sweeper.results.conformance import Footer, foreign_files, read_as
from sweeper.results.errors import ResultsInputError, ResultsWriteError, shown
from sweeper.results.files import NOTHING_WRITTEN, could_not_write
from sweeper.results.layout import (
    COMPACT_PREFIX,
    TABLES,
    TEMP_PREFIX,
    check_sweep_name,
    committed_files,
    is_part,
    pack_id,
    part_name,
)
from sweeper.results.memfs import memory_filesystem
from sweeper.results.provenance import provenance
from sweeper.results.reading import (
    MANIFEST_FILE,
    QUARANTINE,
    current_names,
    list_folder,
    list_sweeps,
    open_uri,
    part_files,
    read_manifest,
    read_replaces,
    replaces,
    warn,
    warn_damaged,
)
from sweeper.results.records import Record, trajectories_table, trials_table
from sweeper.results.roots import check_results_root
from sweeper.results.schema import RUN_FIELDS, TABLE_SCHEMA_VERSION

PACKS_KEY = b"sweeper.packs"  # a merged trials file's metadata: the packs whose rows it holds
STAMP_KEY = b"sweeper.outcome_rules"  # a trials file's: what its outcomes were derived by


def _outcomes_stamp(records: Sequence[Record]) -> str | None:
    """The stamp (`rules_stamp`) of the rules these records' outcomes were derived by (their
    family's: `Record.outcome_rules`); None when they do not say."""
    from sweeper.results.outcomes import rules_stamp

    rules = getattr(records[0], "outcome_rules", None) if records else None
    return rules_stamp(rules) if rules else None

MERGE_FANOUT = 8  # files of one size class merged at a time
MERGE_MAX_ROWS = 500_000  # the most rows one merge reads: what bounds its memory
MERGE_GRACE_S = 60.0  # how long a merge's inputs stay for readers that listed them


STORE_KEPT = ("what was stored before is kept: fix the cause and run the same command again "
              "(it trains only what is missing)")


@dataclass
class FolderScan:
    """A sweep folder's committed files by the commit rule, and the files that cannot be read
    (a truncated, empty or foreign `part-*.parquet`: path -> why). A damaged file never counts:
    a damaged trials file leaves its pack uncommitted; a damaged trajectories file takes its
    trials file out with it, so that the pack is trained again rather than half stored."""

    files: dict[str, list[str]]
    damaged: dict[str, str]
    # trial ids whose `failed` rows a later attempt replaces (`write_pack(supersedes=...)`):
    # readers skip those rows; compaction drops them
    superseded: frozenset[str] = frozenset()
    # per table whose footers were read: the schema its committed files are read under
    schemas: dict[str, pa.Schema] = field(default_factory=dict)
    # per committed trials file (name): the packs whose rows it holds (itself for a pack's
    # file; what a merged file's metadata says: `pack_names`), which a cell summary covers
    packs: dict[str, frozenset[str]] = field(default_factory=dict)
    # per committed file (path): its footer (rows, metadata), for the store's merges
    footers: dict[str, Footer] = field(default_factory=dict)


def scan_folder(fs: pafs.FileSystem, folder: str, checked: dict[str, Footer] | None = None,
                trajectories: bool = True) -> FolderScan:
    """`_scan_folder`, listed again when a file listed is gone before its footer is read (a
    merge's input deleted meanwhile: the listing that follows holds what replaced it)."""
    for attempt in range(3):
        try:
            return _scan_folder(fs, folder, checked, trajectories)
        except FileNotFoundError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _scan_folder(fs: pafs.FileSystem, folder: str, checked: dict[str, Footer] | None = None,
                 trajectories: bool = True) -> FolderScan:
    """Apply the commit rule to a sweep folder, reading each trials file's footer (its schema,
    and metadata that says what a compacted file replaces) and each committed trajectories
    file's (`conforming`). Files are immutable, so `checked` remembers what was read: a store
    scans its folder many times a run and reads each footer once. The one implementation, for
    the store and for `analysis`, which passes trajectories=False and checks a trajectories
    file when it reads it (`conforming` again): an analysis of one trial reads one file."""
    checked = {} if checked is None else checked
    names = {t: part_files(fs, f"{folder}/{t}") for t in TABLES}
    _forget_gone(checked, folder, names)
    damaged: dict[str, str] = {}
    trials = conforming(fs, {f"{folder}/trials/{n}": size for n, size in names["trials"].items()},
                        "trials", checked, damaged)
    metadata = {path.rsplit("/", 1)[1]: footer.schema.metadata or {}
                for path, footer in trials.items()}
    chosen = committed_files({"trials": set(metadata), "trajectories": set(names["trajectories"])},
                             lambda n: replaces(metadata[n]))
    paths = {f"{folder}/trajectories/{n}": names["trajectories"][n]
             for n in chosen["trajectories"]}
    footers = {"trials": trials}
    if trajectories:
        footers["trajectories"] = conforming(fs, paths, "trajectories", checked, damaged)
    lost = {p.rsplit("/", 1)[1] for p in paths if p in damaged}
    kept = {t: [f"{folder}/{t}/{n}" for n in chosen[t] if n not in lost] for t in TABLES}
    superseded = frozenset(i for n in chosen["trials"] if n not in lost
                           for i in json.loads(metadata[n].get(b"sweeper.supersedes", b"[]")))
    schemas = {t: read_as(found[p] for p in kept[t]) for t, found in footers.items()}
    packs = {n: pack_names(n, metadata[n]) for n in chosen["trials"] if n not in lost}
    return FolderScan(kept, damaged, superseded, schemas, packs,
                      {p: f for found in footers.values() for p, f in found.items()})


def _forget_gone(checked: dict[str, Footer], folder: str,
                 names: Mapping[str, Mapping[str, int]]) -> None:
    """Drop the footers kept of this folder's files that are gone (merged, quarantined): a
    long run's cache holds what is on disk, not every file it ever saw."""
    here = {f"{folder}/{t}/{n}:{size}" for t, files in names.items() for n, size in files.items()}
    for key in [k for k in checked if k.startswith(f"{folder}/") and k not in here]:
        del checked[key]


def pack_names(name: str, metadata: Mapping[bytes, bytes]) -> frozenset[str]:
    """The packs (their files' names) whose rows a trials file holds: its own name for a
    pack's file, for a merged one the names its metadata lists (every pack merged into it,
    through merges of merges); a file merged before that was recorded holds itself."""
    listed = metadata.get(PACKS_KEY)
    return frozenset(json.loads(listed)) if listed else frozenset((name,))


def conforming(fs: pafs.FileSystem, files: Mapping[str, int | None], table: str,
               checked: dict[str, Footer], damaged: dict[str, str],
               read_schema: Callable[[str], pa.Schema] | None = None) -> dict[str, Footer]:
    """The footers of those of `files` (path -> size) that are whole Parquet files of the
    table's schema (`conformance.foreign_files`); the others go to `damaged` (path -> why).
    Each footer is read once (`read_schema`, default pyarrow's metadata, with the file's rows)
    and kept in `checked` under its path and size (a retried pack may write its file again)."""
    footers: dict[str, Footer] = {}
    for path, size in files.items():
        key = f"{path}:{size}"
        if key not in checked:
            try:
                if read_schema is not None:
                    checked[key] = Footer.of(read_schema(path))
                else:
                    meta = pq.read_metadata(path, filesystem=fs)
                    checked[key] = Footer.of(meta.schema.to_arrow_schema(), meta.num_rows)
            except FileNotFoundError:
                raise  # listed, then gone (a merge's input deleted): the caller lists again
            except (pa.ArrowException, OSError, ValueError) as exc:
                damaged[path] = _why(exc)
                continue
        footers[path] = checked[key]
    foreign = foreign_files(footers, table)
    damaged.update(foreign)
    return {path: footer for path, footer in footers.items() if path not in foreign}


def without_superseded(superseded: frozenset[str]) -> ds.Expression | None:
    """A filter on trials rows: the `failed` rows of trials a later attempt stored are gone."""
    if not superseded:
        return None
    gone = (ds.field("status") == "failed") & ds.field("trial_id").isin(sorted(superseded))
    return ~gone


def _why(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:160] if text else type(exc).__name__


def _with_metadata(table: pa.Table, extra: dict[str, str] | None = None) -> pa.Table:
    meta = {b"sweeper.schema_version": str(TABLE_SCHEMA_VERSION).encode(),
            b"sweeper.provenance": json.dumps(provenance()).encode()}
    for k, v in (extra or {}).items():
        meta[f"sweeper.{k}".encode()] = v.encode()
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})


def s3_client(uri: str):
    """A boto3 S3 client for a results URI (endpoint, scheme and region from its query;
    credentials from the environment), or None without boto3."""
    from urllib.parse import parse_qs, urlsplit

    try:
        import boto3
    except ImportError:  # pragma: no cover
        return None
    from botocore.config import Config

    from sweeper.results.reading import _timeout_from_environment

    query = {k: v[-1] for k, v in parse_qs(urlsplit(uri).query).items()}
    endpoint = query.get("endpoint_override")
    if endpoint and "://" not in endpoint:
        endpoint = f"{query.get('scheme', 'https')}://{endpoint}"
    timeout = _timeout_from_environment()  # every call with a deadline (`open_uri`)
    return boto3.client("s3", endpoint_url=endpoint, region_name=query.get("region"),
                        config=Config(connect_timeout=timeout / 3,
                                      read_timeout=timeout / 3,
                                      retries={"max_attempts": 2, "mode": "standard"}))


def _s3_put(uri: str):
    """A single PutObject per file: the object appears whole or not at all.

    pyarrow's S3 output stream uploads in parts (CreateMultipartUpload, UploadPart, Complete),
    which some S3 servers reject for small files; one put is simpler and atomic. Endpoint,
    scheme and region come from the URI's query, credentials from the environment (boto3's
    default chain), never from a sweep file. Without boto3, pyarrow's stream is used.
    """
    client = s3_client(uri)
    if client is None:  # pragma: no cover
        return None

    from botocore.exceptions import BotoCoreError, ClientError

    def put(path: str, data: bytes) -> None:
        bucket, _, key = path.partition("/")
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data)
        except (BotoCoreError, ClientError) as exc:
            raise OSError(str(exc)) from exc  # Store._put: a ResultsWriteError

    return put


# -- the store -----------------------------------------------------------------------------
@dataclass
class Store:
    """A results root: `Store.open("./results")`, `Store.open("s3://bucket/prefix")`.

    The interface every backend offers (the contract is this module's docstring): write_pack,
    write_manifest / read_manifest, files (committed, by `committed_files`), read / dataset,
    stored_ids, status_counts, recover, compact, sweeps.
    """

    fs: pafs.FileSystem
    root: str
    uri: str

    put_object: Any = field(default=None, repr=False)  # S3: one PutObject per file
    # files whose footers were read (files are immutable: once is enough), damaged files warned of
    _checked: dict[str, Footer] = field(default_factory=dict, repr=False, compare=False)
    _warned: set[str] = field(default_factory=set, repr=False, compare=False)

    def __getstate__(self) -> dict:
        """Picklable (Ray Tune pickles its callbacks): the S3 client is rebuilt on arrival."""
        return {**self.__dict__, "put_object": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.uri.startswith("s3://"):
            self.put_object = _s3_put(self.uri)

    @staticmethod
    def open(uri: str | os.PathLike) -> Store:
        """The backend for a results root: MemoryStore for memory://NAME, else FileStore (a
        pathlib.Path is a local path, as in sweeper.run(results=tmp_path))."""
        if isinstance(uri, os.PathLike):
            uri = os.fspath(uri)
        check_results_root(uri, in_process=True)
        if uri.startswith("memory://"):
            return MemoryStore.named(uri)
        return FileStore.at(uri)

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def renames_atomically(self) -> bool:
        """Whether a temporary file moved into place appears whole (local disks, memory); on
        object stores a single put does that instead."""
        return self.is_local

    @property
    def in_process(self) -> bool:
        """Whether only this process can reach the store (memory://): no child works on it."""
        return False

    def path(self, sweep: str, *parts: str) -> str:
        return "/".join([self.root, check_sweep_name(sweep), *parts])

    # writing -------------------------------------------------------------------------------
    def _put(self, path: str, data: bytes | Callable[[Any], None]) -> None:
        """Write a whole file: temp name + rename locally, a single put on object stores.
        A write that fails leaves no temp file and raises ResultsWriteError. `data`: the
        bytes, or where a rename commits, a function that writes them to a stream."""
        parent = path.rsplit("/", 1)[0]
        tmp = None
        try:
            if self.put_object is not None:
                self.put_object(path, data)
                return
            self.fs.create_dir(parent, recursive=True)
            if self.renames_atomically:
                tmp = f"{parent}/{TEMP_PREFIX}{uuid.uuid4().hex}"
                with self.fs.open_output_stream(tmp) as f:
                    data(f) if callable(data) else f.write(data)
                self.fs.move(tmp, path)
            else:
                with self.fs.open_output_stream(path) as f:
                    f.write(data)
        except (OSError, pa.ArrowException) as exc:
            if tmp is not None:
                with contextlib.suppress(OSError, pa.ArrowException):
                    self.fs.delete_file(tmp)
            raise could_not_write(path, exc, STORE_KEPT) from exc

    def _put_table(self, path: str, table: pa.Table, extra: dict[str, str] | None = None,
                   row_group_size: int | None = None) -> None:
        """A Parquet file written whole (`_put`): straight into its temporary file where a
        rename commits it (a merge's file is never held twice in memory), else as the bytes
        of one put."""
        table = _with_metadata(table, extra)
        if self.put_object is None and self.renames_atomically:
            self._put(path, lambda stream: pq.write_table(table, stream,
                                                          row_group_size=row_group_size))
            return
        buf = io.BytesIO()
        pq.write_table(table, buf, row_group_size=row_group_size)
        self._put(path, buf.getvalue())

    def write_pack(self, sweep: str, records: Sequence[Record], attempts: int = 1,
                   node_id: str | None = None, supersedes: Sequence[str] = ()) -> str:
        """Store one pack's trials: trajectories first, then the trials file that commits them.

        supersedes: ids of these trials stored before as `failed` (a later run retried them):
        named in the trials file's metadata, their failed rows stop counting once it commits.
        """
        pack = pack_id(r.trial_id for r in records)
        if part_name(pack) in self.taken_names(sweep):  # a retried pack: a name of its own
            pack = pack_id([*(r.trial_id for r in records), uuid.uuid4().hex])
        extra = {"supersedes": json.dumps(sorted(supersedes))} if supersedes else {}
        stamp = _outcomes_stamp(records)
        if stamp is not None:
            extra["outcome_rules"] = stamp
        self._put_pair(sweep, part_name(pack), trajectories_table(records),
                       trials_table(records, sweep, pack, attempts, node_id), extra or None)
        return pack

    def _put_pair(self, sweep: str, name: str, trajectories: pa.Table, trials: pa.Table,
                  extra: dict[str, str] | None, trajectories_extra: dict[str, str] | None = None,
                  row_group_size: int | None = None) -> None:
        """Two files of one name by the commit rule: the trajectories, then the trials file
        that commits them. When the trials file cannot be written, the trajectories file just
        written goes too, unless a trials file of that name commits it (a retried pack), so a
        failed write leaves nothing it made (an orphan would never count; recovery would
        delete it)."""
        written = self.path(sweep, "trajectories", name)
        self._put_table(written, trajectories, trajectories_extra, row_group_size)
        try:
            self._put_table(self.path(sweep, "trials", name), trials, extra)
        except ResultsWriteError:
            with contextlib.suppress(OSError, pa.ArrowException):
                if self.fs.get_file_info(self.path(sweep, "trials", name)).type \
                        != pafs.FileType.File:
                    self.fs.delete_file(written)
            raise

    def write_manifest(self, sweep: str, manifest: Mapping[str, Any]) -> None:
        old = self.read_manifest(sweep) or {}
        now = dt.datetime.now(dt.timezone.utc).isoformat()
        merged = {**old, **manifest, "sweep": sweep, "schema_version": TABLE_SCHEMA_VERSION,
                  "provenance": provenance(), "created": old.get("created", now),
                  "updated": now}
        self._put(self.path(sweep, MANIFEST_FILE), json.dumps(merged, indent=2).encode())

    # reading -------------------------------------------------------------------------------
    def sweeps(self) -> list[str]:
        """The sweep folders under the root (those holding a trials/ folder)."""
        return list_sweeps(self.fs, self.root)

    def read_manifest(self, sweep: str, *, reader: bool = False) -> dict[str, Any] | None:
        """The sweep's manifest, or None before its first run wrote one; a damaged one is
        refused, or for a reader warned of and read as {} (`reading.read_manifest`)."""
        return read_manifest(self.fs, self.path(sweep), reader=reader)

    def committed(self, sweep: str) -> dict[str, list[str]]:
        """Both tables' committed files (full paths), by `committed_files`; a file that cannot
        be read is skipped with a warning (`recover` moves it aside)."""
        return self.scan(sweep).files

    def scan(self, sweep: str) -> FolderScan:
        """The sweep folder's committed files, damaged files (warned of once) and superseded
        failed trials (`scan_folder`)."""
        scan = scan_folder(self.fs, self.path(sweep), self._checked)
        for path, why in scan.damaged.items():
            if path not in self._warned:
                self._warned.add(path)
                warn_damaged(path, why)
        return scan

    def files(self, sweep: str, table: str) -> list[str]:
        """Committed files of a table (temporary, orphaned and replaced files left out)."""
        return self.committed(sweep)[table]

    def _replaces(self, sweep: str, name: str) -> list[str]:
        """The files a compacted trials file names in its `replaces` metadata."""
        return read_replaces(self.fs, self.path(sweep, "trials", name))

    def _names(self, sweep: str, table: str) -> set[str]:
        return set(part_files(self.fs, self.path(sweep, table)))

    def dataset(self, sweep: str, table: str) -> ds.Dataset | None:
        scan = self.scan(sweep)
        return self._dataset(scan, table) if scan.files[table] else None

    def _dataset(self, scan: FolderScan, table: str,
                 paths: list[str] | None = None) -> ds.Dataset:
        """A table's committed files as one dataset, under the union of their schemas
        (`conformance.read_as`: a column some files lack is null there, not lost when
        they come first) and, for trials, every run column (`RUN_FIELDS`: a column added since,
        shared_with, is null in older stores)."""
        schema = scan.schemas[table]
        if table == "trials":
            missing = [f for f in RUN_FIELDS if f.name not in schema.names]
            schema = pa.schema([*schema, *missing], metadata=schema.metadata)
        return ds.dataset(scan.files[table] if paths is None else paths, filesystem=self.fs,
                          format="parquet", schema=schema)

    def read(self, sweep: str, table: str, columns: list[str] | None = None,
             filter: ds.Expression | None = None) -> pa.Table | None:
        """A table's committed rows (of trials: without the failed rows a later attempt
        superseded). A file a merge replaced that is deleted while this reads (its grace
        period over, or the run's end) makes it list the folder again, once."""
        for attempt in (1, 2):
            scan = self.scan(sweep)
            if not scan.files[table]:
                return None
            where = filter
            if table == "trials":
                gone = without_superseded(scan.superseded)
                where = gone if where is None else (gone & where if gone is not None else where)
            try:
                return self._dataset(scan, table).to_table(columns=columns, filter=where)
            except FileNotFoundError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def stored_ids(self, sweep: str) -> set[str]:
        """Trial ids stored, whatever their status (failed included)."""
        table = self.read(sweep, "trials", columns=["trial_id"])
        return set() if table is None else set(table.column("trial_id").to_pylist())

    def done_ids(self, sweep: str) -> set[str]:
        """Trial ids stored with an outcome (not `failed`): what a run does not train again.
        A failed trial is trained again by the next run, and its new row supersedes the old."""
        table = self.read(sweep, "trials", columns=["trial_id", "status"])
        if table is None:
            return set()
        return {i for i, s in zip(table.column("trial_id").to_pylist(),
                                  table.column("status").to_pylist()) if s != "failed"}

    def status_counts(self, sweep: str) -> dict[str, int]:
        """Trials per status, each trial id once (a store with ids stored twice, before the
        next run or compaction merges them: `_merge_duplicates`)."""
        table = self.read(sweep, "trials", columns=["trial_id", "status"])
        if table is None:
            return {}
        counts: dict[str, int] = {}
        seen: set[str] = set()
        for trial, s in zip(table.column("trial_id").to_pylist(),
                            table.column("status").to_pylist(), strict=True):
            if trial not in seen:
                seen.add(trial)
                counts[s] = counts.get(s, 0) + 1
        return counts

    # maintenance ---------------------------------------------------------------------------
    def recover(self, sweep: str) -> list[str]:
        """Finish what a crash left: interrupted compactions, orphaned and temporary files; and
        move files that cannot be read (with their pack's other file) to `quarantine/`, so
        their packs count as not stored and the next run trains them again."""
        removed = self._quarantine(sweep)
        removed += self.delete_replaced(sweep)  # merges' inputs, a merged file after its own
        names = {t: self._names(sweep, t) for t in TABLES}
        chosen = committed_files(names, lambda name: self._replaces(sweep, name))
        for table in TABLES:
            stale = [self.path(sweep, table, name) for name in sorted(names[table]
                                                                      - set(chosen[table]))]
            stale += [info.path for info in list_folder(self.fs, self.path(sweep, table))
                      if info.base_name.startswith(TEMP_PREFIX)]
            for path in stale:
                self._delete(path)
                removed.append(path)
        self._merge_duplicates(sweep)
        return removed

    def _merge_duplicates(self, sweep: str) -> None:
        """Trial ids stored in two committed files (two results folders of one sweep copied
        into one: each trial trained once in each) are resolved by the store's own rule: the
        files that hold them are merged into one pair that keeps the first copy of each id (by
        file name) and replaces them all, so no row is lost and none counts twice. Said in one
        warning line."""
        scan = self.scan(sweep)
        if len(scan.files["trials"]) < 2:
            return
        ids = self._dataset(scan, "trials").to_table(
            columns=["trial_id"], filter=without_superseded(scan.superseded))
        if len(ids) == len(pc.unique(ids.column("trial_id"))):
            return
        counts = pc.value_counts(ids.column("trial_id"))
        twice = {v.as_py() for v, n in zip(counts.field("values"), counts.field("counts"))
                 if n.as_py() > 1}
        names = [path.rsplit("/", 1)[1] for path in scan.files["trials"]
                 if twice & set(pq.read_table(path, columns=["trial_id"], filesystem=self.fs)
                                .column("trial_id").to_pylist())]
        self._merge(sweep, scan, sorted(names), dedupe=True)
        warn(f"sweep {sweep}: {len(twice)} trial id{'s' if len(twice) != 1 else ''} stored "
             f"twice (two results folders of one sweep put together?); their {len(names)} "
             "files merged, keeping the first copy of each")

    def _delete(self, path: str) -> None:
        """Delete a file of the store; one that cannot be deleted (a read-only folder) is one
        line (ResultsWriteError)."""
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            return  # gone already (another process's merge deleted it first)
        except (OSError, pa.ArrowException) as exc:
            raise could_not_write(path, exc, STORE_KEPT, "delete") from exc

    def _quarantine_path(self, sweep: str, table: str, name: str) -> str:
        """Where a damaged file goes: quarantine/TABLE/NAME, or NAME.2, NAME.3, ... when a
        copy is there already (a pack damaged again after it trained again): every copy kept."""
        path = self.path(sweep, QUARANTINE, table, name)
        copy = 1
        while self.fs.get_file_info(path).type != pafs.FileType.NotFound:
            copy += 1
            path = self.path(sweep, QUARANTINE, table, f"{name}.{copy}")
        return path

    def _quarantine(self, sweep: str) -> list[str]:
        scan = scan_folder(self.fs, self.path(sweep), self._checked)
        moved = []
        for path, why in sorted(scan.damaged.items()):
            name = path.rsplit("/", 1)[1]
            for table in TABLES:
                source = self.path(sweep, table, name)
                if self.fs.get_file_info(source).type != pafs.FileType.File:
                    continue
                try:
                    self.fs.create_dir(self.path(sweep, QUARANTINE, table), recursive=True)
                    self.fs.move(source, self._quarantine_path(sweep, table, name))
                except (OSError, pa.ArrowException) as exc:
                    raise could_not_write(source, exc, STORE_KEPT, "move aside") from exc
                moved.append(source)
            warn(f"moved damaged {path} ({why}) and its pack's files to "
                 f"{self.path(sweep, QUARANTINE)}/; its trials will be trained again")
        return moved

    def compact(self, sweep: str, row_groups: int | None = None) -> tuple[int, int]:
        """Merge the committed files into as few pairs as MERGE_MAX_ROWS allows (one, below it);
        returns (trials files before, rows of trials). Run by one process at a time (the
        sweep's lease): it recovers first and deletes what it replaced at once.

        The merged trajectories are sorted by trial_id and step, in row groups of 64 Ki rows
        (or `row_groups` of them), so that one trial's rows are found by statistics alone.
        """
        self.recover(sweep)
        scan = self.scan(sweep)
        names = [p.rsplit("/", 1)[1] for p in scan.files["trials"]]
        if len(names) > 1 or row_groups is not None:
            for group in whole_groups(self._sizes(sweep, scan)):
                if len(group) > 1 or row_groups is not None:
                    self._merge(sweep, scan, group, row_groups)
            self.recover(sweep)  # the merged files' inputs
        return len(names), len(self.stored_ids(sweep))  # counted in the few files left

    def merge_tiers(self, sweep: str, grace_s: float = MERGE_GRACE_S,
                    fanout: int = MERGE_FANOUT, max_rows: int = MERGE_MAX_ROWS) -> int:
        """Keep a sweep cheap to read while it grows: its single writer calls this after each
        pack (under the sweep's lease), so a running sweep is always read at about the price
        of a compacted one. Files of one size class (rows, by powers of MERGE_FANOUT) are
        merged once MERGE_FANOUT of them are there (`tier_group`), so a reader opens at most
        MERGE_FANOUT - 1 files a class, a number logarithmic in the sweep's rows, and no merge
        reads more than MERGE_MAX_ROWS rows (its memory is bounded whatever N). A merge commits
        by the store's own rule (`_merge`); the files it replaced are deleted once it is
        `grace_s` old (`delete_replaced`): a reader that listed them before may still read
        them, and never meets a file gone. A driver has this done by its merge child
        (`sweeper.results.merging`). Returns the merges made."""
        self.delete_replaced(sweep, grace_s)
        merges = 0
        while True:
            scan = self.scan(sweep)
            group = tier_group(self._sizes(sweep, scan), fanout, max_rows)
            if group is None:
                return merges
            self._merge(sweep, scan, group)
            merges += 1
            release_unused_memory()

    def merge_due(self, sweep: str) -> bool:
        """Whether `merge_tiers` has a merge to make now (one listing; footers read once)."""
        return tier_group(self._sizes(sweep, self.scan(sweep))) is not None

    def _sizes(self, sweep: str, scan: FolderScan) -> dict[str, int]:
        """Rows (trials and trajectories) of each committed pair, by its name."""
        sizes = {}
        for path in scan.files["trials"]:
            name = path.rsplit("/", 1)[1]
            partner = scan.footers.get(self.path(sweep, "trajectories", name))
            sizes[name] = (scan.footers[path].rows or 0) + (partner.rows or 0 if partner else 0)
        return sizes

    def _merge(self, sweep: str, scan: FolderScan, names: Sequence[str],
               row_groups: int | None = None, dedupe: bool = False) -> str:
        """Merge committed pairs into one, committed by the rule every reader keeps: the merged
        trajectories, then the merged trials file, whose metadata names the files it replaces
        (`replaces`: from then on they do not count), the packs whose rows it holds (`packs`:
        what a cell summary covers) and the failed rows later attempts superseded in them
        (`supersedes`). The inputs are deleted by the caller (`recover`, `delete_replaced`)."""
        trials_paths = [self.path(sweep, "trials", n) for n in names]
        traj_paths = [p for n in names if (p := self.path(sweep, "trajectories", n))
                      in scan.footers]
        if dedupe:  # `_merge_duplicates`: each id's first copy, its own trajectory with it
            trials, trajectories = self._first_copies(sweep, scan, names)
        else:
            trials = self._dataset(scan, "trials", trials_paths).to_table(
                filter=without_superseded(scan.superseded))
            trajectories = (self._dataset(scan, "trajectories", traj_paths).to_table()
                            if traj_paths else pa.table({"trial_id": pa.array([], pa.string()),
                                                         "step": pa.array([], pa.int64())}))
        trials = current_names(trials).sort_by("trial_id")
        ids = trials.column("trial_id")
        if len(ids) != len(pc.unique(ids)):  # duplicates are `recover`'s (_merge_duplicates)
            raise RuntimeError(f"sweep {sweep}: duplicate trial ids in files to merge")
        trajectories = trajectories.sort_by([("trial_id", "ascending"), ("step", "ascending")])
        metadata = [scan.footers[p].schema.metadata or {} for p in trials_paths]
        superseded = sorted({i for m in metadata
                             for i in json.loads(m.get(b"sweeper.supersedes", b"[]"))})
        # every file it replaces, through the merges it merges: whichever of them is deleted
        # first (a crash, `recover`), the others never count again, and no pack is written
        # again under one of their names (`write_pack`)
        replaced = set(names).union(*(replaces(m) for m in metadata))
        extra = {"replaces": json.dumps(sorted(replaced)),
                 "packs": json.dumps(sorted(set().union(*(scan.packs[n] for n in names))))}
        if superseded:
            extra["supersedes"] = json.dumps(superseded)
        stamps = {m.get(STAMP_KEY) for m in metadata}
        if len(stamps) == 1 and None not in stamps:  # every input's outcomes by one set of rules
            extra["outcome_rules"] = stamps.pop().decode()
        name = f"{COMPACT_PREFIX}{uuid.uuid4().hex[:12]}.parquet"
        group_rows = (64 * 1024 if row_groups is None
                      else max(1, -(-trajectories.num_rows // row_groups)))
        self._put_pair(sweep, name, trajectories, trials, extra,
                       {"replaces": extra["replaces"]}, group_rows)
        return name

    def _first_copies(self, sweep: str, scan: FolderScan, names: Sequence[str]
                      ) -> tuple[pa.Table, pa.Table]:
        """The rows of files `names` with each trial id once: its first copy that is not
        failed (by file name, then row), else its first copy; that file's trajectory rows of
        it come with it."""
        rows = [self._dataset(scan, "trials", [self.path(sweep, "trials", name)]).to_table(
            filter=without_superseded(scan.superseded)) for name in names]
        winner: dict[str, tuple[int, int]] = {}
        for f, table in enumerate(rows):
            statuses = table.column("status").to_pylist()
            for r, trial in enumerate(table.column("trial_id").to_pylist()):
                best = winner.get(trial)
                if best is None or (rows[best[0]].column("status")[best[1]].as_py() == "failed"
                                    and statuses[r] != "failed"):
                    winner[trial] = (f, r)
        trials, trajectories = [], []
        for f, (name, table) in enumerate(zip(names, rows, strict=True)):
            keep = [winner[t] == (f, r) for r, t in enumerate(table.column("trial_id")
                                                               .to_pylist())]
            kept = table.filter(pa.array(keep, pa.bool_()))
            trials.append(kept)
            traj_path = self.path(sweep, "trajectories", name)
            if traj_path in scan.footers:
                traj = self._dataset(scan, "trajectories", [traj_path]).to_table()
                trajectories.append(traj.filter(pc.is_in(traj.column("trial_id"),
                                                          kept.column("trial_id"))))
        empty = pa.table({"trial_id": pa.array([], pa.string()), "step": pa.array([], pa.int64())})
        return (pa.concat_tables(trials, promote_options="permissive"),
                pa.concat_tables(trajectories, promote_options="permissive")
                if trajectories else empty)

    def taken_names(self, sweep: str) -> set[str]:
        """The trials file names a new pack may not take: those on disk (a failed pack retried
        has the name of its first attempt: its file is kept, its rows superseded, and a cell
        summary that covers the name would not count the new one) and those merged files on
        disk say they replace (a pack written under one of them would not count)."""
        names = part_files(self.fs, self.path(sweep, "trials"))
        return set(names) | {r for n, size in names.items() if n.startswith(COMPACT_PREFIX)
                             for r in replaces(self._footer(self.path(sweep, "trials", n),
                                                           size))}

    def _footer(self, path: str, size: int | None) -> Mapping[bytes, bytes]:
        """A file's footer metadata, read once (files are immutable)."""
        key = f"{path}:{size}"
        if key not in self._checked:
            meta = pq.read_metadata(path, filesystem=self.fs)
            self._checked[key] = Footer.of(meta.schema.to_arrow_schema(), meta.num_rows)
        return self._checked[key].schema.metadata or {}

    def delete_replaced(self, sweep: str, grace_s: float = 0.0) -> list[str]:
        """Delete the pairs merged files replace, once the merge that replaced each is `grace_s`
        seconds old, and a merged file only after the files it replaced are gone (so that
        they never count again). Temporary and orphaned files are `recover`'s: this runs
        beside a writer. Returns the paths deleted."""
        infos = {t: {i.base_name: i for i in list_folder(self.fs, self.path(sweep, t))
            if i.type == pafs.FileType.File and is_part(i.base_name)} for t in TABLES}
        trials = infos["trials"]
        replaced_by = {}
        own: dict[str, list[str]] = {}
        for name, info in sorted(trials.items()):
            if name.startswith(COMPACT_PREFIX):
                try:
                    own[name] = replaces(self._footer(info.path, info.size))
                except (OSError, pa.ArrowException, ValueError):
                    continue  # damaged: recovery's
                for old in own[name]:
                    replaced_by.setdefault(old, name)
        now = dt.datetime.now(dt.timezone.utc)
        deleted: list[str] = []
        changed = True
        while changed:
            changed = False
            for name, by in sorted(replaced_by.items()):
                if name not in trials and name not in infos["trajectories"]:
                    continue
                if by not in trials or any(o in trials for o in own.get(name, ())):
                    continue
                mtime = trials[by].mtime
                if grace_s > 0 and (mtime is None or (now - mtime).total_seconds() < grace_s):
                    continue
                for table in TABLES:  # trials first: the pair is then uncommitted
                    if name in infos[table]:
                        self._delete(infos[table].pop(name).path)
                        deleted.append(self.path(sweep, table, name))
                changed = True
        return deleted


def release_unused_memory() -> None:
    """Hand the memory a merge freed back to the system: Arrow's allocator (mimalloc or
    jemalloc) otherwise keeps it for reuse, and the driver's resident memory would step up
    with each larger merge it made (the largest grows with the sweep), never down."""
    pa.default_memory_pool().release_unused()


def use_system_allocator() -> pa.MemoryPool:
    """Make Arrow allocate with the C library's malloc in this process (a sweep's driver).

    Arrow's default pool (mimalloc) keeps what a process freed in its own arenas, and a
    driver that writes a pack and merges files every few seconds for hours frees a great deal:
    measured on the Recorder alone (benchmarks/scale.py's writer, 24,000 trials), its resident
    memory grew 1.4 KB a trial with mimalloc, even with `release_unused_memory` after every
    merge, and 0.6 KB with the system pool, and sat 30-40 MB lower. The driver's Arrow work is
    small files and bounded merges, where the allocator's speed does not show. Readers keep
    the default pool. Returns the pool it replaced (the Recorder puts it back at its close:
    a notebook that ran a sweep reads with Arrow's own pool again)."""
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    return before


def size_class(rows: int, fanout: int = MERGE_FANOUT) -> int:
    """0 below `fanout` rows, 1 below fanout**2, and so on."""
    level, bound = 0, fanout
    while rows >= bound:
        level, bound = level + 1, bound * fanout
    return level


def tier_group(sizes: Mapping[str, int], fanout: int = MERGE_FANOUT,
               max_rows: int = MERGE_MAX_ROWS) -> list[str] | None:
    """The next files to merge (names), or None: in the lowest size class that holds `fanout`
    files, its smallest, as many (up to `fanout`) as fit in
    `max_rows` rows together. A file over half of `max_rows` is whole and never merged
    again."""
    classes: dict[int, list[str]] = {}
    for name, rows in sorted(sizes.items()):
        if 2 * rows <= max_rows:
            classes.setdefault(size_class(rows, fanout), []).append(name)
    for level in sorted(classes):
        if len(classes[level]) < fanout:
            continue
        group, total = [], 0
        for name in sorted(classes[level], key=lambda n: (sizes[n], n))[:fanout]:
            if total + sizes[name] > max_rows:
                break
            group.append(name)
            total += sizes[name]
        if len(group) >= 2:
            return group
    return None


def whole_groups(sizes: Mapping[str, int], max_rows: int = MERGE_MAX_ROWS) -> list[list[str]]:
    """Every file (names, in order) cut into groups of at most `max_rows` rows together (a
    file larger than that alone): what `compact` merges, each group into one file."""
    groups: list[list[str]] = [[]]
    total = 0
    for name, rows in sorted(sizes.items()):
        if groups[-1] and total + rows > max_rows:
            groups.append([])
            total = 0
        groups[-1].append(name)
        total += rows
    return [g for g in groups if g]


def _local_root(uri: str) -> str:
    """An absolute results folder that is, or can become, a writable folder; else one line."""
    import os

    root = os.path.abspath(uri)
    _check_path_limits(uri, root)
    probe = root
    while True:  # the nearest part of it that exists; a loop or a file on the way: one line
        try:
            os.stat(probe)
            break
        except FileNotFoundError:
            probe = os.path.dirname(probe)
        except OSError as exc:  # ELOOP (a symlink loop), ENOTDIR, EACCES
            raise ResultsInputError(f"--results: got {shown(uri)}, but {shown(probe)} cannot be "
                                    f"opened ({os.strerror(exc.errno or 0).lower()}); allowed: "
                                    "a folder (existing or new) or a pyarrow.fs URI") from None
    if not os.path.isdir(probe) or (probe == root and root.startswith("/proc")):
        raise ResultsInputError(f"--results: got {uri!r}, but {probe!r} is not a folder; "
                                "allowed: a folder (existing or new) or a pyarrow.fs URI")
    return root


# what sweeper adds under a root: /<sweep name, <= 128>/trajectories/<part name, <= 60>.tmp...
PATH_UNDER_ROOT = 256


def _check_path_limits(uri: str, root: str) -> None:
    """A local root within the filesystem's limits, with room for what is stored under it:
    a component of at most NAME_MAX bytes (255), the whole at most PATH_MAX (4,096) less
    PATH_UNDER_ROOT; else one line instead of ENAMETOOLONG at the first write."""
    import os

    name_max, path_max = 255, 4096
    with contextlib.suppress(OSError, ValueError):
        name_max = os.pathconf("/", "PC_NAME_MAX")
        path_max = os.pathconf("/", "PC_PATH_MAX")
    longest = max(root.split("/"), key=lambda part: len(os.fsencode(part)))
    if len(os.fsencode(longest)) > name_max:
        raise ResultsInputError(f"--results: got a path with a {len(os.fsencode(longest)):,}-"
                                f"byte component ({shown(longest)}); allowed: components of "
                                f"at most {name_max} bytes")
    if len(os.fsencode(root)) > path_max - PATH_UNDER_ROOT:
        raise ResultsInputError(f"--results: got a path of {len(os.fsencode(root)):,} bytes; "
                                f"allowed: at most {path_max - PATH_UNDER_ROOT:,} (the system's "
                                f"{path_max:,}, less room for the sweep's own files)")


MIN_FREE_BYTES = 64 << 10  # a results folder with less free space than this is full


def check_writable(store: Store) -> None:
    """Before a run writes anything: a local results folder (or its nearest existing parent)
    must be a folder (not under /proc, /sys, /dev: an input error, exit 2) that this user can
    write (else one line, exit 1: a read-only filesystem or a folder's permissions, as a
    write that fails). Object stores answer at the first write."""
    import errno
    import os

    if not store.is_local:
        return
    probe = store.root
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if probe.startswith(("/proc", "/sys", "/dev")):
        raise ResultsInputError(f"--results: got {store.uri!r}, but {probe!r} is not writable; "
                                "allowed: a folder this user can write")
    if not os.access(probe, os.W_OK | os.X_OK):
        code = errno.EROFS if os.statvfs(probe).f_flag & os.ST_RDONLY else errno.EACCES
        raise could_not_write(probe, OSError(code, os.strerror(code)), NOTHING_WRITTEN,
                              "write in")
    stats = os.statvfs(probe)
    if stats.f_bavail * stats.f_frsize < MIN_FREE_BYTES:  # a full disk: before any write
        raise could_not_write(probe, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
                              NOTHING_WRITTEN, "write in")
    # what permissions do not tell (root on an immutable folder, an ACL, a FUSE mount): a
    # file made and removed at once, so that a refusal comes before the lease, not after
    test = os.path.join(probe, f".sweeper-writable-{os.getpid()}-{uuid.uuid4().hex[:12]}")
    try:
        os.close(os.open(test, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(test)
    except OSError as exc:
        raise could_not_write(probe, exc, NOTHING_WRITTEN, "write in") from None


class FileStore(Store):
    """A local folder or any pyarrow.fs URI (s3://bucket/prefix?endpoint_override=...)."""

    @classmethod
    def at(cls, uri: str) -> FileStore:
        if "://" in uri:
            if uri.startswith("s3://") and not uri[len("s3://"):].split("?")[0].strip("/"):
                raise ResultsInputError(f"--results: got {uri!r}, which names no bucket; "
                                        "allowed: s3://bucket/prefix")
            fs, root = open_uri(uri)  # asked once, within a timeout: never a hang
        else:
            fs, root = pafs.LocalFileSystem(), _local_root(uri)
        store = cls(fs, root.rstrip("/"), uri)
        if uri.startswith("s3://"):
            store.put_object = _s3_put(uri)
        return store


class MemoryStore(Store):
    """The same store over an in-memory filesystem: for tests, nothing touches a disk.

    `Store.open("memory://NAME")` returns the same root for the same NAME within a process.
    """

    @classmethod
    def named(cls, uri: str) -> MemoryStore:
        name = uri[len("memory://"):].strip("/") or "default"
        return cls(memory_filesystem(name), f"/{name}", uri)

    @property
    def renames_atomically(self) -> bool:
        return True

    @property
    def in_process(self) -> bool:
        return True

    def __getstate__(self) -> dict:
        return {"uri": self.uri}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(MemoryStore.named(state["uri"]).__dict__)

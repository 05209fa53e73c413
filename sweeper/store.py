"""The Parquet store: one folder per sweep under a results root (local path or pyarrow.fs URI).

    <root>/<sweep>/manifest.json
    <root>/<sweep>/trials/part-<pack_id>.parquet         one row per trial
    <root>/<sweep>/trajectories/part-<pack_id>.parquet   one row per (trial, logged step)

The contract (see docs/data-model.md):
- Files are immutable and written whole: a temporary name then a rename on local disks, a single
  put on object stores. A reader never sees half a file.
- A pack is committed by its trials file. Its trajectories file is written first and counts only
  once the trials file of the same name exists; `recover()` deletes leftovers of a crash.
- `compact()` merges many files into one pair; the new files name the files they replace in their
  metadata, so a crash in the middle is finished by `recover()` without losing or doubling a row.
- Every file carries `sweeper.schema_version` and `sweeper.provenance` in its Parquet metadata.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import re
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sweeper import __version__
from sweeper.errors import ParameterError
from sweeper.models import MODELS
from sweeper.outcomes import derive_outcomes
from sweeper.registry import Entry
from sweeper.spec import TRAIN_PARAMS, TrialSpec
from sweeper.tasks import TASKS
from sweeper.train import TrialResult
from sweeper.trajectory import SCHEMA_VERSION, scalar_metrics, trajectory_schema

SWEEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
TABLES = ("trials", "trajectories")
ARROW_TYPES = {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string()}
DERIVED_TYPES = {"content_tokens": pa.int64(), "lift": pa.float64()}


def check_sweep_name(name: str, field: str = "name") -> str:
    """A sweep name is one path segment: it can never escape the results root."""
    if not isinstance(name, str) or not SWEEP_NAME.match(name) or name.strip(".") == "":
        raise ParameterError(f"{field}: got {name!r}; allowed: 1-128 characters of letters, "
                             "digits, '_', '-', '.', starting with a letter or digit (one folder "
                             "name, no '/' or '..')")
    return name


def pack_id(trial_ids: Iterable[str]) -> str:
    return hashlib.sha256(",".join(sorted(trial_ids)).encode()).hexdigest()[:16]


# -- building the tables -------------------------------------------------------------------
def _param_fields(prefix: str, entry: Entry) -> list[pa.Field]:
    return [pa.field(f"{prefix}.{p.name}", ARROW_TYPES[p.type]) for p in entry.params]


def trials_schema(spec: TrialSpec) -> pa.Schema:
    """The trials table of one task/model pair: run facts, typed config columns, outcomes."""
    fields = [pa.field("trial_id", pa.string()), pa.field("sweep", pa.string()),
              pa.field("pack_id", pa.string()), pa.field("status", pa.string()),
              pa.field("error", pa.string()), pa.field("wall_time_s", pa.float64()),
              pa.field("host", pa.string()), pa.field("node_id", pa.string()),
              pa.field("attempts", pa.int32()),
              pa.field("task.id", pa.string())]
    fields += _param_fields("task", TASKS.get(spec.task))
    fields += [pa.field(f"task.{k}", DERIVED_TYPES[k]) for k in spec.make_task().derived()]
    fields += [pa.field("model.id", pa.string())] + _param_fields("model", MODELS.get(spec.model))
    fields += [pa.field("optim.name", pa.string()), pa.field("optim.lr", pa.float64())]
    fields += [pa.field(f"train.{p.name}", ARROW_TYPES[p.type]) for p in TRAIN_PARAMS
               if p.name not in ("optimizer", "lr")]
    fields += [pa.field("seed", pa.int64()), pa.field("learned", pa.bool_())]
    fields += [pa.field(n, pa.int64()) for n in ("steps_to_learn", "attention_onset",
                                                 "ktiw_onset", "plateau_exit", "diverged_step")]
    for m in scalar_metrics(spec.family):
        fields += [pa.field(f"final_{m.name}", pa.float64()),
                   pa.field(f"best_{m.name}", pa.float64())]
    return pa.schema(fields)


def failed_result(spec: TrialSpec, error: str, wall_time_s: float = 0.0) -> TrialResult:
    """A trial that raised on every attempt: stored with its error and no trajectory."""
    empty = {"step": [], **{m: [] for m in trajectory_schema(spec.family).names[2:]}}
    outcomes = {k: None for k in derive_outcomes(spec.family, {**empty})}
    return TrialResult(spec, "failed", empty, outcomes, wall_time_s, error=error)


def trials_table(results: list[TrialResult], sweep: str, pack: str, attempts: int = 1,
                 node_id: str | None = None) -> pa.Table:
    rows = []
    for r in results:
        rows.append({"trial_id": r.trial_id, "sweep": sweep, "pack_id": pack,
                     "status": r.status, "error": r.error, "wall_time_s": r.wall_time_s,
                     "host": r.host, "node_id": node_id, "attempts": attempts,
                     **r.spec.flat(), **r.outcomes, "diverged_step": r.diverged_step})
    return pa.Table.from_pylist(rows, schema=trials_schema(results[0].spec))


def trajectories_table(results: list[TrialResult]) -> pa.Table:
    schema = trajectory_schema(results[0].spec.family)
    columns: dict[str, list] = {name: [] for name in schema.names}
    for r in sorted(results, key=lambda r: r.trial_id):
        n = len(r.trajectory["step"])
        columns["trial_id"] += [r.trial_id] * n
        for name in schema.names[1:]:
            columns[name] += r.trajectory[name]
    return pa.Table.from_pydict(columns, schema=schema)


def _provenance() -> dict[str, str]:
    meta = {"sweeper": __version__, "host": socket.gethostname(),
            "written": dt.datetime.now(dt.timezone.utc).isoformat()}
    try:
        import torch

        meta["torch"] = torch.__version__
    except ImportError:  # pragma: no cover - compaction may run without torch
        pass
    return meta


def _with_metadata(table: pa.Table, extra: dict[str, str] | None = None) -> pa.Table:
    meta = {b"sweeper.schema_version": str(SCHEMA_VERSION).encode(),
            b"sweeper.provenance": json.dumps(_provenance()).encode()}
    for k, v in (extra or {}).items():
        meta[f"sweeper.{k}".encode()] = v.encode()
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})


def _s3_put(uri: str):
    """A single PutObject per file: the object appears whole or not at all.

    pyarrow's S3 output stream uploads in parts (CreateMultipartUpload, UploadPart, Complete),
    which some S3 servers reject for small files; one put is simpler and atomic. Endpoint,
    scheme and region come from the URI's query, credentials from the environment (boto3's
    default chain), never from a sweep file. Without boto3, pyarrow's stream is used.
    """
    from urllib.parse import parse_qs, urlsplit

    try:
        import boto3
    except ImportError:  # pragma: no cover
        return None
    query = {k: v[-1] for k, v in parse_qs(urlsplit(uri).query).items()}
    endpoint = query.get("endpoint_override")
    if endpoint and "://" not in endpoint:
        endpoint = f"{query.get('scheme', 'https')}://{endpoint}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name=query.get("region"))

    def put(path: str, data: bytes) -> None:
        bucket, _, key = path.partition("/")
        client.put_object(Bucket=bucket, Key=key, Body=data)

    return put


# -- the store -----------------------------------------------------------------------------
@dataclass
class Store:
    """A results root. `Store.open("./results")` or `Store.open("s3://bucket/prefix")`."""

    fs: pafs.FileSystem
    root: str
    uri: str

    put_object: Any = field(default=None, repr=False)  # S3: one PutObject per file

    def __getstate__(self) -> dict:
        """Picklable (Ray Tune pickles its callbacks): the S3 client is rebuilt on arrival."""
        return {**self.__dict__, "put_object": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.uri.startswith("s3://"):
            self.put_object = _s3_put(self.uri)

    @classmethod
    def open(cls, uri: str) -> Store:
        if "://" in uri:
            try:
                fs, root = pafs.FileSystem.from_uri(uri)
            except (pa.ArrowInvalid, ValueError, OSError) as exc:
                raise ParameterError(f"--results: got {uri!r}, which pyarrow.fs cannot open "
                                     f"({exc}); allowed: a local path or a pyarrow.fs URI such "
                                     "as s3://bucket/prefix") from None
        else:
            import os

            fs, root = pafs.LocalFileSystem(), os.path.abspath(uri)
        store = cls(fs, root.rstrip("/"), uri)
        if uri.startswith("s3://"):
            store.put_object = _s3_put(uri)
        return store

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, sweep: str, *parts: str) -> str:
        return "/".join([self.root, check_sweep_name(sweep), *parts])

    # writing -------------------------------------------------------------------------------
    def _put(self, path: str, data: bytes) -> None:
        """Write a whole file: temp name + rename locally, a single put on object stores."""
        parent = path.rsplit("/", 1)[0]
        if self.is_local:
            self.fs.create_dir(parent, recursive=True)
            tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, path)
        elif self.put_object is not None:
            self.put_object(path, data)
        else:
            self.fs.create_dir(parent, recursive=True)
            with self.fs.open_output_stream(path) as f:
                f.write(data)

    def _put_table(self, path: str, table: pa.Table, extra: dict[str, str] | None = None,
                   row_group_size: int | None = None) -> None:
        buf = io.BytesIO()
        pq.write_table(_with_metadata(table, extra), buf, row_group_size=row_group_size)
        self._put(path, buf.getvalue())

    def write_pack(self, sweep: str, results: list[TrialResult], attempts: int = 1,
                   node_id: str | None = None) -> str:
        """Store one pack's trials: trajectories first, then the trials file that commits them."""
        pack = pack_id(r.trial_id for r in results)
        name = f"part-{pack}.parquet"
        self._put_table(self.path(sweep, "trajectories", name), trajectories_table(results))
        self._put_table(self.path(sweep, "trials", name),
                        trials_table(results, sweep, pack, attempts, node_id))
        return pack

    def write_manifest(self, sweep: str, manifest: dict[str, Any]) -> None:
        old = self.read_manifest(sweep) or {}
        now = dt.datetime.now(dt.timezone.utc).isoformat()
        merged = {**old, **manifest, "sweep": sweep, "schema_version": SCHEMA_VERSION,
                  "created": old.get("created", now), "updated": now}
        self._put(self.path(sweep, "manifest.json"), json.dumps(merged, indent=2).encode())

    # reading -------------------------------------------------------------------------------
    def read_manifest(self, sweep: str) -> dict[str, Any] | None:
        path = self.path(sweep, "manifest.json")
        if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with self.fs.open_input_stream(path) as f:
            return json.loads(f.read())

    def files(self, sweep: str, table: str) -> list[str]:
        """Committed files of a table (temporary and orphaned files left out), sorted."""
        names = {t: self._names(sweep, t) for t in TABLES}
        committed = names["trials"] & names["trajectories"] if table == "trajectories" \
            else names["trials"]
        committed -= self._replaced(sweep, names["trials"])  # a compaction cut short
        return [self.path(sweep, table, n) for n in sorted(committed)]

    def _replaced(self, sweep: str, trial_names: set[str]) -> set[str]:
        """Files named in the `replaces` metadata of committed compacted trials files."""
        replaced: set[str] = set()
        for name in sorted(trial_names):
            if name.startswith("part-compact-"):
                meta = pq.read_schema(self.path(sweep, "trials", name),
                                      filesystem=self.fs).metadata or {}
                replaced |= set(json.loads(meta.get(b"sweeper.replaces", b"[]")))
        return replaced

    def _names(self, sweep: str, table: str) -> set[str]:
        selector = pafs.FileSelector(self.path(sweep, table), allow_not_found=True)
        return {info.base_name for info in self.fs.get_file_info(selector)
                if info.base_name.startswith("part-") and info.base_name.endswith(".parquet")}

    def dataset(self, sweep: str, table: str) -> ds.Dataset | None:
        files = self.files(sweep, table)
        return ds.dataset(files, filesystem=self.fs, format="parquet") if files else None

    def read(self, sweep: str, table: str, columns: list[str] | None = None,
             filter: ds.Expression | None = None) -> pa.Table | None:
        data = self.dataset(sweep, table)
        return None if data is None else data.to_table(columns=columns, filter=filter)

    def stored_ids(self, sweep: str) -> set[str]:
        table = self.read(sweep, "trials", columns=["trial_id"])
        return set() if table is None else set(table.column("trial_id").to_pylist())

    def status_counts(self, sweep: str) -> dict[str, int]:
        table = self.read(sweep, "trials", columns=["status"])
        if table is None:
            return {}
        counts: dict[str, int] = {}
        for s in table.column("status").to_pylist():
            counts[s] = counts.get(s, 0) + 1
        return counts

    # maintenance ---------------------------------------------------------------------------
    def recover(self, sweep: str) -> list[str]:
        """Finish what a crash left: interrupted compactions, orphaned and temporary files."""
        removed = []
        for old in sorted(self._replaced(sweep, self._names(sweep, "trials"))):
            for table in TABLES:
                old_path = self.path(sweep, table, old)
                if self.fs.get_file_info(old_path).type != pafs.FileType.NotFound:
                    self.fs.delete_file(old_path)
                    removed.append(old_path)
        trials, trajectories = self._names(sweep, "trials"), self._names(sweep, "trajectories")
        for orphan in trajectories - trials:
            self.fs.delete_file(self.path(sweep, "trajectories", orphan))
            removed.append(orphan)
        for table in TABLES:
            selector = pafs.FileSelector(self.path(sweep, table), allow_not_found=True)
            for info in self.fs.get_file_info(selector):
                if info.base_name.startswith(".tmp-"):
                    self.fs.delete_file(info.path)
                    removed.append(info.path)
        return removed

    def compact(self, sweep: str) -> tuple[int, int]:
        """Merge all committed files into one pair; returns (files before, rows of trials)."""
        self.recover(sweep)
        trial_files = [p.rsplit("/", 1)[1] for p in self.files(sweep, "trials")]
        if len(trial_files) <= 1:
            return len(trial_files), len(self.stored_ids(sweep))
        trials = self.read(sweep, "trials")
        trajectories = self.read(sweep, "trajectories").sort_by([("trial_id", "ascending"),
                                                                 ("step", "ascending")])
        if trials.num_rows != len(set(trials.column("trial_id").to_pylist())):
            raise RuntimeError(f"sweep {sweep}: duplicate trial ids before compaction")
        name = f"part-compact-{uuid.uuid4().hex[:12]}.parquet"
        extra = {"replaces": json.dumps(trial_files)}
        self._put_table(self.path(sweep, "trajectories", name), trajectories, extra,
                        row_group_size=64 * 1024)
        self._put_table(self.path(sweep, "trials", name), trials, extra)
        for table in ("trials", "trajectories"):  # trials first: the pack is then uncommitted
            for old in trial_files:
                self.fs.delete_file(self.path(sweep, table, old))
        return len(trial_files), trials.num_rows

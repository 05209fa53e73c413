"""Reading a results root without a `Store`: its sweeps, a sweep's manifest, what a compacted
file replaces, and a table under today's column names, for the store, the cell summary and
`analysis` alike, so that none of them keeps its own copy of a rule of the contract.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sweeper.results.errors import ResultsInputError, shown
from sweeper.results.layout import is_part
from sweeper.results.schema import LEGACY_COLUMNS

MANIFEST_FILE = "manifest.json"
QUARANTINE = "quarantine"  # a sweep's folder for files recovery could not read
REPLACES_KEY = b"sweeper.replaces"  # a compacted trials file's metadata: the files it replaces


_WARNED: set[str] = set()


def warn(message: str) -> None:
    """One line on stderr: what a reader skipped or the store moved aside, never a traceback;
    each message once per process (several readers may meet the same damaged file)."""
    import sys

    if message in _WARNED:
        return
    _WARNED.add(message)
    print(f"warning: {message}", file=sys.stderr, flush=True)


def warn_damaged(path: str, why: str) -> None:
    """The one line a reader prints when it leaves a damaged or foreign file out."""
    warn(f"skipping damaged file {path} ({why}); the next `sweeper run` moves it to "
         f"{QUARANTINE}/ and trains its pack again")


def _is_dir(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type == pafs.FileType.Directory


def list_folder(fs: pafs.FileSystem, directory: str) -> list[pafs.FileInfo]:
    """What a store's folder holds (nothing when it does not exist): the one listing every
    reader and writer makes, so that a file where a folder of the store should be (a damaged
    or hand-edited store) is one line naming it, not a traceback in whichever command met it."""
    try:
        return fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    except NotADirectoryError:
        raise ResultsInputError(f"{directory}: a file where the store keeps a folder; allowed: "
                                "a folder (move the file away; the rest of the store is "
                                "read as it is)") from None


def list_sweeps(fs: pafs.FileSystem, root: str) -> list[str]:
    """The sweep folders under a results root: those holding a trials/ folder, sorted."""
    if not _is_dir(fs, root):
        return []
    infos = list_folder(fs, root)
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory
                  and _is_dir(fs, f"{root}/{i.base_name}/trials"))


def part_files(fs: pafs.FileSystem, directory: str) -> dict[str, int]:
    """The `part-*.parquet` files of a table's folder (name -> size): what the commit rule
    chooses from; temporary and hidden files are never read."""
    return {info.base_name: info.size for info in list_folder(fs, directory)
            if info.type == pafs.FileType.File and is_part(info.base_name)}


_JSON_NAMES = {list: "list", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


class DamagedManifest(ResultsInputError):
    """A manifest.json that is not a JSON object (not JSON, or `[1, 2]`, `"x"`, `null`), or
    whose fields are not of their kinds (`MANIFEST_FIELDS`)."""


def read_manifest(fs: pafs.FileSystem, folder: str, *, reader: bool = False
                  ) -> dict[str, Any] | None:
    """A sweep folder's manifest.json, or None when it has none.

    A damaged one (not a JSON object, or a field of another kind) is refused in one line
    (`DamagedManifest`) where it is
    needed to write: it holds the identity that keeps another configuration out of the sweep,
    so replacing it is the user's decision, never a run's. A reader (reader=True) needs it for
    nothing but labels: it warns in one line and reads the results without it ({}).
    """
    path = f"{folder}/{MANIFEST_FILE}"
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(path) as f:
        manifest, why = _json_object(f.read())
    wrong = _wrong_fields(manifest) if manifest is not None else []
    if manifest is not None and not wrong:
        return manifest
    if manifest is not None:  # a JSON object with a field of the wrong kind
        if reader:
            warn(f"skipping damaged fields of {path} ({wrong[0]}); the results are read "
                 "without them")
            return {k: v for k, v in manifest.items()
                    if k not in {w.split(":")[0] for w in wrong}}
        why = wrong[0]
    if reader:
        warn(f"skipping damaged manifest {path} ({why}); the results are read without it, and "
             "`sweeper run` refuses the sweep until it is moved aside")
        return {}
    raise DamagedManifest(f"{path}: damaged ({why}); allowed: the manifest sweeper "
                          f"writes: move it aside (into {folder}/{QUARANTINE}/) and run again, "
                          "which writes it anew from the sweep file")


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _list_of(kind: type) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(isinstance(i, kind) for i in v)


# What each field the runner writes holds (`sweeper.runner`): a field of another kind is
# damage (a hand edit, another tool), refused where the manifest is needed to write and left
# out by a reader. Fields not listed (a newer sweeper's) are kept as they are.
MANIFEST_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{k: (lambda v: isinstance(v, str), "a string") for k in (
        "sweep_file", "task", "model", "search", "outcome", "fingerprint", "sweep", "created",
        "updated")},
    **{k: (lambda v: v is None or isinstance(v, str), "a string or null")
       for k in ("objective", "direction")},
    **{k: (lambda v: isinstance(v, bool), "true or false")
       for k in ("search_draws_cells", "search_samples_level_set", "search_adaptive")},
    "trials_expanded": (_is_count, "a whole number >= 0"),
    "schema_version": (_is_count, "a whole number >= 0"),
    "axes": (_list_of(str), "a list of column names"),
    "overrides": (_list_of(str), "a list of strings"),
    "versions": (_list_of(dict), "a list of objects"),
    "identity": (lambda v: isinstance(v, dict), "an object"),
    "provenance": (lambda v: isinstance(v, dict), "an object"),
}


def _wrong_fields(manifest: Mapping[str, Any]) -> list[str]:
    """'field: got ...; allowed: ...' for each known field of the wrong kind."""
    return [f"{k}: got {shown(manifest[k])}; allowed: {what}"
            for k, (ok, what) in MANIFEST_FIELDS.items() if k in manifest and not ok(manifest[k])]


def _json_object(text: bytes) -> tuple[dict[str, Any] | None, str]:
    """The JSON object `text` holds, or None and why it holds none."""
    try:
        value = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return None, f"not JSON: {str(exc)[:120] or type(exc).__name__}"
    if isinstance(value, dict):
        return value, ""
    return None, f"a JSON {_JSON_NAMES.get(type(value), 'value')}"


# the manifest's keys: its cells are drawn, it samples a level set, it is adaptive (decides what
# trains while it runs, and may end before its budget)
SEARCH_FACTS = ("search_draws_cells", "search_samples_level_set", "search_adaptive")
# The reading of a manifest written before its search's facts were recorded (no such keys):
# the facts of the search types sweeper had then, so that no reader branches on a type.
HISTORICAL_SEARCH_FACTS = {"grid": (False, False, False), "random": (True, False, False),
                           "optuna": (True, False, True), "boundary": (True, True, True)}


def search_facts(manifest: Mapping[str, Any], search_type: str | None = None) -> dict[str, bool]:
    """What the sweep's strategy said of its search (`SEARCH_FACTS`: its cells are drawn, not a
    grid; it samples a level set), from the manifest, or for an older one from its type
    (`search_type`, else the manifest's `search`; unknown: a grid's)."""
    kind = search_type or manifest.get("search") or "grid"
    old = dict(zip(SEARCH_FACTS, HISTORICAL_SEARCH_FACTS.get(str(kind),
                                                            (False, False, False))))
    return {key: bool(manifest.get(key, old[key])) for key in SEARCH_FACTS}


def replaces(metadata: Mapping[bytes, bytes] | None) -> list[str]:
    """The file names a trials file's footer metadata says it replaces ([] unless compacted)."""
    return json.loads((metadata or {}).get(REPLACES_KEY, b"[]"))


def read_replaces(fs: pafs.FileSystem, path: str) -> list[str]:
    """What a trials file replaces, from its footer (the schema only; no row is read)."""
    return replaces(pq.read_schema(path, filesystem=fs).metadata)


def current_names(table: pa.Table) -> pa.Table:
    """A table with the columns an older store called otherwise (optim.lr) under today's names
    (train.lr, `LEGACY_COLUMNS`), a mix of old and new files' columns merged into one. The one
    rename: the store's compaction writes it, the summary and `analysis` read through it."""
    columns: dict[str, pa.ChunkedArray] = {}
    for name in table.column_names:
        new = LEGACY_COLUMNS.get(name, name)
        if new not in columns:
            columns[new] = table.column(name)
        elif new == name:  # today's name wins over the old one
            columns[new] = pc.coalesce(table.column(name), columns[new])
        else:
            columns[new] = pc.coalesce(columns[new], table.column(name))
    return pa.table(columns, metadata=table.schema.metadata)


_NULLABLE = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
             pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(),
             pa.uint16(): pd.UInt16Dtype(), pa.uint32(): pd.UInt32Dtype(),
             pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype()}


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow to pandas with nullable ints and bools, so a column's dtype never depends on
    whether it happens to hold a null (steps_to_learn stays an integer column)."""
    return table.to_pandas(types_mapper=_NULLABLE.get)


# How long a results root's first answer may take; $SWEEPER_REMOTE_TIMEOUT_S changes it.
REMOTE_TIMEOUT_S = 10.0


def open_uri(uri: str, timeout_s: float | None = None, field: str = "--results"
             ) -> tuple[pafs.FileSystem, str]:
    """A results root given as a pyarrow.fs URI (s3://bucket/prefix?..., gs://...), opened and
    asked once for its root, within `timeout_s` seconds: an endpoint that refuses, a network
    that is not there, credentials that never come are one line (naming `field`) before
    anything starts,
    never a hang (with no network, gs:// waits for minutes). The one opener of URIs, for the
    store and for `analysis` alike; the root may not exist yet (a new results root)."""
    import threading

    if timeout_s is None:
        timeout_s = _timeout_from_environment()
    answer: dict[str, Any] = {}

    def probe() -> None:
        try:
            fs, root = pafs.FileSystem.from_uri(uri)
            fs = _with_deadlines(fs, uri, timeout_s)
            answer["opened"] = (fs, root.rstrip("/"), fs.get_file_info(root).type)
        except Exception as exc:  # noqa: BLE001 - told on the caller's thread
            answer["error"] = exc

    thread = threading.Thread(target=probe, name="sweeper-results-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ResultsInputError(f"{field}: {uri!r} did not answer within {timeout_s:g} s; "
                                "allowed: a results root this machine reaches (check the "
                                "network, the endpoint and the credentials)")
    error = answer.get("error")
    if isinstance(error, pa.ArrowInvalid | pa.ArrowNotImplementedError | ValueError):
        raise ResultsInputError(f"{field}: got {uri!r}, which pyarrow.fs cannot open "
                                f"({_short(error)}); allowed: a local path or a pyarrow.fs URI "
                                "such as s3://bucket/prefix") from None
    if error is not None:
        raise ResultsInputError(f"{field}: {uri!r} cannot be reached ({_short(error)}); "
                                "allowed: a results root this machine reaches") from None
    fs, root, kind = answer["opened"]
    if kind == pafs.FileType.File:
        raise ResultsInputError(f"{field}: got {uri!r}, which is a file; allowed: a folder "
                                "(existing or new)")
    return fs, root


def _with_deadlines(fs: pafs.FileSystem, uri: str, timeout_s: float) -> pafs.FileSystem:
    """An S3 filesystem whose every call has a deadline: connecting and each wait for data
    at most `timeout_s` / 3, one retry (a throttled request is tried again). pyarrow's URI
    takes no timeouts, and its defaults retry an endpoint that accepts and never answers for
    ~100 s, in the caller's thread or at the process's exit: the same options (the URI's
    query) on a filesystem built with them."""
    if not isinstance(fs, pafs.S3FileSystem):
        return fs
    from urllib.parse import parse_qs, urlsplit

    flags = ("allow_bucket_creation", "allow_bucket_deletion", "force_virtual_addressing")
    options: dict[str, Any] = {"region": fs.region}  # the bucket's, as the URI's parse found
    for key, values in parse_qs(urlsplit(uri).query).items():
        options[key] = values[-1].lower() in ("1", "true", "yes") if key in flags else values[-1]
    wait = timeout_s / 3  # two attempts within the deadline, with room for the exit
    try:
        return pafs.S3FileSystem(**options, connect_timeout=wait, request_timeout=wait,
                                 retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=2))
    except (TypeError, ValueError, pa.ArrowInvalid):  # a URI option the constructor lacks
        return fs  # (tls_verify_certificates...): the URI's own, opened under the probe


def _timeout_from_environment() -> float:
    """$SWEEPER_REMOTE_TIMEOUT_S (seconds, 0.1 to 3600), else REMOTE_TIMEOUT_S."""
    import contextlib
    import os

    from sweeper.numbers import check_float

    text = os.environ.get("SWEEPER_REMOTE_TIMEOUT_S")
    if not text:
        return REMOTE_TIMEOUT_S
    value: Any = text
    with contextlib.suppress(ValueError):
        value = float(text)
    return check_float(value, "$SWEEPER_REMOTE_TIMEOUT_S", 0.1, 3600, error=ResultsInputError)


def _short(error: BaseException, chars: int = 200) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= chars else text[:chars] + "..."

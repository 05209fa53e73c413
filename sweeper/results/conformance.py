"""Which Parquet files are a sweep's: a file under `trials/` or `trajectories/` whose schema is
not the table's is foreign, and is treated as a damaged file (skipped with one warning line by
every reader, moved to `quarantine/` by the next run, its pack trained again).

A file is foreign when
- it lacks a column every file of its table has had since the first version
  (`REQUIRED_COLUMNS`), names a column twice, or its metadata naming files or trials
  (`sweeper.replaces`, `sweeper.supersedes`) is not a JSON list of names;
- a column the contract types (run facts, outcomes, `seed`, `final_*` and `best_*`; in
  trajectories every metric) holds another *kind* of value than the contract's; or
- any other column (a config column: `task.length`) holds another kind than the sweep's other
  files do (the kind most of them hold; files written by sweeper outvote the rest).

Kinds, not exact types, are compared (`column_kind`): text, numbers (any integer or float),
booleans, lists of numbers. A column whose type widened between versions (int32 to int64, int to
float) or that is all null stays readable, and the readers read every file under the
permissive union of their schemas (`unified_schema`). Columns a file has and others lack are
never a reason: families add metrics and columns over time, and files written before them lack
them (`shared_with`; version 1's `optim.lr`, read as `train.lr`: `LEGACY_COLUMNS`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from sweeper.results.rules import OUTCOME_TYPES
from sweeper.results.schema import RUN_FIELDS

# In every file since version 1 (`shared_with` came later: not required, but typed)
REQUIRED_COLUMNS = {"trials": ("trial_id", "sweep", "pack_id", "status", "error", "wall_time_s",
                               "host", "node_id", "attempts"),
                    "trajectories": ("trial_id", "step")}
SWEEPER_KEY = b"sweeper.schema_version"  # in the metadata of every file sweeper writes
# trials files' metadata naming files (a compaction's) or trials (a retry's): JSON lists
LIST_KEYS = (b"sweeper.replaces", b"sweeper.supersedes", b"sweeper.packs")

NUMBER, LIST = "numbers", "lists of numbers"
Kind = str | None  # None: all null, which any kind admits
Signature = tuple[tuple[str, Kind], ...]


def column_kind(type_: pa.DataType) -> Kind:
    """What a column holds, as far as reading it with other files goes."""
    if pa.types.is_null(type_):
        return None
    if pa.types.is_integer(type_) or pa.types.is_floating(type_):
        return NUMBER
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "text"
    if pa.types.is_boolean(type_):
        return "booleans"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return LIST if column_kind(type_.value_type) in (NUMBER, None) else str(type_)
    return str(type_)  # binary, dates, dictionaries, structs: only the same type matches


_TYPED = {f.name: column_kind(f.type) for f in RUN_FIELDS} | {
    name: column_kind(t) for name, t in OUTCOME_TYPES.items()} | {"seed": NUMBER}


def contract_kinds(table: str, column: str) -> frozenset[Kind] | None:
    """The kinds the contract allows a column, or None where it leaves them to the family."""
    if table == "trajectories":
        return frozenset({"text"}) if column == "trial_id" else (
            frozenset({NUMBER}) if column == "step" else frozenset({NUMBER, LIST}))  # metrics
    if column in _TYPED:
        return frozenset({_TYPED[column]})
    if column.startswith(("final_", "best_")):
        return frozenset({NUMBER})
    return None


def signature(schema: pa.Schema) -> Signature:
    return tuple((f.name, column_kind(f.type)) for f in schema)


@dataclass(frozen=True)
class Footer:
    """What a file's footer says, worked out once per file (files are immutable, and a store
    scans its folder many times a run): its schema; its shape, all its conformance depends on
    (its columns' kinds, whether sweeper wrote it, whether its list metadata is readable);
    its exact types; its rows (None where only the schema was read), which the store's merges
    size files by."""

    schema: pa.Schema
    shape: tuple[Signature, bool, bool]
    types: tuple[tuple[str, str], ...]
    rows: int | None = None

    @classmethod
    def of(cls, schema: pa.Schema, rows: int | None = None) -> Footer:
        """Kept small: a store of thousands of files holds one of these per file, so the
        columns are shared by every file of the same types and only sweeper's own metadata
        is kept (not pandas' or Arrow's serialised copies of the schema)."""
        metadata = schema.metadata or {}
        lists = all(_is_text_list(metadata.get(key, b"[]")) for key in LIST_KEYS)
        shape = (signature(schema), SWEEPER_KEY in metadata, lists)
        types = tuple((f.name, str(f.type)) for f in schema)
        types, plain = _SCHEMAS.setdefault(types, (types, schema.remove_metadata()))
        kept = {k: v for k, v in metadata.items() if k.startswith(b"sweeper.")}
        return cls(plain.with_metadata(kept) if kept else plain, shape, types, rows)


# by types: one copy of the types and of the columns for every file that has them
_SCHEMAS: dict[tuple[tuple[str, str], ...], tuple[tuple[tuple[str, str], ...], pa.Schema]] = {}


def file_problem(schema: pa.Schema, table: str) -> str | None:
    """Why one file's schema cannot be its table's (a missing required column, a column named
    twice, a typed column of another kind), or None."""
    names = schema.names
    for column in REQUIRED_COLUMNS[table]:
        if column not in names:
            return f"a foreign file: no column {column!r}"
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        return f"a foreign file: column {twice[0]!r} appears twice"
    for key in LIST_KEYS:
        if not _is_text_list((schema.metadata or {}).get(key, b"[]")):
            return f"a foreign file: its metadata {key.decode()} is not a JSON list of names"
    for field in schema:
        allowed = contract_kinds(table, field.name)
        kind = column_kind(field.type)
        if allowed is not None and kind is not None and kind not in allowed:
            return _kind_problem(field, f"not {' or '.join(sorted(allowed, key=len))}")
    return None


def _is_text_list(data: bytes) -> bool:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _kind_problem(field: pa.Field, expected: str) -> str:
    return f"a foreign file: column {field.name!r} holds {field.type}, {expected}"


def foreign_files(footers: Mapping[str, Footer], table: str) -> dict[str, str]:
    """The files among `footers` (path -> Footer) that are not the table's: path -> why.
    The files that pass `file_problem` vote, per column, for the kind it holds. Files of one
    shape are judged once (a sweep of 10,000 packs has a handful of shapes)."""
    shapes: dict[tuple, list[str]] = {}
    for path, footer in footers.items():
        shapes.setdefault(footer.shape, []).append(path)
    first = {shape: footers[paths[0]].schema for shape, paths in shapes.items()}
    why = {shape: file_problem(schema, table) for shape, schema in first.items()}
    usual = _usual_kinds({shape: len(paths) for shape, paths in shapes.items()
                          if why[shape] is None})
    for shape, schema in first.items():
        why[shape] = why[shape] or _unusual_kind(schema, usual)
    return {path: why[shape] for shape, paths in shapes.items() if why[shape] for path in paths}


def _unusual_kind(schema: pa.Schema, usual: Mapping[str, Kind]) -> str | None:
    for field in schema:
        kind, expected = column_kind(field.type), usual.get(field.name)
        if kind is not None and expected is not None and kind != expected:
            return _kind_problem(field, f"where the sweep's other files hold {expected}")
    return None


def _usual_kinds(shapes: Mapping[tuple, int]) -> dict[str, Kind]:
    """Per column, the kind most files hold (shape -> its count of files): files sweeper wrote
    outvote the others; a tie goes to the kind named first, so that every reader chooses
    alike."""
    votes: Counter[tuple[str, Kind]] = Counter()
    total = sum(shapes.values())
    for (columns, by_sweeper, _), count in shapes.items():
        weight = count * (1 + total * by_sweeper)
        for name, kind in set(columns):
            if kind is not None:
                votes[name, kind] += weight
    usual: dict[str, tuple[int, str]] = {}
    for (name, kind), count in sorted(votes.items()):
        if name not in usual or count > usual[name][0]:
            usual[name] = (count, kind)
    return {name: kind for name, (_, kind) in usual.items()}


def read_as(footers: Iterable[Footer]) -> pa.Schema:
    """The schema a table's conforming files are read under (`unified_schema`), each distinct
    set of types unified once."""
    return unified_schema(list({f.types: f.schema for f in footers}.values()))


def unified_schema(schemas: list[pa.Schema]) -> pa.Schema:
    """The schema every one of a table's (conforming) files is read under: the permissive
    union of theirs (a column some files lack is null there; int and float read as float),
    with the first file's metadata. Raises ArrowTypeError or ArrowInvalid when kinds differ,
    which `foreign_files` rules out."""
    if not schemas:
        return pa.schema([])
    merged = pa.unify_schemas([s.remove_metadata() for s in schemas],
                              promote_options="permissive")
    return merged.with_metadata(schemas[0].metadata)

"""Where a sweep's results live, what a trial id is, and the commit rule.

    <root>/<sweep>/manifest.json
    <root>/<sweep>/trials/part-<pack_id>.parquet         one row per trial
    <root>/<sweep>/trajectories/part-<pack_id>.parquet   one row per (trial, logged step)
    <root>/<sweep>/{trials,trajectories}/part-compact-<hex>.parquet   merged by `compact`

`committed_files` is the only commit rule: every reader (the store, pandas through
`analysis.load`, DuckDB views over explicit file lists) takes its file lists from it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sweeper.results.errors import ResultsInputError, shown

TABLES = ("trials", "trajectories")
STUDY_FILE = "optuna.db"  # an Optuna sweep's study (SQLite) beside its local results
SWEEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # matched in full: fullmatch
PART_PREFIX, PART_SUFFIX = "part-", ".parquet"
COMPACT_PREFIX, TEMP_PREFIX = "part-compact-", ".tmp-"

# What a config *means*: bump only when the same config would now train something else. The
# trial id hashes it with the config, so new metrics or table columns never orphan a stored
# trial (the tables' own version is `schema.TABLE_SCHEMA_VERSION`).
CONFIG_SCHEMA_VERSION = 1


def check_sweep_name(name: str, field: str = "name") -> str:
    """A sweep name is one path segment: it can never escape the results root. Matched in
    full: `$` would admit a trailing newline, a folder whose name ends in one."""
    if not isinstance(name, str) or not SWEEP_NAME.fullmatch(name) or name.strip(".") == "":
        raise ResultsInputError(f"{field}: got {shown(name)}; allowed: 1-128 characters of "
                                "letters, digits, '_', '-', '.', starting with a letter or "
                                "digit (one folder name, no '/' or '..')")
    return name


def canonical_json(config: Mapping[str, Any]) -> str:
    """The config as the trial id hashes it: sorted keys, no spaces, with the config version."""
    return json.dumps({"schema_version": CONFIG_SCHEMA_VERSION, **config}, sort_keys=True,
                      separators=(",", ":"))


def trial_id(config: Mapping[str, Any]) -> str:
    """16 hex digits of the SHA-256 of the canonical config: the same config, the same id."""
    return hash_text(canonical_json(config))


def hash_text(text: str) -> str:
    """A trial id from a config's canonical text (`canonical_json`)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pack_id(trial_ids: Iterable[str]) -> str:
    return hashlib.sha256(",".join(sorted(trial_ids)).encode()).hexdigest()[:16]


def part_name(pack: str) -> str:
    return f"{PART_PREFIX}{pack}{PART_SUFFIX}"


def is_part(name: str) -> bool:
    return name.startswith(PART_PREFIX) and name.endswith(PART_SUFFIX)


def pack_of_file(name: str) -> str | None:
    """The pack a file holds, from its name; None for a compacted file (it holds many)."""
    base = name.rsplit("/", 1)[-1]
    if not is_part(base) or base.startswith(COMPACT_PREFIX):
        return None
    return base[len(PART_PREFIX):-len(PART_SUFFIX)]


def committed_files(names: Mapping[str, Iterable[str]],
                    replaces: Callable[[str], Iterable[str]]) -> dict[str, list[str]]:
    """The commit rule, on file names: which `part-*.parquet` files hold results.

    names: the `part-*` file names found in each table's folder. replaces(name): the file
    names a compacted trials file says it replaces (read from its metadata).

    - A pack is committed by its trials file; its trajectories file counts only once the
      trials file of the same name exists (it is written first).
    - A committed compacted file replaces the files it names: they no longer count, even if a
      crash left them on disk (recovery deletes them).
    """
    trials = {n for n in names.get("trials", ()) if is_part(n)}
    replaced: set[str] = set()
    for name in sorted(trials):
        if name.startswith(COMPACT_PREFIX):
            replaced |= set(replaces(name))
    trials -= replaced
    trajectories = {n for n in names.get("trajectories", ()) if is_part(n)} & trials
    return {"trials": sorted(trials), "trajectories": sorted(trajectories)}

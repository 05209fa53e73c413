"""A sweep's identity: what its name stands for, so that one name never pools two studies.

The fingerprint hashes the configuration that is not an axis: task and model ids, every
resolved fixed parameter (defaults included, so a changed default counts too), the step budget
and the search (without its budget of trials). Axes and seeds are left out: adding values or
seeds extends the same study. The manifest keeps the fingerprint of each version of the sweep
file that has run; a run whose identity differs from the stored one is refused, naming what
differs, unless the user gives the sweep a new name or passes `--extend`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sweeper.errors import SweeperInputError
from sweeper.search_space import SweepFile


def identity(sweep: SweepFile) -> dict[str, Any]:
    """The flat configuration a fingerprint hashes (column -> value)."""
    probe = _probe(sweep)
    unset = probe.unset_optional()  # as the trial id: a parameter added later keeps the identity
    derived = {f"task.{k}" for k in probe.make_task().derived()} | axis_derived(sweep)
    flat = {k: v for k, v in probe.flat().items()
            if k != "seed" and k not in unset and k not in derived}
    search = {k: v for k, v in vars(sweep.search).items() if k not in ("trials", "budget")}
    flat.update({f"search.{k}": v for k, v in search.items() if v is not None})
    return flat


def _probe(sweep: SweepFile, axis_values: dict[str, dict[str, Any]] | None = None):
    """A trial spec at the sweep's fixed values (and the given axis values, by group)."""
    from sweeper.spec import make_spec

    groups = {g: {**sweep.fixed[g], **(axis_values or {}).get(g, {})}
              for g in ("task", "model", "train")}
    return make_spec(sweep.task, sweep.model, groups["task"], groups["model"], groups["train"],
                     0, sweep.device)


def axis_derived(sweep: SweepFile) -> set[str]:
    """The axes' columns and the columns a task resolves from them: those whose value changes
    when one axis takes another of its values (copy's task.vocab, N = L + round(c L), in a
    sweep over c with vocab unset). They vary inside the sweep like the axes, so they are no
    part of what the sweep's name stands for (a sweep over c printed as `task.vocab 15`)."""
    columns = {a.column for a in sweep.axes}
    base = _probe(sweep).flat()
    for axis in sweep.axes:
        ends = axis.values if axis.kind in ("grid", "choice") else axis.values[:2]
        for value in ends:
            try:
                flat = _probe(sweep, {axis.group: {axis.name: value}}).flat()
            except (SweeperInputError, ValueError, TypeError):
                continue  # a value that needs another axis's too: its own spec says why
            columns |= {k for k, v in flat.items() if k in base and v != base[k]}
    return columns


def optional_columns(sweep: SweepFile) -> set[str]:
    """The flat columns of the parameters a trial id hashes only when set (`Entry.optional`,
    `spec.OPTIONAL_TRAIN`): an identity without one had it null."""
    from sweeper.families import MODELS, TASKS
    from sweeper.spec import OPTIONAL_TRAIN

    return ({f"task.{k}" for k in TASKS.get(sweep.task).optional}
            | {f"model.{k}" for k in MODELS.get(sweep.model).optional}
            | {f"train.{k}" for k in OPTIONAL_TRAIN})


def fingerprint(config: dict[str, Any]) -> str:
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_same_study(sweep: SweepFile, mine: dict[str, Any], manifest: dict[str, Any] | None,
                     extend: bool) -> None:
    """Refuse a sweep file whose non-axis configuration (`mine`: its `identity`, computed
    once per run by its plan) differs from the stored sweep's."""
    if not manifest or "identity" not in manifest or extend:
        return
    stored = manifest["identity"]
    if any(v.get("fingerprint") == fingerprint(mine) for v in manifest.get("versions", [])):
        return  # a version of the file that has run under this name before (--extend)
    # keys on one side only are a newer or older sweeper's (a parameter or search option added
    # since): their old values cannot be known, and the trial ids tell those trials apart;
    # except a parameter hashed only when set (`optional_columns`): absent, it was null
    # and a column the axes change (`axis_derived`): stored by a sweeper before that rule
    optional = optional_columns(sweep)
    compared = ((set(mine) & set(stored)) | ((set(mine) ^ set(stored)) & optional)
                ) - axis_derived(sweep)
    changes = [f"{k}: {stored.get(k)!r} -> {mine.get(k)!r}" for k in sorted(compared)
               if mine.get(k) != stored.get(k)]
    if not changes:
        return
    raise SweeperInputError(
        f"name: sweep {sweep.name!r} is stored with another configuration "
        f"({'; '.join(changes[:4])}{'; ...' if len(changes) > 4 else ''}); allowed: the same "
        "configuration, a new name, or --extend to add these trials to the stored sweep")


def versions(sweep: SweepFile, mine: dict[str, Any], manifest: dict[str, Any] | None,
             overrides: list[str] | None = None) -> list[dict[str, Any]]:
    """The manifest's list of the sweep file's versions that have run, with this one (`mine`:
    its identity) added when it is new (by fingerprint and text)."""
    import datetime as dt

    known = list((manifest or {}).get("versions", []))
    entry = {"fingerprint": fingerprint(mine), "sweep_file": sweep.text,
             "overrides": list(overrides or [])}
    if not any(v.get("fingerprint") == entry["fingerprint"]
               and v.get("sweep_file") == entry["sweep_file"]
               and v.get("overrides", []) == entry["overrides"] for v in known):
        entry["first_run"] = dt.datetime.now(dt.timezone.utc).isoformat()
        known.append(entry)
    return known

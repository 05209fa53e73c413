"""Which config columns are a sweep's parameters, and which are derived from them: the one rule
every view that offers a column as an axis, a colour, a slice, a key or a default column reads.

A sweep stores every parameter of every trial, so more config columns vary than were swept: the
families derive some from others (`task.lift`, `task.content_tokens`: `Family.derived`), and a
task may set one parameter from another (copy trains N = L + round(c L) content tokens, so in a
sweep over c the column `task.vocab` varies with c). What was swept is what the sweep file asked
for: its `axes:` with the run's `--set` overrides applied (the manifest's `axes`). A column
that varies inside one sweep without being one of its axes is derived there; a column that
differs only between sweeps (each fixed at its own value) is a parameter of the comparison.
A manifest that cannot say (a synthetic store's, whose file names no axes) derives nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .outcomes import derived_columns

CONFIG_PREFIXES = ("task.", "model.", "train.")


def declared_axes(manifest: Mapping) -> set[str] | None:
    """The columns the sweep asked to vary: the manifest's `axes` (its file's axes with the
    run's `--set` overrides applied), else, for a manifest from before it kept them, its sweep
    file's `axes:`; None when neither says (a synthetic store's file names no axes: then the
    stored values are all there is to go by)."""
    axes = manifest.get("axes")
    if isinstance(axes, list):
        return {str(a) for a in axes} or None
    from .search import search_info

    return set(search_info(dict(manifest)).axes) or None


def named_settings(manifest: Mapping) -> set[str]:
    """The columns its sweep file sets (`fixed:`, `axes:`) or its runs' `--set` overrides
    name: a fixed value changed between runs (`--extend`) varies in the store, and is a
    parameter there, not a derived column."""
    named: set[str] = set()
    text = manifest.get("sweep_file")
    try:
        import yaml

        data = yaml.safe_load(text) if isinstance(text, str) else None
    except Exception:  # noqa: BLE001 - a view of the file, never a failure
        data = None
    for section in ("fixed", "axes"):
        groups = data.get(section) if isinstance(data, dict) else None
        for group, params in (groups or {}).items() if isinstance(groups, dict) else ():
            if isinstance(params, dict):
                named |= {f"{group}.{name}" for name in params}
    for item in manifest.get("overrides") or ():
        named.add(str(item).partition("=")[0].strip())
    return named


def varying(frame: pd.DataFrame) -> list[str]:
    """Config columns with more than one value (null counted as one), the families' derived
    columns, ids and list values left out."""
    out, derived = [], set(derived_columns())
    for c in frame.columns:
        if not c.startswith(CONFIG_PREFIXES) or c in derived or c.endswith(".id"):
            continue
        column = frame[c]
        if column.dtype == object and column.map(
                lambda v: isinstance(v, list | np.ndarray)).any():
            continue
        try:
            many = column.nunique(dropna=False) > 1
        except TypeError:  # values that cannot be hashed: by their text
            many = column.astype(str).nunique(dropna=False) > 1
        if many:
            out.append(c)
    return out


def derived_here(frame: pd.DataFrame, manifests: Mapping[str, Mapping] | None) -> set[str]:
    """Config columns that vary inside a sweep whose file does not sweep them (copy's
    task.vocab in a sweep over c), unless a sweep of `frame` sweeps them or names them (a
    fixed value changed between its runs: `named_settings`)."""
    if not manifests:
        return set()
    several = "sweep" in frame.columns and len(manifests) > 1
    derived, axes = set(), set()
    for name, manifest in manifests.items():
        asked = declared_axes(manifest)
        if asked is None:
            continue
        named = named_settings(manifest)  # a bare `--set length=8` names its column's end
        axes |= asked | {c for c in frame.columns if c in named
                         or any(c.endswith(f".{n}") for n in named if "." not in n)}
        rows = frame[frame["sweep"] == name] if several else frame
        derived |= {c for c in varying(rows) if c not in asked}
    return derived - axes


def swept_columns(frame: pd.DataFrame, manifests: Mapping[str, Mapping] | None = None
                  ) -> list[str]:
    """The parameters that vary in `frame` (trials, or a summary's cells): `varying` less what
    is derived in the sweeps `manifests` describe (`derived_here`), in the frame's order."""
    derived = derived_here(frame, manifests)
    return [c for c in varying(frame) if c not in derived]

"""A sweep file with overrides: from a path, YAML text or a mapping, with overrides merged
group by group and `--set KEY=VALUE` items applied, then validated like a file (the same
one-line errors). What `sweeper.run(..., **overrides)` and `sweeper plan/run --set` share.

Overrides are top-level keys of the sweep file (name, fixed, axes, seeds, budget, ...): a
mapping is merged into the file's group by group (`axes={"task": {"hardness": {...}}}` replaces
the hardness axis and keeps the others), and each parameter's value or axis is replaced whole;
anything else replaces the key.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from typing import Any


def set_item(text: str) -> str:
    """`--set`'s argparse type: KEY=VALUE, so that `--set seeds 3` is one line naming --set
    (not the whole command's usage, about a stray `3`)."""
    import argparse

    from sweeper.numbers import shown

    if "=" not in text or not text.partition("=")[0].strip():
        raise argparse.ArgumentTypeError(f"got {shown(text)}; allowed: KEY=VALUE in one word, "
                                         "e.g. seeds=3, heads=4 or model.heads=1,4")
    return text


def sweep_from(source: str | os.PathLike | Mapping[str, Any],
               overrides: Mapping[str, Any] | None = None, sets: list[str] | None = None):
    """A validated `SweepFile` from a path, YAML text or a mapping, with overrides merged and
    then `--set` overrides applied (`apply_sets`). Python values (a mapping, overrides) are
    written as YAML and read back as a file is, so that one reader checks them all."""
    from sweeper.search_space import parse_sweep

    if sets:
        return sweep_from(apply_sets(_raw(source, overrides), sets))
    if isinstance(source, Mapping) or overrides:
        return parse_sweep(_yaml_text(_raw(source, overrides)))
    return parse_sweep(_source_text(source))


def _source_text(source: str | os.PathLike) -> str:
    """A sweep file's text: `source` itself when it is YAML text, else the file it names (read
    as `sweeper plan` reads a file: a regular file, bounded)."""
    from sweeper.search_space import read_sweep_text

    text = os.fspath(source)
    if os.path.exists(text) or not _looks_like_yaml(text):
        return read_sweep_text(text)
    return text


def _yaml_text(data: Mapping[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(_plain(data, ""), sort_keys=False)


def _raw(source: str | os.PathLike | Mapping[str, Any],
         overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sweep file's mapping, overrides merged, before validation."""
    from sweeper.search_space import SweepFileError, parse_yaml

    data: Any = dict(source) if isinstance(source, Mapping) else parse_yaml(_source_text(source))
    if not isinstance(data, dict):
        raise SweepFileError(f"the file: got {type(data).__name__}; allowed: a YAML mapping of "
                             "the sweep-file keys")
    return _merged(data, _plain(overrides, "")) if overrides else data


def _plain(value: Any, path: str) -> Any:
    """An override as YAML can write it: numbers as the one rule reads them (numpy's too),
    tuples as lists; anything YAML cannot write (a set, an object) is one line naming its key,
    never a traceback from the YAML writer. NaN, infinity and out-of-range values pass here
    and are refused by their field, which knows its bounds."""
    from sweeper.numbers import INT64_MAX, INT64_MIN, shown
    from sweeper.search_space import SweepFileError
    from sweeper.sweep_fields import key_path

    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral) and type(value).__name__ != "bool_":
        number = int(value)
        if not INT64_MIN <= number <= INT64_MAX:
            raise SweepFileError(f"{path}: got {shown(number)}; allowed: an integer within "
                                 "int64 (at most 19 digits)")
        return number
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:
            raise SweepFileError(f"{path}: got {shown(value)}; allowed: a finite number"
                                 ) from None
    if type(value).__name__ == "bool_":
        return bool(value)
    if isinstance(value, Mapping):
        return {key: _plain(item, key_path(path, key)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise SweepFileError(f"{path or 'the sweep'}: got {shown(value)} ({type(value).__name__}); "
                         "allowed: numbers, strings, true/false, null, lists and mappings")


def apply_sets(data: Mapping[str, Any], sets: list[str]) -> dict[str, Any]:
    """`--set` overrides on a sweep file's mapping, in order (values read as sweep files are):

    - `model.width=48`: a fixed value (task, model, train); it replaces an axis of that name.
    - `model.heads=1,4`: a comma list sweeps an axis (a grid) and replaces a fixed value.
    - `model.head_seeds=[3,7]`: a list value (fixed); `model.head_seeds=[3,7],[3,8]` an axis.
    - any other dotted key sets that key of the file: `seeds=4`, `budget.steps=100`,
      `name=quick_w48`, `search.trials=20`.
    """
    import copy

    from sweeper.numbers import shown
    from sweeper.results.schema import resolve_column
    from sweeper.search_space import GROUPS, TOP_KEYS, SweepFileError
    from sweeper.sweep_fields import key_path

    out = copy.deepcopy(dict(data))
    for item in sets:
        key, sep, raw = item.partition("=")
        path = key.strip().split(".")
        label = f"--set {key_path('', key.strip())}"  # a long or odd key is shown cut
        if not sep or not key.strip() or any(not p for p in path):
            raise SweepFileError(f"--set: got {shown(item)}; allowed: KEY=VALUE such as "
                                 "model.width=48, model.heads=1,4 or seeds=4")
        if len(path) == 1 and path[0] not in TOP_KEYS:
            path = resolve_column(path[0], _parameters(out), "--set",
                                  error=SweepFileError).split(".")
        if len(path) == 1 and path[0] not in TOP_KEYS:
            raise SweepFileError(f"{label}: unknown key; allowed: GROUP.NAME (task, model, "
                                 f"train), a parameter's NAME, or a key of the file: "
                                 f"{', '.join(TOP_KEYS)}")
        value, values = _set_value(label, raw)
        if path[0] in GROUPS and len(path) == 2:
            group, name = path
            fixed = _mapping_in(_mapping_in(out, "fixed", label), group, label)
            axes = _mapping_in(_mapping_in(out, "axes", label), group, label)
            if values is None:
                axes.pop(name, None)
                fixed[name] = value
            else:
                fixed.pop(name, None)
                axes[name] = {"grid": values}
            continue
        node = out
        for part in path[:-1]:
            node = _mapping_in(node, part, label)
        node[path[-1]] = value if values is None else values
    return out


def _mapping_in(node: dict, key: str, label: str) -> dict:
    """`node[key]`, a mapping (made when absent or null), or one line naming the `--set`."""
    from sweeper.search_space import SweepFileError
    from sweeper.sweep_fields import key_path

    if node.get(key) is None:
        node[key] = {}
    if not isinstance(node[key], dict):
        raise SweepFileError(f"{label}: {key_path('', key)} is not a mapping in the file; "
                             "allowed: a key of a mapping")
    return node[key]


def _set_value(label: str, raw: str) -> tuple[Any, list | None]:
    """`--set` VALUE as (a value, None) or (None, an axis's values): `1,4` is an axis, `[3,7]`
    one list value (seq2seq's head_seeds), `[0,1],[2,3]` an axis of list values. Read as a
    sweep file is, with its bounds; errors name `label` (`--set KEY`)."""
    import yaml

    from sweeper.numbers import shown
    from sweeper.search_space import SweepFileError, load_yaml_value

    text = raw.strip()
    try:
        if "," in text and not text.startswith(("[", "{")):
            return None, [load_yaml_value(v.strip(), label) for v in text.split(",")]
        try:
            return load_yaml_value(text, label), None
        except yaml.YAMLError:
            if not text.startswith("["):
                raise
            return None, load_yaml_value(f"[{text}]", label)  # [0,1],[2,3]: an axis of lists
    except yaml.YAMLError:
        raise SweepFileError(f"{label}: got {shown(raw)}; allowed: a YAML value, a comma list "
                             "(an axis) or comma-separated [lists] (an axis of lists)") from None


def _parameters(data: Mapping[str, Any]) -> list[str]:
    """GROUP.NAME of every parameter of the file's task and model and of train: what a short
    `--set NAME=VALUE` resolves against (`heads=4` -> model.heads)."""
    from sweeper.errors import SweeperInputError
    from sweeper.families import MODELS, TASKS
    from sweeper.spec import TRAIN_PARAMS

    names = []
    for group, registry in (("task", TASKS), ("model", MODELS)):
        try:
            names += [f"{group}.{p.name}" for p in registry.get(str(data.get(group))).params]
        except SweeperInputError:
            pass
    return names + [f"train.{p.name}" for p in TRAIN_PARAMS]


def _looks_like_yaml(text: str) -> bool:
    """Sweep-file text rather than a path: several lines, or a one-line {...} mapping."""
    return "\n" in text or text.lstrip().startswith("{")


def _merged(base: Any, changes: Mapping[str, Any], depth: int = 0) -> Any:
    """`changes` merged into `base`: mappings down to the groups (depth 2), below that each
    parameter's value or axis replaced whole."""
    if not isinstance(base, Mapping):
        return dict(changes)
    out = dict(base)
    for key, value in changes.items():
        if depth < 2 and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value, depth + 1)
        else:
            out[key] = value
    return out

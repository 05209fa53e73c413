"""Which sweep a command names: the one rule every command that reads a sweep uses.

A sweep is named in one of three ways (`locate_sweep`):

- a sweep name, under the results root `--results` (default `results`);
- RESULTS/SWEEP: a local path, or a URI such as s3://bucket/p/SWEEP?endpoint_override=...;
- the sweep file (a .yaml): its `name:` gives the sweep, and the results root is --results,
  else the file's `results:`, else `results`.

The file is read as YAML for those two keys only (not validated as a sweep: reading needs no
families, so this stays free of torch like the rest of `sweeper.results`). A local sweep that
is not there is one line naming the argument and where it looked; a URI's is checked by the
reader that opens it (one connection, not two).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sweeper.results.errors import ResultsInputError, shown
from sweeper.results.layout import check_sweep_name
from sweeper.results.roots import check_results_root

DEFAULT_RESULTS = "results"  # where `sweeper run` stores sweeps unless told otherwise
SWEEP_FILE_SUFFIXES = (".yaml", ".yml")
SWEEP_FORMS = ("a sweep name (under --results, default results), RESULTS/SWEEP (a path or a "
               "URI such as s3://bucket/p/SWEEP), or the sweep file")


@dataclass(frozen=True)
class SweepLocation:
    """A sweep as a command named it: its results root (a path or URI) and its name; `file` is
    the sweep file when the command was given one."""
    results: str
    name: str
    file: str | None = None

    @property
    def where(self) -> str:
        return f"{self.results.rstrip('/')}/{self.name}"


def is_sweep_file(target: str) -> bool:
    return target.lower().endswith(SWEEP_FILE_SUFFIXES)


def locate_sweep(target: str | os.PathLike, results: str | None = None,
                 argument: str = "SWEEP") -> SweepLocation:
    """The sweep `target` names (module docstring); `argument` is the name errors give it."""
    text = os.fspath(target)
    if not text:
        raise ResultsInputError(f"{argument}: got ''; allowed: {SWEEP_FORMS}")
    if is_sweep_file(text):
        location = _from_file(text, results, argument)
    elif "://" in text:
        location = _from_uri(text, results, argument)
    elif os.sep in text.strip(os.sep) or (os.altsep and os.altsep in text):
        location = _from_path(text, results, argument)
    else:
        location = _from_name(text, results, argument)
    check_sweep_name(location.name, argument)
    if "://" not in location.results:
        _check_local(location, argument)
    return location


def _from_file(text: str, results: str | None, argument: str) -> SweepLocation:
    import yaml

    try:
        with open(text, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ResultsInputError(f"{argument}: got {shown(text)}, no such sweep file; allowed: "
                                f"{SWEEP_FORMS}") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ResultsInputError(f"{argument}: {shown(text)} cannot be read as a sweep file "
                                f"({exc})") from None
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise ResultsInputError(f"{argument}: {shown(text)} has no `name:`; allowed: a sweep "
                                "file naming its sweep")
    root = results or (data.get("results") if isinstance(data.get("results"), str) else None)
    return SweepLocation(root or DEFAULT_RESULTS, name, text)


def _from_uri(text: str, results: str | None, argument: str) -> SweepLocation:
    check_results_root(text, argument, in_process=True)  # before any error could print it
    _no_results_with_path(text, results, argument)
    base, sep, options = text.partition("?")  # s3://b/p/SWEEP?endpoint_override=...
    scheme, rest = base.split("://", 1)
    rest = rest.rstrip("/")
    if "/" not in rest:
        raise ResultsInputError(f"{argument}: got {shown(text)}, which names no sweep folder; "
                                "allowed: RESULTS/SWEEP, e.g. s3://bucket/results/quick")
    root, name = rest.rsplit("/", 1)
    return SweepLocation(f"{scheme}://{root}{sep}{options}", name)


def _from_path(text: str, results: str | None, argument: str) -> SweepLocation:
    _no_results_with_path(text, results, argument)
    path = os.path.abspath(text)
    return SweepLocation(os.path.dirname(path), os.path.basename(path))


def _from_name(text: str, results: str | None, argument: str) -> SweepLocation:
    if results is not None:
        return SweepLocation(results, text)
    if not _is_sweep(os.path.join(DEFAULT_RESULTS, text)) and _is_sweep(text):
        return SweepLocation(os.path.abspath(os.curdir), text)  # a sweep folder right here
    return SweepLocation(DEFAULT_RESULTS, text)


def _no_results_with_path(text: str, results: str | None, argument: str) -> None:
    if results is not None:
        raise ResultsInputError(f"{argument}: got {shown(text)} with --results {results}; "
                                "allowed: a sweep name with --results, or RESULTS/SWEEP "
                                "without it")


def _is_sweep(folder: str) -> bool:
    """A sweep's folder: one holding its manifest or its trials (what `sweeper run` writes
    first), or the lease of a driver that has started (`sweeper status` says "starting")."""
    from sweeper.results.lease import LEASE

    return (os.path.isfile(os.path.join(folder, "manifest.json"))
            or os.path.isdir(os.path.join(folder, "trials"))
            or os.path.isfile(os.path.join(folder, LEASE)))


def _check_local(location: SweepLocation, argument: str) -> None:
    if _is_sweep(os.path.join(location.results, location.name)):
        return
    root = os.path.abspath(location.results)
    found = sorted(n for n in (os.listdir(root) if os.path.isdir(root) else ())
                   if _is_sweep(os.path.join(root, n)))
    given = f" (from {location.file})" if location.file else ""
    raise ResultsInputError(f"{argument}: got {shown(location.name)}{given}; no sweep of that "
                            f"name under {root}; sweeps there: {', '.join(found) or 'none'}")

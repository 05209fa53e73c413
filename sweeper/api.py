"""Run a sweep from Python: `sweeper.run(...) -> SweepResult` (what `sweeper run` does).

    import sweeper
    result = sweeper.run("search_spaces/quick.yaml", results="results", executor="local",
                         seeds=2, budget={"steps": 100})
    result                    # the summary and the cell table, as `sweeper run` prints them
    res = result.load()       # the same `Results` as analysis.load("results", "quick")

Overrides are top-level keys of the sweep file (name, fixed, axes, seeds, budget, ...): a
mapping is merged into the file's group by group (`axes={"task": {"hardness": {...}}}` replaces
the hardness axis and keeps the others), and each parameter's value or axis is replaced whole;
anything else replaces the key. The result is validated like a file, with the same one-line
errors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sweeper.executors import EXECUTORS, make_executor  # noqa: F401 (the names api offers)

DEFAULT_RESULTS = "./results"


@dataclass
class SweepResult:
    """What a run did and where its results are; `.load()` reads them."""

    sweep: str
    results: str  # the results root (a path or URI)
    expanded: int  # trials the file expands to (adaptive: the search's budget)
    already_stored: int  # trials stored before this run
    ran: int  # trials this run stored
    packs: int | None  # packs this run started
    seconds: float
    status: dict[str, int]  # trials stored per status, after the run
    cells: Any = field(default=None, repr=False)  # pandas DataFrame: sweeper.results.cell_stats
    outcome: str = "learned"

    @property
    def trials_per_s(self) -> float:
        return self.ran / self.seconds if self.seconds else 0.0

    def load(self, **kwargs: Any):
        """The stored trials and trajectories: `analysis.load(results, sweep, **kwargs)`."""
        import analysis

        return analysis.load(self.results, self.sweep, **kwargs)

    def summary(self) -> str:
        stored = ", ".join(f"{n} {s}" for s, n in sorted(self.status.items())) or "nothing"
        packs = f", {self.packs} packs" if self.packs is not None else ""
        return (f"sweep {self.sweep}: ran {self.ran} trials in {self.seconds:.1f} s "
                f"({self.trials_per_s:.2f} trials/s{packs}); stored: {stored}; results in "
                f"{self.results.rstrip('/')}/{self.sweep}")

    def __repr__(self) -> str:
        lines = [f"SweepResult({self.summary()})"]
        if self.cells is not None and len(self.cells):
            lines += ["", f"cells ({self.outcome}):", self.cells.to_string(index=False,
                                                                         max_rows=40)]
        return "\n".join(lines)


def sweep_from(source: str | os.PathLike | Mapping[str, Any],
               overrides: Mapping[str, Any] | None = None):
    """A validated `SweepFile` from a path, YAML text or a mapping, with overrides merged."""
    import yaml

    from sweeper.search_space import load_sweep, parse_sweep, parse_yaml

    if isinstance(source, Mapping):
        text = yaml.safe_dump(dict(source), sort_keys=False)
    else:
        text = os.fspath(source)
        if os.path.exists(text) or not _looks_like_yaml(text):
            if not overrides:
                return load_sweep(text)
            with open(text) as f:
                text = f.read()
    if not overrides:
        return parse_sweep(text)
    data = parse_yaml(text)
    return parse_sweep(yaml.safe_dump(_merged(data, overrides), sort_keys=False))


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


def run(sweep: str | os.PathLike | Mapping[str, Any], *, results: str | None = None,
        executor: str = "ray", address: str | None = None, num_cpus: int | None = None,
        pack_size: int | None = None, retries: int | None = None, device: str | None = None,
        results_shared: bool = False, verbose: bool = False, stream=None,
        **overrides: Any) -> SweepResult:
    """Run what of a sweep is not stored yet; see the module's docstring."""
    from sweeper.plan import make_plan
    from sweeper.results import Store
    from sweeper.runner import phase_outcome, run_sweep

    spec = sweep_from(sweep, overrides)
    if retries is not None:
        spec = replace(spec, retries=retries)
    if device is not None:
        from sweeper.sweep_commands import with_device

        spec = with_device(spec, device)
    root = results or spec.results or DEFAULT_RESULTS
    store = Store.open(root)
    make_plan(spec, set())  # expand once up front: a bad cell fails before anything is written
    runner = make_executor(executor, address=address, num_cpus=num_cpus,
                           results_shared=results_shared, verbose=verbose)
    runner.check(spec, store)  # before it starts and before anything is written
    with runner:
        summary = run_sweep(spec, store, runner, pack_size, stream=stream)
    outcome = phase_outcome(spec)
    return SweepResult(spec.name, root, summary["expanded"], summary["already_stored"],
                       summary["ran"], summary["packs"], summary["seconds"], summary["status"],
                       cells_of(store, spec, outcome), outcome)


def cells_of(store, spec, outcome: str = "learned"):
    """The sweep's cells (`sweeper.results.cell_stats` of `outcome` over its axes), or None
    when nothing is stored."""
    from sweeper.results import SUCCESS_OUTCOMES, cell_stats

    data = store.read(spec.name, "trials")
    if data is None:
        return None
    return cell_stats(data.to_pandas(), [a.column for a in spec.axes], outcome,
                      SUCCESS_OUTCOMES[outcome])

"""The package's import graph against docs/architecture.md: no circles, and no layer importing
one above it.

The graph is read from the source: every `import`, function-level ones included (a lazy import
that closes a loop counts) and those under `if TYPE_CHECKING:` too (an annotation is a real
design dependency: a reader follows it); `from pkg import name` is an edge to `pkg.name` when
that is a module, else to `pkg`; `importlib.import_module("...")` with a literal name counts.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sweeper", "analysis")

# docs/architecture.md's layers, top first: a module may import its own layer and those below.
# Patterns are fnmatch over dotted module names; the first layer that matches a module owns it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("command line", ("sweeper.cli", "sweeper.sweep_commands", "sweeper.__main__",
                      "analysis.cli", "analysis.__main__", "sweeper.families.*.probes")),
    ("library entry", ("sweeper", "sweeper.api")),
    ("analysis", ("analysis", "analysis.*", "sweeper.report")),
    ("execution", ("sweeper.runner", "sweeper.recording",
                   "sweeper.executors", "sweeper.executors.*", "sweeper.interrupts")),
    ("planning", ("sweeper.plan", "sweeper.admission", "sweeper.identity")),
    ("sweep file", ("sweeper.overrides", "sweeper.search_space")),
    ("search", ("sweeper.strategies", "sweeper.strategies.*")),
    ("sweep parts", ("sweeper.sweep_fields", "sweeper.cells", "sweeper.packing",
                     "sweeper.estimate", "sweeper.devices")),
    ("training", ("sweeper.train", "sweeper.workers", "sweeper.optim", "sweeper.metrics",
                  "sweeper.layers", "sweeper.layers.*", "sweeper.families.*.model",
                  "sweeper.families.*.data", "sweeper.families.*.experiment")),
    ("trial spec", ("sweeper.spec", "sweeper.seeding")),
    ("families", ("sweeper.families", "sweeper.families.*", "sweeper.registry")),
    ("results contract", ("sweeper.results", "sweeper.results.*", "sweeper.errors",
                          "sweeper.numbers")),
]


@functools.cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    mods = modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parent + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                    node.func, "id", None)) == "import_module" and node.args
                  and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                targets = [node.args[0].value]
            for target in targets:
                owner = known(target)
                if owner and owner != module:
                    graph[module].add(owner)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def layer_of(module: str) -> int:
    for rank, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            return rank
    raise AssertionError(f"{module} is in no layer of docs/architecture.md: add it to LAYERS")


def test_the_circle_finder_finds_a_hand_built_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_graph_sees_function_level_and_import_module_imports():
    graph = import_graph()
    assert "sweeper.overrides" in graph["sweeper.api"]  # imported inside `run`
    assert "sweeper.api" in graph["sweeper"]  # imported inside `sweeper.run`
    assert "sweeper.strategies.grid" not in graph["sweeper.strategies"]  # a string in a table


def test_type_checking_imports_count():
    graph = import_graph()
    assert "sweeper.results" in graph["sweeper.strategies.base"]  # `Store`, annotations only


def test_old_manifests_are_read_with_the_facts_the_strategies_state_now():
    from sweeper.results.reading import HISTORICAL_SEARCH_FACTS, search_facts
    from sweeper.strategies import STRATEGIES, strategy_class

    assert set(HISTORICAL_SEARCH_FACTS) == set(STRATEGIES)
    for kind in STRATEGIES:
        rules = strategy_class(kind)
        facts = search_facts({"search": kind})
        assert facts == search_facts({"search": kind, "search_draws_cells": rules.draws_cells,
                                      "search_samples_level_set": rules.samples_level_set,
                                      "search_adaptive": rules.adaptive})


ANALYSIS_READS = ("sweeper.results", "sweeper.results.*", "sweeper.errors", "sweeper.numbers",
                  "sweeper.families", "sweeper.registry", "analysis", "analysis.*")


def test_analysis_reads_sweeps_only_through_the_results_contract_and_the_registry():
    for module, targets in import_graph().items():
        if module.startswith("analysis"):
            other = sorted(t for t in targets
                           if not any(fnmatch.fnmatchcase(t, p) for p in ANALYSIS_READS))
            assert not other, f"{module} imports {other}"


def test_there_are_no_import_circles():
    assert circles(import_graph()) == []


def test_every_module_is_in_a_layer():
    for module in modules():
        layer_of(module)


@pytest.mark.parametrize("module", sorted(modules()))
def test_a_module_imports_only_its_layer_and_those_below(module):
    graph = import_graph()
    mine = layer_of(module)
    upward = sorted(t for t in graph[module] if layer_of(t) < mine)
    assert not upward, (f"{module} ({LAYERS[mine][0]}) imports a higher layer: " + ", ".join(
        f"{t} ({LAYERS[layer_of(t)][0]})" for t in upward))


def test_no_module_outside_the_strategies_branches_on_the_search_type():
    """The strategies own their type (`SearchRules`): nothing else compares a `.type` with a
    search type's name (`search.type == "optuna"`) or tests it against a set of names."""
    from sweeper.strategies import STRATEGIES

    found = []
    for module, path in modules().items():
        if module.startswith("sweeper.strategies"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            names = {c.value for side in sides for c in ast.walk(side)
                     if isinstance(c, ast.Constant) and c.value in STRATEGIES}
            typed = any(isinstance(s, ast.Attribute) and s.attr == "type" for s in sides)
            if names and typed:
                found.append(f"{module}:{node.lineno}")
    assert found == []


def benchmark_graph() -> dict[str, set[str]]:
    """benchmarks/*.py import each other by file name (each puts its folder on sys.path)."""
    files = {p.stem: p for p in (ROOT / "benchmarks").glob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def test_the_benchmarks_import_each_other_without_a_circle():
    graph = benchmark_graph()
    assert "throughput" in graph["fast_paths"] and "throughput" in graph["jax_anchor"]
    assert circles(graph) == []

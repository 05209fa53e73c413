"""The sweep-file schema and its validation (the format, key by key: docs/sweep-files.md).

A sweep file (YAML) says what to run; `sweeper.plan` expands it into trial specs. Everything is
checked before anything runs, and each error names its path in the file and what is allowed:

    name: quick                         # one folder name under the results root
    task: copy-v1                       # task and model ids (`sweeper tasks` lists them)
    model: seq2seq
    fixed:                              # values every trial shares, by group
      task: {length: 6}
      model: {width: 32}
      train: {batch_size: 64}
    axes:                               # what varies: grid | choice | uniform | loguniform | int
      task:
        cooccurrence: {grid: [0.0, 0.5]}
        hardness: {grid: [0.0, 1.0]}
      model:
        heads: {grid: [1, 4]}
    seeds: 3                            # N seeds per cell (0..N-1), or a list of seeds
    search: {type: grid}                # or {type: random, trials: 20, seed: 0}
                                        # or {type: optuna, trials: 20, objective: best_accuracy,
                                        #     direction: maximize, seed: 0}
                                        # or {type: boundary, trials: 300, target: 0.5,
                                        #     margin: 0.1, seeds_per_proposal: 2}
    scheduler: {type: asha, metric: accuracy, mode: max, grace_period: 50, reduction_factor: 3}
    budget: {steps: 200}                # the step budget (same as fixed.train.steps)
                                        # or {steps: 400, stop: decided, margin: 20}: each
                                        # trial stops 20 steps after its first-passage
                                        # outcomes are all reached (docs/sweep-files.md)
    resources: {cpu: 1, gpu: 0}         # per Tune trial (one pack); fractions allowed
    pack_size: auto                     # or an integer
    retries: 2                          # attempts after the first for a pack that raises
    device: cpu                         # or cuda
    results: ./results                  # results root (local path or pyarrow.fs URI)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from sweeper.errors import ParameterError, SweeperInputError
from sweeper.families import MODELS, TASKS, Family, check_pair, family_of
from sweeper.numbers import MAX_INTEGER_TEXT, MAX_SEED, check_float, shown
from sweeper.registry import Entry, Param
from sweeper.results import check_sweep_name
from sweeper.results.errors import ResultsInputError
from sweeper.results.roots import check_results_root
from sweeper.spec import TRAIN_ENTRY, check_device, make_spec
from sweeper.sweep_fields import (
    MAX_CPUS,
    MAX_GPUS,
    MAX_PACK_SIZE,
    MAX_RETRIES,
    MIN_SHARE,
    Axis,
    Search,
    SweepFileError,
    fail,
    int_at,
    key_path,
    mapping_at,
    number_at,
    suggest,
    suggest_plain,
)

TOP_KEYS = ("name", "task", "model", "fixed", "axes", "seeds", "search", "scheduler", "budget",
            "resources", "pack_size", "retries", "device", "results", "description")
GROUPS = ("task", "model", "train")
AXIS_KINDS = ("grid", "choice", "uniform", "loguniform", "int")


@dataclass(frozen=True)
class Scheduler:
    metric: str
    mode: str = "max"
    grace_period: int = 1
    reduction_factor: float = 3.0


@dataclass(frozen=True)
class SweepFile:
    name: str
    task: str
    model: str
    fixed: dict[str, dict[str, Any]]
    axes: tuple[Axis, ...]
    seeds: tuple[int, ...]
    search: Search
    scheduler: Scheduler | None
    resources: dict[str, float]
    pack_size: int | None  # None: chosen automatically
    retries: int
    device: str
    results: str | None
    text: str = field(default="", compare=False, repr=False)

    @property
    def family(self) -> Family:
        return family_of(self.task)

    def entry(self, group: str) -> Entry:
        return {"task": TASKS.get(self.task), "model": MODELS.get(self.model),
                "train": TRAIN_ENTRY}[group]


# -- YAML, bounded ---------------------------------------------------------------------------
class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with numbers as people write them: YAML 1.1 reads `1e-4` and `3E-3`
    as strings (its floats need a dot); YAML 1.2, and every researcher, reads them as numbers."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+\Z"),
    list("-+0123456789"))


# What a sweep file may be: a few kB in practice; these bounds keep a hostile or broken file
# (a binary, an alias bomb, 20,000 nested brackets, a 5,000-digit integer) from hanging or
# crashing the parser.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_VALUES = 100_000  # scalars, lists and mappings, aliases expanded
INT_TAG = "tag:yaml.org,2002:int"


def _check_nodes(root: yaml.Node, prefix: str = "") -> None:
    """Duplicate keys, keys that are not plain scalars, integers too long to read, depth and
    expanded size, walking each node once (an alias repeats a node; its expanded size is
    counted, not walked). Paths start at `prefix` ("": the file)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, str, int, bool]] = [(root, prefix, 0, False)]
    while stack:
        node, path, depth, children_done = stack.pop()
        if depth > MAX_DEPTH:
            raise SweepFileError(f"{path or 'the file'}: nested deeper than {MAX_DEPTH} levels; "
                                 "allowed: a sweep file's few levels")
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            _check_scalar(node, path)
            sizes[id(node)] = 1
            continue
        children = ([v for _, v in node.value] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[id(node)] > MAX_VALUES:
                raise SweepFileError(f"{path or 'the file'}: expands to more than {MAX_VALUES:,} "
                                     "values (YAML aliases); allowed: a sweep file's few values")
            continue
        stack.append((node, path, depth, True))
        if isinstance(node, yaml.MappingNode):
            _check_keys(node, path)
            for key_node, value_node in node.value:
                stack.append((value_node, key_path(path, key_node.value), depth + 1, False))
        else:
            for i, item in enumerate(node.value):
                stack.append((item, f"{path}[{i}]", depth + 1, False))


TAG_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false",
             "timestamp": "a date (YYYY-MM-DD) or time", "null": "null", "binary": "base64 text"}


def _check_scalar(node: yaml.ScalarNode, path: str) -> None:
    """An integer written with more than MAX_INTEGER_TEXT characters is refused before it is
    read: Python reads at most 4,300 digits, and no field takes more than int64's 19. A scalar
    whose tag (`!!int 'eight'`, `!!bool maybe`: an explicit tag, which YAML applies whatever
    the text) does not read as that tag is refused naming its field, before any is built
    (PyYAML's constructors raise ValueError, KeyError, AttributeError or IndexError)."""
    line = node.start_mark.line + 1
    if node.tag == INT_TAG and len(node.value) > MAX_INTEGER_TEXT:
        raise SweepFileError(f"{path or 'the file'}: got an integer of {len(node.value):,} "
                             f"characters (line {line}); allowed: an integer within int64 "
                             "(at most 19 digits)")
    kind = node.tag.rsplit(":", 1)[-1] if node.tag.startswith("tag:yaml.org,2002:") else None
    if kind not in TAG_KINDS:
        return  # str, or a tag the loader refuses as it builds (one line, `parse_yaml`)
    try:
        _Loader.yaml_constructors[node.tag](_Loader(""), node)
    except Exception:  # noqa: BLE001 - whatever the constructor raises: the text does not read
        raise SweepFileError(f"{path or 'the file'}: got {shown(node.value)} tagged !!{kind} "
                             f"(line {line}); allowed: {TAG_KINDS[kind]}, or no tag") from None


def _check_keys(node: yaml.MappingNode, path: str) -> None:
    """Keys are plain scalars, each given once (a duplicate key is refused, never silently
    the last one)."""
    seen: set[str] = set()
    for key_node, _ in node.value:
        line = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            raise SweepFileError(f"{path or 'the file'}: a key that is a list or mapping (line "
                                 f"{line}); allowed: plain names as keys")
        if key_node.value in seen:
            raise SweepFileError(f"{key_path(path, key_node.value)}: given twice (line {line}); "
                                 "allowed: each key once")
        seen.add(key_node.value)


def _load_checked(text: str, prefix: str = "") -> Any:
    """YAML text read by `_Loader` after its nodes pass `_check_nodes`: one parse. Raises
    SweepFileError for a checked bound, yaml.YAMLError for text that is not YAML."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, prefix)
        return loader.construct_document(node)
    except RecursionError:
        raise SweepFileError(f"{prefix or 'the file'}: nested deeper than {MAX_DEPTH} levels; "
                             "allowed: a sweep file's few levels") from None
    finally:
        loader.dispose()


def load_yaml_value(text: str, where: str) -> Any:
    """One YAML value read as a sweep file reads it, with the same bounds (`--set` values);
    its errors name `where`. Raises yaml.YAMLError for text that is not YAML."""
    if len(text) > MAX_FILE_BYTES:
        raise SweepFileError(f"{where}: {len(text):,} characters; allowed: up to "
                             f"{MAX_FILE_BYTES:,}")
    return _load_checked(text, where)


def parse_yaml(text: str) -> Any:
    """A sweep file's YAML, bounded (`_check_nodes`), or a one-line SweepFileError."""
    if len(text) > MAX_FILE_BYTES:
        raise SweepFileError(f"the file: {len(text):,} characters; allowed: up to "
                             f"{MAX_FILE_BYTES:,}")
    try:
        return _load_checked(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SweepFileError(f"{where}not valid YAML ({problem}); allowed: a YAML mapping of "
                             "the sweep-file keys (see sweeper/search_space.py)") from None


# -- validation helpers --------------------------------------------------------------------
def _param(entry: Entry, group: str, name: str, path: str) -> Param:
    names = [p.name for p in entry.params]
    if name not in names:
        raise SweepFileError(f"{path}: unknown {entry.id} parameter{suggest(name, names)}; "
                             f"allowed: {', '.join(sorted(names))}")
    return entry.param(name)


def _check_value(param: Param, value: Any, path: str) -> Any:
    return _check_value_with(param.check, value, path)


def _check_value_with(check, value: Any, path: str) -> Any:
    """`check(value, path)` with its ParameterError as the sweep file's error."""
    try:
        return check(value, path)
    except ParameterError as exc:
        raise SweepFileError(str(exc)) from None


# -- the parts of a sweep file -------------------------------------------------------------
def _fixed(raw: Any, sweep: dict) -> dict[str, dict[str, Any]]:
    fixed = mapping_at(raw, "fixed", GROUPS)
    out: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
    for group, values in fixed.items():
        entry = sweep["entries"][group]
        for name, value in mapping_at(values, f"fixed.{group}").items():
            path = f"fixed.{group}.{name}"
            out[group][name] = _check_value(_param(entry, group, name, path), value, path)
    return out


def _axes(raw: Any, sweep: dict, fixed: dict) -> tuple[Axis, ...]:
    axes = []
    for group, params in mapping_at(raw, "axes", GROUPS).items():
        entry = sweep["entries"][group]
        for name, spec in mapping_at(params, f"axes.{group}").items():
            path = f"axes.{group}.{name}"
            param = _param(entry, group, name, path)
            if name in fixed[group]:
                raise SweepFileError(f"{path}: {group}.{name} is given twice (also in "
                                     f"fixed.{group}); allowed: an axis or a fixed value")
            axes.append(_axis(group, name, param, spec, path))
    return tuple(axes)


def _axis(group: str, name: str, param: Param, spec: Any, path: str) -> Axis:
    spec = mapping_at(spec, path, AXIS_KINDS)
    if len(spec) != 1:
        raise fail(path, spec, "exactly one of " + ", ".join(AXIS_KINDS))
    (kind, values), = spec.items()
    where = f"{path}.{kind}"
    if param.type is list and kind != "grid":  # lists are not Optuna choices or ranges
        raise fail(where, values, f"grid ({group}.{name} takes {param.allowed()}: an axis "
                                   "of lists is a grid)")
    if kind in ("grid", "choice"):
        if not isinstance(values, list) or not values:
            raise fail(where, values, "a non-empty list of values")
        checked = [_check_value(param, v, f"{where}[{i}]") for i, v in enumerate(values)]
        repeated = _first_repeat(tuple(v) if isinstance(v, list) else v for v in checked)
        if repeated is not None:
            raise fail(f"{where}[{repeated}]", values[repeated],
                       f"distinct values ({shown(values[repeated])} is given twice)")
        return Axis(group, name, kind, tuple(checked))
    if not isinstance(values, list) or len(values) != 2:
        raise fail(where, values, "[low, high]")
    if kind == "int" and param.type is not int:
        raise fail(where, values, f"grid, choice, uniform or loguniform ({group}.{name} takes "
                                   f"{param.allowed()})")
    if kind in ("uniform", "loguniform") and param.type is not float:
        raise fail(where, values, f"grid, choice{', int' if param.type is int else ''} "
                                   f"({group}.{name} takes {param.allowed()})")
    low, high = (_check_value(param, v, f"{where}[{i}]") for i, v in enumerate(values))
    if not low < high:
        raise fail(where, values, "[low, high] with low < high")
    if kind == "loguniform" and low <= 0:
        raise fail(f"{where}[0]", values[0], "a number > 0 (log scale)")
    return Axis(group, name, kind, (low, high))


def _first_repeat(values: Iterable[Any]) -> int | None:
    """The index of the first value equal to an earlier one, or None: one pass (a list of
    100,000 seeds compared pairwise took minutes)."""
    seen: set[Any] = set()
    for i, value in enumerate(values):
        if value in seen:
            return i
        seen.add(value)
    return None


def _seeds(raw: Any) -> tuple[int, ...]:
    if raw is None:
        return (0,)
    if isinstance(raw, list):
        if not raw:
            raise fail("seeds", raw, "an integer >= 1 or a non-empty list of seeds")
        seeds = [int_at(s, f"seeds[{i}]", 0, MAX_SEED) for i, s in enumerate(raw)]
        repeated = _first_repeat(seeds)
        if repeated is not None:
            raise fail(f"seeds[{repeated}]", seeds[repeated], "distinct seeds")
        return tuple(seeds)
    return tuple(range(int_at(raw, "seeds", 1, 100_000)))


def _search(raw: Any, axes: tuple[Axis, ...], family: Family,
             seeds: tuple[int, ...] = (0,)) -> Search:
    """The `search:` section, read by its type's strategy (`sweeper.strategies`): each search
    type says which keys it takes and what they may hold."""
    from sweeper.strategies import STRATEGIES, strategy_class

    raw = {"type": "grid"} if raw is None else raw
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str) \
            or raw.get("type") not in STRATEGIES:
        got = raw.get("type") if isinstance(raw, dict) else raw
        *most, last = STRATEGIES
        raise fail("search.type", got, f"{', '.join(most)} or {last}")
    rules = strategy_class(raw["type"])
    mapping_at(raw, "search", rules.section_keys)
    return rules.read_search(raw, axes, family, seeds)


MAX_REDUCTION_FACTOR = 100  # ASHA keeps 1 in this many at each rung (2 to 4 is usual)


def _scheduler(raw: Any, family: Family, steps: int) -> Scheduler | None:
    if raw is None:
        return None
    raw = mapping_at(raw, "scheduler", ("type", "metric", "mode", "grace_period",
                                         "reduction_factor"))
    if raw.get("type") != "asha":
        raise fail("scheduler.type", raw.get("type"), "asha")
    metrics = tuple(m.name for m in family.scalar_metrics())
    metric = raw.get("metric")
    if metric not in metrics:
        raise SweepFileError(f"scheduler.metric: got {shown(metric)}"
                             f"{suggest_plain(metric, metrics)}; allowed: {', '.join(metrics)}")
    mode = raw.get("mode", "max")
    if mode not in ("max", "min"):
        raise fail("scheduler.mode", mode, "max or min")
    grace = int_at(raw.get("grace_period", 1), "scheduler.grace_period", 1, steps)
    factor = number_at(raw.get("reduction_factor", 3), "scheduler.reduction_factor", 1,
                        strict=True, high=MAX_REDUCTION_FACTOR)
    rungs = asha_rungs(steps, grace, factor)
    if rungs > MAX_RUNGS:  # ASHA keeps a table per rung: a factor near 1 makes millions
        least = (steps / grace) ** (1 / (MAX_RUNGS - 1))
        raise SweepFileError(
            f"scheduler.reduction_factor: got {shown(factor)}, which makes {rungs:.3g} rungs "
            f"between grace_period {grace} and {steps} steps; allowed: a factor of at least "
            f"{math.ceil(least * 1000) / 1000:g} here (at most {MAX_RUNGS} rungs; 2 to 4 is usual)")
    return Scheduler(metric, mode, grace, factor)


MAX_RUNGS = 32  # ASHA's rungs between grace_period and the budget: 2 to 10 in practice


def asha_rungs(steps: int, grace: int, factor: float) -> float:
    """The rungs Ray's ASHA builds: int(log(max_t / grace_period) / log(factor)) + 1."""
    return math.floor(math.log(steps / grace) / math.log(factor)) + 1


def _resources(raw: Any) -> dict[str, float]:
    raw = mapping_at(raw, "resources", ("cpu", "gpu"))
    cpu = number_at(raw.get("cpu", 1), "resources.cpu", MIN_SHARE, high=MAX_CPUS)
    gpu = raw.get("gpu", 0)
    if gpu != 0 or isinstance(gpu, bool):  # 0: no GPU
        gpu = check_float(gpu, "resources.gpu", MIN_SHARE, MAX_GPUS, error=SweepFileError,
                          allowed=f"0, or a number >= {MIN_SHARE:g} and <= {MAX_GPUS}")
    return {"cpu": cpu, "gpu": float(gpu)}


# -- the whole file ------------------------------------------------------------------------
def load_sweep(path: str) -> SweepFile:
    """Read and validate a sweep file; "-" reads it from standard input."""
    return parse_sweep(read_sweep_text(path))


def read_sweep_text(path: str) -> str:
    """A sweep file's text, bounded and decoded ("-": standard input), or a one-line error.

    The file must be a regular file: a FIFO would wait for a writer for ever, a device (say
    /dev/zero) never ends, a folder cannot be read; each is refused at once (the FIFO is
    opened without waiting, then looked at). A UTF-8 byte-order mark at the start is text,
    and is dropped."""
    if path == "-":
        import sys

        if sys.stdin is None:  # `sweeper plan - <&-`: Python leaves a closed stdin as None
            raise SweepFileError("-: standard input is closed; allowed: a sweep file piped "
                                 "in (sweeper plan - < sweep.yaml), or its path")
        stdin = getattr(sys.stdin, "buffer", None)
        try:
            data = stdin.read(MAX_FILE_BYTES + 1) if stdin is not None else \
                sys.stdin.read(MAX_FILE_BYTES + 1).encode()
        except (OSError, ValueError) as exc:  # a closed or unreadable descriptor
            raise SweepFileError(f"-: standard input could not be read ({exc.__class__.__name__}"
                                 "); allowed: a sweep file piped in, or its path") from None
    else:
        data = _read_regular_file(path)
    if len(data) > MAX_FILE_BYTES:
        raise SweepFileError(f"{path}: larger than {MAX_FILE_BYTES:,} bytes; allowed: a sweep "
                             "file (a few kB of YAML)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SweepFileError(f"{path}: not UTF-8 text; allowed: a YAML sweep file") from None


def _read_regular_file(path: str) -> bytes:
    """Up to MAX_FILE_BYTES + 1 bytes of `path`, which must be a regular file."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO: opened, never waited on
    except OSError as exc:
        raise SweepFileError(f"{path}: cannot read ({exc.strerror}); allowed: a readable "
                             "sweep file (or - for standard input)") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode)
                or stat.S_ISBLK(mode) else "not a regular file")
        raise SweepFileError(f"{path}: {kind}; allowed: a regular file (or - to read the sweep "
                             "from standard input)")
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise SweepFileError(f"{path}: cannot read ({exc.strerror}); allowed: a readable "
                                 "sweep file") from None


def parse_sweep(text: str) -> SweepFile:
    raw = parse_yaml(text)
    raw = mapping_at(raw, "", TOP_KEYS)
    for key in ("name", "task", "model"):
        if key not in raw:
            raise fail(key, None, f"a {key} (required)")
    for key in ("task", "model"):
        if not isinstance(raw[key], str):
            raise fail(key, raw[key], f"a {key} id (see sweeper tasks)")
    try:
        name = check_sweep_name(raw["name"], "name")
    except ResultsInputError as exc:  # the results contract's name rule
        raise SweepFileError(str(exc)) from None
    try:
        task, model = TASKS.get(raw["task"]).id, MODELS.get(raw["model"]).id
    except SweeperInputError as exc:
        raise SweepFileError(f"{'task' if raw['task'] not in TASKS.ids() else 'model'}: "
                             f"{exc}") from None
    try:
        family = check_pair(task, model)
    except SweeperInputError as exc:
        raise SweepFileError(str(exc)) from None
    entries = {"task": TASKS.get(task), "model": MODELS.get(model), "train": TRAIN_ENTRY}
    fixed = _fixed(raw.get("fixed"), {"entries": entries})
    _budget(mapping_at(raw.get("budget"), "budget", tuple(BUDGET_KEYS)), fixed["train"])
    axes = _axes(raw.get("axes"), {"entries": entries}, fixed)
    seeds = _seeds(raw.get("seeds"))
    search = _search(raw.get("search"), axes, family, seeds)
    device = _check_value_with(check_device, raw.get("device", "cpu"), "device")
    try:
        probe = make_spec(task, model, fixed["task"], fixed["model"], fixed["train"], 0, device)
    except SweeperInputError as exc:
        raise SweepFileError(f"fixed: {exc}") from None
    scheduler = _scheduler(raw.get("scheduler"), family, probe.train["steps"])
    if scheduler is not None and (probe.train["stop"] is not None or any(
            (a.group, a.name) == ("train", "stop") for a in axes)):
        raise SweepFileError("scheduler: early stopping by a metric (asha) and budget.stop: "
                             "decided would stop packs two ways; allowed: one of them")
    pack_size = raw.get("pack_size", "auto")
    pack_size = None if pack_size == "auto" else int_at(pack_size, "pack_size", 1, MAX_PACK_SIZE)
    retries = int_at(raw.get("retries", 2), "retries", 0, MAX_RETRIES)
    results = raw.get("results")
    if results is not None:
        try:
            check_results_root(results, "results")
        except ResultsInputError as exc:
            raise SweepFileError(str(exc)) from None
    _check_trial_count(axes, seeds, search)
    sweep = SweepFile(name, task, model, fixed, axes, seeds, search, scheduler,
                      _resources(raw.get("resources")), pack_size, retries, device, results,
                      text)
    return sweep


# budget's keys and the train parameter each sets: the step budget, and the rule that stops a
# trial before it once its first-passage outcomes are decided (`train.stop`, `stop_margin`)
BUDGET_KEYS = {"steps": "steps", "stop": "stop", "margin": "stop_margin"}


def _budget(budget: dict[str, Any], train: dict[str, Any]) -> None:
    """Put the sweep's `budget` into its fixed train parameters (each given once)."""
    for key, name in BUDGET_KEYS.items():
        if key not in budget:
            continue
        if name in train:
            raise SweepFileError(f"budget.{key}: given twice (also in fixed.train.{name}); "
                                 "allowed: one of them")
        train[name] = _check_value(TRAIN_ENTRY.param(name), budget[key], f"budget.{key}")
    if budget.get("margin") is not None and train.get("stop") is None:
        raise SweepFileError(f"budget.margin: got {budget['margin']}; allowed: only with "
                             "budget.stop: decided")


# Planning costs ~6 us and ~350 bytes a trial (a cell's config is built once, its seeds put
# into its text: `TrialSpec.with_seed`): 1,000,000 trials plan in ~7 s and ~350 MB on one core
# (benchmarks/scale.py, docs/scaling.md). The bound is the driver's memory: past it, a study is
# several sweep files (or an adaptive search, whose budget is its trials).
MAX_TRIALS = 1_000_000


def _check_trial_count(axes: tuple[Axis, ...], seeds: tuple[int, ...], search: Search) -> None:
    """Refuse a sweep too large to plan, from the axes' sizes: nothing is expanded first."""
    from sweeper.strategies import strategy_class

    cells, how = strategy_class(search.type).cells_to_plan(axes, search)
    total = cells * len(seeds)
    if total > MAX_TRIALS:
        raise SweepFileError(f"axes: {how} x {len(seeds)} seeds = {total:,} trials; allowed: up "
                             f"to {MAX_TRIALS:,} per sweep file, what one driver plans in memory "
                             "(split it into several sweeps)")

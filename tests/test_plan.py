"""Expansion is pure and deterministic; packs keep every spec once; `sweeper plan` shows the
count, a table and what is stored, and runs nothing."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sweep_helpers import (
    REPO,
    TINY,
    all_files,
    fake_results,
    subprocess_env,
    sweep_text,
    variant,
    write_sweep,
)

import sweeper.runner  # noqa: F401 (binds sys.stderr as a default; see test_sweep_cli)
from sweeper.cli import main
from sweeper.errors import SweeperInputError
from sweeper.packing import MAX_CPU_PACK, form_packs, pack_cost, pack_counts
from sweeper.plan import cells, expand, make_plan
from sweeper.results import Store
from sweeper.search_space import parse_sweep
from sweeper.spec import make_spec

PROPERTY = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _rounded(low: float, high: float, digits: int) -> st.SearchStrategy[float]:
    # no subnormals: training in this process may have turned on flush-to-zero (pin_threads)
    floats = st.floats(low, high, allow_nan=False, allow_subnormal=False)
    return floats.map(lambda x: round(x, digits))


# Real parameters of copy-v1 / seq2seq / train, each with a strategy of valid values.
GRID_VALUES = {
    # whole multiples of L: every length keeps them as given (others round to an N)
    "task.cooccurrence": st.sampled_from([0.0, 1.0, 2.0]),
    "task.hardness": _rounded(0, 1, 3),
    "task.length": st.integers(2, 10),
    "task.mapping": st.sampled_from(["identity", "permutation"]),
    "task.repeat": st.booleans(),
    "model.heads": st.integers(1, 4),
    "model.width": st.integers(4, 16),
    "model.cell": st.sampled_from(["lstm", "gru"]),
    "model.attention": st.sampled_from(["learned", "uniform"]),
    "train.lr": _rounded(1e-4, 1.0, 5),
    "train.batch_size": st.integers(1, 64),
    "train.eval_every": st.integers(1, 20),
}
# Parameters that take ranges, with a valid [low, high] strategy each.
RANGES = {
    "task.hardness": ("uniform", 0.0, 1.0),
    "task.cooccurrence": ("uniform", 0.0, 2.0),
    "train.lr": ("loguniform", 1e-5, 1.0),
    "model.heads": ("int", 1, 8),
    "task.length": ("int", 2, 12),
}


def _base() -> dict:
    return variant(**{"axes": {}, "fixed.train": {"batch_size": 8, "eval_size": 8},
                      "budget.steps": 20})


def _set_axis(data: dict, path: str, spec: dict) -> None:
    group, name = path.split(".")
    data["fixed"].get(group, {}).pop(name, None)  # an axis may not also be fixed
    data["axes"].setdefault(group, {})[name] = spec


@st.composite
def grid_sweeps(draw) -> tuple[dict, list[tuple[str, list]]]:
    paths = draw(st.lists(st.sampled_from(sorted(GRID_VALUES)), min_size=1, max_size=4,
                          unique=True))
    data = _base()
    axes = []
    for path in paths:
        values = draw(st.lists(GRID_VALUES[path], min_size=1, max_size=3, unique=True))
        _set_axis(data, path, {draw(st.sampled_from(["grid", "choice"])): values})
        axes.append((path, values))
    data["seeds"] = draw(st.one_of(st.integers(1, 3),
                                   st.lists(st.integers(0, 50), min_size=1, max_size=3,
                                            unique=True)))
    return data, axes


@st.composite
def random_sweeps(draw) -> dict:
    data = _base()
    for path in draw(st.lists(st.sampled_from(sorted(RANGES)), min_size=1, max_size=3,
                              unique=True)):
        kind, low, high = RANGES[path]
        _set_axis(data, path, {kind: [low, high]})
    if draw(st.booleans()):
        _set_axis(data, "model.cell", {"choice": ["lstm", "gru"]})
    data["seeds"] = draw(st.integers(1, 3))
    data["search"] = {"type": "random", "trials": draw(st.integers(1, 12)),
                      "seed": draw(st.integers(0, 2**31))}
    return data


def column(path: str) -> str:
    """The trials-table column of an axis path: the same name (one name per setting)."""
    return path


def _seeds(data: dict) -> list[int]:
    return list(range(data["seeds"])) if isinstance(data["seeds"], int) else data["seeds"]


@PROPERTY
@given(grid_sweeps())
def test_grid_expansion_is_deterministic_and_complete(drawn):
    data, axes = drawn
    text = sweep_text(data)
    first, second = expand(parse_sweep(text)), expand(parse_sweep(text))
    assert [s.canonical_json() for s in first] == [s.canonical_json() for s in second]
    ids = [s.trial_id for s in first]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids)
    seeds = _seeds(data)
    assert len(first) == math.prod(len(v) for _, v in axes) * len(seeds)
    # Order: the product of the axes in file order, then the seeds.
    in_file = [(f"{g}.{n}", next(iter(spec.values())))
               for g, params in data["axes"].items() for n, spec in params.items()]
    expected = list(itertools.product(*(v for _, v in in_file), seeds))
    got = [tuple(s.flat()[column(p)] for p, _ in in_file) + (s.seed,) for s in first]
    assert got == expected


@PROPERTY
@given(random_sweeps())
def test_random_search_is_deterministic_for_a_fixed_seed(data):
    text = sweep_text(data)
    sweep = parse_sweep(text)
    first, second = expand(sweep), expand(parse_sweep(text))
    assert [s.trial_id for s in first] == [s.trial_id for s in second]
    assert cells(sweep) == cells(parse_sweep(text))
    ids = [s.trial_id for s in first]
    assert len(set(ids)) == len(ids)
    assert len(first) <= data["search"]["trials"] * data["seeds"]
    for cell in cells(sweep):
        assert len(cell) == len(sweep.axes)
        for axis in sweep.axes:
            value = cell[axis.path]
            if axis.kind in ("grid", "choice"):
                assert value in axis.values
            else:
                low, high = axis.values
                assert low <= value <= high
                assert isinstance(value, int) == (axis.kind == "int")


def test_random_search_depends_on_its_seed():
    data = variant(**{"search": {"type": "random", "trials": 6, "seed": 1},
                      "axes.task.hardness": {"uniform": [0.0, 1.0]}})
    one = cells(parse_sweep(sweep_text(data)))
    data["search"]["seed"] = 2
    two = cells(parse_sweep(sweep_text(data)))
    assert one != two and len(one) == len(two) == 6


@PROPERTY
@given(grid_sweeps(), st.one_of(st.none(), st.integers(1, 5)), st.integers(1, 4))
def test_form_packs_keeps_every_spec_once_with_one_pack_key(drawn, pack_size, workers):
    specs = expand(parse_sweep(sweep_text(drawn[0])))
    packs = form_packs(specs, pack_size, workers)
    flat = [s.trial_id for pack in packs for s in pack]
    assert sorted(flat) == sorted(s.trial_id for s in specs)
    assert len(flat) == len(set(flat))
    for pack in packs:
        assert pack
        assert len({s.pack_key() for s in pack}) == 1
        assert len(pack) <= (pack_size or MAX_CPU_PACK)
    # Specs of one shape are never split further than the pack size needs.
    if pack_size is not None:
        by_key: dict = {}
        for s in specs:
            by_key[s.pack_key()] = by_key.get(s.pack_key(), 0) + 1
        assert len(packs) == sum(math.ceil(n / pack_size) for n in by_key.values())


def test_automatic_packs_split_shape_groups_only_until_every_worker_has_one():
    specs = expand(parse_sweep(sweep_text(variant(  # 2 shapes (heads) x 8 seeds
        seeds=8, **{"axes.task.cooccurrence": {"grid": [0.0]},
                    "axes.model": {"heads": {"grid": [1, 2]}}}))))
    sizes = lambda workers: sorted(len(p) for p in form_packs(specs, None, workers))  # noqa: E731
    assert sizes(1) == sizes(2) == [8, 8]
    assert sizes(3) == [4, 4, 8]
    assert sizes(4) == [4, 4, 4, 4]
    assert sizes(100) == [1] * 16


def test_automatic_packs_fit_the_memory_a_pack_may_use_per_shape():
    specs = expand(parse_sweep(sweep_text(variant(  # 2 shapes (widths) x 8 seeds
        seeds=8, **{"axes.task.cooccurrence": {"grid": [0.0]}, "fixed.model": {},
                    "axes.model": {"width": {"grid": [8, 64]}}}))))
    small, large = sorted({s.memory_bytes() for s in specs})
    assert large > 2 * small
    packs = form_packs(specs, None, 1, pack_bytes=2 * large)
    sizes = sorted((p[0].model_params["width"], len(p)) for p in packs)
    assert sizes == [(8, 8), (64, 2), (64, 2), (64, 2), (64, 2)]
    assert all(sum(s.memory_bytes() for s in p) <= 2 * large for p in packs)
    # an explicit pack size is the caller's to check (sweeper.admission.check_memory refuses it)
    assert [len(p) for p in form_packs(specs, 8, 1, pack_bytes=2 * large)] == [8, 8]


def test_packs_are_handed_out_longest_first_so_the_slowest_starts_first():
    quick = expand(parse_sweep((REPO / "search_spaces" / "quick.yaml").read_text()))
    for packs in (form_packs(quick, None, 2), form_packs(quick, 5, 2)):
        costs = [pack_cost(p) for p in packs]
        assert costs == sorted(costs, reverse=True)
        assert packs[0][0].model_params["heads"] == 4  # four heads cost more than one
        assert packs[-1][0].model_params["heads"] == 1
    assert sorted(s.trial_id for p in form_packs(quick, None, 2) for s in p) == sorted(
        s.trial_id for s in quick)


def test_pack_counts_keep_groups_whole_up_to_the_cap():
    assert pack_counts([12] * 6, workers=2, cap=16) == [1] * 6  # the quick sweep's shape
    assert pack_counts([40], workers=1, cap=16) == [3]
    assert pack_counts([40, 2], workers=8, cap=16) == [7, 1]  # the largest packs split first
    assert pack_counts([1, 1], workers=8, cap=16) == [1, 1]


def test_plan_pending_skips_stored_ids():
    sweep = parse_sweep(sweep_text(TINY))
    specs = expand(sweep)
    plan = make_plan(sweep, {specs[0].trial_id, "not-a-trial"})
    assert plan.pending == specs[1:]


def test_trial_ids_do_not_depend_on_the_process():
    """Same file, another interpreter with another hash seed: the same ids in the same order."""
    quick = REPO / "search_spaces" / "quick.yaml"
    code = ("from sweeper.search_space import load_sweep; from sweeper.plan import expand; "
            f"print(' '.join(s.trial_id for s in expand(load_sweep({str(quick)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=180,
                         env=subprocess_env(PYTHONHASHSEED="12345")).stdout.split()
    from sweeper.search_space import load_sweep

    assert out == [s.trial_id for s in expand(load_sweep(str(quick)))]


# -- sweeper plan ------------------------------------------------------------------------------
@pytest.fixture
def grid_file(tmp_path):
    return write_sweep(tmp_path / "tiny.yaml", variant(**{
        "axes.task.hardness": {"grid": [0.0, 1.0]}, "seeds": 3}))  # 2 x 2 cells x 3 seeds


def test_plan_prints_count_table_and_stored(grid_file, tmp_path, capsys):
    results = tmp_path / "results"
    assert main(["plan", str(grid_file), "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "tiny: 12 trials (grid search, 3 seeds per cell); 0 stored, 12 to run" in out
    header = next(line for line in out.splitlines() if "trial_id" in line)
    assert header.split() == ["trial_id", "task.cooccurrence", "task.hardness", "seed"]
    specs = expand(parse_sweep(grid_file.read_text()))
    assert specs[0].trial_id in out and specs[9].trial_id in out
    assert "... 2 more" in out  # 10 rows by default
    assert not results.exists(), "plan wrote something"

    Store.open(str(results)).write_pack("tiny", fake_results(specs[:5]))
    before = all_files(results)
    assert main(["plan", str(grid_file), "--results", str(results), "--rows", "3"]) == 0
    out = capsys.readouterr().out
    assert "12 trials" in out and "5 stored, 7 to run" in out
    assert "... 9 more" in out
    assert all_files(results) == before


def test_plan_cuts_packs_for_the_executors_slots_as_run_does(grid_file, tmp_path, capsys):
    import json

    def packs(*argv: str) -> int:
        assert main(["plan", str(grid_file), "--results", str(tmp_path / "r"), "--json",
                     "--no-estimate", *argv]) == 0
        return json.loads(capsys.readouterr().out)["packs"]

    # 9 trainings of one pack key: whole for the local executor's one slot, split for two
    assert packs("--executor", "local") == 1
    assert packs("--executor", "ray", "--num-cpus", "2") == 2
    assert packs("--executor", "local", "--workers", "3") == 3


def test_plan_of_an_adaptive_sweep(tmp_path, capsys):
    data = variant(**{"search": {"type": "optuna", "trials": 3, "objective": "best_accuracy",
                                 "direction": "maximize"},
                      "axes.task.hardness": {"uniform": [0.0, 1.0]}})
    path = write_sweep(tmp_path / "opt.yaml", data)
    assert main(["plan", str(path), "--results", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "adaptive" in out and "3 cells x 2 seeds = 6 trials" in out and "0 stored" in out


def test_plan_uses_the_results_root_of_the_file(tmp_path, capsys, monkeypatch):
    results = tmp_path / "from-file"
    path = write_sweep(tmp_path / "t.yaml", variant(results=str(results)))
    specs = expand(parse_sweep(path.read_text()))
    Store.open(str(results)).write_pack("tiny", fake_results(specs[:1]))
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(path)]) == 0
    assert "1 stored, 3 to run" in capsys.readouterr().out


def test_plan_of_a_learning_rate_axis(tmp_path, capsys):
    """train.lr is a real axis; its column in the specs and the store is train.lr too."""
    path = write_sweep(tmp_path / "lr.yaml", variant(**{
        "axes": {"train": {"lr": {"grid": [0.001, 0.01]}}}, "seeds": 1}))
    rc = main(["plan", str(path), "--results", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "lr" in out and "0.01" in out and "2 trials" in out


def test_cooccurrence_and_vocab_are_stored_as_the_effective_pair():
    spec = make_spec("copy-v1", "seq2seq", {"length": 8, "vocab": 16})
    same = make_spec("copy-v1", "seq2seq", {"length": 8, "cooccurrence": 1.0})
    assert spec.trial_id == same.trial_id
    assert spec.flat()["task.cooccurrence"] == 1.0 and spec.flat()["task.vocab"] == 16
    rounded = make_spec("copy-v1", "seq2seq", {"length": 8, "cooccurrence": 0.3})
    assert (rounded.task_params["vocab"], rounded.task_params["cooccurrence"]) == (10, 0.25)


def test_grid_values_that_are_the_same_task_are_refused_naming_both(tmp_path):
    data = variant(**{"fixed.task": {"length": 4}, "axes.task.cooccurrence": {
        "grid": [0.5, 0.625]}})
    with pytest.raises(SweeperInputError, match="the cells .*0.5.* and .*0.625.* are the same"):
        expand(parse_sweep(sweep_text(data)))


@pytest.mark.parametrize("name", ["quick", "snell_heads_stage2_base1", "lu_phase"])
def test_a_seed_put_into_its_cells_text_gives_the_id_its_config_hashes(name):
    from pathlib import Path

    from sweeper import results
    from sweeper.plan import expand
    from sweeper.search_space import load_sweep

    path = Path(__file__).resolve().parents[1] / "search_spaces" / f"{name}.yaml"
    specs = expand(load_sweep(str(path)))
    assert len({s.seed for s in specs}) > 1
    assert all(s.trial_id == results.trial_id(s.config()) for s in specs)

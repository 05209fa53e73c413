"""Sweep files: every file in search_spaces/ validates; malformed files are rejected as a whole,
before anything runs, with one line naming the path in the file and what is allowed, exit 2,
and nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from sweep_helpers import DELETE, REPO, TINY, cli_subprocess, sweep_text, variant, write_sweep

import sweeper.runner  # noqa: F401 (binds sys.stderr as a default; see test_sweep_cli)
from sweeper.cli import main
from sweeper.errors import SweeperInputError
from sweeper.packing import form_packs
from sweeper.plan import expand, make_plan
from sweeper.results import check_sweep_name
from sweeper.search_space import SweepFileError, load_sweep, parse_sweep

SPACES = sorted((REPO / "search_spaces").glob("*.y*ml"))

# A valid base with ranges: random search over a learning rate and the co-occurrence.
RANDOM = variant(**{"search": {"type": "random", "trials": 4, "seed": 0},
                    "axes.train.lr": {"loguniform": [1e-4, 1e-2]}})
OPTUNA = variant(**{"search": {"type": "optuna", "trials": 3, "objective": "best_accuracy",
                               "direction": "maximize"},
                    "axes.task.hardness": {"uniform": [0.0, 1.0]}})

DUPLICATE_KEY = """\
name: tiny
task: copy-v1
model: seq2seq
axes:
  task:
    hardness: {grid: [0.0, 0.5]}
    hardness: {grid: [1.0]}
"""
BAD_YAML = """\
name: tiny
task: copy-v1
axes: {task: {hardness: {grid: [0.0, 0.5}}}
"""

# (id, file text or dict, the path the message starts with, a word it must also contain).
CASES = [
    ("unknown-top-key", variant(seed=3), "seed", "did you mean 'seeds'"),
    ("unknown-top-key-typo", variant(**{"axis": {}}), "axis", "did you mean 'axes'"),
    ("unknown-axis-param", variant(**{"axes.task.hardnes": {"grid": [0.0]}}),
     "axes.task.hardnes", "did you mean 'hardness'"),
    ("unknown-axis-group", variant(**{"axes.optim": {"lr": {"grid": [0.1]}}}), "axes.optim",
     "task, model, train"),
    ("unknown-axis-kind", variant(**{"axes.task.hardness": {"range": [0, 1]}}),
     "axes.task.hardness.range", "grid"),
    ("axis-not-a-mapping", variant(**{"axes.task.hardness": [0.0, 1.0]}),
     "axes.task.hardness", "mapping"),
    ("two-kinds-in-one-axis", variant(**{"axes.task.hardness": {"grid": [0.0],
                                                               "choice": [1.0]}}),
     "axes.task.hardness", "exactly one"),
    ("wrong-type-in-grid", variant(**{"axes.task.hardness": {"grid": [0.0, 0.5, "x"]}}),
     "axes.task.hardness.grid[2]", "a number"),
    ("bool-for-float-in-grid", variant(**{"axes.task.cooccurrence": {"grid": [0.0, True]}}),
     "axes.task.cooccurrence.grid[1]", "a number"),
    ("hardness-out-of-range-fixed", variant(**{"fixed.task.hardness": 1.5}),
     "fixed.task.hardness", "<= 1"),
    ("hardness-out-of-range-axis", variant(**{"axes.task.hardness": {"grid": [0.5, 1.5]}}),
     "axes.task.hardness.grid[1]", "<= 1"),
    ("unknown-fixed-param", variant(**{"fixed.model.depth": 2}), "fixed.model.depth",
     "width"),
    ("empty-grid", variant(**{"axes.task.hardness": {"grid": []}}),
     "axes.task.hardness.grid", "non-empty"),
    ("duplicate-grid-value", variant(**{"axes.model.heads": {"grid": [1, 2, 1]}}),
     "axes.model.heads.grid[2]", "distinct"),
    ("inverted-uniform", variant(RANDOM, **{"axes.train.lr": {"uniform": [0.1, 0.01]}}),
     "axes.train.lr.uniform", "low < high"),
    ("uniform-not-a-pair", variant(RANDOM, **{"axes.train.lr": {"uniform": [0.1]}}),
     "axes.train.lr.uniform", "[low, high]"),
    ("loguniform-low-zero", variant(RANDOM, **{"axes.train.lr": {"loguniform": [0, 0.1]}}),
     "axes.train.lr.loguniform[0]", "> 0"),
    ("loguniform-low-negative",
     variant(RANDOM, **{"axes.train.lr": {"loguniform": [-1.0, 0.1]}}),
     "axes.train.lr.loguniform[0]", ">= 0"),
    ("int-axis-on-float-param", variant(RANDOM, **{"axes.task.hardness": {"int": [0, 1]}}),
     "axes.task.hardness.int", "uniform"),
    ("uniform-on-str-param",
     variant(RANDOM, **{"axes.model.cell": {"uniform": [0.0, 1.0]}}),
     "axes.model.cell.uniform", "grid, choice"),
    ("range-axis-with-grid-search", variant(**{"axes.train.lr": {"uniform": [1e-4, 1e-2]}}),
     "axes.train.lr.uniform", "search random or optuna"),
    ("duplicate-yaml-key", DUPLICATE_KEY, "axes.task.hardness", "given twice"),
    ("axis-also-fixed", variant(**{"fixed.task.cooccurrence": 0.5}),
     "axes.task.cooccurrence", "fixed.task"),
    ("budget-given-twice", variant(**{"fixed.train.steps": 30}), "budget.steps",
     "fixed.train.steps"),
    ("budget-not-an-int", variant(**{"budget.steps": "many"}), "budget.steps", "integer"),
    ("unknown-task", variant(task="copy-v9"), "task", "did you mean 'copy-v1'"),
    ("unknown-model", variant(model="seq3seq"), "model", "did you mean 'seq2seq'"),
    ("model-not-on-task", variant(**{"model": "kq-attention", "fixed.model": DELETE}),
     "model", "seq2seq"),
    ("missing-name", variant(name=DELETE), "name", "required"),
    ("bad-search-type", variant(search={"type": "bayes"}), "search.type", "optuna"),
    ("random-without-trials", variant(RANDOM, search={"type": "random"}), "search.trials",
     "integer"),
    ("random-unknown-key", variant(RANDOM, search={"type": "random", "trials": 3,
                                                   "sampler": "tpe"}),
     "search.sampler", "trials"),
    ("optuna-unknown-objective", variant(OPTUNA, **{"search.objective": "best_acuracy"}),
     "search.objective", "did you mean 'best_accuracy'"),
    ("optuna-bad-direction", variant(OPTUNA, **{"search.direction": "up"}),
     "search.direction", "maximize"),
    ("asha-unknown-metric", variant(scheduler={"type": "asha", "metric": "acc"}),
     "scheduler.metric", "accuracy"),
    ("asha-grace-over-steps", variant(scheduler={"type": "asha", "metric": "accuracy",
                                                 "grace_period": 500}),
     "scheduler.grace_period", "<= 20"),
    ("scheduler-bad-type", variant(scheduler={"type": "hyperband", "metric": "accuracy"}),
     "scheduler.type", "asha"),
    ("resources-cpu-zero", variant(resources={"cpu": 0}), "resources.cpu", ">= 0.01"),
    ("resources-cpu-tiny", variant(resources={"cpu": 1e-9}), "resources.cpu", ">= 0.01"),
    ("resources-gpu-tiny", variant(resources={"gpu": 1e-3}), "resources.gpu",
     "0, or a number >= 0.01"),
    ("resources-gpu-negative", variant(resources={"cpu": 1, "gpu": -1}), "resources.gpu",
     ">= 0"),
    ("resources-unknown-key", variant(resources={"cpus": 1}), "resources.cpus", "cpu, gpu"),
    ("pack-size-zero", variant(pack_size=0), "pack_size", ">= 1"),
    ("retries-negative", variant(retries=-1), "retries", ">= 0"),
    ("seeds-zero", variant(seeds=0), "seeds", ">= 1"),
    ("seeds-duplicate", variant(seeds=[0, 1, 1]), "seeds[2]", "distinct"),
    ("seeds-negative", variant(seeds=[0, -1]), "seeds[1]", ">= 0"),
    ("bad-device", variant(device="tpu"), "device", "cuda"),
    ("name-escapes-up", variant(name="../x"), "name", "no '/' or '..'"),
    ("name-has-slash", variant(name="a/b"), "name", "one folder name"),
    ("name-dotdot", variant(name=".."), "name", "one folder name"),
    ("cell-fails-cross-check", variant(**{"fixed.task.length": 8,
                                          "axes.task.vocab": {"grid": [4, 12]}}),
     "axes", "task.vocab"),
    ("invalid-yaml", BAD_YAML, "line 3", "YAML"),
]


def _message(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    prefix = "sweeper run: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


def test_the_table_is_large_enough():
    assert len(CASES) >= 20
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case_id,data,path,word", CASES, ids=[c[0] for c in CASES])
def test_malformed_sweep_file_is_rejected(case_id, data, path, word, tmp_path, capsys,
                                          monkeypatch):
    sweep_file = write_sweep(tmp_path / "sweep.yaml", data)
    results = tmp_path / "results"
    results.mkdir()
    cwd = tmp_path / "cwd"  # where ./results would go by default
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    rc = main(["run", str(sweep_file), "--results", str(results), "--executor", "local"])
    captured = capsys.readouterr()
    assert rc == 2, captured
    message = _message(captured.err)
    if path.startswith("line "):
        assert re.search(rf"\b{path}\b", message), message
    else:
        assert re.match(re.escape(path) + r"[: (]", message), \
            f"message does not start with {path!r}: {message}"
    assert "allowed" in message, message
    assert word in message, message
    assert captured.out == ""
    assert list(results.iterdir()) == [], "something was written"
    assert list(cwd.iterdir()) == [], "something was written in the working directory"


def test_parse_errors_are_sweep_file_errors():
    with pytest.raises(SweepFileError, match=r"^axes\.task\.hardness\.grid\[2\]: "):
        parse_sweep(sweep_text(variant(**{"axes.task.hardness": {"grid": [0.0, 0.5, "x"]}})))


def test_missing_file_is_an_input_error(tmp_path, capsys):
    rc = main(["run", str(tmp_path / "nope.yaml"), "--results", str(tmp_path / "r")])
    assert rc == 2
    assert "cannot read" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", ["plan", "run"])
def test_rejected_through_a_real_process(command, tmp_path):
    """The installed entry point behaves the same: exit 2, one line, nothing written."""
    data = variant(**{"axes.task.hardness": {"grid": [0.0, 0.5, "x"]}}) if command == "run" \
        else variant(name="../escape")
    sweep_file = write_sweep(tmp_path / "sweep.yaml", data)
    results = tmp_path / "results"
    results.mkdir()
    proc = cli_subprocess([command, sweep_file, "--results", results], timeout=180,
                          cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    expected = "axes.task.hardness.grid[2]: " if command == "run" else "name: "
    assert f"sweeper {command}: error: {expected}" in lines[0]
    assert "allowed" in lines[0]
    assert list(results.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "sweep.yaml"]


# -- valid files -----------------------------------------------------------------------------
def test_search_spaces_exist():
    names = [p.name for p in SPACES]
    assert "quick.yaml" in names


@pytest.mark.parametrize("path", SPACES, ids=[p.name for p in SPACES])
def test_every_shipped_sweep_file_validates(path):
    sweep = load_sweep(str(path))
    assert check_sweep_name(sweep.name) == sweep.name
    assert sweep.text == path.read_text()
    plan = make_plan(sweep, set())
    if sweep.search.type == "optuna":
        assert plan.specs == [] and plan.adaptive
        return
    assert plan.specs, "expands to nothing"
    assert len({s.trial_id for s in plan.specs}) == len(plan.specs)
    packs = form_packs(plan.specs, sweep.pack_size, workers=2)
    assert sum(len(p) for p in packs) == len(plan.specs)


def test_quick_sweep_is_copy_cooccurrence_hardness_heads():
    sweep = load_sweep(str(REPO / "search_spaces" / "quick.yaml"))
    assert (sweep.task, sweep.model) == ("copy-v1", "seq2seq")
    assert {a.path for a in sweep.axes} >= {"task.cooccurrence", "task.hardness",
                                            "model.heads"}
    assert len(sweep.seeds) >= 2
    specs = expand(sweep)
    cells = 1
    for axis in sweep.axes:
        cells *= len(axis.values)
    assert len(specs) == cells * len(sweep.seeds)


def test_a_paper_scale_copy_sweep_is_shipped():
    """The issue asks for quick.yaml and a paper-scale copy sweep (N = L = 40 in the paper)."""
    paper = []
    for path in SPACES:
        sweep = load_sweep(str(path))
        if sweep.task.startswith("copy-") and path.name != "quick.yaml":
            lengths = {sweep.fixed["task"].get("length")} | {
                v for a in sweep.axes if a.path == "task.length" for v in a.values}
            if 40 in lengths:
                paper.append(path.name)
    assert paper, f"no copy sweep with task.length 40 among {[p.name for p in SPACES]}"


def test_valid_file_is_parsed_into_its_parts():
    text = sweep_text(variant(**{
        "seeds": [3, 5], "resources": {"cpu": 0.5, "gpu": 0.25}, "pack_size": 7,
        "scheduler": {"type": "asha", "metric": "accuracy", "grace_period": 10},
        "axes.model.heads": {"grid": [1, 2]}, "results": "s3://bucket/prefix"}))
    sweep = parse_sweep(text)
    assert sweep.name == "tiny" and sweep.task == "copy-v1" and sweep.model == "seq2seq"
    assert sweep.seeds == (3, 5)
    assert sweep.resources == {"cpu": 0.5, "gpu": 0.25}  # fractions allowed
    assert sweep.pack_size == 7 and sweep.retries == 1
    assert [a.path for a in sweep.axes] == ["task.cooccurrence", "model.heads"]
    assert sweep.axes[1].values == (1, 2)
    assert sweep.fixed["train"]["steps"] == 20  # budget.steps lands in the train group
    assert sweep.scheduler.metric == "accuracy" and sweep.scheduler.grace_period == 10
    assert sweep.results == "s3://bucket/prefix"
    assert parse_sweep(sweep_text(TINY)).pack_size is None  # auto
    assert parse_sweep(sweep_text(TINY)).search.type == "grid"


def test_values_are_coerced_to_the_parameter_type():
    sweep = parse_sweep(sweep_text(variant(**{"axes.task.cooccurrence": {"grid": [0, 1]}})))
    assert sweep.axes[0].values == (0.0, 1.0)
    assert all(isinstance(v, float) for v in sweep.axes[0].values)


def test_yaml_tags_are_not_executed():
    text = "name: !!python/object/apply:os.system ['echo pwned']\ntask: copy-v1\n"
    with pytest.raises(SweepFileError, match="YAML"):
        parse_sweep(text)


def test_every_case_file_is_valid_yaml_except_the_yaml_case():
    for case_id, data, _, _ in CASES:
        if case_id in ("invalid-yaml",):
            with pytest.raises(yaml.YAMLError):
                yaml.safe_load(data)
        elif isinstance(data, dict):
            yaml.safe_load(sweep_text(data))


def test_base_files_of_the_table_are_valid(tmp_path):
    for data in (TINY, RANDOM, OPTUNA):
        parse_sweep(sweep_text(data))
    assert Path(write_sweep(tmp_path / "x.yaml", TINY)).read_text() == sweep_text(TINY)


def test_the_sweep_file_page_documents_every_key_and_its_example_parses():
    from sweeper.search_space import TOP_KEYS

    page = (REPO / "docs" / "sweep-files.md").read_text()
    for key in TOP_KEYS:
        assert f"**`{key}`**" in page, key
    example = re.search(r"```yaml\n(.*?)```", page, re.S).group(1)
    sweep = parse_sweep(example)
    assert sweep.name == "quick" and len(sweep.axes) == 3


def test_a_sweep_file_error_points_to_the_format_page():
    with pytest.raises(SweeperInputError, match=r"seeds: .*\(see docs/sweep-files.md\)$"):
        parse_sweep("name: x\ntask: copy-v1\nmodel: seq2seq\nseeds: -1\n")

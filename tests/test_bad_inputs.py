"""Malformed sweep files, generated: each is one line naming the field and what is allowed,
exit status 2, nothing written, quickly. No file may hang, crash or start anything.

The set is built from the smallest valid sweep (`TINY`) by breaking one thing at a time: every
key misspelt, every value of the wrong type or out of range, plus the hostile files a parser
meets (binary, alias bombs, deep nesting, sweeps too large to plan).
"""

from __future__ import annotations

import copy
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sweep_helpers import TINY, cli

WRONG_VALUES = ("abc", [1, 2], {"x": 1}, -7, 1e300)
TIME_LIMIT_S = 10.0


def _set(data: dict, path: tuple[str, ...], value: Any) -> dict:
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return out


def _rename(data: dict, path: tuple[str, ...]) -> dict:
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1] + "x"] = node.pop(path[-1])
    return out


def _leaves(data: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for key, value in data.items():
        path = (*prefix, key)
        paths.append(path)
        if isinstance(value, dict) and key != "grid":
            paths += _leaves(value, path)
    return paths


BASE = {**TINY, "search": {"type": "grid"}}
VALID = {(("seeds",), 1), (("name",), 0),  # a list of seeds, and "abc" as a name, are fine
         (("axes", "task", "cooccurrence", "grid"), 1)}  # so is the grid [1, 2]
VALUE_PATHS = [p for p in _leaves(BASE) if p[-1] not in ("fixed", "axes", "search", "task",
                                                           "model", "train", "budget",
                                                           "resources", "cooccurrence")]


def _cases() -> list[tuple[str, str]]:
    cases = []
    for path in _leaves(BASE):
        if path[0] not in ("axes",) or len(path) < 3:
            cases.append((f"misspelt:{'.'.join(path)}", yaml.safe_dump(_rename(BASE, path))))
    for path in VALUE_PATHS:
        for i, value in enumerate(WRONG_VALUES):
            if (path, i) in VALID:
                continue
            cases.append((f"wrong:{'.'.join(path)}:{i}", yaml.safe_dump(_set(BASE, path, value))))
    for axis_value in ([], "abc", [0.0, "x"], {"grid": []}, {"uniform": [1]}, {"nope": [1]}):
        cases.append((f"axis:{axis_value!r}", yaml.safe_dump(
            _set(BASE, ("axes", "task", "cooccurrence"), axis_value))))
    cases += [
        ("empty", ""), ("a list", "- 1\n- 2\n"), ("a scalar", "42\n"),
        ("not yaml", "name: [unclosed\n"), ("tabs", "name:\tx\n\ttask: y\n"),
        ("duplicate key", yaml.safe_dump(BASE) + "seeds: 3\n"),
        ("list key", yaml.safe_dump(BASE) + "? [a, b]\n: 1\n"),
        ("task list", yaml.safe_dump({**BASE, "task": ["copy-v1"]})),
        ("model mapping", yaml.safe_dump({**BASE, "model": {"id": "seq2seq"}})),
        ("device cuda:x", yaml.safe_dump({**BASE, "device": "cuda:x"})),
        ("deep nesting", "name: " + "[" * 5000 + "]" * 5000 + "\n"),
        ("alias bomb", _alias_bomb()),
        ("huge grid", yaml.safe_dump(_set(BASE, ("axes", "model"), {
            "width": {"grid": list(range(1, 1001))}, "heads": {"grid": list(range(1, 201))}}))),
        ("huge random", yaml.safe_dump({**BASE, "axes": {"task": {"hardness": {
            "uniform": [0.0, 1.0]}}}, "search": {"type": "random", "trials": 1_000_000},
            "seeds": 100})),
        ("task and model mismatch", yaml.safe_dump({**BASE, "model": "kq-attention"})),
        ("name escapes", yaml.safe_dump({**BASE, "name": "../x"})),
        ("name empty", yaml.safe_dump({**BASE, "name": ""})),
        ("steps twice", yaml.safe_dump(_set(BASE, ("fixed", "train", "steps"), 5))),
        ("seed past int64", yaml.safe_dump({**BASE, "seeds": [1, 2**63]})),
    ]
    asha = {"type": "asha", "metric": "loss", "mode": "min"}
    for label, extra in (("resources.gpu", {"resources": {"cpu": 1, "gpu": math.nan}}),
                         ("resources.cpu", {"resources": {"cpu": math.inf}}),
                         ("scheduler.reduction_factor",
                          {"scheduler": {**asha, "reduction_factor": math.nan}})):
        cases.append((f"not finite:{label}", yaml.safe_dump({**BASE, **extra})))
    for factor in (1 + 2**-52, 1 + 1e-9, 1.001, 1.01, 1.05):  # valid, and ruinous: rungs
        cases.append((f"asha rungs:{factor!r}", yaml.safe_dump(
            {**BASE, "scheduler": {**asha, "reduction_factor": factor}})))
    return cases + _tag_cases()


# YAML's explicit tags apply whatever the text: each is refused naming its field
BAD_TAGS = ("!!int 'eight'", "!!float 'abc'", "!!bool maybe", "!!timestamp 'x2020'",
            "!!int ''", "!!float ''", "!!timestamp 2020-13-45", "!!int 1.5", "!!bool ''",
            "!!float '1e'")
TAG_PLACES = {"fixed.train.eval_size": ("fixed", "train", "eval_size"),
              "axes grid value": ("axes", "task", "cooccurrence", "grid"),
              "description": ("description",), "seeds": ("seeds",)}


def _tag_cases() -> list[tuple[str, str]]:
    cases = []
    for place, path in TAG_PLACES.items():
        marker = ["TAGGED"] if place == "axes grid value" else "TAGGED"
        text = yaml.safe_dump(_set(BASE, path, marker))
        for tag in BAD_TAGS:
            cases.append((f"tag:{place}:{tag}", text.replace("TAGGED", tag)))
    return cases


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\nname: bomb\ntask: copy-v1\nmodel: seq2seq\n"


CASES = _cases()


def test_a_binary_sweep_file_is_one_line(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_bytes(bytes(range(256)) * 8)
    rc, _, err = cli(["plan", path, "--results", tmp_path / "results"])
    assert rc == 2 and err.strip().splitlines() == [
        f"sweeper plan: error: {path}: not UTF-8 text; allowed: a YAML sweep file "
        "(see docs/sweep-files.md)"]


def test_a_sweep_file_larger_than_the_limit_is_refused_unread(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("# " + "x" * (2 << 20) + "\n")
    rc, _, err = cli(["plan", path, "--results", tmp_path / "results"])
    assert rc == 2 and "larger than 1,048,576 bytes" in err


def test_sweeps_at_the_limits_still_plan(tmp_path):
    """The bounds leave room: a 2,000-cell grid and a 24-level file are fine."""
    data = _set(BASE, ("axes", "model"), {"cell": {"grid": ["lstm", "gru"]},
                                          "heads": {"grid": list(range(1, 201))},
                                          "shared_embedding": {"grid": [True, False]}})
    path = Path(tmp_path / "big.yaml")
    path.write_text(yaml.safe_dump(data))
    rc, out, err = cli(["plan", path, "--results", tmp_path / "results", "--rows", "1",
                        "--no-estimate"])  # (the estimate's probe is not what this pins)
    assert rc == 0, err
    assert "3200 trials" in out  # 2 x 2 x 200 x 2 cells, 2 seeds
    path.write_text("# 24 levels deep\n" + yaml.safe_dump({**BASE, "description": _nested(22)}))
    rc, _, err = cli(["plan", path, "--results", tmp_path / "results", "--rows", "1",
                      "--no-estimate"])
    assert rc == 0, err


def _nested(depth: int) -> Any:
    return "deep" if depth == 0 else {"x": _nested(depth - 1)}


def test_a_trial_that_cannot_fit_in_memory_is_refused_before_anything_starts(tmp_path):
    data = _set(BASE, ("fixed", "model", "width"), 8192)
    data = _set(data, ("fixed", "task", "length"), 512)
    data = _set(data, ("fixed", "train", "batch_size"), 1_000_000)
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(data))
    results = tmp_path / "results"
    rc, _, err = cli(["run", path, "--results", results, "--executor", "local"])
    [line] = err.strip().splitlines()
    assert rc == 2 and "one trial needs about" in line and "model.width 8192" in line
    assert not results.exists()


def _machine_for(trials: float, monkeypatch) -> int:
    """Make this machine's memory fit `trials` of BASE's trials (MEMORY_SHARE of it)."""
    import sweeper.admission as admission
    from sweeper.plan import expand
    from sweeper.search_space import parse_sweep

    need = expand(parse_sweep(yaml.safe_dump(BASE)))[0].memory_bytes()
    monkeypatch.setattr(admission, "_physical_memory",
                        lambda: int(trials * need / admission.MEMORY_SHARE))
    return need


def test_a_pack_size_that_cannot_fit_in_memory_is_refused_naming_the_largest_that_fits(
        tmp_path, monkeypatch):
    _machine_for(3.5, monkeypatch)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(BASE))
    results = tmp_path / "results"
    rc, _, err = cli(["run", path, "--results", results, "--executor", "local",
                      "--pack-size", "4"])
    [line] = err.strip().splitlines()
    assert rc == 2 and "--pack-size/pack_size: got 4" in line and "at most 3" in line, line
    assert not results.exists()


def test_an_adaptive_cell_whose_seeds_cannot_fit_in_memory_is_refused_naming_seeds():
    from sweeper.admission import MEMORY_SHARE, check_memory
    from sweeper.errors import SweeperInputError
    from sweeper.plan import expand
    from sweeper.search_space import parse_sweep

    need = expand(parse_sweep(yaml.safe_dump(BASE)))[0].memory_bytes()
    optuna = {**BASE, "seeds": 8, "axes": {"task": {"hardness": {"uniform": [0.0, 1.0]}}},
              "search": {"type": "optuna", "trials": 4, "objective": "best_accuracy",
                         "direction": "maximize"}}
    sweep = parse_sweep(yaml.safe_dump(optuna))
    with pytest.raises(SweeperInputError, match=r"^seeds: got 8;.*at most 3 "):
        check_memory(sweep, [], available=int(3.5 * need / MEMORY_SHARE))
    assert check_memory(sweep, [], available=int(9 * need / MEMORY_SHARE)) > 8 * need
    # an Optuna pack is a cell's seeds whatever --pack-size says
    with pytest.raises(SweeperInputError, match=r"^seeds: got 8;"):
        check_memory(sweep, [], pack_size=2, available=int(3.5 * need / MEMORY_SHARE))


def test_a_boundary_search_is_checked_by_its_seeds_per_proposal_not_all_its_seeds():
    from sweeper.admission import MEMORY_SHARE, check_memory
    from sweeper.errors import SweeperInputError
    from sweeper.plan import make_plan
    from sweeper.search_space import parse_sweep

    boundary = {**BASE, "seeds": 16, "axes": {"task": {"cooccurrence": {"grid": [0.0, 0.5]},
                                                       "hardness": {"grid": [0.0, 1.0]}}},
                "search": {"type": "boundary", "trials": 8, "seeds_per_proposal": 2}}
    sweep = parse_sweep(yaml.safe_dump(boundary))
    specs = make_plan(sweep, set()).specs
    need = max(s.memory_bytes() for s in specs)
    assert check_memory(sweep, specs, available=int(3.5 * need / MEMORY_SHARE))
    with pytest.raises(SweeperInputError, match=r"^search.seeds_per_proposal: got 2;"):
        check_memory(sweep, specs, available=int(1.5 * need / MEMORY_SHARE))


def test_a_fixed_pack_size_is_checked_by_the_packs_it_makes():
    from sweeper.admission import MEMORY_SHARE, check_memory
    from sweeper.plan import expand
    from sweeper.search_space import parse_sweep

    # two widths x 2 seeds: with pack_size 8 each pack holds one width's 2 seeds
    sweep = parse_sweep(yaml.safe_dump({**BASE, "fixed": {**BASE["fixed"], "model": {}},
                                        "axes": {"model": {"width": {"grid": [8, 64]}}}}))
    specs = expand(sweep)
    large = max(s.memory_bytes() for s in specs)
    assert check_memory(sweep, specs, pack_size=8, available=int(2.5 * large / MEMORY_SHARE))


def test_automatic_packs_are_cut_to_fit_this_machines_memory(tmp_path, monkeypatch):
    import pyarrow.dataset as ds

    _machine_for(1.5, monkeypatch)  # room for one trial at a time
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(BASE))
    results = tmp_path / "results"
    rc, out, err = cli(["run", path, "--results", results, "--executor", "local"])
    assert rc == 0, err
    trials = ds.dataset(str(results / BASE["name"] / "trials")).to_table().to_pandas()
    assert len(trials) == 4 and trials.groupby("pack_id").size().max() == 1


@pytest.mark.parametrize("resources, flags, field", [
    ({"cpu": 3}, ["--num-cpus", "2"], "resources.cpu: got 3 per pack; allowed: at most 2"),
    ({"cpu": 1, "gpu": 1}, [], "resources.gpu: got 1 per pack; allowed: at most 0"),
])
def test_a_pack_larger_than_embedded_ray_is_refused_instead_of_waiting_for_ever(
        tmp_path, resources, flags, field):
    import torch

    if resources.get("gpu") and torch.cuda.device_count():
        pytest.skip("this machine has a GPU")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**BASE, "resources": resources}))
    results = tmp_path / "results"
    started = time.monotonic()
    rc, _, err = cli(["run", path, "--results", results, *flags])
    [line] = err.strip().splitlines()
    assert rc == 2 and field in line, line
    assert time.monotonic() - started < TIME_LIMIT_S and not results.exists()


@pytest.mark.parametrize("root", ["/dev/null", "/proc/self", "/etc/hostname", "s3://"])
def test_a_results_root_that_is_not_a_folder_is_one_line(tmp_path, root):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(BASE))
    rc, _, err = cli(["run", path, "--results", root, "--executor", "local"])
    [line] = err.strip().splitlines()
    assert rc == 2 and line.startswith("sweeper run: error: --results:"), line


# roots that keep nothing, or carry a secret: refused before anything is opened, the secret
# never printed (generated: each scheme and each way a credential can sit in a URI)
SECRET = "s3cr3tVALUE"
LOST_ROOTS = ["", " ", "memory://x", "memory:///x", "mock:///x", "MOCK:///x", "ftp://host/x",
              "nope+x://y"]
SECRET_ROOTS = [f"s3://KEY:{SECRET}@bucket/p", f"s3://{SECRET}@bucket/p",
                f"gs://u:{SECRET}@bucket/p", f"s3://bucket/p?access_key=K&secret_key={SECRET}",
                f"s3://bucket/p?endpoint_override=127.0.0.1:1&session_token={SECRET}",
                f"hdfs://u:{SECRET}@namenode:8020/p", f"abfs://u:{SECRET}@account/p",
                f"s3://AKIAX:ab/cd{SECRET}@bucket/p",  # a secret with '/' in it
                f"s3://bucket/p?secret%5Fkey={SECRET}",  # a key name percent-encoded
                f"abfs://c@account/p?client_secret={SECRET}",
                f"abfs://c@account/p?account_key={SECRET}"]


@pytest.mark.parametrize("root", ["abfs://container@account.dfs.core.windows.net/p",
                                  "hdfs://user@namenode:8020/p", "s3://bucket/a@b/c",
                                  "s3://bucket/p?endpoint_override=127.0.0.1:9000&scheme=http",
                                  "file:///home/u@h/r", "relative/x@y"])
def test_an_at_sign_that_names_no_secret_is_a_root(root):
    from sweeper.results.roots import check_results_root

    assert check_results_root(root) == root


@pytest.mark.parametrize("where", ["flag", "file"])
@pytest.mark.parametrize("root", LOST_ROOTS + SECRET_ROOTS)
def test_a_root_that_keeps_nothing_or_holds_a_secret_is_one_line_that_never_shows_it(
        tmp_path, root, where):
    data = {**BASE, "results": root} if where == "file" else BASE
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    flag = ["--results", root] if where == "flag" else []
    for command in (["plan"], ["run", "--executor", "local"], ["status"]):
        if command == ["status"] and where == "file":
            continue  # status reads the file's results: too, by the same rule (checked above)
        rc, out, err = cli([command[0], path, *command[1:], *flag])
        [line] = err.strip().splitlines()
        assert rc == 2 and ("results" in line.split(": error: ")[1].split(":")[0]), line
        assert SECRET not in out + err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.yaml"]
    if root.startswith("memory://"):  # the Python API's own in-process root stays open
        from sweeper.results import Store
        Store.open(root)


# -- one rule for every number, wherever it enters --------------------------------------------
# (the value as YAML text, as a Python value, the field the one line names)
NUMBERS = [
    (".nan", math.nan, "resources.gpu"),
    (".inf", math.inf, "resources.cpu"),
    ("1.0e-9", 1e-9, "resources.cpu"),
    ("9" * 5000, 10**5000, "seeds"),
    ("[1, 9223372036854775808]", [1, 2**63], "seeds[1]"),
    ("true", True, "retries"),
    ("'3'", "3", "pack_size"),
    ("-1", -1, "budget.steps"),
]


def _key(field: str) -> str:
    return field.split("[")[0]


def _at(field: str, value: Any) -> dict:
    """BASE with `field` (resources.cpu, seeds, ...) set to `value`."""
    path = tuple(_key(field).split("."))
    return _set(BASE, path, value)


@pytest.mark.parametrize(("text", "value", "field"), NUMBERS, ids=[n[2] + ":" + n[0][:12]
                                                                  for n in NUMBERS])
def test_a_number_is_refused_alike_in_a_file_a_set_and_the_python_api(text, value, field,
                                                                       tmp_path):
    """`plan` and `run` refuse the file with the same line; `--set` and `sweeper.run`'s
    keywords name the same field; nothing is written."""
    import sweeper
    from sweeper.errors import SweeperInputError

    results, key = tmp_path / "results", _key(field)
    name = key.split(".")[-1]
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(_at(field, 0)).replace(f"{name}: 0", f"{name}: {text}"))
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(BASE))
    messages = []
    for argv in (["plan", path], ["run", path, "--executor", "local"],
                 ["plan", base, "--set", f"{key}={text}"]):
        rc, _, err = cli([*argv, "--results", results])
        [line] = err.strip().splitlines()
        assert rc == 2 and key in line, line
        messages.append(line.split(": error: ", 1)[1])
    assert messages[0] == messages[1]  # plan refuses exactly what run refuses
    group = key.split(".")[0]
    with pytest.raises(SweeperInputError, match=re.escape(key)):
        sweeper.run(BASE, results=str(results), executor="local",
                    **{group: _at(field, value)[group]})
    assert not results.exists()


@pytest.mark.parametrize(("keyword", "value"), [
    ("retries", -1), ("retries", 101), ("pack_size", 0), ("pack_size", 10**40),
    ("num_cpus", 0), ("retries", math.nan), ("device", "cuda:x"), ("device", "cpu\n")])
def test_a_run_keyword_is_refused_by_the_same_rule_before_anything_starts(keyword, value,
                                                                          tmp_path):
    import sweeper
    from sweeper.errors import SweeperInputError

    results = tmp_path / "results"
    # (the command names both, --pack-size/pack_size; from Python, the argument)
    with pytest.raises(SweeperInputError, match=rf"^{keyword}: got "):
        sweeper.run(BASE, results=str(results), executor="local", **{keyword: value})
    assert not results.exists()


def test_python_values_of_numpy_and_tuples_are_read_as_numbers_and_lists():
    import numpy as np

    from sweeper.overrides import sweep_from

    sweep = sweep_from(BASE, {"seeds": (np.int64(3), 5), "budget": {"steps": np.float32(30)}})
    assert sweep.seeds == (3, 5) and sweep.fixed["train"]["steps"] == 30


@pytest.mark.parametrize("argv", [
    ["plan", "{file}", "--rows", "-1"], ["plan", "{file}", "--workers", "0"],
    ["run", "{file}", "--pack-size", "9" * 5000], ["run", "{file}", "--retries", "1e9"],
    ["run", "{file}", "--num-cpus", "nan"], ["train", "--task", "copy-v1", "--model", "seq2seq",
                                             "--out", "{root}/t", "--seed", "-1"],
    ["dashboard", "{root}", "--port", "-1"], ["dashboard", "{root}", "--port", "99999"],
    ["plan"],
])
def test_a_bad_flag_is_one_line_exit_2(argv, tmp_path, capsys):
    from sweeper.cli import main

    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump(BASE))
    with pytest.raises(SystemExit) as exc:
        main([a.format(file=file, root=tmp_path / "results") for a in argv])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and ": error: " in line and len(line) < 300, line
    assert not (tmp_path / "results").exists()


# -- names and inputs that cannot surprise ---------------------------------------------------
@pytest.mark.parametrize("name", ["x\n", "x\r", "x\n\n", "x\t", "x ", "\nx", "x" * 129])
def test_a_sweep_name_is_matched_in_full(name, tmp_path):
    from sweeper.results import check_sweep_name
    from sweeper.results.errors import ResultsInputError

    with pytest.raises(ResultsInputError, match="^name: got "):
        check_sweep_name(name)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**BASE, "name": name}))
    for argv in (["plan", path], ["run", path, "--executor", "local"]):
        rc, _, err = cli([*argv, "--results", tmp_path / "results"])
        [line] = err.strip().splitlines()
        assert rc == 2 and line.startswith(f"sweeper {argv[0]}: error: name: got "), line
    assert not (tmp_path / "results").exists()


def test_a_utf8_byte_order_mark_is_text_and_plans(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(BASE).encode())
    rc, out, err = cli(["plan", path, "--results", tmp_path / "results", "--no-estimate"])
    assert rc == 0 and out.startswith(f"{BASE['name']}: 4 trials"), err


@pytest.mark.parametrize("special", ["fifo", "folder", "/dev/zero", "/dev/null"])
def test_a_sweep_file_that_is_not_a_regular_file_is_refused_at_once(special, tmp_path):
    """In real child processes: a FIFO read without a writer would block for ever."""
    from sweep_helpers import cli_subprocess

    path = {"fifo": tmp_path / "fifo", "folder": tmp_path}.get(special, Path(special))
    if special == "fifo":
        os.mkfifo(path)
    for command in (["plan", path], ["run", path, "--executor", "local"]):
        started = time.monotonic()
        done = cli_subprocess([*command, "--results", tmp_path / "results"], timeout=60)
        [line] = done.stderr.strip().splitlines()
        assert done.returncode == 2 and "allowed: a regular file" in line, line
        assert time.monotonic() - started < TIME_LIMIT_S
    assert not (tmp_path / "results").exists()


UNREACHABLE_S3 = "s3://bucket/x?endpoint_override=127.0.0.1:9&scheme=http"  # nothing listens


@pytest.mark.parametrize("command", [["plan"], ["run", "--executor", "local"]])
def test_a_results_root_that_does_not_answer_is_one_line_within_seconds(command, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("SWEEPER_REMOTE_TIMEOUT_S", "3")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(BASE))
    started = time.monotonic()
    rc, _, err = cli([command[0], path, *command[1:], "--results", UNREACHABLE_S3])
    [line] = err.strip().splitlines()
    assert rc == 2 and line.startswith(f"sweeper {command[0]}: error: --results: "), line
    assert "did not answer within 3 s" in line or "cannot be reached" in line, line
    assert time.monotonic() - started < TIME_LIMIT_S


@pytest.mark.parametrize("command", [["plan"], ["status"], ["run", "--executor", "local"]])
def test_an_endpoint_that_accepts_and_never_answers_ends_the_process_within_seconds(
        command, tmp_path):
    """The whole process, its exit included: pyarrow's S3 client retried such an endpoint
    for ~100 s after the one line was printed."""
    import socket
    import subprocess
    import sys

    from sweep_helpers import REPO, subprocess_env

    silent = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel's backlog), mute
    port = silent.getsockname()[1]
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(BASE))
    try:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "sweeper.cli", command[0], str(path), *command[1:],
             "--results", f"s3://bucket/x?endpoint_override=127.0.0.1:{port}&scheme=http"],
            capture_output=True, text=True, cwd=REPO, timeout=120,
            env=subprocess_env(SWEEPER_REMOTE_TIMEOUT_S="3", AWS_ACCESS_KEY_ID="k",
                               AWS_SECRET_ACCESS_KEY="s"))
        took = time.monotonic() - started
    finally:
        silent.close()
    [line] = done.stderr.strip().splitlines()
    assert done.returncode == 2 and ": error: --results: " in line, line
    assert took < TIME_LIMIT_S, took


def test_a_results_root_whose_opening_hangs_is_refused_at_the_timeout(monkeypatch):
    """As gs:// does with no network (it waits for minutes): the probe is given up on."""
    from types import SimpleNamespace

    import pyarrow.fs as pafs

    import sweeper.results.reading as reading
    from sweeper.results import Store
    from sweeper.results.errors import ResultsInputError

    monkeypatch.setenv("SWEEPER_REMOTE_TIMEOUT_S", "0.5")
    hanging = SimpleNamespace(from_uri=lambda uri: time.sleep(30))
    monkeypatch.setattr(reading, "pafs", SimpleNamespace(FileSystem=hanging,
                                                         FileType=pafs.FileType))
    started = time.monotonic()
    with pytest.raises(ResultsInputError, match=r"^--results: 'gs://b/x' did not answer within "
                                                r"0.5 s; allowed: "):
        Store.open("gs://b/x")
    assert time.monotonic() - started < 2


# -- plan refuses what run refuses, before its estimate allocates anything --------------------
HUGE = _set(_set(_set(BASE, ("fixed", "model", "width"), 8192), ("fixed", "task", "length"), 512),
            ("fixed", "train", "batch_size"), 1_000_000)


@pytest.mark.parametrize("case", ["cuda", "memory"])
def test_plan_refuses_what_run_refuses_here_before_its_estimate_trains(case, tmp_path,
                                                                       monkeypatch):
    import torch

    import sweeper.estimate

    if case == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    monkeypatch.setattr(sweeper.estimate, "measure_step_cost", lambda *a: pytest.fail("probe ran"))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**BASE, "device": "cuda"} if case == "cuda" else HUGE))
    results = tmp_path / "results"
    lines = []
    for argv in (["plan", path], ["run", path, "--executor", "local"], ["run", path]):
        rc, _, err = cli([*argv, "--results", results])
        [line] = err.strip().splitlines()
        assert rc == 2, line
        lines.append(line.split(": error: ", 1)[1])
    assert lines[0] == lines[1] == lines[2]
    assert ("0 CUDA device(s)" if case == "cuda" else "one trial needs about") in lines[0]
    assert not results.exists()


def test_plan_for_a_cluster_skips_this_machines_checks_and_its_probe(tmp_path, monkeypatch):
    import sweeper.estimate

    monkeypatch.setattr(sweeper.estimate, "measure_step_cost", lambda *a: pytest.fail("probe ran"))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**HUGE, "device": "cuda"}))
    rc, out, err = cli(["plan", path, "--results", tmp_path / "results", "--address", "auto",
                        "--results-shared"])  # (a local path on a cluster: as run, shared)
    assert rc == 0 and "4 trials" in out and "estimate" not in out, err
    rc, _, err = cli(["plan", path, "--results", tmp_path / "results", "--address", "auto"])
    assert rc == 2 and "on a Ray cluster" in err  # plan refuses what run would


# -- the dashboard's parameters ----------------------------------------------------------------
PHASE = "/api/phase?sweep=copy&x=task.cooccurrence&y=task.hardness"
CELL = "/api/cell?sweep=copy&cell="
MALFORMED_QUERIES = [
    "/api/state", "/api/state?sweep=x%0A", "/api/state?sweep=x%0D", "/api/state?sweep=..",
    "/api/state?sweep=copy&sweep=other", "/api/state?sweep=%C3%A9", "/api/state?sweep=%FF",
    "/api/state?sweep=%00", "/api/state?sweep=" + "a" * 300, "/api/state?sweep=copy&extra=1",
    "/api/state?Sweep=copy", "/api/phase?sweep=copy", "/api/phase?sweep=copy&x=task.hardness",
    PHASE + "&min_seeds=abc", PHASE + "&min_seeds=nan", PHASE + "&min_seeds=inf",
    PHASE + "&min_seeds=1.5", PHASE + "&min_seeds=0", PHASE + "&min_seeds=-1",
    PHASE + "&min_seeds=" + "9" * 5000, PHASE + "&min_seeds=3&min_seeds=4",
    PHASE + "&outcome=nope", PHASE + "&facet=nope", "/api/phase?sweep=copy&x=nope&y=task.hardness",
    CELL + "notjson", CELL + "%7B%7D", CELL + "[1,2]", CELL + "[" * 5000 + "]" * 5000,
    CELL + '[{"column":"task.hardness","lo":"a","hi":1}]',
    CELL + '[{"column":"task.hardness","lo":NaN,"hi":1}]',
    CELL + '[{"column":"task.hardness","lo":0}]',
    CELL + '[{"column":"task.hardness","lo":1,"hi":0}]',
    CELL + '[{"column":"task.hardness","lo":0,"hi":1,"closed":"yes"}]',
    "/api/trials?sweep=copy&offset=-1", "/api/trials?sweep=copy&limit=0",
    "/api/trials?sweep=copy&limit=" + "9" * 50,
    CELL + '[{"column":"task.hardness","value":1e999}]',
    CELL + '[{"column":"task.hardness","value":Infinity}]',
    CELL + '[{"column":"task.hardness","value":' + "9" * 5000 + "}]",
    CELL + '[{"column":[1],"value":1}]', CELL + '[{"column":"nope","value":1}]',
    CELL + '[{"column":"task.hardness","value":1,"x":2}]', CELL + "[]&metrics=nope",
    CELL + "[]&metrics=%E2%98%83", "/api/failed?sweep=copy&sweep=copy",
    "/api/search?sweep=copy&x=1", "/api/metrics?sweep=%0A",
    # bounded by what they cost: nesting, integer size
    "/api/trials?sweep=copy&where=" + "not%20" * 1000 + "seed%20%3D%3D%201",
    "/api/trials?sweep=copy&where=" + "(" * 1000 + "seed%20%3D%3D%201" + ")" * 1000,
    CELL + "[]&where=" + "not%20" * 200 + "seed%20%3D%3D%201",
    "/api/trials?sweep=copy&where=seed%20%3D%3D%2099999999999999999999999",
    "/api/trials?sweep=copy&where=seed%20%3D%3D%20-99999999999999999999999",
    "/api/trials?sweep=copy&where=task.hardness%20%3C%201e999",
    CELL + "[]&where=seed%20in%20(1,%2099999999999999999999999)",
]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    import synthetic_stores as synthetic
    from analysis_fixtures import serving_dashboard

    root = tmp_path_factory.mktemp("dashboard")
    synthetic.write_copy_sweep(root, "copy", failed=0.05, diverged=0.03)
    with serving_dashboard(root, "copy") as url:
        yield url


def _get(url: str) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_dashboard_query_set_is_large():
    assert len(MALFORMED_QUERIES) >= 40


@pytest.mark.parametrize("query", MALFORMED_QUERIES, ids=range(len(MALFORMED_QUERIES)))
def test_a_malformed_dashboard_query_is_400_with_one_line(query, dashboard):
    import json

    status, body = _get(dashboard + query.replace(" ", "%20").replace('"', "%22"))
    message = json.loads(body)["error"]
    assert status == 400, (status, message)
    assert "\n" not in message and "Error" not in message and "Traceback" not in message
    assert "allowed" in message or "unknown" in message or "must differ" in message, message
    assert len(message) < 400, message


def test_a_metric_named_twice_is_drawn_once(dashboard):
    import json

    _, body = _get(f"{dashboard}/api/trials?sweep=copy&limit=1")
    trial = json.loads(body)["rows"][0][-1]  # (trial_id is the table's last column)
    for path in ("/api/cell?sweep=copy&cell=[]", f"/api/curves?sweep=copy&trials={trial}"):
        status, body = _get(f"{dashboard}{path}&metrics=loss,loss,accuracy,loss")
        assert status == 200, (path, status, body[:200])
        assert [m["name"] for m in json.loads(body)["metrics"]] == ["loss", "accuracy"], path


def test_the_dashboard_keeps_a_bounded_number_of_sweeps_whatever_is_asked(tmp_path):
    import synthetic_stores as synthetic

    from analysis.dashboard.server import MAX_VIEWS, Dashboard

    synthetic.write_copy_sweep(tmp_path, "copy")
    dashboard = Dashboard(str(tmp_path), None, None)
    for i in range(10 * MAX_VIEWS):  # made-up names, as a flood of requests would ask
        dashboard.view(f"made-up-{i}")
    dashboard.view("copy")
    assert len(dashboard.views) == MAX_VIEWS and "copy" in dashboard.views
    assert dashboard.view("copy") is dashboard.views["copy"]  # the one asked for stays


def test_a_dashboard_failure_answers_500_without_the_exception_text(dashboard, monkeypatch,
                                                                    capsys):
    import json

    from analysis.dashboard.data import SweepView

    def broken(self):
        raise RuntimeError("secret /home/someone/path")

    monkeypatch.setattr(SweepView, "failed", broken)
    status, body = _get(f"{dashboard}/api/failed?sweep=copy")
    assert status == 500 and "secret" not in json.loads(body)["error"]
    assert "secret" in capsys.readouterr().err  # the server's own log keeps it


@pytest.mark.parametrize("port", [-1, 99999, 2**70, "80"])
def test_a_dashboard_port_outside_0_65535_is_refused_in_one_line(port, tmp_path):
    from analysis.dashboard.server import make_server
    from analysis.errors import AnalysisInputError

    with pytest.raises(AnalysisInputError, match=r"^--port: got .*; allowed: an integer >= 0 "
                                                 r"and <= 65535$"):
        make_server(str(tmp_path), None, port=port)


# -- the fault suite: malformed files and overrides, generated, for plan and run -----------------
@dataclass(frozen=True)
class Fault:
    """One malformed input: a sweep file's text (or bytes), or a file that is not a regular
    file (`special`), with `--set` items applied to it."""

    label: str
    text: str | bytes = ""
    sets: tuple[str, ...] = ()
    special: str | None = None


PLACEHOLDER = "__fault__"
CONTEXTS: dict[str, dict] = {  # valid sweeps that hold each number field
    "grid": BASE,
    "random": {**BASE, "search": {"type": "random", "trials": 4, "seed": 0}},
    "asha": {**BASE, "scheduler": {"type": "asha", "metric": "loss", "mode": "min",
                                   "grace_period": 1, "reduction_factor": 3}},
    "boundary": {**BASE, "search": {"type": "boundary", "trials": 8, "target": 0.5,
                                    "margin": 0.1, "seeds_per_proposal": 1}},
}
# (context, path, whether a tiny positive number is allowed there)
NUMBER_FIELDS = [
    ("grid", ("seeds",), False), ("grid", ("retries",), False), ("grid", ("pack_size",), False),
    ("grid", ("budget", "steps"), False), ("grid", ("fixed", "task", "length"), False),
    ("grid", ("fixed", "model", "width"), False), ("grid", ("fixed", "model", "heads"), False),
    ("grid", ("fixed", "train", "batch_size"), False),
    ("grid", ("fixed", "train", "eval_every"), False),
    ("grid", ("fixed", "train", "eval_size"), False), ("grid", ("fixed", "train", "lr"), True),
    ("grid", ("resources", "cpu"), False), ("grid", ("resources", "gpu"), False),
    ("grid", ("axes", "task", "cooccurrence", "grid", 0), True),
    ("random", ("search", "trials"), False), ("random", ("search", "seed"), False),
    ("asha", ("scheduler", "grace_period"), False),
    ("asha", ("scheduler", "reduction_factor"), False),
    ("boundary", ("search", "target"), True), ("boundary", ("search", "margin"), True),
    ("boundary", ("search", "seeds_per_proposal"), False),
]
TINY_NUMBER = "1.0e-300"  # (not a denormal: training here flushes those to zero)
BAD_NUMBERS = [".nan", ".NaN", ".inf", "-.inf", "1e400", "-1e400", "9" * 5000, "-" + "9" * 25,
               "9223372036854775808", "1_000_000_000_000_000_000_000", "0x" + "f" * 120,
               "true", "'7'", "[.nan]", "{v: 7}", TINY_NUMBER]
SET_NUMBERS = [".nan", "-.inf", "9" * 5000, "9223372036854775808", "true", TINY_NUMBER]
SET_FIELDS = [("seeds", False), ("retries", False), ("pack_size", False),
              ("budget.steps", False), ("task.length", False), ("model.width", False),
              ("train.lr", True), ("resources.cpu", False), ("resources.gpu", False),
              ("search.seed", False)]


def _with_text_at(data: dict, path: tuple, text: str) -> str:
    """`data` as YAML with the raw YAML `text` at `path` (a list index: its element)."""
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
    node[path[-1]] = PLACEHOLDER
    return yaml.safe_dump(out, sort_keys=False).replace(PLACEHOLDER, text)


def _number_faults() -> list[Fault]:
    faults = []
    for context, path, tiny_ok in NUMBER_FIELDS:
        for text in BAD_NUMBERS:
            if text == TINY_NUMBER and tiny_ok:
                continue
            where = ".".join(map(str, path))
            faults.append(Fault(f"number:{context}:{where}:{text[:12]}",
                                _with_text_at(CONTEXTS[context], path, text)))
    for key, tiny_ok in SET_FIELDS:
        for text in SET_NUMBERS:
            if not (text == TINY_NUMBER and tiny_ok):
                context = CONTEXTS["random" if key.startswith("search") else "grid"]
                faults.append(Fault(f"--set:{key}={text[:12]}", yaml.safe_dump(context),
                                    (f"{key}={text}",)))
    return faults


def _nested_list(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def _nested_mapping(depth: int) -> str:
    return "{a: " * depth + "1" + "}" * depth


def _structure_faults() -> list[Fault]:
    """Deep nesting under every key, and duplicate keys at every level."""
    from sweeper.search_space import MAX_DEPTH, TOP_KEYS

    text = yaml.safe_dump(BASE, sort_keys=False)
    faults = []
    for key in TOP_KEYS:
        rest = yaml.safe_dump({k: v for k, v in BASE.items() if k != key}, sort_keys=False)
        for kind, deep in (("list", _nested_list), ("mapping", _nested_mapping)):
            faults.append(Fault(f"deep {kind}:{key}", f"{rest}{key}: {deep(MAX_DEPTH + 8)}\n"))
    faults.append(Fault("deep block nesting", text + "description:\n" + "".join(
        f"{'  ' * (i + 1)}k{i}:\n" for i in range(MAX_DEPTH + 8)) + "  " * (MAX_DEPTH + 9)
        + "x\n"))
    for label, duplicate in (("top", "name: other\n"), ("quoted", "'name': other\n"),
                             ("double-quoted", '"seeds": 3\n'),
                             ("budget", "budget: {steps: 30}\n"),
                             ("in a flow mapping", "search: {type: grid, type: random}\n")):
        faults.append(Fault(f"duplicate key:{label}", text + duplicate))
    faults.append(Fault("duplicate key:resources.cpu", text.replace(
        "resources:\n  cpu: 1\n", "resources:\n  cpu: 1\n  cpu: 2\n")))
    faults.append(Fault("duplicate key:fixed.task.length", text.replace(
        "    length: 4\n", "    length: 4\n    length: 5\n")))
    faults.append(Fault("duplicate key:axes.task.cooccurrence", text.replace(
        "  task:\n    cooccurrence:", "  task:\n    cooccurrence: {grid: [0.1]}\n"
        "    cooccurrence:")))
    return faults


def _text_faults() -> list[Fault]:
    """Unicode, control characters, long names, byte-order marks."""
    text = yaml.safe_dump(BASE, sort_keys=False)
    faults = []
    names = {"cjk": "名前", "accent": "café", "right-to-left override": "x\u202ey",
             "zero-width space": "x\u200b", "escape sequence": "x\x1b[31m", "nul": "x\x00",
             "newline": "x\n", "carriage return": "x\r", "tab": "\tx", "space": "x y",
             "129 characters": "x" * 129, "100,000 characters": "x" * 100_000,
             "dot dot": "..", "slash": "a/b", "backslash": "a\\b", "emoji": "run\U0001F680"}
    for label, name in names.items():
        faults.append(Fault(f"name:{label}", yaml.safe_dump({**BASE, "name": name})))
    for key, value in (("task", "c\u03bfpy-v1"), ("task", "copy-v1\n"), ("task", "x" * 100_000),
                       ("model", "seq2seq\x00"), ("model", "SEQ2SEQ"), ("device", "cpu\n"),
                       ("device", "cuda:0\n"), ("device", "cuda:99999"), ("device", "\u0441pu"),
                       ("results", ""), ("results", 7)):
        faults.append(Fault(f"{key}:{value!r}"[:60], yaml.safe_dump({**BASE, key: value})))
    for label, key in (("cyrillic a", "n\u0430me"), ("zero-width", "name\u200b"),
                       ("newline", "name\n"), ("100,000 characters", "k" * 100_000),
                       ("escape", "\x1b[2J")):
        faults.append(Fault(f"key:{label}", yaml.safe_dump({**BASE, key: 1})))
    faults.append(Fault("parameter:unicode choice", yaml.safe_dump(
        _set(BASE, ("fixed", "model", "cell"), "lstm\u200b"))))
    faults.append(Fault("raw control character", text.replace("name: tiny", "name: ti\x07ny")))
    bom = "\ufeff"
    faults += [
        Fault("bom:then not YAML", bom + "name: [unclosed\n"),
        Fault("bom:in the middle", text.replace("model:", bom + "model:")),
        Fault("bom:alone", bom),
        Fault("bom:utf-16", (bom + text).encode("utf-16-le")),
        Fault("bom:utf-16-be", (bom + text).encode("utf-16-be")),
        Fault("bom:utf-32", (bom + text).encode("utf-32")),
        Fault("latin-1", text.replace("tiny", "caf\xe9").encode("latin-1")),
    ]
    return faults


def _set_faults() -> list[Fault]:
    """`--set` items that are not YAML, or not a key of the file (not KEY=VALUE: argparse's
    refusal, tests/test_command_grammar.py)."""
    text = yaml.safe_dump(BASE, sort_keys=False)
    items = ["seeds=[1", "seeds={", "model.width=abc", "model.width=1,",
             "nope=1", "model.nope=1", "a.b.c.d=1", "fixed=3", "axes.task=[1]",
             "seeds=" + _nested_list(40), "name=\"x\\n\"", "name=\"x\\u202ey\"",
             "device=cuda:x", "search.type=nope", "resources=[1, 2]", "retries=1,2",
             "model.heads=1,1", "seeds=" + ",".join(["1"] * 3), "task.length=" + "9" * 5000,
             "seeds=" + "[" + ",".join(map(str, range(200_001))) + "]", "x" * 10_000 + "=1"]
    faults = [Fault(f"--set:{item[:24]!r}", text, (item,)) for item in items]
    for label, data, item in (("into a list", {**BASE, "fixed": [1]}, "task.length=4"),
                              ("into a number", {**BASE, "axes": {"task": 3}},
                               "task.cooccurrence=0,1"),
                              ("under a string", BASE, "name.x=1")):
        faults.append(Fault(f"--set {label}", yaml.safe_dump(data), (item,)))
    return faults


SPECIAL_FILES = ["fifo", "folder", "/dev/zero", "/dev/null", "/dev/stdin", "symlink to fifo",
                 "dangling symlink", "symlink loop", "missing", "/proc/self/mem"]


def _special_faults() -> list[Fault]:
    return [Fault(f"special:{kind}", special=kind) for kind in SPECIAL_FILES]


FAULTS = ([Fault(label, text) for label, text in CASES] + _number_faults()
          + _structure_faults() + _text_faults() + _set_faults() + _special_faults())
COMMANDS = (("plan",), ("run", "--executor", "local"))
FIGURES: list[tuple[str, str, float, int]] = []  # label, command, seconds, stderr lines


def _sweep_path(fault: Fault, folder: Path) -> Path:
    """The file the fault gives the command: written, or made special."""
    if fault.special is None:
        path = folder / "sweep.yaml"
        if isinstance(fault.text, bytes):
            path.write_bytes(fault.text)
        else:
            path.write_text(fault.text, encoding="utf-8")
        return path
    kind, path = fault.special, folder / "special"
    if kind in ("fifo", "symlink to fifo"):
        os.mkfifo(folder / "fifo")
        if kind == "fifo":
            return folder / "fifo"
        path.symlink_to(folder / "fifo")
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling symlink":
        path.symlink_to(folder / "nowhere")
    elif kind == "symlink loop":
        path.symlink_to(path)
    elif kind == "missing":
        pass
    else:
        return Path(kind)
    return path


def _cli_within(argv: list, limit_s: float) -> tuple[int, str, str]:
    """`cli(argv)` in this process, given up on (and failed) past `limit_s`: a case that
    hangs fails here instead of hanging the suite."""
    import threading

    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["result"] = cli(argv)
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(limit_s)
    if "error" in box:
        raise box["error"]
    if "result" not in box:
        pytest.fail(f"still running after {limit_s} s: sweeper {' '.join(map(str, argv))}"[:300])
    return box["result"]


def test_the_fault_suite_is_large():
    assert len(FAULTS) >= 150
    assert len({f.label for f in FAULTS}) == len(FAULTS)


@pytest.mark.parametrize("context", list(CONTEXTS))
def test_the_contexts_of_the_number_faults_are_valid(context):
    from sweeper.search_space import parse_sweep

    parse_sweep(yaml.safe_dump(CONTEXTS[context]))


@pytest.fixture
def nothing_may_start(monkeypatch):
    """A fault that got past the checks fails at once instead of training (plan's estimate,
    the native kernels' build, the sweep itself), so that no case leaves work running."""
    import sweeper.devices
    import sweeper.estimate
    import sweeper.runner

    def started(*args, **kwargs):
        raise AssertionError("a malformed input got past the checks and started work")

    for module, name in ((sweeper.estimate, "estimate_run"), (sweeper.runner, "run_sweep"),
                         (sweeper.devices, "prepare_native_kernels")):
        monkeypatch.setattr(module, name, started)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("fault", FAULTS, ids=[f.label for f in FAULTS])
def test_a_fault_is_one_line_exit_2_within_10_s_and_writes_nothing(fault, command, tmp_path,
                                                                   nothing_may_start):
    path = _sweep_path(fault, tmp_path)
    results = tmp_path / "results"
    before = sorted(tmp_path.rglob("*"))
    sets = [a for item in fault.sets for a in ("--set", item)]
    started = time.perf_counter()
    rc, out, err = _cli_within([command[0], path, *command[1:], *sets, "--results", results],
                               TIME_LIMIT_S + 5)
    elapsed = time.perf_counter() - started
    lines = err.strip().splitlines()
    FIGURES.append((fault.label, command[0], elapsed, len(lines)))
    assert rc == 2, f"{fault.label}: exit {rc}\n{out}{err}"[:2000]
    assert len(lines) == 1 and lines[0].startswith(f"sweeper {command[0]}: error: "), err[:2000]
    assert "allowed" in lines[0] or "unknown" in lines[0], lines[0]
    assert lines[0].isprintable() and len(lines[0]) < 1000, lines[0][:300]
    assert out == "" and not results.exists() and sorted(tmp_path.rglob("*")) == before
    assert elapsed < TIME_LIMIT_S, f"{fault.label}: {elapsed:.1f} s"


CHILD_FAULTS = ["number:grid:resources.gpu:.nan", "number:grid:seeds:999999999999",
                "duplicate key:top", "deep list:name", "bom:then not YAML", "name:newline",
                "special:fifo", "special:/dev/zero", "--set:'seeds=[1'"]


@pytest.mark.parametrize("executor", ["local", "ray"])
@pytest.mark.parametrize("label", CHILD_FAULTS)
def test_a_fault_in_a_real_child_process_is_one_line_exit_2_and_nothing_starts(label, executor,
                                                                              tmp_path):
    """A handful of the suite through `python -m sweeper.cli`; `run` on the default Ray
    executor too: refused before Ray starts, so never a hang."""
    from sweep_helpers import cli_subprocess

    fault = next(f for f in FAULTS if f.label == label)
    path = _sweep_path(fault, tmp_path)
    results = tmp_path / "results"
    sets = [a for item in fault.sets for a in ("--set", item)]
    commands = [["plan"], ["run", "--executor", executor]] if executor == "local" else [["run"]]
    for command in commands:
        started = time.monotonic()
        done = cli_subprocess([command[0], path, *command[1:], *sets, "--results", results],
                              timeout=60)
        elapsed = time.monotonic() - started
        lines = done.stderr.strip().splitlines()
        FIGURES.append((f"child:{label}", " ".join(command), elapsed, len(lines)))
        assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
        assert lines[0].startswith(f"sweeper {command[0]}: error: ")
        assert elapsed < TIME_LIMIT_S and not results.exists()


def test_the_fault_suite_figures():
    """The figures the closing note quotes: cases, the worst time, the most stderr lines (run
    with -s to see them; every case ran above when the whole file runs)."""
    if not FIGURES:
        pytest.skip("no fault ran in this session")
    worst = max(FIGURES, key=lambda f: f[2])
    children = [f for f in FIGURES if f[0].startswith("child:")]
    here = sorted(f[2] for f in FIGURES if not f[0].startswith("child:"))
    median, slowest = (here[len(here) // 2], here[-1]) if here else (math.nan, math.nan)
    print(f"\nfault suite: {len(FAULTS)} generated cases, {len(FIGURES)} runs "
          f"({len(children)} in child processes); worst {worst[2]:.2f} s ({worst[1]} "
          f"{worst[0]}); most stderr lines {max(f[3] for f in FIGURES)}; in process: median "
          f"{median:.3f} s, worst {slowest:.3f} s")
    assert max(f[3] for f in FIGURES) == 1 and worst[2] < TIME_LIMIT_S


@pytest.mark.parametrize("command", ["plan -", "run - --executor local"])
def test_a_closed_standard_input_is_one_line(command, tmp_path):
    import subprocess
    import sys

    from sweep_helpers import REPO, subprocess_env

    done = subprocess.run(["bash", "-c", f"{sys.executable} -m sweeper.cli {command} "
                           f"--results {tmp_path / 'r'} <&-"], capture_output=True, text=True,
                          cwd=REPO, env=subprocess_env(), timeout=60)
    [line] = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "standard input is closed" in line, done.stderr
    assert not (tmp_path / "r").exists()


# paths at the system's limits: one line before anything is opened
PATH_CASES = {f"component {n}": lambda tmp, n=n: tmp / ("a" * n) for n in (256, 300, 1000)}
PATH_CASES |= {f"path {n}": lambda tmp, n=n: Path("/".join([str(tmp)] + ["b" * 200] * (
    n // 201))) for n in (3900, 4097, 10000)}
PATH_CASES |= {"symlink loop": lambda tmp: _loop(tmp) / "r",
               "under a file": lambda tmp: _file(tmp) / "r"}


def _loop(tmp: Path) -> Path:
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return tmp / "a"


def _file(tmp: Path) -> Path:
    (tmp / "f").write_text("x")
    return tmp / "f"


@pytest.mark.parametrize("command", [["plan"], ["run", "--executor", "local"]],
                         ids=lambda c: c[0])
@pytest.mark.parametrize("case", list(PATH_CASES))
def test_a_results_path_past_the_systems_limits_is_one_line(case, command, tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(BASE))
    box = tmp_path / "box"
    box.mkdir()
    root = PATH_CASES[case](box)
    before = sorted(box.rglob("*"))
    rc, _, err = cli([command[0], path, *command[1:], "--results", root])
    [line] = err.strip().splitlines()
    assert rc == 2 and ": error: --results:" in line and "allowed" in line, line
    assert sorted(box.rglob("*")) == before


@pytest.mark.parametrize(("case", "argv", "words"), [
    ("a GPU this machine lacks", ["--set", "resources.gpu=1"], "resources.gpu: got 1 per pack"),
    ("a pack larger than embedded Ray", ["--set", "resources.cpu=2", "--num-cpus", "1"],
     "resources.cpu: got 2 per pack"),
    ("asha on the local executor", ["--set", "scheduler={type: asha, metric: loss, mode: min}",
                                    "--executor", "local"], "runs on Ray Tune only"),
    ("a local root on a cluster", ["--address", "127.0.0.1:1"], "on a Ray cluster"),
])
def test_plan_refuses_what_the_executor_would_refuse_in_the_same_line(case, argv, words,
                                                                      tmp_path):
    import torch

    if case.startswith("a GPU") and torch.cuda.device_count():
        pytest.skip("this machine has a GPU")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(BASE))
    lines = {}
    for command in ("plan", "run"):
        extra = ["--no-estimate"] if command == "plan" else []
        rc, _, err = cli([command, path, *argv, *extra, "--results", tmp_path / "r"])
        [lines[command]] = err.strip().splitlines()
        assert rc == 2 and words in lines[command], lines[command]
    assert lines["plan"].split(": error: ")[1] == lines["run"].split(": error: ")[1]
    assert not (tmp_path / "r").exists()


def test_plan_and_run_refuse_a_folder_this_process_cannot_write_in_though_root(tmp_path):
    import shutil
    import subprocess

    folder = tmp_path / "immutable"
    folder.mkdir()
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i needs root on a filesystem that supports it")
    try:
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(BASE))
        for command in (["plan", "--no-estimate"], ["run", "--executor", "local"]):
            rc, _, err = cli([command[0], path, *command[1:], "--results", folder / "r"])
            [line] = err.strip().splitlines()
            assert rc == 1 and f"could not write in {folder}" in line, line
        assert not list(folder.iterdir())
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)

"""One grammar for every command that reads a sweep: the sweep named three ways (a name under
--results, RESULTS/SWEEP, the sweep file), --json on every command that prints a result, short
column names wherever a column is named, and --set's KEY=VALUE refused in one line.

One small real sweep (trained here, no Ray) and a tiny head-seeds stage 1 serve the module."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_helpers import cli, cli_subprocess, subprocess_env, variant, write_sweep

NAME, HEADS_NAME = "grammar", "grammar_heads"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The results root and the sweep file of a 2 x 2 copy sweep (cooccurrence x heads, 2
    seeds) and of a 3-head stage 1, both trained by `sweeper.run`."""
    import sweeper

    tmp = tmp_path_factory.mktemp("grammar")
    results = tmp / "results"
    data = variant(**{"name": NAME, "results": str(results),
                      "axes.model.heads": {"grid": [1, 2]}})
    file = write_sweep(tmp / "grammar.yaml", data)
    stage1 = {"name": HEADS_NAME, "task": "copy-v1", "model": "seq2seq",
              "fixed": {"task": {"length": 4, "cooccurrence": 0.0},
                        "model": {"width": 8, "heads": 1, "base_seed": 0},
                        "train": {"batch_size": 8, "eval_size": 8, "eval_every": 3}},
              "axes": {"model": {"head_seeds": {"grid": [[0], [1], [2]]}}},
              "seeds": 2, "budget": {"steps": 6}}
    for source in (str(file), stage1):
        result = sweeper.run(source, results=str(results), executor="local",
                             stream=io.StringIO())
        assert result.exit_status == 0
    return results, file


def forms(results: Path, file: Path, name: str = NAME) -> list[list[str]]:
    """The three ways to name a sweep."""
    return [[name, "--results", str(results)], [str(results / name)], [str(file)]]


def run_json(argv: list[str]) -> object:
    rc, out, err = cli([*argv, "--json"])
    assert rc == 0, err
    return json.loads(out)


def stored_ids(results: Path, name: str = NAME) -> set[str]:
    import pandas as pd

    return set(pd.read_parquet(results / name / "trials")["trial_id"])


# -- the three forms, with --json ------------------------------------------------------------

@pytest.mark.parametrize("form", range(3), ids=["name+results", "results/sweep", "file"])
def test_every_reading_command_takes_the_three_forms_and_prints_json(sweep, form, tmp_path):
    results, file = sweep
    target = forms(results, file)[form]
    ids = stored_ids(results)

    status = run_json(["status", *target])
    assert status["sweep"] == NAME and status["done"] == len(ids) == 8
    rows = run_json(["query", *target, "--columns", "learned"])
    assert {r["trial_id"] for r in rows} == ids
    best = run_json(["best", *target, "--metric", "final_accuracy", "-n", "3", "--by", "trial"])
    assert len(best) == 3 and {r["trial_id"] for r in best} <= ids
    phase = run_json(["phase", *target, "--x", "task.cooccurrence", "--y", "model.heads",
                      "-o", str(tmp_path / "phase.png")])
    assert phase["sweep"] == NAME and sum(c["n_trials"] for c in phase["cells"]) == 8
    assert (tmp_path / "phase.png").stat().st_size > 0
    report = run_json(["report", *target, "-o", str(tmp_path / "report.html")])
    assert report["sweep"] == NAME and report["trials"] == 8
    seeds = run_json(["seeds", *target, "--where", "task.cooccurrence == 0 and "
                      "model.heads == 1", "-o", str(tmp_path / "seeds.png")])
    assert seeds["sweep"] == NAME and len(seeds["trials"]) == 2
    assert set(seeds["trials"]) <= ids and len(seeds["cells"]) == 1


def test_heads_takes_the_three_forms_and_prints_json(sweep):
    results, _ = sweep
    stage1 = write_sweep(results.parent / "stage1.yaml", {"name": HEADS_NAME,
                                                          "results": str(results)})
    seen = []
    for target in forms(results, stage1, HEADS_NAME):
        classes = run_json(["heads", *target])
        assert classes["sweep"] == HEADS_NAME and {h["base_seed"] for h in classes["heads"]} == {0}
        seen.append(sorted(h["head_seed"] for h in classes["heads"]))
    assert seen == [[0, 1, 2]] * 3


def test_compact_takes_the_three_forms_and_prints_json(sweep):
    results, file = sweep
    ids = stored_ids(results)
    answers = [run_json(["compact", *target]) for target in forms(results, file)]
    assert [a["sweep"] for a in answers] == [NAME] * 3
    before = answers[0]["files_before"]  # one per pack
    assert answers[0]["compacted"] == (before > 1) and answers[0]["trials"] == 8
    assert [a["files_before"] for a in answers[1:]] == [1, 1]
    assert stored_ids(results) == ids  # merged, nothing lost


@pytest.mark.parametrize("command", ["status", "compact", "query", "best", "phase", "report",
                                     "seeds", "heads"])
def test_a_name_that_is_no_sweep_is_one_line_naming_the_argument_and_where(sweep, command):
    results, _ = sweep
    extra = {"best": ["--metric", "final_accuracy"], "phase": ["--x", "a", "--y", "b"]}
    rc, out, err = cli([command, "nosuch", "--results", str(results), *extra.get(command, [])])
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "SWEEP: got 'nosuch'; no sweep of that name under" in err
    assert str(results) in err and NAME in err  # where it looked, and what is there


def test_a_path_with_results_is_refused_naming_both_forms(sweep):
    results, _ = sweep
    rc, _, err = cli(["query", str(results / NAME), "--results", str(results)])
    assert rc == 2 and "a sweep name with --results, or RESULTS/SWEEP without it" in err


def _dashboard_line(*argv: str) -> str:
    """The first line `sweeper dashboard ARGV --port 0` prints (its URL), then stopped."""
    proc = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "dashboard", *argv,
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=subprocess_env())
    try:
        started = time.monotonic()
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        assert time.monotonic() - started < 60
        return line
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_dashboard_opens_the_sweep_named_any_way_and_keeps_results_sweep(sweep):
    results, file = sweep
    for argv in [*forms(results, file), [str(results), NAME]]:
        line = _dashboard_line(*argv)
        assert f"?sweep={NAME}" in line and f"serving {results}" in line, (argv, line)
    root = _dashboard_line(str(results))  # a results root: its sweeps listed, the first open
    assert f"serving {results}" in root
    # a sweep not started yet, named with --results: served (it shows as it lands), and said
    later = _dashboard_line("later", "--results", str(results))
    assert "?sweep=later" in later and f"serving {results}" in later


# -- short column names ----------------------------------------------------------------------

def test_short_names_in_query_where_and_columns(sweep):
    results, _ = sweep
    rows = run_json(["query", NAME, "--results", str(results), "--where",
                     "heads == 2 and cooccurrence > 0", "--columns", "heads,cooccurrence,learned"])
    assert len(rows) == 2 and {r["model.heads"] for r in rows} == {2}
    assert {r["task.cooccurrence"] for r in rows} == {0.5}
    assert list(rows[0]) == ["model.heads", "task.cooccurrence", "learned", "trial_id"]
    rc, _, err = cli(["query", NAME, "--results", str(results), "--where", "id == 'copy-v1'"])
    assert rc == 2 and "where id: ambiguous; allowed: one of model.id, task.id" in err


def test_short_names_in_phase_axes_and_facet(sweep, tmp_path):
    results, _ = sweep
    target = [NAME, "--results", str(results), "-o", str(tmp_path / "p.png")]
    phase = run_json(["phase", *target, "--x", "cooccurrence", "--y", "hardness",
                      "--facet", "heads"])
    assert (phase["x"], phase["y"], phase["facet"]) == ("task.cooccurrence", "task.hardness",
                                                         "model.heads")
    for flag in ("--x", "--y", "--facet"):
        axes = {"--x": "cooccurrence", "--y": "heads", "--facet": "none", flag: "id"}
        rc, _, err = cli(["phase", *target, *[a for kv in axes.items() for a in kv]])
        assert rc == 2 and err.count("\n") == 1
        assert f"{flag} id: ambiguous; allowed: one of task.id, model.id" in err


def test_short_names_in_seeds_where_and_by(sweep, tmp_path):
    results, _ = sweep
    seeds = run_json(["seeds", NAME, "--results", str(results), "--where", "heads == 2",
                      "--by", "heads,cooccurrence", "-o", str(tmp_path / "s.png")])
    assert seeds["cells"] == [{"model.heads": 2, "task.cooccurrence": 0.0},
                              {"model.heads": 2, "task.cooccurrence": 0.5}]
    rc, _, err = cli(["seeds", NAME, "--results", str(results), "--where", "id == 'x'",
                      "-o", str(tmp_path / "s.png")])
    assert rc == 2 and "model.id, task.id" in err


def test_short_names_in_set(sweep, tmp_path, monkeypatch):
    _, file = sweep
    plan = run_json(["plan", file, "--results", str(tmp_path), "--no-estimate", "--set",
                     "heads=4", "--set", "lr=0.01"])
    assert plan["trials"] == 4 and "model.heads" not in plan["rows"][0]  # an axis no more
    from sweeper.overrides import apply_sets

    data = apply_sets(variant(**{"axes.model.heads": {"grid": [1, 2]}}), ["heads=4", "lr=0.01"])
    assert data["fixed"]["model"]["heads"] == 4 and "heads" not in data["axes"]["model"]
    assert data["fixed"]["train"]["lr"] == 0.01
    import sweeper.overrides

    monkeypatch.setattr(sweeper.overrides, "_parameters",
                        lambda data: ["task.size", "model.size", "train.lr"])
    rc, _, err = cli(["plan", file, "--results", str(tmp_path), "--set", "size=3"])
    assert rc == 2 and "--set size: ambiguous; allowed: one of task.size, model.size" in err


def test_set_without_equals_is_one_line_naming_set(sweep):
    _, file = sweep
    proc = cli_subprocess(["plan", file, "--set", "seeds", "3"], timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert "argument --set: got 'seeds'; allowed: KEY=VALUE" in proc.stderr


@pytest.mark.parametrize("command", ["plan", "run", "train"])
@pytest.mark.parametrize("item", ["seeds", "=4", ""])
def test_a_set_that_is_not_key_equals_value_is_refused_by_the_parser(sweep, command, item,
                                                                    capsys, tmp_path):
    from sweeper.cli import main

    _, file = sweep
    argv = ([command, str(file)] if command != "train" else
            [command, "--task", "copy-v1", "--model", "seq2seq", "--out", str(tmp_path / "t")])
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--set", item, "--results" if command != "train" else "-v",
              *([str(tmp_path / "r")] if command != "train" else [])])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert f"sweeper {command}: error: argument --set: got {item!r}; allowed: KEY=VALUE" in err
    assert list(tmp_path.iterdir()) == []


def test_plan_and_run_share_the_flags_that_mean_the_same():
    """What `plan` estimates, `run` does: the same flags for the same choices."""
    from sweeper.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    flags = {name: {o for a in commands[name]._actions for o in a.option_strings}
             for name in ("plan", "run")}
    shared = {"--results", "--set", "--executor", "--num-cpus", "--workers", "--pack-size",
              "--address", "--no-estimate", "--json", "--strict"}
    assert shared <= flags["plan"] and shared <= flags["run"]


def test_train_takes_budget_steps_as_run_does_and_status_names_the_state_as_run_does(
        sweep, tmp_path):
    results, _ = sweep
    rc, out, err = cli(["train", "--task", "copy-v1", "--model", "seq2seq", "--set",
                        "task.length=4", "--set", "model.width=8", "--set", "budget.steps=10",
                        "--set", "train.batch_size=8", "--set", "train.eval_every=10",
                        "--set", "train.eval_size=8", "--out", str(tmp_path / "t")])
    assert rc == 0, err
    status = run_json(["status", NAME, "--results", str(results)])
    assert status["state"] == status["driver"]

"""The command line as researchers use it, each habit through a real subprocess: numbers written
as `1e-4`, output piped into `head`, help text on every flag."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sweep_helpers import REPO, cli_subprocess, subprocess_env

SWEEP = """\
name: numbers
task: copy-v1
model: seq2seq
fixed:
  task: {length: 4, vocab: 1_0}
  model: {width: 8}
  train: {lr: 1e-4, batch_size: 8, eval_every: 10, eval_size: 8}
axes:
  task:
    hardness: {grid: [0, 5E-1]}
seeds: 1
budget: {steps: 2e1}
"""


@pytest.mark.parametrize(("written", "value"), [("1e-4", 1e-4), ("3E-3", 3e-3),
                                                ("-2.5e+1", -25.0), ("1_000", 1000),
                                                ("1.5", 1.5)])
def test_numbers_are_read_as_people_write_them(written, value):
    from sweeper.search_space import load_yaml_value

    value_read = load_yaml_value(written, "x")
    assert value_read == value
    assert isinstance(value_read, float if "." in written or "e" in written.lower() else int)


def test_a_sweep_file_with_exponent_numbers_plans(tmp_path):
    path = tmp_path / "numbers.yaml"
    path.write_text(SWEEP)
    proc = cli_subprocess(["plan", path, "--results", tmp_path / "results"])
    assert proc.returncode == 0, proc.stderr
    assert "2 trials" in proc.stdout
    from sweeper.search_space import load_sweep

    sweep = load_sweep(str(path))
    assert [a.values for a in sweep.axes] == [(0.0, 0.5)]
    assert sweep.fixed["train"]["lr"] == 1e-4 and sweep.fixed["train"]["steps"] == 20
    assert sweep.fixed["task"]["vocab"] == 10


def test_a_word_where_a_number_belongs_keeps_its_one_line_error(tmp_path):
    path = tmp_path / "words.yaml"
    path.write_text(SWEEP.replace("lr: 1e-4", "lr: 1e-4x"))
    proc = cli_subprocess(["plan", path, "--results", tmp_path / "results"])
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "train.lr: got '1e-4x'; allowed: a number >= 0" in line
    assert not (tmp_path / "results").exists()


def test_train_set_takes_exponent_numbers(tmp_path):
    proc = cli_subprocess(["train", "--task", "copy-v1", "--model", "seq2seq", "--set",
                           "train.lr=1e-4", "--set", "task.length=4", "--set", "model.width=8",
                           "--set", "train.batch_size=8", "--set", "train.eval_size=8",
                           "--steps", "2", "--out", tmp_path / "run"])
    assert proc.returncode == 0, proc.stderr
    assert "train.lr=0.0001" in proc.stdout


@pytest.mark.parametrize("argv", [["tasks"], ["plan", str(REPO / "search_spaces/snell_phase.yaml"),
                                              "--rows", "400", "--no-estimate"]])
def test_output_piped_into_head_ends_quietly(argv, tmp_path):
    command = (f"{sys.executable} -m sweeper.cli {' '.join(argv)} --results {tmp_path} "
               if argv[0] == "plan" else f"{sys.executable} -m sweeper.cli tasks")
    proc = subprocess.run(f"{command} | head -1", shell=True, capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=subprocess_env(),
                          executable="/bin/bash")
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_analysis_output_piped_into_head_ends_quietly(tmp_path):
    from synthetic_stores import write_copy_sweep

    write_copy_sweep(tmp_path, "copy")
    command = f"{sys.executable} -m analysis query {tmp_path}/copy --format csv | head -1"
    proc = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=subprocess_env(), executable="/bin/bash")
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def _flags(parser) -> list[tuple[str, str, str | None]]:
    import argparse

    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += [(f"{parser.prog} {name}", *rest[1:]) for rest in _flags(sub)]
        elif action.option_strings and action.dest != "help":
            out.append((parser.prog, action.option_strings[0], action.help))
    return out


def test_every_flag_has_help_text():
    from analysis.cli import build_parser as analysis_parser
    from sweeper.cli import build_parser

    missing = [f"{prog} {flag}" for prog, flag, text in
               _flags(build_parser()) + _flags(analysis_parser()) if not text]
    assert not missing, f"flags without help text: {missing}"


def test_query_prints_exactly_the_columns_named_and_sorts_rows_by_axes_then_seed(tmp_path):
    import io

    import pandas as pd
    from synthetic_stores import write_copy_sweep

    write_copy_sweep(tmp_path, "copy")
    proc = subprocess.run([sys.executable, "-m", "analysis", "query", f"{tmp_path}/copy",
                           "--columns", "heads,learned,steps_to_learn", "--only", "--format",
                           "csv"],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.StringIO(proc.stdout))
    assert list(frame.columns) == ["model.heads", "learned", "steps_to_learn", "trial_id"]
    proc = subprocess.run([sys.executable, "-m", "analysis", "query", f"{tmp_path}/copy",
                           "--format", "csv"], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.StringIO(proc.stdout))  # by default: the swept columns, seed, ...
    axes = ["task.cooccurrence", "task.hardness", "model.heads"]
    assert set(axes) <= set(frame.columns) and "seed" in frame.columns
    order = [c for c in frame.columns if c.startswith(("task.", "model."))] + ["seed"]
    assert frame.equals(frame.sort_values(order, kind="stable", ignore_index=True))

    ambiguous = subprocess.run([sys.executable, "-m", "sweeper.cli", "query",
                                f"{tmp_path}/copy", "--columns", "id"],
                               capture_output=True, text=True, timeout=120, cwd=REPO,
                               env=subprocess_env())
    assert ambiguous.returncode == 2
    assert "task.id, model.id" in ambiguous.stderr.strip().splitlines()[-1]
    final = subprocess.run([sys.executable, "-m", "sweeper.cli", "query", f"{tmp_path}/copy",
                            "--columns", "accuracy"], capture_output=True, text=True,
                           timeout=120, cwd=REPO, env=subprocess_env())
    assert final.returncode == 0 and "final_accuracy" in final.stdout.splitlines()[0]


def test_bash_completion_completes_commands_flags_and_choices(tmp_path):
    proc = cli_subprocess(["completion", "bash"])
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / "sweeper.bash"
    script.write_text(proc.stdout)

    def complete(*words: str) -> list[str]:
        quoted = " ".join(f"'{w}'" for w in words)
        done = subprocess.run(["bash", "-c", f"source {script}; COMP_WORDS=(sweeper {quoted}); "
                               f"COMP_CWORD={len(words)}; _shtab_sweeper; "
                               'printf "%s\\n" "${COMPREPLY[@]}"'],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("ru") == ["run"]
    assert complete("run", "--exe") == ["--executor"]
    assert complete("run", "--executor", "") == ["ray", "local"]
    assert "tasks" in complete("")


def test_zsh_completion_is_a_compdef_script():
    proc = cli_subprocess(["completion", "zsh"])
    assert proc.returncode == 0 and proc.stdout.startswith("#compdef sweeper")
    assert "--executor" in proc.stdout and "_files" in proc.stdout


def test_a_bare_sweep_name_reads_from_the_default_results_folder(tmp_path):
    from synthetic_stores import write_copy_sweep

    write_copy_sweep(tmp_path / "results", "copy")
    proc = subprocess.run([sys.executable, "-m", "sweeper.cli", "query", "copy", "--columns",
                           "learned", "--only", "--limit", "2", "--format", "csv"],
                          capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "learned,trial_id"

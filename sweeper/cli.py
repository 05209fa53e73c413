"""The `sweeper` command: train one trial, list tasks, plan and run sweeps, watch and read them.

Every command validates its input before it writes anything; a `SweeperInputError` (or an
analysis input error) becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from sweeper.errors import ParameterError, StoreStepError
from sweeper.numbers import MAX_SEED, int_argument
from sweeper.results.errors import (
    OneLineParser,
    ResultsInputError,
    ResultsWriteError,
    closed_pipe_exit,
    command_line,
    one_line,
)
from sweeper.results.roots import check_results_root


def _parse_sets(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`--set task.cooccurrence=0.5` -> {"task": {"cooccurrence": 0.5}} (values read as YAML)."""
    from sweeper.numbers import shown
    from sweeper.search_space import load_yaml_value
    from sweeper.sweep_fields import key_path

    out: dict[str, dict[str, Any]] = {"task": {}, "model": {}, "train": {}}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        label = f"--set {key_path('', key)}"
        if key.strip() == "budget.steps":  # a sweep file's name for it, as `run --set` takes
            key = "train.steps"
        group, dot, name = key.partition(".")
        if not sep or not dot or not name:
            raise ParameterError(f"--set: got {shown(pair)}; allowed: GROUP.NAME=VALUE with "
                                 "GROUP one of task, model, train (e.g. task.cooccurrence=0.5),"
                                 " or budget.steps=N as in a sweep file")
        if group not in out:
            raise ParameterError(f"{label}: unknown group {shown(group)}; allowed: task, model, "
                                 "train")
        try:
            out[group][name] = load_yaml_value(raw, label)
        except yaml.YAMLError as exc:
            raise ParameterError(f"{label}: got {shown(raw)}, not a value ({exc})") from None
    return out


def cmd_train(args: argparse.Namespace) -> int:
    from sweeper.results import Store, check_sweep_name
    from sweeper.spec import make_spec

    sets = _parse_sets(args.set)
    train = dict(sets["train"])
    for flag in ("steps", "lr", "batch_size", "eval_every", "eval_size", "optimizer"):
        if getattr(args, flag) is not None:
            train[flag] = getattr(args, flag)
    spec = make_spec(args.task, args.model, sets["task"], sets["model"], train, args.seed,
                     args.device)
    out = os.path.abspath(args.out)
    check_sweep_name(os.path.basename(out), "--out (its last folder name)")
    store = Store.open(os.path.dirname(out))

    from sweeper import report
    from sweeper.train import train as train_one
    from sweeper.workers import pin_threads

    pin_threads(args.threads)
    result = train_one(spec, report=report.step_printer(spec) if args.verbose else None)
    store.write_pack(os.path.basename(out), [result])
    store.write_manifest(os.path.basename(out), {"command": " ".join(sys.argv),
                                                 "task": spec.task, "model": spec.model,
                                                 "trials_expanded": 1})
    print(report.trial_summary(result, out))
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from sweeper.families import families
    from sweeper.spec import TRAIN_PARAMS

    if args.json:
        print(json.dumps(_tasks_json(families(), TRAIN_PARAMS)))
        return 0
    for family in families().values():
        print(f"family {family.name}: {family.doc}")
        print(f"  tasks: {', '.join(t.id for t in family.tasks)}; models: "
              f"{', '.join(family.model_ids)}; phase outcome: {family.phase_outcome}"
              + (f"; train defaults: {_inline(family.train_defaults)}"
                 if family.train_defaults else ""))
        print()
        for entry in family.tasks:
            _print_entry("task", entry)
        for entry in family.models:
            if not isinstance(entry, str):
                _print_entry("model", entry)
    print("train (a family may change the defaults, above)")
    for p in TRAIN_PARAMS:
        print(f"  {p.name:<18} default {p.default!r:<12} {p.allowed():<36} {p.doc}")
    return 0


def _tasks_json(families: dict, train_params) -> dict[str, Any]:
    """`sweeper tasks --json`: every family, its tasks' and models' parameters, and train's."""
    def params(entry_params) -> list[dict[str, Any]]:
        return [{"name": p.name, "type": p.type.__name__, "default": p.default,
                 "allowed": p.allowed(), "doc": p.doc, "low": p.low, "high": p.high,
                 "choices": list(p.choices) if p.choices else None, "nullable": p.nullable}
                for p in entry_params]

    return {"families": [
        {"name": f.name, "doc": f.doc, "phase_outcome": f.phase_outcome,
         "train_defaults": dict(f.train_defaults),
         "tasks": [{"id": t.id, "doc": t.doc, "params": params(t.params)} for t in f.tasks],
         "models": [{"id": m} if isinstance(m, str) else
                    {"id": m.id, "doc": m.doc, "params": params(m.params)} for m in f.models]}
        for f in families.values()], "train": params(train_params)}


def _inline(values) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items())


def _print_entry(label: str, entry) -> None:
    print(f"{label} {entry.id}: {entry.doc}")
    for p in entry.params:
        print(f"  {p.name:<18} default {p.default!r:<12} {p.allowed():<36} {p.doc}")
    print()


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="sweeper", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train one trial and store it as Parquet under --out")
    p.add_argument("--task", required=True, help="a task id, e.g. copy-v1 (see sweeper tasks)")
    p.add_argument("--model", required=True,
                   help="a model id that trains on the task, e.g. seq2seq")
    from sweeper.overrides import set_item

    p.add_argument("--set", action="append", default=[], metavar="GROUP.NAME=VALUE",
                   type=set_item,
                   help="a task, model or train parameter, e.g. task.length=16 (repeatable)")
    p.add_argument("--steps", type=int_argument(), help="optimiser steps (train.steps)")
    p.add_argument("--lr", type=float, help="learning rate (train.lr), e.g. 1e-3")
    p.add_argument("--batch-size", type=int_argument(),
                   help="sequences per step (train.batch_size)")
    p.add_argument("--eval-every", type=int_argument(),
                   help="steps between evaluations (train.eval_every)")
    p.add_argument("--eval-size", type=int_argument(),
                   help="fresh evaluation sequences (train.eval_size)")
    p.add_argument("--optimizer", help="adam or sgd (train.optimizer)")
    p.add_argument("--seed", type=int_argument(0, MAX_SEED), default=0,
                   help="the trial's seed (default 0)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--threads", type=int_argument(1, 1024), default=1,
                   help="torch threads (default 1)")
    p.add_argument("--out", required=True, help="folder for trials/ and trajectories/")
    p.add_argument("-v", "--verbose", action="store_true", help="print every evaluation")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("tasks", help="list tasks, models and their parameters")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")
    p.set_defaults(func=cmd_tasks)

    from sweeper import sweep_commands

    sweep_commands.register(sub)
    try:
        from analysis.cli import register as register_analysis
    except ImportError:  # pragma: no cover - analysis is part of this distribution
        register_analysis = None
    if register_analysis is not None:
        register_analysis(sub)

    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh)",
                       description='Enable with: eval "$(sweeper completion bash)" in ~/.bashrc, '
                                   "or sweeper completion zsh > ~/.zfunc/_sweeper for zsh.")
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete for")
    p.set_defaults(func=cmd_completion)
    return parser


# shtab's FILE completer, spelled out so that building the parser does not import shtab
FILE_COMPLETION = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}
FILE_ARGUMENTS = ("file", "sweep", "sweep_dir", "--results", "--out", "-o")


def cmd_completion(args: argparse.Namespace) -> int:
    """A completion script from the parser itself (shtab): subcommands, flags, choices, and
    file names where a command takes a path."""
    import shtab

    parser = build_parser()
    for action in _all_actions(parser):
        if action.dest in FILE_ARGUMENTS or set(action.option_strings) & set(FILE_ARGUMENTS):
            action.complete = FILE_COMPLETION
    print(shtab.complete(parser, shell=args.shell))
    return 0


def _all_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    actions = []
    for action in parser._actions:
        actions.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                actions += _all_actions(sub)
    return actions


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with command_line():  # input errors name the flags (`sweeper.results.errors`)
            if getattr(args, "results", None) is not None:  # a root that outlives the process
                check_results_root(args.results)
            status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        return closed_pipe_exit()
    except ResultsInputError as exc:  # the root of sweeper's and analysis' input errors
        print(f"sweeper {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except (ResultsWriteError, StoreStepError) as exc:  # a full disk, a read-only folder, a
        # pack that could not be stored: not the input's fault
        print(f"sweeper {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, or `sweeper.interrupts.Interrupted`
        print(f"interrupted: {exc}" if str(exc) else "interrupted", file=sys.stderr)
        return getattr(exc, "exit_status", 130)


if __name__ == "__main__":
    sys.exit(main())

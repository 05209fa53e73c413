"""Stop what is decided: training steps and wall time with and without `budget.stop: decided`,
paired on one machine, and whether every first-passage outcome and the phase diagram agree.

    python benchmarks/decided.py --quick              # the quick sweep only (~4 min, 2 cores)
    python benchmarks/decided.py                      # also a slice of snell_phase
    python benchmarks/decided.py --margin 50          # steps trained past each decision
    python benchmarks/decided.py --executor ray       # as README's main job runs (noisier)

Each sweep runs twice into fresh stores, the full budget first, then with the rule, with the
same executor (default local: one process, so that wall time is the training's). Trials are
paired by their configuration and seed (their ids differ: the rule is part of a trial's
config). Printed per sweep: trials, training steps (what each trial trained to, `stopped_at`;
a shared training once), wall time, the first-passage outcomes that differ (should be none),
whether the phase diagram of the sweep's outcome is the same, and which end-state outcomes
moved (regime, attention_heads: read at the stop, as docs/results.md says).

The cadence table prices the decision's resolution: from the full run's trajectories
(evaluations every 10 steps), what the rule would train if the trials were evaluated every
10, 20 or 40 steps (the decision falls on the next evaluation: coarser cadences decide later),
against what those evaluations cost, in training steps (one evaluation measured against one
training step of a pack of the sweep's shape, here). It is read off the stored trajectories:
a run at cadence 20 draws other evaluation samples, so its decisions may fall a little
differently.

The last line:
    decided: N trials, X% fewer training steps, Y% less wall time, first-passage outcomes
    identical in M of N
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from machine import cpu_name  # noqa: E402

FIRST_PASSAGE = ("learned", "steps_to_learn", "attention_learned", "attention_steps",
                 "attention_onset", "ktiw_onset")
END_STATE = ("regime", "attention_heads")
# a slice of snell_phase: the weak-signal corner and its strong-signal neighbours, both heads
PHASE_SLICE = ["task.cooccurrence=0.0,0.25,1.0", "task.hardness=0.0,0.6,1.0", "seeds=4"]
CADENCES = (10, 20, 40)


def run(sweep: str, sets: list[str], executor: str, root: str) -> float:
    """One sweep into `root`; its wall time (seconds)."""
    import io

    import sweeper

    start = time.perf_counter()
    sweeper.run(sweep, results=root, executor=executor, sets=sets, estimate=False,
                stream=io.StringIO(), num_cpus=2 if executor == "ray" else None)
    return time.perf_counter() - start


def trials(root: str, name: str):
    from analysis import load

    return load(root, name).trials


def pair(full, decided):
    """The two runs' trials side by side, by configuration and seed."""
    keys = [c for c in full.columns if c.startswith(("task.", "model.")) or c == "seed"
            or (c.startswith("train.") and c not in ("train.stop", "train.stop_margin"))]
    keys = [k for k in keys if full[k].notna().any()]
    return full.merge(decided, on=keys, suffixes=("_full", "_decided"), validate="one_to_one")


def trained_steps(frame) -> int:
    """Steps trained: each training once (a row that shares another's is not a training)."""
    own = frame[frame["shared_with"].isna()]
    return int(own["stopped_at"].fillna(own["train.steps"]).sum())


def same(a, b) -> bool:
    import pandas as pd

    return (pd.isna(a) and pd.isna(b)) or (not pd.isna(a) and not pd.isna(b) and a == b)


def phase_cells(root: str, name: str, outcome: str):
    """The phase diagram's cells (counts, rates, intervals), without the trials' ids."""
    from analysis import load
    from analysis.phase import phase_from_results

    diagram = phase_from_results(load(root, name), x="task.cooccurrence", y="task.hardness",
                                 facet="model.heads", outcome=outcome)
    columns = ["model.heads", "task.cooccurrence", "task.hardness", "n_trials", "n",
               "successes", "p", "p_low", "p_high"]
    return diagram.cells[[c for c in columns if c in diagram.cells.columns]].reset_index(
        drop=True)


def cadence_table(root: str, name: str, margin: int, eval_cost: float) -> list[str]:
    """Steps the rule would train at each cadence, from the full run's trajectories."""
    from analysis import load
    from sweeper.families import families
    from sweeper.results import DecisionWatch

    results = load(root, name)
    family = families()["copy"]
    rows = results.trajectories
    own = results.trials[results.trials["shared_with"].isna()]
    steps_budget = int(own["train.steps"].iloc[0])
    lines = [f"  {'cadence':>8} {'steps trained':>14} {'saved':>7} {'evaluations':>12} "
             f"{'eval cost (steps)':>18} {'net saved':>10}"]
    full_steps = len(own) * steps_budget
    full_evals = len(own) * (steps_budget // 10 + 1)  # the full run's, every 10 steps
    for cadence in CADENCES:
        trained = evals = 0
        chosen = rows[rows["trial_id"].isin(set(own["trial_id"]))]
        for _, group in chosen.groupby("trial_id"):
            group = group.sort_values("step")
            group = group[(group["step"] % cadence == 0) | (group["step"] == steps_budget)]
            watch = DecisionWatch(family.outcome_rules, [m.name for m in family.metrics], [{}])
            stop = steps_budget
            for _, row in group.iterrows():
                at = watch.observe(int(row["step"]), [row.to_dict()])[0]
                if at is not None and row["step"] - at >= margin and row["step"] < steps_budget:
                    stop = int(row["step"])
                    break
            trained += stop
            evals += stop // cadence + 1
        cost = evals * eval_cost
        net = 1 - (trained + cost) / (full_steps + full_evals * eval_cost)
        lines.append(f"  {cadence:>8} {trained:>14,} {1 - trained / full_steps:>7.1%} "
                     f"{evals:>12,} {cost:>18,.0f} {net:>10.1%}")
    return lines


def evaluation_cost(sweep: str) -> float:
    """One evaluation's time in training steps, for a pack of 16 of the sweep's shape."""
    import torch

    from sweeper.optim import PackedOptimizer
    from sweeper.plan import expand
    from sweeper.search_space import parse_sweep
    from sweeper.train import make_experiment

    torch.set_num_threads(1)
    specs = list(expand(parse_sweep(Path(sweep).read_text())))[:16]
    experiment = make_experiment(specs, torch.float32, "cpu")
    lr = torch.tensor([s.train["lr"] for s in specs])
    optimizer = PackedOptimizer(list(experiment.model.parameters()), lr,
                                specs[0].train["optimizer"])

    def step():
        optimizer.zero_grad()
        experiment.train_loss().sum().backward()
        optimizer.step(torch.ones(len(specs), dtype=torch.bool))

    for _ in range(3):
        step()
        experiment.evaluate()
    steps, evals = [], []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(10):
            step()
        steps.append((time.perf_counter() - t) / 10)
        t = time.perf_counter()
        experiment.evaluate()
        evals.append(time.perf_counter() - t)
    steps.sort(), evals.sort()
    return evals[2] / steps[2]


def compare(label: str, sweep: str, sets: list[str], executor: str, margin: int,
            work: str) -> dict:
    name = Path(sweep).stem
    rule = ["budget.stop=decided", f"budget.margin={margin}"]
    full_root, rule_root = f"{work}/{label}-full", f"{work}/{label}-decided"
    full_s = run(sweep, sets + ["budget.stop=null", "budget.margin=null"], executor, full_root)
    rule_s = run(sweep, sets + rule, executor, rule_root)
    full, decided = trials(full_root, name), trials(rule_root, name)
    both = pair(full, decided)
    differing = [(row["seed"], c) for _, row in both.iterrows() for c in FIRST_PASSAGE
                 if f"{c}_full" in both and not same(row[f"{c}_full"], row[f"{c}_decided"])]
    identical = len(both) - len({s for s, _ in differing})
    moved = {c: int(sum(not same(a, b) for a, b in zip(both[f"{c}_full"], both[f"{c}_decided"])))
             for c in END_STATE if f"{c}_full" in both}
    steps_full, steps_rule = trained_steps(full), trained_steps(decided)
    outcome = "attention_learned"
    diagram_same = phase_cells(full_root, name, outcome).equals(
        phase_cells(rule_root, name, outcome))
    reasons = decided["stop_reason"].value_counts().to_dict()
    print(f"\n== {label}: {sweep} {' '.join(sets)} ({executor} executor, margin {margin})")
    print(f"  trials {len(full)} (paired {len(both)}), stop reasons with the rule: {reasons}")
    print(f"  training steps  full {steps_full:>9,}  decided {steps_rule:>9,}  "
          f"({1 - steps_rule / steps_full:.1%} fewer)")
    print(f"  wall time       full {full_s:>8.1f}s  decided {rule_s:>8.1f}s  "
          f"({1 - rule_s / full_s:.1%} less)")
    print(f"  first-passage outcomes identical in {identical} of {len(both)} trials"
          + (f"; differing: {differing[:6]}" if differing else ""))
    print(f"  phase diagram of {outcome} identical: {diagram_same}")
    print(f"  end-state outcomes moved (read at the stop): {moved}")
    return {"trials": len(both), "identical": identical, "steps_full": steps_full,
            "steps_rule": steps_rule, "wall_full": full_s, "wall_rule": rule_s,
            "root": full_root, "name": name}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the quick sweep only")
    parser.add_argument("--margin", type=int, default=20)
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--keep", help="keep the stores under this folder")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_name()}; {os.cpu_count()} cores; Python {platform.python_version()}")
    work = args.keep or tempfile.mkdtemp(prefix="sweeper-decided-")
    runs = [("quick", str(REPO / "search_spaces/quick.yaml"), [])]
    if not args.quick:
        runs.append(("snell_phase slice", str(REPO / "search_spaces/snell_phase.yaml"),
                     PHASE_SLICE))
    measured = [compare(label, sweep, sets, args.executor, args.margin, work)
                for label, sweep, sets in runs]
    cost = evaluation_cost(runs[0][1])
    print(f"\none evaluation costs {cost:.2f} training steps (a pack of 16 of quick's shape)")
    print("the rule at other evaluation cadences (from the quick sweep's full trajectories):")
    print("\n".join(cadence_table(measured[0]["root"], measured[0]["name"], args.margin, cost)))
    n = sum(m["trials"] for m in measured)
    steps = 1 - sum(m["steps_rule"] for m in measured) / sum(m["steps_full"] for m in measured)
    wall = 1 - sum(m["wall_rule"] for m in measured) / sum(m["wall_full"] for m in measured)
    same_n = sum(m["identical"] for m in measured)
    print(f"\ndecided: {n} trials, {steps:.1%} fewer training steps, {wall:.1%} less wall time, "
          f"first-passage outcomes identical in {same_n} of {n}")
    return 0 if same_n == n and not math.isnan(steps) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Probes of the mechanisms behind claims in docs/results.md, on freshly trained copy models.

`readout_saturation` trains one pack of copy-family specs with the optimizer sweeps use and,
at chosen steps, measures the readout W_o tanh(W_c [s; c] + b_c) + b_o on evaluation data:

- `never_target_mass`: the softmax mass on classes the task never asks for (target frequency
  0: SOS always; at hardness 1 also the content tokens >= L),
- `saturated`: the share of its tanh units with |tanh a| > 0.95 (each passes under a tenth of
  the gradient an unsaturated unit passes).

It is the mechanism of the old hardness artefact (docs/results.md; pinned at L = 8 by
tests/test_science.py), and at the paper's scale the test of whether the same mechanism is why
the output-bias init moves snell_copy's numbers:

    python -m sweeper.families.copy.probes search_spaces/snell_copy_ablation.yaml --seeds 4 \\
        --steps 0,5,10,20,40

prints, for each cell of the sweep file and each step, the median and range over seeds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import pandas as pd

SATURATED = 0.95  # |tanh a| above this: a saturated unit (1 - 0.95^2 < 0.1 of the gradient)
PROBE_BATCH = 256
MEASURES = ("accuracy", "attn_acc", "never_target_mass", "saturated")


def readout_saturation(specs: list, steps: Sequence[int],
                       sos_never_target: bool = False) -> pd.DataFrame:
    """One row per (step, seed) of a pack of copy-family specs of one shape, trained up to
    max(steps) with the sweeps' optimizer: token and attention accuracy (the experiment's own
    evaluation), never_target_mass and saturated (module docstring).

    `sos_never_target` starts SOS's output bias at log NEVER_TARGET, as the log-frequency init
    does, leaving every other parameter as built: with nn.Linear's init it separates SOS's
    initial share from the rest of the difference between the two inits.
    """
    import torch

    from sweeper.optim import PackedOptimizer
    from sweeper.train import make_experiment

    if any(s.family.name != "copy" or s.model != "seq2seq" for s in specs):
        raise ValueError("got another task or model; allowed: the copy family's tasks with "
                         "model seq2seq (the probe reads its readout)")
    experiment = make_experiment(specs, torch.float32, "cpu")
    model, K = experiment.model, len(specs)
    if sos_never_target:
        _start_sos_at_never_target(model, specs)
    lr = torch.tensor([s.train["lr"] for s in specs])
    optimizer = PackedOptimizer(list(model.parameters()), lr, specs[0].train["optimizer"])
    never = (experiment.sampler.target_frequencies() == 0).float()  # [K, V]
    everyone = torch.ones(K, dtype=torch.bool)
    rows: list[dict] = []
    for step in range(max(steps) + 1):
        if step in steps:
            rows += _probe(experiment, never, specs, step)
        if step == max(steps):
            break
        optimizer.zero_grad()
        experiment.train_loss().sum().backward()
        optimizer.step(everyone)
    return pd.DataFrame(rows)


def _start_sos_at_never_target(model, specs: list) -> None:
    import math

    import torch

    from sweeper.families.copy.model import NEVER_TARGET

    with torch.no_grad():
        for k, spec in enumerate(specs):
            sos = spec.make_task().sos
            # SOS against the mean of the other `sos` classes (0..N), as in the log-frequency
            # init of a task whose targets are uniform: log(NEVER_TARGET / (1 / sos))
            model.b_o[k, sos] = model.b_o[k, :sos].mean() + math.log(NEVER_TARGET * sos)


def _probe(experiment, never, specs: list, step: int) -> list[dict]:
    import torch

    model = experiment.model
    with torch.no_grad():
        metrics = experiment.evaluate()
        batch = experiment.sampler.sample(PROBE_BATCH, eval=True)
        enc, dec = model.states(batch.src, batch.dec_in)  # [K, B, S, d], [K, B, T, d]
        _, ctx = model.attend(dec, enc)  # [K, B, T, d]
        probs = model.readout(dec, ctx).softmax(-1)  # [K, B, T, V]
        mass = (probs * never[:, None, None, :].to(probs)).sum(-1).mean(dim=(1, 2))  # [K]
        units = model.readout_preactivation(dec, ctx).tanh().abs()  # [K, B, T, d]
        saturated = (units > SATURATED).float().mean(dim=(1, 2, 3))  # [K]
    return [{"step": step, "seed": s.seed, "accuracy": float(metrics["accuracy"][k]),
             "attn_acc": float(metrics["attn_acc"][k]), "never_target_mass": float(mass[k]),
             "saturated": float(saturated[k])} for k, s in enumerate(specs)]


def sweep_probe(path: str, seeds: int | Sequence[int], steps: Sequence[int],
                sos_never_target: bool = False) -> pd.DataFrame:
    """`readout_saturation` for each cell of a grid sweep file, on its first `seeds` seeds
    (a count) or on the seeds listed; the cell's axis values as columns."""
    from sweeper.cells import cell_specs
    from sweeper.plan import cells
    from sweeper.search_space import load_sweep

    sweep = load_sweep(path)
    frames = []
    for cell in cells(sweep):
        specs = cell_specs(sweep, cell)
        unknown = [] if isinstance(seeds, int) else sorted(set(seeds) - set(sweep.seeds))
        if unknown:
            raise ValueError(f"--seeds: got {', '.join(map(str, unknown))}, not seeds of the "
                             f"sweep file; allowed: {', '.join(map(str, sweep.seeds))}")
        specs = (specs[:seeds] if isinstance(seeds, int)
                 else [s for s in specs if s.seed in set(seeds)])
        frame = readout_saturation(specs, steps, sos_never_target)
        for column, value in cell.items():
            frame.insert(0, column, value)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and range over seeds, per cell and step."""
    keys = [c for c in frame.columns if c != "seed" and c not in MEASURES]

    def spread(values: pd.Series) -> str:
        return f"{values.median():.3f} ({values.min():.3f}-{values.max():.3f})"

    return (frame.groupby(keys, sort=False)
            .agg(seeds=("seed", "size"), **{m: (m, spread) for m in MEASURES})
            .reset_index())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweeper.families.copy.probes",
        description="The readout probe on each cell of a copy sweep file (module docstring): "
                    "median (range) over seeds of token and attention accuracy, the softmax "
                    "mass on never-target classes and the share of saturated tanh units, at "
                    "each step.")
    parser.add_argument("sweep_file", help="a grid sweep file of the copy family")
    parser.add_argument("--seeds", default="4",
                        help="seeds per cell: a count (the first ones, default 4) or the seeds "
                             "themselves, comma-separated with at least one comma (4,5,8,10)")
    parser.add_argument("--steps", default="0,10,20,40",
                        help="comma-separated Adam steps to probe at (default 0,10,20,40)")
    parser.add_argument("--sos-never-target", action="store_true",
                        help="start SOS's output bias at log 1e-4 (as the log-frequency init "
                             "does), every other parameter as built")
    args = parser.parse_args(argv)
    try:
        steps = sorted({int(s) for s in args.steps.split(",")})
        seeds: int | list[int] = ([int(s) for s in args.seeds.split(",") if s.strip()]
                                  if "," in args.seeds else int(args.seeds))
        if steps[0] < 0 or seeds in (0, []) or (isinstance(seeds, int) and seeds < 0):
            raise ValueError
    except ValueError:
        print(f"--steps/--seeds: got {args.steps!r} and {args.seeds!r}; allowed: steps as "
              "comma-separated integers >= 0, seeds a count >= 1 or comma-separated seeds",
              file=sys.stderr)
        return 2
    from sweeper.errors import SweeperInputError

    try:
        frame = sweep_probe(args.sweep_file, seeds, steps, args.sos_never_target)
    except (SweeperInputError, ValueError) as exc:
        print(str(exc) if str(exc).startswith("--") else f"sweep_file: {exc}", file=sys.stderr)
        return 2
    print(summary(frame).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How long the analysis takes on a sweep of 10,000 trials with 20 logged steps each.

Writes a synthetic copy-v1 sweep (10 co-occurrence x 10 hardness values x heads 1, 2, 4, 8 x
25 seeds; steps 0..190 every 10 = 20 logged steps; packs of 64 trials, one file per pack and
table, as docs/data-model.md lays them out), then times loading, outcomes, the phase diagram,
drawing and the report. Run: python benchmarks/analysis_load.py [--root DIR] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic stores

from synthetic_stores import compact_sweep, write_copy_sweep  # noqa: E402

from analysis import load, phase_from_results, with_outcomes  # noqa: E402
from analysis.phase import outcome_trajectories, representative_cells  # noqa: E402

GRID = {"cooccurrence": [i / 10 for i in range(10)], "hardness": [i / 9 for i in range(10)],
        "heads": (1, 2, 4, 8), "seeds": 25, "steps": 190, "eval_every": 10}


class Timer:
    """Wall and CPU seconds per step (CPU time shows the cost when other work shares the
    machine's cores)."""

    def __init__(self):
        self.rows: list[tuple[str, float, float, str]] = []

    def __call__(self, label: str, func, note=lambda result: ""):
        wall, cpu = time.perf_counter(), time.process_time()
        result = func()
        self.rows.append((label, time.perf_counter() - wall, time.process_time() - cpu,
                          note(result)))
        return result

    def report(self) -> None:
        width = max(len(row[0]) for row in self.rows)
        print(f"{'step':<{width}}  {'wall':>9}  {'cpu':>9}")
        for label, wall, cpu, note in self.rows:
            print(f"{label:<{width}}  {wall:8.3f}s  {cpu:8.3f}s  {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", help="where to write the sweep (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the sweep afterwards")
    args = parser.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="sweeper-bench-"))
    timer = Timer()
    try:
        run(root, timer)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    timer.report()
    return 0


def run(root: Path, t: Timer) -> None:
    folder = t("write synthetic sweep", lambda: write_copy_sweep(
        root, "bench", pack_size=64, failed=0.01, diverged=0.01, **GRID),
        lambda f: f"{len(list((f / 'trajectories').glob('*.parquet')))} files per table")
    size = sum(p.stat().st_size for p in folder.rglob("*.parquet")) / 2**20
    print(f"sweep at {folder}: {size:.1f} MiB of Parquet")
    res = t("load trials", lambda: load(root, "bench"), lambda r: f"{len(r.trials)} trials")
    t("load all trajectories", lambda: res.trajectories,
      lambda f: f"{len(f)} rows x {f.shape[1]} columns")
    one = res.trials["trial_id"].iloc[1234]
    t("load one trial (trials + its trajectory)",
      lambda: load(root, "bench", trial_ids=[one]).trajectories, lambda f: f"{len(f)} rows")
    fresh = load(root, "bench")
    rows = t("load outcome columns of trajectories", lambda: outcome_trajectories(fresh),
             lambda f: f"{f.shape[1]} columns")
    trials = t("recompute outcomes", lambda: with_outcomes(fresh.trials, rows),
               lambda f: f"{int(f['learned'].sum())} learned")
    phase = t("phase diagram (load + outcomes + cells)", lambda: phase_from_results(
        load(root, "bench"), "task.cooccurrence", "task.hardness", "model.heads"),
        lambda p: f"{len(p.cells)} cells, {len(p.boundary)} boundary segments")
    draw(root, t, phase, trials, res)
    t("compact the sweep (one file per table)", lambda: compact_sweep(folder, row_groups=160))
    t("load trials, compacted", lambda: load(root, "bench"), lambda r: f"{len(r.trials)} trials")
    t("load all trajectories, compacted", lambda: load(root, "bench").trajectories,
      lambda f: f"{len(f)} rows")
    t("load one trial, compacted", lambda: load(root, "bench", trial_ids=[one]).trajectories,
      lambda f: f"{len(f)} rows")


def draw(root: Path, t: Timer, phase, trials, res) -> None:
    from analysis import plots
    from analysis.report import write_report

    fig = t("draw phase figure", lambda: plots.phase_figure(phase))
    t("save phase figure PNG", lambda: plots.save(fig, root / "phase.png"))
    t("save phase figure SVG", lambda: plots.save(fig, root / "phase.svg"))
    cells = representative_cells(phase)
    t("draw + save trajectory figure", lambda: plots.save(
        plots.trajectory_figure(trials, res.trajectories, cells), root / "trajectories.png"))
    t("draw + save onset figure", lambda: plots.save(plots.onset_figure(trials),
                                                     root / "onsets.png"))
    t("report (load, outcomes, phase, 4 figures, HTML)",
      lambda: write_report(load(root, "bench"), root / "report.html"),
      lambda r: f"{len(r.html) / 2**20:.1f} MiB HTML")


if __name__ == "__main__":
    sys.exit(main())

"""The driver's resident memory as a sweep's store grows (issue 38): what grows, and with what.

    python benchmarks/driver_memory.py recorder --packs 2000 --merges none|driver|child
    python benchmarks/driver_memory.py sweep --trials 30000

`recorder`: the driver's Recorder alone (no Ray, no training) storing packs of 16 trials x 40
logged steps into a temporary local store, with its merges as a run makes them (`child`: one
long-lived child process, `sweeper.results.merging`), `none` (no merges) or `driver` (every
merge in this process, as before issue 38's lever). `sweep`: a real tiny sweep on embedded
Ray (copy-v1, width 8, 20 steps, 16 cells: `scale.real_sweep`). Each prints the stored trials
and the driver's resident MB; docs/scaling.md gives the figures.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]


def resident_mb(pid: int | str = "self") -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * 4096 / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


def recorder(packs: int, merges: str, every: int) -> None:
    from scale import sweep_file
    from sweep_helpers import fake_results

    from sweeper.plan import expand
    from sweeper.recording import Progress, Recorder
    from sweeper.results import Store
    from sweeper.results.merging import DriverMerges
    from sweeper.search_space import parse_sweep

    class NoMerges:
        def after_pack(self) -> None:
            pass

        def close(self) -> None:
            pass

    class MergesHere(NoMerges):
        def after_pack(self) -> None:
            store.merge_tiers("s")

    specs = expand(parse_sweep(sweep_file(16 * packs + 400)))
    store = Store.open(tempfile.mkdtemp(prefix="driver-memory-"))
    rec = Recorder(store, "s", Progress(None, stream=io.StringIO()))
    rec.merges = {"none": NoMerges, "driver": MergesHere,
                  "child": lambda: DriverMerges(store, "s")}[merges]()
    start = time.perf_counter()
    for k in range(packs):
        pack = specs[16 * k:16 * (k + 1)]
        rec.finished(pack, fake_results(pack, steps=tuple(range(0, 400, 10))))
        if (16 * (k + 1)) % every == 0:
            print(f"{merges}: {16 * (k + 1):7,} stored  {resident_mb():6.0f} MB  "
                  f"{time.perf_counter() - start:6.0f} s", flush=True)
    rec.close()


def sweep(trials: int) -> None:
    """`benchmarks/scale.py`'s real tiny sweep (its driver's memory at a tenth, a quarter,
    half, three quarters, 99% and all of the trials stored)."""
    import statistics

    from scale import real_sweep

    result = real_sweep(Path(tempfile.mkdtemp(prefix="driver-memory-")), trials)
    for share, mb in result["driver_mb_at"].items():
        print(f"sweep: {int(share * result['trials']):7,} stored  {mb:6.0f} MB", flush=True)
    # the resident size sampled each second is noisy (a Tune run's start, a summary write):
    # the median of the samples taken while each tenth of the sweep was stored (the run's end,
    # which reads the store with every trial in it, left out)
    total, tenth = result["trials"], result["trials"] // 10
    for k in range(1, 11):
        window = [mb for n, mb in result["samples"] if (k - 1) * tenth < n <= k * tenth
                  and n < total]
        if window:
            print(f"sweep: median of {len(window):3} samples while {(k - 1) * tenth:7,} to "
                  f"{k * tenth:7,} stored  {statistics.median(window):6.0f} MB", flush=True)
    print(f"sweep: {result['per_trial_ms']:.1f} ms a trial, peak {result['driver_mb_peak']:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("recorder")
    p.add_argument("--packs", type=int, default=2000)
    p.add_argument("--merges", choices=("none", "driver", "child"), default="child")
    p.add_argument("--every", type=int, default=4000)
    p = sub.add_parser("sweep")
    p.add_argument("--trials", type=int, default=30000)
    args = parser.parse_args()
    if args.what == "recorder":
        recorder(args.packs, args.merges, args.every)
    else:
        sweep(args.trials)


if __name__ == "__main__":
    main()

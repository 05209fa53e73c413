"""The driver's resident memory as a sweep's store grows (issue 38): what grows, and with what.

    python benchmarks/driver_memory.py recorder --packs 2000 --merges none|driver|child
    python benchmarks/driver_memory.py sweep --trials 30000

`recorder`: the driver's Recorder alone (no Ray, no training) storing packs of 16 trials x 40
logged steps into a temporary local store, with its merges as a run makes them (`driver`: size
classes below `sweeper.results.merging.CHILD_CLASS` in this process, the others in a child),
`none` (no merges) or `child` (every merge in a child). `sweep`: a real tiny sweep on embedded
Ray (copy-v1, width 8, 20 steps, 16 cells). Each prints the stored trials and the resident MB
every --every trials; docs/scaling.md gives the figures.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import textwrap
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

    specs = expand(parse_sweep(sweep_file(16 * packs + 400)))
    store = Store.open(tempfile.mkdtemp(prefix="driver-memory-"))
    rec = Recorder(store, "s", Progress(None, stream=io.StringIO()))
    rec.merges = {"none": NoMerges, "driver": lambda: DriverMerges(store, "s"),
                  "child": lambda: DriverMerges(store, "s", child_class=0)}[merges]()
    start = time.perf_counter()
    for k in range(packs):
        pack = specs[16 * k:16 * (k + 1)]
        rec.finished(pack, fake_results(pack, steps=tuple(range(0, 400, 10))))
        if (16 * (k + 1)) % every == 0:
            print(f"{merges}: {16 * (k + 1):7,} stored  {resident_mb():6.0f} MB  "
                  f"{time.perf_counter() - start:6.0f} s", flush=True)
    rec.close()


def sweep(trials: int, every: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="driver-memory-"))
    (root / "tiny.yaml").write_text(textwrap.dedent(f"""\\
        name: tiny
        task: copy-v1
        model: seq2seq
        fixed:
          task: {{length: 4}}
          model: {{width: 8}}
          train: {{batch_size: 8, eval_every: 10, eval_size: 8}}
        axes:
          task:
            cooccurrence: {{grid: [0.0, 0.5]}}
            hardness: {{grid: [0.0, 1.0]}}
          model:
            heads: {{grid: [1, 2, 3, 4]}}
        seeds: {max(1, trials // 16)}
        budget: {{steps: 20}}
        resources: {{cpu: 1}}
        """))
    driver = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "run", str(root / "tiny.yaml"),
                               "--results", str(root / "r"), "--no-estimate", "--executor",
                               "ray"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, cwd=REPO)
    start, last = time.perf_counter(), 0
    while driver.poll() is None:
        time.sleep(2)
        try:
            done = json.loads((root / "r" / "tiny" / "progress.json").read_text())["done"]
        except (OSError, ValueError, KeyError):
            continue
        if done - last >= every:
            print(f"sweep: {done:7,} stored  {resident_mb(driver.pid):6.0f} MB  "
                  f"{time.perf_counter() - start:6.0f} s", flush=True)
            last = done
    if driver.returncode != 0:
        raise SystemExit(driver.stderr.read()[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("recorder")
    p.add_argument("--packs", type=int, default=2000)
    p.add_argument("--merges", choices=("none", "driver", "child"), default="driver")
    p.add_argument("--every", type=int, default=4000)
    p = sub.add_parser("sweep")
    p.add_argument("--trials", type=int, default=30000)
    p.add_argument("--every", type=int, default=2000)
    args = parser.parse_args()
    if args.what == "recorder":
        recorder(args.packs, args.merges, args.every)
    else:
        sweep(args.trials, args.every)


if __name__ == "__main__":
    main()

"""How sweeper's readers and its driver's bookkeeping grow with the number of stored trials.

    python benchmarks/scale.py [--sizes 1000 10000 100000] [--root DIR] [--keep]
                               [--sweep-trials 2000] [--repeat 3]

For each size N it writes a copy-v1 store of N trials x 40 logged steps through the real
writer, merging files as a running sweep's writer does (`Store.merge_tiers`; the trials are
the expansion of a real sweep file, in its manifest, so `status` counts them), then:

- times every reader as a user runs it, each in a fresh process (median of --repeat): `status`,
  `query --where`, `best`, `phase`, `analysis.load()`'s trials table, and the dashboard's
  first trials page, a sort and a filter over HTTP (and its server's peak memory);
- times the same readers on the largest store again *while a writer adds packs to it* (a
  process writing through the driver's `Recorder`, merging as it goes);
- measures the driver's bookkeeping per pack (store the pack, fold it into the cell summary,
  merge files) and its memory, with N trials already stored;
- `sweeper compact`'s time and peak memory on a copy of the store.

It ends with each figure's growth from the smallest size to the largest. --sweep-trials runs
a real tiny sweep on embedded Ray as well (0: none), and prints its per-trial overhead and the
driver's memory at a tenth, a quarter, half and all of it stored.

Figures are wall seconds (medians) and peak resident memory (MB); the machine's CPU is printed.
Synthetic trajectories: `tests/synthetic_stores.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the synthetic stores are a test fixture
sys.path.insert(0, str(REPO / "benchmarks"))
from machine import cpu_name  # noqa: E402

SWEEP = "s"
HARDNESS = [round(i / 9, 6) for i in range(10)]
SWEEP_FILE = textwrap.dedent("""\
    name: s
    task: copy-v1
    model: seq2seq
    fixed:
      task: {{length: 10}}
      model: {{width: 64}}
      train: {{batch_size: 64, lr: 0.001, eval_every: 10, eval_size: 256}}
    axes:
      task:
        cooccurrence: {{grid: [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]}}
        hardness: {{grid: {hardness}}}
      model:
        heads: {{grid: [1, 2, 4, 8]}}
    seeds: {seeds}
    budget: {{steps: 390}}
    """)  # 400 cells; steps 0..390 every 10: 40 logged steps a trial
CELLS = 400

# Each reader: a command line in a fresh process (its wall time and peak memory)
READERS = {
    "status": ["status", SWEEP],
    "query --where": ["query", SWEEP, "--where", "model.heads == 2 and task.hardness > 0.5",
                      "--limit", "20"],
    "best": ["best", SWEEP, "--metric", "final_accuracy"],
    "phase": ["phase", SWEEP, "--x", "task.cooccurrence", "--y", "task.hardness", "-o",
              "{tmp}/phase.png"],
}
LOAD = ("import analysis, sys; r = analysis.load(sys.argv[1], 's'); "
        "assert len(r.trials) > 0")
MEASURED = ("import resource, runpy, sys, time; t = time.perf_counter(); sys.argv = sys.argv[1:];"
            "\ntry:\n    {body}\nfinally:\n    print(json.dumps({{'wall': time.perf_counter() - t,"
            " 'mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}),"
            " file=sys.stderr)")


def sweep_file(trials: int) -> str:
    return SWEEP_FILE.format(hardness=HARDNESS, seeds=max(1, trials // CELLS))


def build(root: Path, trials: int) -> tuple[Path, float]:
    """A store of `trials` under root/SWEEP, written pack by pack with merges (kept between
    runs with --root: built once)."""
    from synthetic_stores import write_planned_copy_sweep

    folder = root / SWEEP
    if (folder / "cells.parquet").exists():
        return folder, float("nan")
    start = time.perf_counter()
    write_planned_copy_sweep(root, sweep_file(trials), failed=0.01, diverged=0.01, merge=True)
    return folder, time.perf_counter() - start


def _measured(code: str, args: list[str]) -> dict:
    """Run `code` in a fresh Python; its wall time (from its first line) and peak memory."""
    import_json = "import json\n"
    script = import_json + MEASURED.format(body=code)
    done = subprocess.run([sys.executable, "-c", script, "x", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{args}: exit {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stderr.strip().splitlines()[-1])


def time_readers(root: Path, repeat: int) -> dict[str, dict]:
    """Median wall time and peak memory of each reader (a fresh process each time)."""
    tmp = tempfile.mkdtemp(prefix="sweeper-scale-out-")
    out = {}
    try:
        for label, argv in READERS.items():
            argv = [a.format(tmp=tmp) for a in argv] + ["--results", str(root)]
            runs = [_measured("from sweeper.cli import main; rc = main(sys.argv[1:])\n"
                              "    assert rc == 0, rc", argv) for _ in range(repeat)]
            out[label] = _median(runs)
        runs = [_measured(LOAD, [str(root)]) for _ in range(repeat)]
        out["load() trials"] = _median(runs)
        out.update(time_dashboard(root, repeat))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _median(runs: list[dict]) -> dict:
    return {"wall": statistics.median(r["wall"] for r in runs),
            "mb": max(r["mb"] for r in runs)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_dashboard(root: Path, repeat: int) -> dict[str, dict]:
    """The dashboard's first trials page, a sort and a filter (HTTP, on loopback), and its
    server's peak memory. The server is started here and stopped by its process id."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "dashboard", SWEEP,
                               "--results", str(root), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=REPO)
    try:
        _wait_for_url(server)
        base = f"http://127.0.0.1:{port}/api/trials?sweep={SWEEP}"
        asks = {"dashboard trials page": base,
                "dashboard sort": base + "&sort=final_accuracy&order=desc",
                "dashboard filter": base + "&where=" + urllib.parse.quote(
                    "model.heads == 4 and final_accuracy > 0.5")}
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state?sweep={SWEEP}",
                               timeout=600).read()  # what the page asks first
        out = {}
        for label, url in asks.items():
            walls = []
            for _ in range(repeat):
                start = time.perf_counter()
                urllib.request.urlopen(url, timeout=600).read()
                walls.append(time.perf_counter() - start)
            out[label] = {"wall": walls[0], "wall_again": statistics.median(walls[1:] or walls)}
        out["dashboard server"] = {"wall": float("nan"), "mb": _peak_mb(server.pid)}
        return out
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _wait_for_url(server: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if "http://" in line:
            return
        if not line and server.poll() is not None:
            raise RuntimeError(f"the dashboard exited with {server.returncode}")
    raise RuntimeError("the dashboard did not print its URL")


def _peak_mb(pid: int) -> float:
    """A process's peak resident memory (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- the driver's bookkeeping ------------------------------------------------------------------
WRITER = """
import json, resource, statistics, sys, time
sys.path.insert(0, {tests!r})
from sweep_helpers import fake_results
from sweeper.plan import expand
from sweeper.recording import Progress, Recorder
from sweeper.results import Store
from sweeper.search_space import parse_sweep
import io

store = Store.open({root!r})
stored = store.stored_ids("s")
specs = [s for s in expand(parse_sweep({text!r})) if s.trial_id not in stored]
recorder = Recorder(store, "s", Progress(None, stream=io.StringIO()), stored=set(stored))
packs = {packs}
times, start = [], time.perf_counter()
rss0 = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
for k in range(packs if packs > 0 else 10**9):
    pack = specs[16 * k:16 * (k + 1)]
    if not pack:
        break
    results = fake_results(pack)
    t = time.perf_counter()
    recorder.finished(pack, results)
    times.append(time.perf_counter() - t)
recorder.close()
rss = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
print(json.dumps({{"median_ms": 1000 * statistics.median(times),
                  "p95_ms": 1000 * sorted(times)[int(0.95 * (len(times) - 1))],
                  "packs": len(times), "rss_mb": rss, "rss_before_mb": rss0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def writer_script(root: Path, trials: int, packs: int) -> str:
    """A driver's Recorder adding `packs` packs of 16 new trials (seeds past the store's)."""
    text = sweep_file(trials + 16 * max(packs, 1000) + CELLS)
    return WRITER.format(tests=str(REPO / "tests"), root=str(root), text=text, packs=packs)


def bookkeeping(root: Path, trials: int, packs: int = 100) -> dict:
    """The driver's cost per pack and its memory with `trials` stored (on a copy)."""
    copy = Path(tempfile.mkdtemp(prefix="sweeper-scale-copy-"))
    try:
        shutil.copytree(root / SWEEP, copy / SWEEP)
        done = subprocess.run([sys.executable, "-c", writer_script(copy, trials, packs)],
                              capture_output=True, text=True, cwd=REPO, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def compact_cost(root: Path) -> dict:
    copy = Path(tempfile.mkdtemp(prefix="sweeper-scale-copy-"))
    try:
        shutil.copytree(root / SWEEP, copy / SWEEP)
        return _measured("from sweeper.cli import main; rc = main(sys.argv[1:])",
                         ["compact", SWEEP, "--results", str(copy)])
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def readers_while_writing(root: Path, trials: int, repeat: int) -> dict[str, dict]:
    """The readers on a copy of the store while a writer adds packs to it."""
    copy = Path(tempfile.mkdtemp(prefix="sweeper-scale-live-"))
    writer = None
    try:
        shutil.copytree(root / SWEEP, copy / SWEEP)
        writer = subprocess.Popen([sys.executable, "-c", writer_script(copy, trials, 0)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  cwd=REPO)
        out = time_readers(copy, repeat)
        if writer.poll() is not None:
            raise RuntimeError(f"the writer ended early (exit {writer.returncode})")
        return out
    finally:
        if writer is not None and writer.poll() is None:
            writer.send_signal(signal.SIGTERM)
            writer.wait(timeout=60)
        shutil.rmtree(copy, ignore_errors=True)


# -- a real sweep --------------------------------------------------------------------------------
# shares of a real sweep stored when the driver is measured
SWEEP_MILESTONES = (0.1, 0.25, 0.5, 0.75, 0.99)


def real_sweep(root: Path, trials: int) -> dict:
    """A real tiny sweep on embedded Ray (width 8, 20 steps): per-trial time and the driver's
    resident memory when a tenth, a quarter, half, three quarters, 99% and all of it are
    stored (the last: while the run's end reads the store for its summary)."""
    seeds = max(1, trials // 16)
    text = textwrap.dedent(f"""\
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
        seeds: {seeds}
        budget: {{steps: 20}}
        resources: {{cpu: 1}}
        """)
    path = root / "tiny.yaml"
    path.write_text(text)
    results = root / "sweep-results"
    start = time.perf_counter()
    driver = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "run", str(path),
                               "--results", str(results), "--no-estimate"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=REPO)
    samples = []
    while driver.poll() is None:
        time.sleep(1.0)
        stored, resident = _stored(results / "tiny"), _resident_mb(driver.pid)
        if resident > 0:  # not after it exited (a zombie has none)
            samples.append((stored, resident))
    out, err = driver.communicate()
    if driver.returncode != 0:
        raise RuntimeError(err[-2000:])
    wall = time.perf_counter() - start
    total = 16 * seeds
    at = {share: next((mb for n, mb in samples if n >= total * share), float("nan"))
          for share in SWEEP_MILESTONES}
    last_n, last = samples[-1] if samples else (0, float("nan"))
    return {"trials": total, "wall": wall, "per_trial_ms": 1000 * wall / total,
            "driver_mb_at": at, "driver_mb_end": last, "stored_at_end": last_n,
            "driver_mb_peak": max((mb for _, mb in samples), default=float("nan")),
            "samples": samples}


def _stored(folder: Path) -> int:
    try:
        progress = json.loads((folder / "progress.json").read_text())
        return int(progress.get("done", 0)) + int(progress.get("failed", 0))
    except (OSError, ValueError):
        return 0


def _resident_mb(pid: int) -> float:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


# -- the table -----------------------------------------------------------------------------------
TARGETS = {"status": 2, "query --where": 3, "best": 3, "phase": 5, "load() trials": 2,
           "dashboard trials page": 1, "dashboard sort": 2, "dashboard filter": 2}


def report(sizes: list[int], rows: dict[int, dict[str, dict]], live: dict | None) -> None:
    labels = list(rows[sizes[0]])
    print(f"\n{'reader (wall s, median)':<26}" + "".join(f"{n:>12,}" for n in sizes)
          + f"{'growth':>10}{'target':>8}" + (f"{'writing':>10}" if live else ""))
    for label in labels:
        walls = [rows[n][label]["wall"] for n in sizes]
        if label == "dashboard server":
            walls = [rows[n][label]["mb"] for n in sizes]
            label = "dashboard server (MB)"
        growth = walls[-1] / walls[0] if walls[0] and walls[0] == walls[0] else float("nan")
        target = TARGETS.get(label)
        line = f"{label:<26}" + "".join(f"{w:>12.2f}" for w in walls) + f"{growth:>9.1f}x"
        line += f"{target:>8}" if target else f"{'':>8}"
        if live and label in live:
            line += f"{live[label]['wall']:>10.2f}"
        print(line)
    mem = [max(v.get("mb", 0) for k, v in rows[n].items() if k != "dashboard server")
           for n in sizes]
    print(f"{'readers peak MB (max)':<26}" + "".join(f"{m:>12.0f}" for m in mem))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--root", help="where stores are built and kept (default: temporary)")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--packs", type=int, default=100,
                        help="packs the bookkeeping measurement adds")
    parser.add_argument("--sweep-trials", type=int, default=2000,
                        help="a real tiny sweep on embedded Ray of this many trials (0: none)")
    parser.add_argument("--sweep-only", action="store_true",
                        help="only the real sweep (no stores, no readers)")
    args = parser.parse_args()
    if args.sweep_only:
        args.sizes = []
    sizes = sorted(args.sizes)
    root = Path(args.root or tempfile.mkdtemp(prefix="sweeper-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"CPU: {cpu_name()}; {os.cpu_count()} cores; Python {platform.python_version()}")
    rows: dict[int, dict[str, dict]] = {}
    try:
        for n in sizes:
            store_root = root / f"n{n}"
            folder, built = build(store_root, n)
            files = len(list((folder / "trials").glob("part-*.parquet")))
            mib = sum(p.stat().st_size for p in folder.rglob("*.parquet")) / 2**20
            print(f"\nN = {n:,}: {files} trials files, {mib:.0f} MiB"
                  + (f", written with merges in {built:.0f} s" if built == built else ""),
                  flush=True)
            rows[n] = time_readers(store_root, args.repeat)
            for label, row in rows[n].items():
                extra = f"  (again {row['wall_again']:.2f} s)" if "wall_again" in row else ""
                memory = f"  {row['mb']:.0f} MB" if "mb" in row else ""
                print(f"  {label:<24} {row['wall']:7.2f} s{memory}{extra}", flush=True)
            book = bookkeeping(store_root, n, args.packs)
            print(f"  driver per pack          {book['median_ms']:7.1f} ms median, "
                  f"{book['p95_ms']:.0f} ms p95 ({book['packs']} packs of 16); resident "
                  f"{book['rss_before_mb']:.0f} -> {book['rss_mb']:.0f} MB", flush=True)
            rows[n]["driver ms/pack"] = {"wall": book["median_ms"]}
            rows[n]["driver resident MB"] = {"wall": book["rss_mb"]}
            packed = compact_cost(store_root)
            print(f"  compact (a copy)         {packed['wall']:7.2f} s  {packed['mb']:.0f} MB",
                  flush=True)
            rows[n]["compact"] = packed
        if sizes:
            live = readers_while_writing(root / f"n{sizes[-1]}", sizes[-1], args.repeat)
            print(f"\nN = {sizes[-1]:,} while a writer adds packs:")
            for label, row in live.items():
                print(f"  {label:<24} {row['wall']:7.2f} s", flush=True)
            report(sizes, rows, live)
        if args.sweep_trials:
            sweep = real_sweep(root, args.sweep_trials)
            print(f"\nreal tiny sweep on embedded Ray: {sweep['trials']} trials in "
                  f"{sweep['wall']:.0f} s ({sweep['per_trial_ms']:.1f} ms a trial); driver "
                  "resident " + ", ".join(f"{mb:.0f} MB at {share * sweep['trials']:,.0f}"
                                          for share, mb in sweep["driver_mb_at"].items())
                  + f", {sweep['driver_mb_end']:.0f} MB with {sweep['stored_at_end']:,} stored "
                  f"(peak {sweep['driver_mb_peak']:.0f} MB)")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast the dashboard is on a large store: start, first view, a cell's curves.

    python benchmarks/dashboard.py [--root /tmp/sweeper-dashboard-bench] [--trials 10000]

Writes a synthetic copy sweep through the real writer (`tests/synthetic_stores.py`: the store
and its cell summary, as a sweep's Recorder keeps it) once, starts `sweeper dashboard` on it,
and drives headless Chromium (Playwright, Debian's /usr/bin/chromium): the time from the
command's start to its URL line, from navigation to the phase diagram drawn (a fresh browser),
and from a click on a cell to its seeds' curves drawn, for a few cells.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

CHROMIUM = os.environ.get("SWEEPER_CHROMIUM", "/usr/bin/chromium")
TESTS = Path(__file__).resolve().parents[1] / "tests"


def make_store(root: Path, trials: int) -> Path:
    sys.path.insert(0, str(TESTS))  # the synthetic stores are a test fixture
    import synthetic_stores as synthetic

    folder = root / "big"
    if (folder / "cells.parquet").exists():
        return folder
    seeds = 20
    levels = max(2, round((trials / seeds / 5) ** 0.5))
    start = time.perf_counter()
    synthetic.write_copy_sweep(root, "big", cooccurrence=[round(i / (levels - 1), 3)
                                                          for i in range(levels)],
                               hardness=[round(i / (levels - 1), 3) for i in range(levels)],
                               heads=(1, 2, 4, 8, 16), seeds=seeds, failed=0.01, diverged=0.02)
    print(f"wrote {levels * levels * 5 * seeds} trials in {time.perf_counter() - start:.0f} s",
          flush=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(page, expression: str, timeout: float = 60.0) -> None:
    """Poll a page condition (the page's CSP forbids Playwright's eval-based waits)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if page.evaluate(expression):
            return
        time.sleep(0.02)
    raise TimeoutError(expression)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/tmp/sweeper-dashboard-bench")
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--cells", type=int, default=5, help="cells to click")
    args = parser.parse_args()
    root = Path(args.root)
    make_store(root, args.trials)
    port = free_port()
    start = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "dashboard", str(root), "big",
                               "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        started = time.perf_counter() - start
        print(f"dashboard started in {started:.2f} s: {line.strip()}")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM,
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t = time.perf_counter()
            page.goto(f"http://127.0.0.1:{port}/?sweep=big")
            wait(page, "document.getElementById('phase').dataset.cells > 0")
            first = time.perf_counter() - t
            cells = page.evaluate("document.getElementById('phase').dataset.cells")
            trials = page.evaluate("document.getElementById('phase').dataset.trials")
            print(f"first view: {first:.2f} s (navigation to the phase diagram drawn; {cells} "
                  f"cells, {trials} trials)")
            count = page.evaluate("window.sweeperDashboard.phase.cells.length")
            times = []
            for k in range(args.cells):
                index = page.evaluate(
                    f"window.sweeperDashboard.phase.cells[{(k * 37) % count}].index")
                c = page.evaluate(f"window.sweeperDashboard.cellCenter({index})")
                before = page.evaluate("document.getElementById('cell-section').dataset.cell")
                t = time.perf_counter()
                page.mouse.click(c["x"], c["y"])
                wait(page, f"document.getElementById('cell-section').dataset.cell == '{index}'"
                     if str(index) != str(before) else "true")
                times.append(time.perf_counter() - t)
                page.evaluate("window.scrollTo(0, 0)")
            curves = page.evaluate("document.getElementById('cell-section').dataset.curves")
            print("cell curves: " + ", ".join(f"{t:.2f}" for t in times)
                  + f" s (click to curves drawn; last cell: {curves} seeds)")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The dashboard in a real browser, on a real store while a sweep is writing to it.

A local sweep (tiny copy packs, a few seconds each) runs in a child process; `sweeper dashboard`
runs in another; headless Chromium (Debian's, driven by Playwright) opens the page and checks:
the phase diagram appears and updates as packs land, the progress shows a pack's steps, a
click on a cell shows its seeds' curves, and the page logs no console message.

CI installs the browser (.ci/run: apt-get install chromium) and sets SWEEPER_REQUIRE_BROWSER,
so a missing browser or Playwright fails there; elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    from sweep_helpers import variant, write_sweep
except ImportError:  # tests/ imported as a package
    from tests.sweep_helpers import variant, write_sweep

CHROMIUM = os.environ.get("SWEEPER_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
REQUIRED = bool(os.environ.get("SWEEPER_REQUIRE_BROWSER") or os.environ.get("CI"))


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="module")
def browser():
    missing = _missing()
    if missing:
        if REQUIRED:
            pytest.fail(f"the dashboard's browser test needs a browser: {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM,
                                     args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float, what: str, poll: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def stop(process: subprocess.Popen) -> None:
    """End a child we started, by its id: SIGINT first (a sweep stores what it finished)."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def page_value(page, expression: str):
    """page.evaluate, polled by the caller: the page's CSP forbids Playwright's eval waits."""
    return page.evaluate(expression)


@pytest.mark.slow
def test_dashboard_follows_a_running_sweep(browser, tmp_path):
    # 4 cells x 2 seeds, one pack per cell: each pack trains 3000 steps (~7 s here). The page
    # polls every 1.5 s and the driver writes progress at most once a second, so a pack must
    # run several polls long to be seen mid-way: CI once missed 1-s packs for a whole sweep.
    sweep = variant(**{"name": "live", "axes.task.hardness": {"grid": [0.0, 1.0]},
                       "budget.steps": 3000, "fixed.train.eval_every": 50, "pack_size": 2})
    path = write_sweep(tmp_path / "live.yaml", sweep)
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "run", str(path), "--executor",
                            "local", "--results", str(results)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = free_port()
    started = time.monotonic()
    dashboard = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "dashboard", str(results),
                                  "live", "--port", str(port)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = dashboard.stdout.readline()
        assert line.startswith(f"sweeper dashboard: http://127.0.0.1:{port}/"), (
            line + dashboard.stderr.read() if dashboard.poll() is not None else line)
        assert time.monotonic() - started < 15  # < 5 s on an idle machine; CI shares 2 cores
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        messages: list[str] = []
        page.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
        page.goto(f"http://127.0.0.1:{port}/?sweep=live")

        def trials_drawn() -> int:
            return int(page_value(page, "+(document.getElementById('phase').dataset.trials"
                                        " || 0)"))

        first = wait_until(trials_drawn, 120, "the first pack in the phase diagram")
        assert first < 8, "the sweep ended before the test could see it running"
        # progress inside packs: a running pack's step, from the driver's progress.json
        wait_until(lambda: "at step" in page_value(
            page, "document.getElementById('packs').textContent") and not page_value(
            page, "document.getElementById('packs').textContent").endswith("at step 0 of 3000"),
            60, "a running pack's step in the progress")
        # the diagram updates as packs land, without a reload
        wait_until(lambda: trials_drawn() > first, 120, "the phase diagram to update")

        # a click on a sampled cell shows its seeds
        index = page_value(page, "window.sweeperDashboard.phase.cells"
                                 ".find((c) => c.n_trials > 0).index")
        point = page_value(page, f"window.sweeperDashboard.cellCenter({index})")
        page.mouse.click(point["x"], point["y"])
        wait_until(lambda: page_value(
            page, "document.getElementById('cell-section').dataset.cell") == str(index),
            30, "the clicked cell's seeds")
        cell = page_value(page, f"window.sweeperDashboard.phase.cells"
                                f".find((c) => c.index === {index})")
        curves = int(page_value(page, "document.getElementById('cell-section').dataset.curves"))
        assert curves == cell["n_trials"] == 2  # one curve per seed
        traces = page_value(page, "document.getElementById('curves').data.length")
        assert traces == 2 * curves  # token accuracy and attention accuracy
        rows = page_value(page, "document.querySelectorAll('#cell-trials tbody tr').length")
        assert rows == curves
        assert page_value(page, "document.getElementById('cell-section').hidden") is False

        wait_until(lambda: run.poll() is not None, 240, "the sweep to finish")
        assert run.returncode == 0, run.stderr.read()[-2000:]
        wait_until(lambda: trials_drawn() == 8, 30, "every trial in the diagram")
        wait_until(lambda: page_value(
            page, "document.getElementById('progress').textContent").startswith("finished"),
            30, "the finished sweep's progress")
        assert messages == []
    finally:
        stop(run)
        stop(dashboard)


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1300, "height": 1100})
    messages: list[str] = []
    page.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
    page.goto(url)
    return page, messages


@pytest.mark.slow
def test_a_sweep_that_lands_after_the_page_opened_is_shown_and_every_count_is_legible(
        browser, tmp_path):
    """The page opens on an empty results root; a 3 x 3 x 2 grid (heads faceted) lands: the
    page shows it without a reload, every sampled cell's k/n is on the page as text (no mark
    drawn over it), the axes' tick labels are the grid's values, and the recovery map is
    drawn under the two-head panel."""
    try:
        import synthetic_stores as synthetic
        from analysis_fixtures import serving_dashboard
    except ImportError:
        from tests import synthetic_stores as synthetic
        from tests.analysis_fixtures import serving_dashboard
    results, staging = tmp_path / "results", tmp_path / "staging"
    results.mkdir()
    with serving_dashboard(results, None) as url:
        page, messages = _open(browser, url + "/")
        wait_until(lambda: "no sweep" in page_value(
            page, "document.getElementById('status').textContent"), 30, "the empty root")
        synthetic.write_copy_sweep(staging, "grid", cooccurrence=(0.0, 0.25, 0.5),
                                   hardness=(0.0, 0.5, 1.0), heads=(1, 2), seeds=4, seed=3)
        (staging / "grid").rename(results / "grid")  # the whole sweep lands at once
        wait_until(lambda: page_value(
            page, "+(document.getElementById('phase').dataset.trials || 0)") == 72, 60,
            "the sweep that landed, without a reload")
        phase = page_value(page, "window.sweeperDashboard.phase")
        assert (phase["x"]["column"], phase["y"]["column"], phase["facet"]) == (
            "task.cooccurrence", "task.hardness", "model.heads")
        # every cell's count, read from the drawn page (the SVG's text), facet by facet
        texts = page_value(page, "[...document.querySelectorAll('#phase svg text')]"
                                 ".map((t) => t.textContent)")
        expected = [f"{c['successes']}/{c['n']}" for c in phase["cells"] if c["n_trials"]]
        assert len(expected) == 18
        counts = [t for t in texts if "/" in t and t.replace("/", "").isdigit()]
        assert sorted(counts) == sorted(expected)
        assert any(c["regime"] == "unreliable" for c in phase["cells"])  # outlined, legible
        # categorical axes: the tick labels are the grid's values, evenly spaced
        xticks = page_value(page, "[...document.querySelectorAll('#phase .xaxislayer-above text')]"
                                  ".map((t) => t.textContent)")
        yticks = page_value(page, "[...document.querySelectorAll('#phase .yaxislayer-above text')]"
                                  ".map((t) => t.textContent)")
        panels = 3  # two facet panels and one recovery map
        assert xticks == ["0", "0.25", "0.5"] * panels
        assert yticks == ["0", "0.5", "1"] * panels
        spacing = page_value(page, """(() => { const a = document.getElementById('phase')
            ._fullLayout.xaxis; return [0, 1, 2].map((i) => a.l2p(i)); })()""")
        assert abs((spacing[1] - spacing[0]) - (spacing[2] - spacing[1])) < 0.5
        assert page_value(page, "document.getElementById('phase').dataset.recovery") == "1"
        assert "recovery: p(H = 2) − p(H = 1)" in texts
        assert messages == []

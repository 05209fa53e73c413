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
        # the diagram updates as packs land, without a reload; the header says what the bar
        # says at every moment (it once kept the last poll's count through the next redraw)
        def header_and_bar() -> tuple[int, int]:
            return page_value(page, "[+document.getElementById('status').textContent"
                                    ".split(' ')[0], +document.getElementById('progress')"
                                    ".dataset.stored]")

        def updated_in_step() -> bool:
            header, bar = header_and_bar()
            assert header == bar, (header, bar)
            return trials_drawn() > first
        wait_until(updated_in_step, 120, "the phase diagram to update")

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
        assert any(c["state"] == "unreliable" for c in phase["cells"])  # outlined, legible
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


def _address(page) -> str:
    """The page's address as the page set it (history.replaceState; page.url lags)."""
    return page_value(page, "location.href")


def _rows(page) -> list[str]:
    """The trials table's rows as drawn (their trial ids, in order)."""
    return page_value(page, "[...document.querySelectorAll('#trials tbody tr')]"
                            ".map((r) => r.dataset.trial)")


@pytest.mark.slow
def test_the_trials_table_sorts_filters_overlays_selected_rows_and_links_restore_the_view(
        browser, tmp_path):
    """A 3 x 3 x 2 grid (heads 1 and 2, 4 seeds): the table holds every trial with `sweeper
    query`'s columns; a header click sorts it, a where expression and a clicked value filter it
    (a bad expression: the server's one line in the page); a phase-map cell clicked and rows
    ticked in the table overlay their curves, named by seed and coloured by heads; the page's
    address then opens the same view in a new page. With $SWEEPER_DASHBOARD_SCREENSHOTS set,
    the first view and the overlay are saved there (docs/figures/dashboard_*.png)."""
    try:
        import synthetic_stores as synthetic
        from analysis_fixtures import serving_dashboard
    except ImportError:
        from tests import synthetic_stores as synthetic
        from tests.analysis_fixtures import serving_dashboard
    from analysis import load
    from analysis.query import DEFAULT, query_frame

    results = tmp_path / "results"
    synthetic.write_copy_sweep(results, "grid", cooccurrence=(0.0, 0.25, 0.5),
                               hardness=(0.0, 0.5, 1.0), heads=(1, 2), seeds=4, seed=3)
    every = query_frame(results, "grid", columns=DEFAULT)
    trials = load(results, "grid").trials.set_index("trial_id")
    shots = os.environ.get("SWEEPER_DASHBOARD_SCREENSHOTS")
    with serving_dashboard(results, "grid") as url:
        page, messages = _open(browser, url + "/?sweep=grid")
        wait_until(lambda: page_value(
            page, "document.getElementById('trials-section').dataset.rows") == "72", 60,
            "every trial in the table")
        columns = page_value(page, "[...document.querySelectorAll('#trials th[data-column]')]"
                                   ".map((t) => t.dataset.column)")
        assert columns == list(every.columns)
        assert _rows(page) == every["trial_id"].tolist()
        if shots:
            page.screenshot(path=str(Path(shots) / "dashboard_first_view.png"))

        # the view the link will restore: another outcome, fewer seeds per cell
        page.select_option("#outcome", "learned")
        page.fill("#min-seeds", "2")
        page.press("#min-seeds", "Tab")  # a change event
        wait_until(lambda: "outcome=learned" in _address(page) and "min_seeds=2" in _address(page),
                   30,
                   "the outcome and min seeds in the address")
        # the map is drawn again for the new view, however the two changes' polls overlap
        wait_until(lambda: "cells need ≥ 2 seeds" in page_value(
            page, "document.getElementById('phase-title').textContent"),
            30, "the map drawn with the new minimum")

        # sort: a header click sorts ascending, a second descending (nulls last)
        for expected in ("asc", "desc"):
            page.click("#trials th[data-column='final_loss']")
            order = every.sort_values("final_loss", ascending=expected == "asc",
                                      kind="stable", na_position="last")["trial_id"].tolist()
            wait_until(lambda o=order: _rows(page) == o, 30, f"the table sorted {expected}")
        assert "sort=final_loss" in _address(page) and "order=desc" in _address(page)

        # filter: a where expression, then a clicked value narrows it
        where = "task.cooccurrence == 0.5 and seed < 3"
        page.fill("#where", where)
        page.press("#where", "Enter")
        chosen = query_frame(results, "grid", where=where, columns=DEFAULT)
        wait_until(lambda: sorted(_rows(page)) == sorted(chosen["trial_id"]), 30,
                   "the rows the where expression selects")
        heads = int(trials.loc[_rows(page)[0], "model.heads"])
        column = list(every.columns).index("model.heads") + 2  # nth-child, after the tick box
        page.click(f"#trials tbody tr:first-child td:nth-child({column})")
        narrowed = chosen[chosen["model.heads"] == heads]["trial_id"]
        wait_until(lambda: sorted(_rows(page)) == sorted(narrowed), 30,
                   "the rows of the clicked value")
        assert page_value(page, "document.getElementById('where').value") == \
            f"({where}) and model.heads == {heads}"

        # a bad expression: the server's one line, in the page; the table stays
        shown = _rows(page)
        page.fill("#where", "model.heads ==")
        page.press("#where", "Enter")
        error = wait_until(lambda: page_value(
            page, "document.getElementById('where-error').hidden ? '' : "
                  "document.getElementById('where-error').textContent"), 30, "the error line")
        assert error.startswith("malformed where 'model.heads ==' at position 14")
        assert "\n" not in error and _rows(page) == shown
        assert [m for m in messages if "status of 400" not in m] == []
        messages.clear()

        # select two cells' rows: one by a click on the phase map (heads 1), the other by
        # ticking its rows in the table (heads 2); the filter cleared first (a clicked cell's
        # curves follow the table's filter: test_a_clicked_cell_follows_the_filter_...)
        page.fill("#where", "")
        page.press("#where", "Enter")
        wait_until(lambda: len(_rows(page)) == 72, 30, "every trial again")
        page.evaluate("window.scrollTo(0, 0)")
        cell = page_value(page, """window.sweeperDashboard.phase.cells.find((c) => c.n_trials
            && c.conditions.some((k) => k.column === 'model.heads' && k.value === 1))""")
        point = page_value(page, f"window.sweeperDashboard.cellCenter({cell['index']})")
        page.mouse.click(point["x"], point["y"])
        wait_until(lambda: page_value(
            page, "document.getElementById('cell-section').dataset.cell") == str(cell["index"]),
            30, "the clicked cell's seeds")
        other = "model.heads == 2 and task.cooccurrence == 0.5 and task.hardness == 0"
        page.fill("#where", other)
        page.press("#where", "Enter")
        ticked = query_frame(results, "grid", where=other, columns=DEFAULT)["trial_id"]
        wait_until(lambda: sorted(_rows(page)) == sorted(ticked), 30, "the second cell's rows")
        for tid in ticked:
            page.check(f"#trials tbody tr[data-trial='{tid}'] input")
        conditions = {c["column"]: c["value"] for c in cell["conditions"]}
        first = trials[(trials["model.heads"] == 1)
                       & (trials["task.cooccurrence"] == conditions["task.cooccurrence"])
                       & (trials["task.hardness"] == conditions["task.hardness"])]
        selected = [*first.index, *ticked]
        assert len(selected) == 8
        expected = sorted(f"seed {trials.loc[t, 'seed']} · model.heads "
                          f"{trials.loc[t, 'model.heads']}" for t in selected)
        wait_until(lambda: page_value(
            page, "document.getElementById('overlay').dataset.curves") == "8", 30,
            "the overlay of both cells' trials")
        traces = page_value(page, "document.getElementById('overlay').data.map((t) => "
                                  "({name: t.name, legend: t.showlegend, colour: t.line.color}))")
        assert len(traces) == 2 * 8  # token accuracy and attention accuracy, shared axes
        assert sorted(t["name"] for t in traces if t["legend"]) == expected
        colours = {t["name"].rsplit(" ", 1)[1]: t["colour"] for t in traces}
        assert len(colours) == 2 and colours["1"] != colours["2"]
        legend = page_value(page, "[...document.querySelectorAll('#overlay .legendtext')]"
                                  ".map((t) => t.textContent)")
        assert sorted(legend) == expected  # the seed names on the page, not only on hover
        if shots:
            page.locator("#trials-section").screenshot(
                path=str(Path(shots) / "dashboard_table_overlay.png"))

        # the address restores the view: axes, outcome, cell, filter, sort, selection
        link = _address(page)
        assert "cell=" in link and "where=" in link and "rows=" in link
        restored, messages2 = _open(browser, link)
        wait_until(lambda: page_value(
            restored, "document.getElementById('overlay').dataset.curves") == "8", 60,
            "the linked view's overlay")
        wait_until(lambda: page_value(
            restored, "document.getElementById('cell-section').dataset.cell")
            == str(cell["index"]), 30, "the linked cell")
        for control in ("x", "y", "facet", "outcome", "min-seeds", "where"):
            assert page_value(restored, f"document.getElementById('{control}').value") == \
                page_value(page, f"document.getElementById('{control}').value"), control
        assert page_value(restored, "document.getElementById('outcome').value") == "learned"
        assert _rows(restored) == _rows(page)
        assert page_value(restored, "document.getElementById('phase-title').textContent") == \
            page_value(page, "document.getElementById('phase-title').textContent")
        assert sorted(page_value(restored, "document.getElementById('overlay').data.filter("
                                           "(t) => t.showlegend).map((t) => t.name)")) == expected
        assert _address(restored) == link
        assert messages == [] and messages2 == []


def _parallel_dimensions(page) -> list[dict]:
    """The dimensions the parallel-coordinates figure drew (its plotly layout's meta)."""
    return page_value(page, """(() => { const d = document.getElementById('parallel');
        return d.layout && d.layout.meta ? d.layout.meta.dimensions : null; })()""")


@pytest.mark.slow
def test_a_grid_sweep_shows_parallel_coordinates_slices_and_importance(browser, tmp_path):
    """A 3 x 3 x 2 grid: the search section is shown for a grid too, its parallel
    coordinates' dimensions are the swept columns and the outcome, one line per counted
    trial, and the page logs nothing."""
    try:
        import synthetic_stores as synthetic
        from analysis_fixtures import serving_dashboard
    except ImportError:
        from tests import synthetic_stores as synthetic
        from tests.analysis_fixtures import serving_dashboard
    synthetic.write_copy_sweep(tmp_path, "grid", cooccurrence=(0.0, 0.25, 0.5),
                               hardness=(0.0, 0.5, 1.0), heads=(1, 2), seeds=4, seed=3)
    with serving_dashboard(tmp_path, "grid") as url:
        page, messages = _open(browser, url + "/")
        dimensions = wait_until(lambda: _parallel_dimensions(page), 60,
                                "the parallel coordinates")
        state = page_value(page, "window.sweeperDashboard.state")
        swept = [a["column"] for a in state["axes"]]
        assert [d["label"] for d in dimensions] == [*swept, state["outcome"]]
        assert {"task.cooccurrence", "task.hardness", "model.heads"} <= set(swept)
        # the axes' names as drawn (the SVG's text), one line per counted trial
        texts = page_value(page, "[...document.querySelectorAll('#parallel svg text')]"
                                 ".map((t) => t.textContent)")
        assert all(label in texts for label in [*swept, state["outcome"]])
        assert all(len(d["values"]) == 72 for d in dimensions)
        assert page_value(page, "document.getElementById('search-section').dataset.lines") == "72"
        hardness = next(d for d in dimensions if d["label"] == "task.hardness")
        assert hardness["ticktext"] == ["0", "0.5", "1"]  # a grid's axis at the grid's values
        assert sorted(set(hardness["values"])) == [0, 1, 2]
        learned = next(d for d in dimensions if d["label"] == state["outcome"])["values"]
        assert set(learned) == {0, 1}
        assert page_value(page, "document.getElementById('history').hidden") is True
        # a slice per swept column, and each column's importance bar
        assert page_value(page, "document.getElementById('objective').data.length") == len(swept)
        assert sorted(page_value(page, "document.getElementById('importance').data[0].y")) == \
            sorted(swept)
        if os.environ.get("SWEEPER_SCREENSHOT_DIR"):  # docs/figures, taken by hand
            page.locator("#parallel").screenshot(path=str(Path(os.environ[
                "SWEEPER_SCREENSHOT_DIR"]) / "dashboard_parallel_grid.png"))
        assert messages == []


PROGRESS_TEXT = (r"(?P<state>\w+): (?P<done>\d+) done, (?P<failed>\d+) failed, (?P<running>\d+)"
                 r" running, (?P<pending>\d+) pending of (?P<planned>\d+) planned")


def _page_progress(page) -> dict | None:
    """The progress line the page shows, as numbers (None before it shows one)."""
    import re

    text = page_value(page, "document.getElementById('progress').textContent")
    match = re.search(PROGRESS_TEXT, text)
    if match is None:
        return None
    return {k: v if k == "state" else int(v) for k, v in match.groupdict().items()}


def _status(results: Path, sweep: str) -> dict:
    """`sweeper status --json`, as a researcher would run it beside the page."""
    import json

    out = subprocess.run([sys.executable, "-m", "sweeper.cli", "status", sweep, "--results",
                          str(results), "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    return {"state": data["driver"], **{k: data[k] for k in (
        "done", "failed", "running", "pending", "planned")}}


def _page_agrees_with_status(page, results: Path, sweep: str, what: str) -> dict:
    """Waits until the page shows what `sweeper status` says at the same moment (the page
    polls every 1.5 s; a pack landing between the two readings is read again)."""
    def agree():
        told = _status(results, sweep)
        return told if _page_progress(page) == told else None

    return wait_until(agree, 60, f"the page to show `sweeper status`'s counts {what}", poll=0.5)


@pytest.mark.slow
def test_an_interrupted_and_resumed_sweep_shows_the_same_counts_as_status(browser, tmp_path):
    """The issue's bug: after Ctrl-C and the same `sweeper run` again the page said 18 done,
    9 running, 0 pending of 27 planned, of a 36-trial sweep (status: 27 done, 9 pending).
    Here a real sweep of 8 trials in packs of 2 runs under a real driver; the page and
    `sweeper status` must say the same at three moments: while the first run trains, after
    its Ctrl-C (interrupted, trials pending), and while the resumed run trains (the whole
    plan counted, across both runs); and at the end, finished with all 8 done."""
    sweep = variant(**{"name": "resume", "axes.task.hardness": {"grid": [0.0, 1.0]},
                       "budget.steps": 3000, "fixed.train.eval_every": 50, "pack_size": 2})
    path = write_sweep(tmp_path / "resume.yaml", sweep)
    results = tmp_path / "results"
    results.mkdir()  # the page opens before the sweep's first file lands
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(path), "--executor", "local",
            "--results", str(results), "--no-estimate"]
    run = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    port = free_port()
    dashboard = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "dashboard", str(results),
                                  "--port", str(port)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    resumed = None
    try:
        line = dashboard.stdout.readline()
        assert line.startswith(f"sweeper dashboard: http://127.0.0.1:{port}/"), (
            line + dashboard.stderr.read() if dashboard.poll() is not None else line)
        page, messages = _open(browser, f"http://127.0.0.1:{port}/?sweep=resume")

        # 1. the first run, one pack stored and the next one training
        wait_until(lambda: (_page_progress(page) or {}).get("done", 0) >= 2, 180,
                   "the first pack on the page")
        first = _page_agrees_with_status(page, results, "resume", "while the first run trains")
        assert first["state"] == "running" and first["planned"] == 8, first
        assert run.poll() is None, "the first run ended before it could be interrupted"

        # 2. Ctrl-C: the driver stores what it finished and says interrupted
        run.send_signal(signal.SIGINT)
        wait_until(lambda: run.poll() is not None, 120, "the interrupted run to exit")
        stopped = _page_agrees_with_status(page, results, "resume", "after Ctrl-C")
        assert stopped["state"] == "interrupted" and stopped["running"] == 0, stopped
        assert stopped["pending"] > 0 and stopped["done"] + stopped["pending"] == 8, stopped

        # 3. the same command again: the whole plan, counted across both runs (the bug's
        # page counted only this run's trials as planned, and the earlier ones as done)
        resumed = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        wait_until(lambda: (_page_progress(page) or {}).get("state") == "running", 180,
                   "the resumed run on the page")
        again = _page_agrees_with_status(page, results, "resume", "while the resumed run trains")
        assert again["state"] == "running" and resumed.poll() is None, again
        assert again["planned"] == 8 and again["done"] >= stopped["done"], again
        assert again["running"] > 0 and again["done"] + again["running"] + again["pending"] == 8

        wait_until(lambda: resumed.poll() is not None, 240, "the resumed run to finish")
        assert resumed.returncode == 0, resumed.stderr.read()[-2000:]
        end = _page_agrees_with_status(page, results, "resume", "at the end")
        assert end == {"state": "finished", "done": 8, "failed": 0, "running": 0,
                       "pending": 0, "planned": 8}
        assert messages == []
    finally:
        stop(run)
        if resumed is not None:
            stop(resumed)
        stop(dashboard)


@pytest.mark.slow
def test_a_large_table_pages_and_a_link_reopens_its_page(browser, tmp_path):
    """1,080 trials: the table shows the first 1,000 of the sorted rows with the pager; next
    shows the rest; the address then opens that page; a filter starts again at its first."""
    try:
        import synthetic_stores as synthetic
        from analysis_fixtures import serving_dashboard
    except ImportError:
        from tests import synthetic_stores as synthetic
        from tests.analysis_fixtures import serving_dashboard
    from analysis.query import DEFAULT, query_frame

    synthetic.write_copy_sweep(tmp_path, "big", cooccurrence=(0.0, 0.25, 0.5),
                               hardness=(0.0, 0.5, 1.0), heads=(1, 2), seeds=60, pack_size=60)
    every = query_frame(tmp_path, "big", columns=DEFAULT)["trial_id"].tolist()
    assert len(every) == 1080

    def table(page) -> tuple:
        section = "document.getElementById('trials-section').dataset"
        return (page_value(page, f"{section}.matched"), page_value(page, f"{section}.offset"),
                _rows(page))

    with serving_dashboard(tmp_path, "big") as url:
        page, messages = _open(browser, url + "/?sweep=big")
        wait_until(lambda: table(page) == ("1080", "0", every[:1000]), 60, "the first page")
        assert page_value(page, "document.getElementById('pager').hidden") is False
        assert page_value(page, "document.getElementById('page-previous').disabled") is True
        page.click("#page-next")
        wait_until(lambda: table(page) == ("1080", "1000", every[1000:]), 30, "the second page")
        assert page_value(page, "document.getElementById('page-next').disabled") is True
        assert "rows 1001–1080 of 1080" in page_value(
            page, "document.getElementById('trials-count').textContent")
        link = _address(page)
        assert "offset=1000" in link

        restored, messages2 = _open(browser, link)
        wait_until(lambda: table(restored) == ("1080", "1000", every[1000:]), 60,
                   "the linked page")
        restored.fill("#where", "seed < 2")
        restored.press("#where", "Enter")
        chosen = query_frame(tmp_path, "big", where="seed < 2", columns=DEFAULT)
        wait_until(lambda: table(restored) == ("36", "0", chosen["trial_id"].tolist()), 30,
                   "the filter's first page")
        assert page_value(restored, "document.getElementById('pager').hidden") is True
        assert messages == [] and messages2 == []


@pytest.mark.slow
def test_curves_take_a_metric_smoothing_a_log_axis_and_bands_kept_in_the_link(browser, tmp_path):
    """A clicked cell's curves follow the table's filter; the overlay draws the metrics picked,
    smoothed (TensorBoard's debiased moving average: the first value stays), on a log axis,
    or as one mean line and band per colour value; the address keeps every choice and opens
    the same view."""
    try:
        import synthetic_stores as synthetic
        from analysis_fixtures import serving_dashboard
    except ImportError:
        from tests import synthetic_stores as synthetic
        from tests.analysis_fixtures import serving_dashboard

    results = tmp_path / "results"
    synthetic.write_copy_sweep(results, "grid", cooccurrence=(0.0, 0.5), hardness=(0.0, 1.0),
                               heads=(1, 2), seeds=4, seed=5)
    with serving_dashboard(results, "grid") as url:
        page, messages = _open(browser, url + "/?sweep=grid")
        wait_until(lambda: page_value(
            page, "document.getElementById('trials-section').dataset.rows") == "32", 60,
            "every trial in the table")
        wait_until(lambda: page_value(page, "document.getElementById('metrics').options.length"),
                   30, "the metric picker")
        cell = page_value(page, """window.sweeperDashboard.phase.cells.find((c) => c.n_trials
            && c.conditions.some((k) => k.column === 'model.heads' && k.value === 1))""")
        point = page_value(page, f"window.sweeperDashboard.cellCenter({cell['index']})")
        page.mouse.click(point["x"], point["y"])
        curves = "document.getElementById('cell-section').dataset.curves"
        wait_until(lambda: page_value(page, curves) == "4", 30, "the cell's four seeds")
        page.fill("#where", "seed < 2")
        page.press("#where", "Enter")
        wait_until(lambda: page_value(page, curves) == "2", 30, "the cell following the filter")
        assert "2 hidden by the table's filter" in page_value(
            page, "document.getElementById('cell-title').textContent")

        overlay = "document.getElementById('overlay')"
        wait_until(lambda: page_value(page, f"{overlay}.dataset.curves") == "4", 30,
                   "the cell's trials in the overlay")
        page.select_option("#metrics", ["loss"])
        wait_until(lambda: page_value(page, f"{overlay}.dataset.traces") == "4", 30,
                   "one panel: loss")
        raw = page_value(page, f"{overlay}.data[0].y")
        page.evaluate("const s = document.getElementById('smooth'); s.value = '0.5';"
                      "s.dispatchEvent(new Event('change'))")
        wait_until(lambda: page_value(page, f"{overlay}.data[0].y") != raw, 30, "smoothed")
        smooth = page_value(page, f"{overlay}.data[0].y")
        expected, last, weight = [], 0.0, 0.0
        for v in raw:
            last, weight = 0.5 * last + 0.5 * v, 0.5 * weight + 0.5
            expected.append(last / weight)
        assert smooth == pytest.approx(expected) and smooth[0] == pytest.approx(raw[0])
        page.check("#logy")
        wait_until(lambda: page_value(page, f"{overlay}.layout.yaxis.type") == "log", 30,
                   "a log y axis")
        page.check("#band")
        wait_until(lambda: page_value(page, f"{overlay}.dataset.traces") == "3", 30,
                   "one mean line and its band")
        names = page_value(page, f"{overlay}.data.filter((t) => t.showlegend).map((t) => t.name)")
        assert names == ["model.heads 1 (4)"]
        link = _address(page)
        for part in ("metrics=loss", "smooth=0.5", "logy=1", "band=1", "colour=", "where="):
            assert part in link, part

        restored, _ = _open(browser, link)
        wait_until(lambda: page_value(
            restored, "document.getElementById('overlay').dataset.traces") == "3", 60,
            "the linked overlay")
        assert page_value(restored, "[...document.getElementById('metrics').selectedOptions]"
                                    ".map((o) => o.value)") == ["loss"]
        assert page_value(restored, "document.getElementById('smooth').value") == "0.5"
        assert page_value(restored, "document.getElementById('logy').checked")
        assert page_value(restored, "document.getElementById('band').checked")
        assert [m for m in messages if "error" in m] == []

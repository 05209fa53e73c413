"""The cell summary, progress inside packs, the dashboard's API and server rules, `sweeper
seeds`, plots that fit their axes, and plan's warning (issue 16). The browser test is in
tests/test_dashboard_browser.py."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.fs as pafs
import pytest
import synthetic_stores as synthetic

try:
    from analysis_fixtures import serving_dashboard
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import serving_dashboard

from analysis import load
from analysis.phase import compute_phase, phase_from_summary
from sweeper.results import Store
from sweeper.results.cells import resolution_warning, seeds_to_resolve
from sweeper.results.summary import (
    SUMMARY_FILE,
    CellSummary,
    current_summary,
    read_summary,
    trial_file_names,
)

LOCAL = pafs.LocalFileSystem()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    synthetic.write_copy_sweep(root, "copy", failed=0.05, diverged=0.03)
    synthetic.write_topic_sweep(root, "topic", distractors=(5, 20), seeds=2)
    return root


# ---------------------------------------------------------------- the cell summary

@pytest.mark.parametrize("facet", ["model.heads", None])
def test_phase_from_the_summary_is_the_phase_of_the_trials(root, facet):
    summary = read_summary(LOCAL, str(root / "copy"))
    trials = load(root, "copy").trials
    assert summary.trials == len(trials)
    for x, y in (("task.cooccurrence", "task.hardness"), ("task.hardness", "model.heads")):
        if facet in (x, y):
            continue
        for outcome in ("attention_learned", "learned"):
            a = compute_phase(trials, x, y, facet, outcome=outcome)
            b = phase_from_summary(summary.cells, x, y, facet, outcome=outcome)
            columns = ["n_trials", "n", "successes", "p", "p_low", "p_high", "state",
                       "recovered"]
            pd.testing.assert_frame_equal(a.cells[columns], b.cells[columns])
            pd.testing.assert_frame_equal(a.boundary, b.boundary)
            assert a.excluded == b.excluded


def test_summary_lists_every_trial_and_pack(root):
    summary = read_summary(LOCAL, str(root / "topic"))
    trials = load(root, "topic").trials
    ids = [t for v in summary.cells["trial_ids"] for t in v]
    assert sorted(ids) == sorted(trials["trial_id"])
    packs = {p for v in summary.cells["packs"] for p in v}
    assert packs == set(trials["pack_id"])


def test_a_reader_catches_up_and_rebuilds(tmp_path):
    folder = synthetic.write_copy_sweep(tmp_path, "s", cooccurrence=(0.0, 1.0), seeds=2)
    names = sorted(trial_file_names(LOCAL, str(folder)))
    whole = read_summary(LOCAL, str(folder))
    assert whole.files == set(names)
    # a summary that lags (a crash between a pack and its summary): the missing file is read
    lagging = CellSummary(whole.cells.iloc[0:0].copy(), set())
    caught, changed = current_summary(LOCAL, str(folder), names, lagging)
    assert changed and caught.trials == whole.trials
    # no summary file: rebuilt from the trials
    (folder / SUMMARY_FILE).unlink()
    rebuilt, _ = current_summary(LOCAL, str(folder), names)
    assert rebuilt.trials == whole.trials and rebuilt.files == set(names)
    # compaction: the files it covered are gone, so it is rebuilt from the compacted file
    Store.open(str(tmp_path)).compact("s")
    compacted = sorted(trial_file_names(LOCAL, str(folder)))
    again, _ = current_summary(LOCAL, str(folder), compacted, whole)
    assert again.files == set(compacted) and again.trials == whole.trials


def test_a_local_sweep_keeps_its_summary_and_reports_steps_inside_packs(tmp_path,
                                                                         monkeypatch):
    import sweeper
    from sweeper.recording import Recorder

    try:
        from sweep_helpers import variant
    except ImportError:
        from tests.sweep_helpers import variant
    steps: list[int] = []
    original = Recorder.progressed

    def spy(self, specs, step):
        steps.append(step)
        original(self, specs, step)

    monkeypatch.setattr(Recorder, "progressed", spy)
    lines = []

    class Stream:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    result = sweeper.run(variant(**{"budget.steps": 40}), results=str(tmp_path),
                         executor="local", stream=Stream())
    assert result.ran == 4
    assert steps and set(steps) >= {10, 20, 30, 40}  # every evaluation of each pack
    folder = tmp_path / "tiny"
    summary = read_summary(LOCAL, str(folder))
    assert summary.files == set(trial_file_names(LOCAL, str(folder))) and summary.trials == 4
    progress = json.loads((folder / "progress.json").read_text())
    assert progress["state"] == "finished" and progress["done"] == 4
    assert progress["packs"] == []


def test_the_progress_line_shows_steps_inside_packs():
    import io

    from sweeper.recording import Progress

    progress = Progress(8, io.StringIO())
    progress.running = 4
    progress.packs = {"a": (120, 400), "b": (40, 400)}
    assert "4 running (steps 120/400, 40/400)" in progress.line()


def test_ray_workers_report_their_step_throttled(monkeypatch):
    from sweeper.executors import ray_tune

    sent = []
    monkeypatch.setattr(ray_tune.tune, "report", lambda payload: sent.append(payload))
    report = ray_tune._progress_reporter(last_step=100, every_s=0.0)
    for step in (0, 10, 50, 100):
        report(step, [{}])
    assert [p["step"] for p in sent] == [0, 10, 50]  # the last goes with the final report
    assert all(p.get("progress") and "rows" not in p for p in sent)
    sent.clear()
    slow = ray_tune._progress_reporter(last_step=100, every_s=3600.0)
    for step in (10, 20):
        slow(step, [{}])
    assert sent == []  # at most one report per interval

    class Sink:
        def __init__(self):
            self.calls = []

        def progressed(self, specs, step):
            self.calls.append((specs, step))

    class Searcher:
        packs = {"t1": ["spec"]}

    sink = Sink()
    callback = ray_tune._StoreCallback(Searcher(), sink)

    class Trial:
        trial_id = "t1"

    callback.on_trial_result(0, [], Trial(), {"progress": True, "step": 30})
    assert sink.calls == [(["spec"], 30)]
    assert callback.final == {} and callback.rows == {}  # nothing stored from progress


# ---------------------------------------------------------------- the dashboard's API

@pytest.fixture(scope="module")
def server(root):
    with serving_dashboard(root, "copy") as url:
        yield url


def get(url: str, headers: dict | None = None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def api(base: str, path: str, **args):
    from urllib.parse import urlencode

    status, _, body = get(f"{base}/api/{path}?{urlencode(args)}")
    assert status == 200, body
    return json.loads(body)


def test_the_api_serves_state_phase_cell_failed_and_search(server, root):
    state = api(server, "state", sweep="copy")
    assert state["stored"] == 144 and state["outcome"] == "attention_learned"
    assert state["default"] == {"x": "task.cooccurrence", "y": "task.hardness",
                                "facet": "model.heads"}
    assert {a["column"] for a in state["axes"]} >= {"task.cooccurrence", "task.hardness",
                                                    "model.heads"}
    phase = api(server, "phase", sweep="copy", x="task.cooccurrence", y="task.hardness",
                facet="model.heads")
    assert phase["title"].startswith("p(attention learned")
    assert sum(c["n_trials"] for c in phase["cells"]) == 144
    # a grid's axis is drawn as the grid: evenly spaced cells labelled by the grid's values
    trials = load(root, "copy").trials
    grid = sorted(trials["task.cooccurrence"].unique())
    assert phase["x"]["kind"] == "category" and phase["x"]["values"] == [f"{v:g}" for v in grid]
    assert phase["x"]["edges"] is None
    cell = next(c for c in phase["cells"] if c["n_trials"])
    seeds = api(server, "cell", sweep="copy", cell=json.dumps(cell["conditions"]))
    assert seeds["total"] == cell["n_trials"] and len(seeds["curves"]) >= cell["n"]
    assert [m["name"] for m in seeds["metrics"]] == ["accuracy", "attn_acc"]
    assert [m["threshold"] for m in seeds["metrics"]] == [0.95, 0.9]
    assert seeds["successes"] == cell["successes"]
    trials = load(root, "copy").trials
    failed = api(server, "failed", sweep="copy")
    assert failed["total"] == int((trials["status"] == "failed").sum()) > 0
    assert all("worker died" in t["error"] for t in failed["trials"])
    search = api(server, "search", sweep="copy")
    assert search["objective"] == "attention_learned" and search["cells"]


def test_the_trials_api_lists_every_trial_with_query_columns_sorts_and_filters(server, root):
    from analysis.query import DEFAULT, query_frame

    every = query_frame(root, "copy", columns=DEFAULT)
    table = api(server, "trials", sweep="copy")
    assert table["columns"] == list(every.columns)  # what `sweeper query` prints
    assert "model.heads" in table["columns"] and "final_accuracy" in table["columns"]
    assert len(table["rows"]) == table["total"] == len(load(root, "copy").trials) == 144
    at = table["columns"].index("trial_id")
    assert [r[at] for r in table["rows"]] == every["trial_id"].tolist()

    by_loss = api(server, "trials", sweep="copy", sort="final_loss", order="desc")
    loss = [r[by_loss["columns"].index("final_loss")] for r in by_loss["rows"]]
    known = [v for v in loss if v is not None]
    assert known == sorted(known, reverse=True) and loss[:len(known)] == known  # nulls last
    assert [r[at] for r in by_loss["rows"]] == every.sort_values(
        "final_loss", ascending=False, kind="stable", na_position="last")["trial_id"].tolist()

    where = "model.heads == 2 and seed < 2 and status == 'ok'"
    chosen = api(server, "trials", sweep="copy", where=where)
    expected = query_frame(root, "copy", where=where, columns=DEFAULT)
    assert 0 < len(chosen["rows"]) == len(expected) < 144 and chosen["total"] == 144
    assert [r[at] for r in chosen["rows"]] == expected["trial_id"].tolist()
    assert {r[chosen["columns"].index("model.heads")] for r in chosen["rows"]} == {2}


def test_the_trials_api_pages_the_sorted_filtered_rows(server, root):
    """A page is `limit` rows from `offset` of the sorted, filtered table: the pages put
    together are the whole table, each row once, and `matched` counts them all."""
    from analysis.query import DEFAULT, query_frame

    where = "seed < 5"
    every = query_frame(root, "copy", where=where, columns=DEFAULT).sort_values(
        "final_loss", kind="stable", na_position="last")["trial_id"].tolist()
    assert len(every) > 2 * 25
    pages, offset = [], 0
    while True:
        page = api(server, "trials", sweep="copy", where=where, sort="final_loss",
                   offset=str(offset), limit="25")
        assert page["matched"] == len(every) and page["total"] == 144
        assert page["offset"] == offset and len(page["rows"]) <= 25
        if not page["rows"]:
            break
        at = page["columns"].index("trial_id")
        pages.append([r[at] for r in page["rows"]])
        offset += 25
    assert [len(p) for p in pages[:-1]] == [25] * (len(pages) - 1)
    assert sum(pages, []) == every
    assert len(api(server, "trials", sweep="copy")["rows"]) == 144  # one page by default


@pytest.mark.parametrize(("args", "start"), [
    ({"limit": "0"}, "limit: got 0; allowed: an integer >= 1 and <= 10000"),
    ({"offset": "-1"}, "offset: got -1; allowed: an integer >= 0"),
    ({"where": "model.heads =="}, "malformed where 'model.heads ==' at position 14"),
    ({"where": "nope == 1"}, "unknown column 'nope' in where"),
    ({"sort": "nope"}, "sort: got 'nope'; allowed: task.cooccurrence"),
    ({"sort": "seed", "order": "up"}, "order: got 'up'; allowed: asc, desc"),
])
def test_the_trials_api_refuses_a_bad_filter_or_sort_in_one_line(server, args, start):
    from urllib.parse import urlencode

    status, _, body = get(f"{server}/api/trials?{urlencode({'sweep': 'copy', **args})}")
    assert status == 400
    error = json.loads(body)["error"]
    assert error.startswith(start) and "\n" not in error and "Traceback" not in error


def test_the_curves_api_draws_the_trials_named_with_their_seeds(server, root):
    trials = load(root, "copy").trials
    ok = trials[trials["status"] == "ok"].sort_values("trial_id").head(3)
    data = api(server, "curves", sweep="copy", trials=",".join(ok["trial_id"]))
    assert sorted(data["curves"]) == sorted(ok["trial_id"])
    assert [m["name"] for m in data["metrics"]] == ["accuracy", "attn_acc"]
    for tid, seed, heads in zip(ok["trial_id"], ok["seed"], ok["model.heads"], strict=True):
        assert data["trials"][tid]["seed"] == seed and data["trials"][tid]["model.heads"] == heads
        assert len(data["curves"][tid]["step"]) == len(data["curves"][tid]["accuracy"]) > 1
    status, _, body = get(f"{server}/api/curves?sweep=copy&trials=nope")
    assert status == 400 and json.loads(body)["error"].startswith("trials: no trial 'nope'")


def test_the_server_refuses_foreign_hosts_and_serves_its_own_assets(server):
    status, _, body = get(f"{server}/api/sweeps", {"Host": "attacker.example:80"})
    assert status == 403
    status, headers, body = get(f"{server}/")
    assert status == 200 and "default-src 'none'" in headers["Content-Security-Policy"]
    assert b"/static/plotly.min.js" in body and b"http" not in body.split(b"<body>")[0]
    status, headers, body = get(f"{server}/static/plotly.min.js")
    assert status == 200 and len(body) > 1_000_000 and b"plotly.js" in body[:200]
    assert get(f"{server}/static/../server.py")[0] == 404


def test_a_non_loopback_bind_needs_allow_remote_and_then_a_token(root):
    from analysis.dashboard.server import make_server
    from analysis.errors import AnalysisInputError

    with pytest.raises(AnalysisInputError, match="allow-remote"):
        make_server(str(root), "copy", host="0.0.0.0", port=0)
    httpd, dashboard = make_server(str(root), "copy", port=0, allow_remote=True,
                                   token="s3cret-token")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        assert get(f"{base}/api/sweeps")[0] == 403
        assert get(f"{base}/api/sweeps?token=wrong")[0] == 403
        status, headers, _ = get(f"{base}/api/sweeps?token=s3cret-token")
        assert status == 200 and "HttpOnly" in headers["Set-Cookie"]
        assert get(f"{base}/api/sweeps", {"X-Sweeper-Token": "s3cret-token"})[0] == 200
    finally:
        httpd.shutdown()
        httpd.server_close()


def _write_random_sweep(root, name: str, draws: int, column: str, sample, axes_yaml: str,
                        failed: float = 0.0):
    """A random search's store, as a run writes it: `draws` values of `column` (`sample(n)`)
    for each of c = 0 and 1, one seed each; the manifest names the search and its file's
    `axes:` (`axes_yaml`)."""
    configs = synthetic.copy_configs(cooccurrence=(0.0, 1.0), hardness=(0.0,), heads=(1,),
                                     seeds=1)
    rows = pd.concat([configs] * draws, ignore_index=True)
    rows[column] = sample(len(rows))
    rows["seed"] = np.arange(len(rows))
    rows = synthetic._with_ids(rows.drop(columns="trial_id").to_dict("records"))
    synthetic._write_sweep(root, name, rows, topic=False, pack_by=["task.cooccurrence"],
                           pack_size=draws // 2, seed=0, failed=failed, diverged=0.0)
    manifest = root / name / "manifest.json"
    data = json.loads(manifest.read_text())
    data["search"] = "random"
    data["sweep_file"] = (f"name: {name}\nsearch: {{type: random, trials: {2 * draws}}}\n"
                          f"axes:\n{axes_yaml}")
    manifest.write_text(json.dumps(data))


def test_a_continuous_axis_is_binned_and_log_scaled(tmp_path):
    """A random search over a log-uniform lr: the phase view bins it on a log axis, and the
    search view has the objective per cell."""
    rng = np.random.default_rng(0)
    _write_random_sweep(tmp_path, "rand", 20, "train.lr", lambda n: 10 ** rng.uniform(-4, -2, n),
                        "  train:\n    lr: {loguniform: [0.0001, 0.01]}\n"
                        "  task:\n    cooccurrence: {choice: [0.0, 1.0]}\n")
    from analysis.dashboard.data import SweepView

    view = SweepView(LOCAL, str(tmp_path), "rand")
    state = view.state()
    lr = next(a for a in state["axes"] if a["column"] == "train.lr")
    assert lr["kind"] == "log" and lr["binned"] and state["search"]["drawn"]
    phase = view.phase("train.lr", "task.cooccurrence", None)
    assert phase["x"]["kind"] == "log" and len(phase["x"]["values"]) <= 8
    assert sum(c["n_trials"] for c in phase["cells"]) == 40
    for cell in phase["cells"]:  # each trial in one cell's drill-down, as in the map
        assert "lo" in cell["conditions"][0]
        assert view.cell(cell["conditions"])["total"] == cell["n_trials"]
    search = view.search()
    assert len(search["cells"]) == 40 and search["type"] == "random"
    assert next(p for p in search["parameters"] if p["column"] == "train.lr")["kind"] == "log"


@pytest.mark.parametrize("failed", [0.0, 0.3])
def test_a_drawn_sweeps_map_has_the_bins_and_counts_of_sweeper_phase(tmp_path, failed):
    """The page's map of a random search is cut as `sweeper phase` cuts it by default
    (DEFAULT_BINS quantile bins of the sampled values, failed trials' included): the same
    edges, the same trials and successes per cell, and each cell's drill-down holds its
    trials; a grid with many values keeps one cell per value."""
    from analysis.dashboard.data import SweepView
    from analysis.phase import DEFAULT_BINS, phase_from_results

    rng = np.random.default_rng(1)
    _write_random_sweep(tmp_path, "drawn", 30, "task.hardness", lambda n: rng.uniform(0, 1, n),
                        "  task:\n    hardness: {uniform: [0.0, 1.0]}\n"
                        "    cooccurrence: {choice: [0.0, 1.0]}\n", failed=failed)

    view = SweepView(LOCAL, str(tmp_path), "drawn")
    page = view.phase("task.hardness", "task.cooccurrence", None, min_seeds=1)
    cli = phase_from_results(load(tmp_path, "drawn"), "task.hardness", "task.cooccurrence",
                             min_seeds=1)
    edges = cli.bins["task.hardness"].edges
    assert len(edges) == DEFAULT_BINS + 1
    assert [b[0] for b in page["x"]["bins"]] + [page["x"]["bins"][-1][1]] == \
        pytest.approx(edges)
    expected = {}
    for _, row in cli.cells.iterrows():
        lo = edges[cli.bins["task.hardness"].labels.index(row["task.hardness"])]
        expected[(round(lo, 12), float(row["task.cooccurrence"]))] = (
            int(row["n_trials"]), int(row["successes"]))
    drawn = {}
    for cell in page["cells"]:
        bin_, value = cell["conditions"]
        drawn[(round(bin_["lo"], 12), float(value["value"]))] = (
            int(cell["n_trials"]), int(cell["successes"]))
    assert drawn == {k: v for k, v in expected.items() if v[0]}
    for cell in page["cells"]:  # the top bin closed, the others [lo, hi)
        assert cell["conditions"][0].get("closed", False) == (
            cell["conditions"][0]["hi"] == pytest.approx(edges[-1]))
        assert view.cell(cell["conditions"])["total"] == cell["n_trials"]

    grid = synthetic.copy_configs(cooccurrence=tuple(np.linspace(0, 1, 15).round(4)),
                                  hardness=(0.0, 1.0), heads=(1,), seeds=1)
    grid = synthetic._with_ids(grid.drop(columns="trial_id").to_dict("records"))
    synthetic._write_sweep(tmp_path, "fine", grid, topic=False, pack_by=["task.hardness"],
                           pack_size=15, seed=0, failed=0.0, diverged=0.0)
    fine = SweepView(LOCAL, str(tmp_path), "fine")
    assert not any(a["binned"] for a in fine.axes())
    assert len(fine.phase("task.cooccurrence", "task.hardness", None)["x"]["values"]) == 15


# ---------------------------------------------------------------- plots, seeds, plan

def test_phase_figures_fit_their_text_and_axes(root):
    from analysis import plots
    from analysis.phase import phase_from_results

    results = load(root, "copy")
    for facet in ("model.heads", None):
        phase = phase_from_results(results, "task.cooccurrence", "task.hardness", facet)
        fig = plots.phase_figure(phase)
        fig.canvas.draw()
        box = fig.get_tightbbox(fig.canvas.get_renderer())
        width, height = fig.get_size_inches()
        assert box.x0 >= -0.01 and box.y0 >= -0.01, (facet, box)  # nothing clipped
        assert box.x1 <= width + 0.01 and box.y1 <= height + 0.01, (facet, box)
        ax = fig.phase_panels[0][1]
        assert ax.get_xlim()[0] < 0 < 0.25 < ax.get_xlim()[1]  # numeric: at the values
        unreliable = (phase.facet_cells(phase.facet_values[0])["state"] == "unreliable").sum()
        dashed = [p for p in ax.patches if p.get_linestyle() in ("--", "dashed")]
        assert len(dashed) == unreliable > 0
    assert phase_from_results(results, "task.cooccurrence", "task.hardness",
                              "model.heads").base == 1  # the smallest


def test_log_spaced_values_get_a_log_axis():
    from analysis.axes import axis_scale

    lr = axis_scale("train.lr", [1e-4, 3e-4, 1e-3, 3e-3])
    assert lr.kind == "log" and lr.edges[0] < 1e-4 < lr.edges[1] < 3e-4
    assert abs(lr.pos(0.5) - np.sqrt(1e-4 * 3e-4)) < 1e-12
    c = axis_scale("task.cooccurrence", [0.0, 0.25, 0.5, 1.0])
    assert c.kind == "linear" and c.pos(2.5) == 0.75
    assert axis_scale("model.classifier", ["fc", "tc"]).kind == "category"


def test_seeds_command_draws_cells_and_refuses_too_many(root, tmp_path, capsys):
    from PIL import Image

    from analysis.cli import main

    out = tmp_path / "seeds.png"
    assert main(["seeds", str(root / "copy"), "--where",
                 "task.cooccurrence == 0 and task.hardness == 0.5", "-o", str(out)]) == 0
    assert "3 cells" in capsys.readouterr().out
    with Image.open(out) as image:
        assert image.size[0] > 500
    assert main(["seeds", str(root / "copy"), "-o", str(tmp_path / "all.png")]) == 2
    assert "at most" in capsys.readouterr().err


def test_plan_warns_when_seeds_cannot_resolve_a_cell(tmp_path, capsys):
    from sweeper.cli import main

    try:
        from sweep_helpers import TINY, write_sweep
    except ImportError:
        from tests.sweep_helpers import TINY, write_sweep
    assert seeds_to_resolve() == 4
    assert resolution_warning(4) is None and "at least 4 seeds" in resolution_warning(3)
    path = write_sweep(tmp_path / "t.yaml", {**TINY, "seeds": 3})
    assert main(["plan", str(path), "--results", str(tmp_path / "r")]) == 0
    assert "3 seeds per cell cannot resolve a cell" in capsys.readouterr().err


# ---------------------------------------------------------------- one definition of progress

PROGRESS_KEYS = ("state", "stored", "done", "failed", "running", "pending", "planned")


def _status_json(results: Path, name: str) -> dict:
    try:
        from sweep_helpers import cli
    except ImportError:
        from tests.sweep_helpers import cli
    rc, out, err = cli(["status", name, "--results", results, "--json"])
    assert rc == 0, err
    return json.loads(out)


def _live(results: Path, name: str) -> dict:
    from analysis.dashboard.data import SweepView

    return SweepView(LOCAL, str(results), name).state()["progress"]


def _same_progress(results: Path, name: str) -> dict:
    """The dashboard's live state and `sweeper status --json` say the same counts."""
    status, live = _status_json(results, name), _live(results, name)
    assert {k: live[k] for k in ("done", "failed", "running", "pending", "planned")} == {
        k: status[k] for k in ("done", "failed", "running", "pending", "planned")}
    assert live["state"] == status["driver"]
    return live


def test_an_interrupted_and_resumed_sweep_shows_the_whole_plan_everywhere(tmp_path,
                                                                           monkeypatch):
    """3 cells x 2 seeds in packs of 2 (6 trials). Stopped after its first pack (as a first
    Ctrl-C does), then resumed: `sweeper status`, the dashboard, the progress line and the
    run's result count the whole plan across both runs (the bug: done counted the first run,
    planned only the second, and status said finished with trials pending)."""
    import io

    import sweeper.workers
    from sweeper.executors.local import LocalExecutor
    from sweeper.interrupts import StopRequest
    from sweeper.runner import run_sweep
    from sweeper.search_space import load_sweep
    from sweeper.spec import spec_from_config

    try:
        from sweep_helpers import cli, fake_result, variant, write_sweep
    except ImportError:
        from tests.sweep_helpers import cli, fake_result, variant, write_sweep
    sweep = load_sweep(str(write_sweep(tmp_path / "r.yaml", variant(**{
        "name": "resumed", "axes.task.cooccurrence": {"grid": [0.0, 0.5, 1.0]},
        "pack_size": 2}))))
    results = tmp_path / "results"
    store = Store.open(str(results))
    stop, seen = StopRequest(), []

    def first_pack_then_ctrl_c(configs, device, threads, report=None):
        stop.event.set()  # a first signal while the first pack trains: it is stored, no more
        return [fake_result(spec_from_config(c, device)) for c in configs]

    monkeypatch.setattr(sweeper.workers, "execute_pack", first_pack_then_ctrl_c)
    first = run_sweep(sweep, store, LocalExecutor(), stop=stop, stream=io.StringIO())
    assert first["interrupted"] and first["ran"] == 2
    live = _same_progress(results, "resumed")
    assert {k: live[k] for k in PROGRESS_KEYS} == {
        "state": "interrupted", "stored": 2, "done": 2, "failed": 0, "running": 0,
        "pending": 4, "planned": 6}
    assert first["progress"].to_json() | {"age_s": None, "updated": None} == live | {
        "age_s": None, "updated": None}
    rc, out, _ = cli(["status", "resumed", "--results", results])
    assert rc == 0 and "2 done, 0 failed, 4 pending (2 ok); 6 planned; interrupted before" in out

    def resumed(configs, device, threads, report=None):
        seen.append(_same_progress(results, "resumed"))  # mid-run: a pack is running
        return [fake_result(spec_from_config(c, device)) for c in configs]

    monkeypatch.setattr(sweeper.workers, "execute_pack", resumed)
    lines = io.StringIO()
    second = run_sweep(sweep, store, LocalExecutor(), stream=lines)
    assert {k: seen[0][k] for k in PROGRESS_KEYS} == {
        "state": "running", "stored": 2, "done": 2, "failed": 0, "running": 2,
        "pending": 2, "planned": 6}
    assert seen[1]["done"] == 4 and seen[1]["pending"] == 0 and seen[1]["running"] == 2
    assert "6/6 trials: 6 done, 0 failed, 0 running, 0 pending" in lines.getvalue()
    end = _same_progress(results, "resumed")
    assert end["state"] == "finished" and end["pending"] == 0 and end["done"] == 6
    assert second["pending"] == 0 and second["progress"].state == "finished"


def _grid_sweep_with_progress(tmp_path, name: str, stored: int | None,
                              progress: dict | None) -> Path:
    """A 4-trial grid sweep's results root with its first `stored` trials (None: all) and the
    driver's progress file `progress` (None: none)."""
    try:
        from sweep_helpers import fake_results, variant, write_sweep
    except ImportError:
        from tests.sweep_helpers import fake_results, variant, write_sweep
    from sweeper.plan import make_plan
    from sweeper.results.summary import PROGRESS_FILE, progress_bytes
    from sweeper.runner import manifest
    from sweeper.search_space import load_sweep

    sweep = load_sweep(str(write_sweep(tmp_path / f"{name}.yaml", variant(name=name))))
    plan = make_plan(sweep, set())
    results = tmp_path / "results"
    store = Store.open(str(results))
    store.write_manifest(name, manifest(sweep, plan, None))
    store.write_pack(name, fake_results(plan.specs[:stored]))
    if progress is not None:
        (results / name / PROGRESS_FILE).write_bytes(progress_bytes(progress))
    return results


def test_status_says_interrupted_when_the_driver_ended_before_its_plan(tmp_path):
    """A grid sweep whose driver ended with trials of its plan unstored (an older sweeper wrote
    "finished" when a signal stopped it) is interrupted, not finished; without a progress file
    (results only) it is "stored"."""
    try:
        from sweep_helpers import cli
    except ImportError:
        from tests.sweep_helpers import cli
    from sweeper.results.summary import PROGRESS_FILE, progress_bytes

    results = _grid_sweep_with_progress(tmp_path, "part", 1, None)
    assert _same_progress(results, "part")["state"] == "stored"
    (results / "part" / PROGRESS_FILE).write_bytes(progress_bytes(
        {"state": "finished", "running": 0}))
    rc, out, _ = cli(["status", "part", "--results", results])
    assert rc == 0 and out.startswith("part: 1 done, 0 failed, 3 pending (1 ok); 4 planned; "
                                      "interrupted before its plan was done"), out
    assert _same_progress(results, "part")["state"] == "interrupted"


def test_a_signal_during_the_last_pack_leaves_a_finished_sweep_not_an_interrupted_one(tmp_path):
    """A driver stopped by a signal while its last pack trained stores that pack and writes
    "interrupted"; with every trial of the plan stored, status must not say "run the same
    command to resume"."""
    try:
        from sweep_helpers import cli
    except ImportError:
        from tests.sweep_helpers import cli
    results = _grid_sweep_with_progress(tmp_path, "whole", None,
                                        {"state": "interrupted", "running": 0})
    rc, out, _ = cli(["status", "whole", "--results", results])
    assert rc == 0 and "4 done, 0 failed, 0 pending (4 ok); 4 planned; finished" in out, out
    assert _same_progress(results, "whole")["state"] == "finished"


def test_the_dashboard_opens_the_running_sweep_first(tmp_path):
    from analysis.dashboard.server import Dashboard
    from sweeper.results.summary import PROGRESS_FILE, progress_bytes

    for name in ("alpha", "beta", "gamma"):
        synthetic.write_copy_sweep(tmp_path, name, cooccurrence=(0.0, 1.0), seeds=1)
    (tmp_path / "gamma" / PROGRESS_FILE).write_bytes(progress_bytes({"state": "finished"}))
    assert Dashboard(str(tmp_path), None, None).first == "gamma"  # the latest updated
    (tmp_path / "beta" / PROGRESS_FILE).write_bytes(progress_bytes({"state": "running"}))
    dashboard = Dashboard(str(tmp_path), None, None)
    assert dashboard.first == "beta"  # its driver runs
    assert dashboard.preferred(dashboard.available()) == "beta"
    assert Dashboard(str(tmp_path), "alpha", None).first == "alpha"  # named: that one


def test_the_phase_api_draws_a_grid_as_the_grid_with_the_recovery_map(root):
    from analysis.dashboard.data import SweepView

    view = SweepView(LOCAL, str(root), "copy")
    phase = view.phase("task.cooccurrence", "task.hardness", "model.heads")
    trials = load(root, "copy").trials
    for axis, column in ((phase["x"], "task.cooccurrence"), (phase["y"], "task.hardness")):
        assert axis["kind"] == "category"
        assert axis["values"] == [f"{v:g}" for v in sorted(trials[column].unique())]
    heads = sorted(trials["model.heads"].unique())
    reference = compute_phase(trials, "task.cooccurrence", "task.hardness", "model.heads")
    assert [m["facet"] for m in phase["recovery"]] == list(range(1, len(heads)))
    for m in phase["recovery"]:
        value = heads[m["facet"]]
        rec = reference.recovery[reference.recovery["model.heads"] == value]
        expected = reference.grid("delta", frame=rec)
        got = np.array(m["delta"], dtype=float)
        np.testing.assert_allclose(got, expected.astype(float), equal_nan=True)
        assert m["label"] == f"recovery: p(H = {value}) − p(H = {heads[0]})"
    assert view.phase("task.cooccurrence", "task.hardness", None)["recovery"] == []


# ---------------------------------------------------------------- the search views

def test_a_grid_sweep_has_parallel_lines_slices_and_importance(root):
    """Every counted trial of the grid is one parallel-coordinates line with its swept values
    and outcome; each slice counts a value's trials and their share learned; hardness (the
    synthetic truth's strongest term) is the most important parameter; a grid has no
    optimisation history."""
    from analysis.dashboard.data import SweepView

    view = SweepView(LOCAL, str(root), "copy")
    view.state()
    search = view.search()
    trials = load(root, "copy").trials
    from sweeper.results import COUNTED_STATUSES

    counted = trials[trials["status"].isin(COUNTED_STATUSES)]
    assert search["type"] == "grid" and search["yes_no"] and search["history"] is None
    assert len(search["lines"]) == len(counted) == counted["trial_id"].nunique()
    by_id = counted.set_index("trial_id")
    for line in search["lines"]:
        trial = by_id.loc[line["trial_id"]]
        assert line["objective"] == float(bool(trial["attention_learned"]))
        assert line["task.hardness"] == trial["task.hardness"]
        assert line["model.heads"] == trial["model.heads"]
    hardness = next(s for s in search["slices"] if s["column"] == "task.hardness")
    assert hardness["values"] == sorted(counted["task.hardness"].unique())
    for value, n, mean in zip(hardness["values"], hardness["n"], hardness["mean"]):
        here = counted[counted["task.hardness"] == value]
        assert n == len(here) and mean == pytest.approx(here["attention_learned"].mean())
    assert {p["kind"] for p in search["parameters"]} == {"category"}  # at the grid's values
    importance = search["importance"]
    assert importance["method"] == "spread"
    assert next(iter(importance["values"])) == "task.hardness"
    assert sum(importance["values"].values()) == pytest.approx(1.0)


def test_a_random_search_has_a_monotone_best_so_far_history(tmp_path):
    from analysis.dashboard.data import SweepView
    from analysis.search import history, spread_importance, trial_lines

    synthetic.write_random_copy_sweep(tmp_path, "random")
    view = SweepView(LOCAL, str(tmp_path), "random")
    view.state()
    search = view.search()
    # one point per cell, as the search counts its trials (60 cells of 2 seeds: 120 trials)
    assert search["type"] == "random" and len(search["history"]["objective"]) == 60
    assert search["history"]["trials"] == [2] * 60
    assert np.all(np.diff(search["history"]["best"]) >= 0)
    trials = load(tmp_path, "random").trials
    keys = ["task.cooccurrence", "task.hardness"]
    lines = trial_lines(trials, keys, "attention_steps")
    per_cell = history(lines, "maximize", keys)
    means = lines.groupby(keys, sort=False)["objective"].mean()
    assert per_cell["objective"] == pytest.approx(means.tolist())
    for direction, step in (("maximize", np.maximum), ("minimize", np.minimum)):
        h = history(lines, direction)
        assert len(h["best"]) == len(lines) and h["objective"] == lines["objective"].tolist()
        assert h["best"] == np.asarray(step.accumulate(h["objective"])).tolist()
        diffs = np.diff(h["best"])
        assert (diffs >= 0).all() if direction == "maximize" else (diffs <= 0).all()
    spread = spread_importance(lines, ["task.cooccurrence", "task.hardness"])
    assert list(spread.values()) == sorted(spread.values(), reverse=True)


def test_an_optuna_study_gives_optunas_own_importance(tmp_path):
    """A sweep with an Optuna study beside its results: importance is Optuna's (PED-ANOVA),
    and the parameter that drives the objective comes first."""
    import optuna

    from analysis.dashboard.data import SweepView
    from sweeper.results.layout import STUDY_FILE

    synthetic.write_copy_sweep(tmp_path, "opt", seeds=1)
    storage = f"sqlite:///{tmp_path / 'opt' / STUDY_FILE}"
    study = optuna.create_study(study_name="opt", storage=storage, direction="maximize")
    space = {"x": optuna.distributions.FloatDistribution(0, 1),
             "noise": optuna.distributions.FloatDistribution(0, 1)}
    rng = np.random.default_rng(0)
    for _ in range(40):
        x, noise = rng.uniform(0, 1, 2)
        study.add_trial(optuna.trial.create_trial(params={"x": x, "noise": noise},
                                                  distributions=space, value=x ** 2))
    view = SweepView(LOCAL, str(tmp_path), "opt")
    view.state()
    importance = view.search()["importance"]
    assert importance["method"] == "optuna"
    assert list(importance["values"])[0] == "x"
    assert importance["values"]["x"] > importance["values"]["noise"]


def test_the_search_views_answer_before_the_state_was_asked(tmp_path):
    from analysis.dashboard.data import SweepView

    synthetic.write_random_copy_sweep(tmp_path, "random")
    first = SweepView(LOCAL, str(tmp_path), "random").search()  # no state() before it
    view = SweepView(LOCAL, str(tmp_path), "random")
    view.state()
    assert first["parameters"] and first == view.search()

"""SQL through DuckDB, filtered queries, output formats, the CLI functions, and S3."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
from pathlib import Path

import pandas as pd
import pytest

from analysis import AnalysisInputError, format_frame, load, query_frame, sql
from analysis.cli import main, register
from analysis.query import connect

try:
    from analysis_fixtures import small_copy_sweep, store  # noqa: F401
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import small_copy_sweep, store  # noqa: F401


def test_sql_joins_trials_and_trajectories(store):
    frame = sql(store, 'SELECT t."model.heads" AS heads, count(*) AS rows, max(j.step) AS last '
                       "FROM trials t JOIN trajectories j USING (trial_id) GROUP BY 1 ORDER BY 1",
                "copy")
    res = load(store, "copy")
    merged = res.trajectories.merge(res.trials[["trial_id", "model.heads"]], on="trial_id")
    assert frame["heads"].tolist() == [1, 2, 4]
    assert frame["rows"].tolist() == merged.groupby("model.heads").size().tolist()
    assert frame["last"].tolist() == [200, 200, 200]


def test_sql_views_cover_every_file(store):
    con = connect(store, "copy")
    trials = con.execute("SELECT count(*) FROM trials").fetchone()[0]
    rows = con.execute("SELECT count(*) FROM trajectories").fetchone()[0]
    res = load(store, "copy")
    assert (trials, rows) == (len(res.trials), len(res.trajectories))
    con.close()


def test_sql_over_several_sweeps_labels_trajectories(store):
    frame = sql(store, "SELECT sweep, count(DISTINCT trial_id) AS n FROM trajectories "
                       "GROUP BY 1 ORDER BY 1", ["copy", "topic"])
    assert frame["sweep"].tolist() == ["copy", "topic"]


def test_sql_cannot_touch_other_files(store, tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(AnalysisInputError, match="Permission"):
        sql(store, f"COPY trials TO '{target}'", "copy")
    assert not target.exists()
    with pytest.raises(AnalysisInputError, match="Permission"):
        sql(store, "SELECT * FROM read_csv('/etc/passwd')", "copy")
    with pytest.raises(AnalysisInputError):
        sql(store, "SET enable_external_access = true", "copy")


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT heads FROM trials", 'Referenced column "heads" not found'),
    ("SELEC 1", "Parser Error"),
    ("SELECT * FROM nope", "nope"),
])
def test_bad_sql_gets_one_line_with_the_columns(store, query, message):
    with pytest.raises(AnalysisInputError, match=message) as info:
        sql(store, query, "copy")
    text = str(info.value)
    assert "\n" not in text
    assert "trials: trial_id, sweep" in text and "trajectories: trial_id, step" in text


def test_query_frame_filters_and_joins_trial_columns(store):
    frame = query_frame(store, "copy", where="model.heads == 1 and step == 200",
                        columns=["accuracy", "task.hardness"], table="trajectories", only=True)
    # only: exactly the columns asked for, after what names a trajectory row
    assert list(frame.columns) == ["trial_id", "step", "accuracy", "task.hardness"]
    kept = query_frame(store, "copy", where="step == 200", columns=["accuracy"],
                       table="trajectories")
    swept = [c for c in kept.columns if c.startswith(("task.", "model."))]
    assert {"task.cooccurrence", "task.hardness", "model.heads"} <= set(swept)
    assert list(kept.columns) == ["trial_id", "step", *swept, "accuracy"]
    assert (frame["step"] == 200).all() and frame["task.hardness"].notna().all()
    with pytest.raises(AnalysisInputError, match="table 'trajectories'"):
        query_frame(store, "copy", columns=["attn_acc_head"])  # per head: no final_ column
    assert "final_accuracy" in query_frame(store, "copy", columns=["accuracy"]).columns
    with pytest.raises(AnalysisInputError, match="table 'trajectories'"):
        query_frame(store, "copy", where="step > 3")


def test_formats():
    frame = pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": ["x", None],
                          "l": [[0.5, 1.0], [2.0]]})
    assert json.loads(format_frame(frame, "json")) == [
        {"a": 1, "b": "x", "l": [0.5, 1.0]}, {"a": None, "b": None, "l": [2.0]}]
    assert pd.read_csv(io.StringIO(format_frame(frame, "csv")))["a"].tolist()[0] == 1
    table = format_frame(frame, "table").splitlines()
    assert table[0].split() == ["a", "b", "l"] and len(table) == 3
    assert "no rows" in format_frame(frame.iloc[:0], "table")
    with pytest.raises(AnalysisInputError, match="allowed: table, csv, json"):
        format_frame(frame, "xml")


# ---------------------------------------------------------------- CLI functions

def test_register_adds_three_subcommands():
    parser = argparse.ArgumentParser(prog="sweeper")
    register(parser.add_subparsers(dest="command"))
    for argv in (["query", "R/S"], ["phase", "R/S", "--x", "a", "--y", "b"], ["report", "R/S"]):
        args = parser.parse_args(argv)
        assert callable(args.func) and args.command == argv[0]


def test_cli_query_where_columns_json(store, capsys):
    code = main(["query", str(store / "copy"), "--where", "model.heads == 1 and "
                 "task.hardness > 0.5", "--columns", "seed,learned", "--format", "json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    expected = load(store, "copy", where="model.heads == 1 and task.hardness > 0.5")
    assert len(rows) == len(expected.trials)
    swept = [c for c in rows[0] if c.startswith(("task.", "model."))]
    assert "task.cooccurrence" in swept  # a row names its cell: the swept columns first
    assert list(rows[0]) == [*swept, "seed", "learned", "trial_id"]


def test_cli_query_sql_csv(store, capsys):
    code = main(["query", str(store / "copy"), "--format", "csv", "--sql",
                 "SELECT count(*) AS n FROM trials JOIN trajectories USING (trial_id)"])
    assert code == 0
    assert capsys.readouterr().out.splitlines()[1] == str(len(load(store, "copy").trajectories))


@pytest.mark.parametrize("argv", [
    ["query", "{copy}", "--where", "model.heds == 1"],
    ["query", "{copy}", "--columns", "seed,acuracy"],
    ["query", "{copy}", "--sql", "SELECT nope FROM trials"],
    ["query", "{copy}", "--sql", "SELECT 1", "--where", "seed == 1"],
    ["query", "{root}/missing"],
    ["phase", "{copy}", "--x", "task.cooccurence", "--y", "task.hardness", "-o", "{out}.png"],
    ["phase", "{copy}", "--x", "task.cooccurrence", "--y", "task.hardness", "-o", "{out}.gif"],
    ["phase", "{copy}", "--x", "task.cooccurrence", "--y", "task.hardness", "--threshold", "2"],
    ["report", "{copy}", "-o", "{out}.txt"],
    ["report", "{copy}", "--x", "task.hardness", "-o", "{out}.html"],
])
def test_cli_bad_input_exits_2_with_one_line(store, tmp_path, capsys, argv):
    argv = [a.format(copy=store / "copy", root=store, out=tmp_path / "x") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sweeper {argv[0]}: error: ")
    assert not list(tmp_path.iterdir())


def test_cli_unknown_column_lists_the_available_ones(store, capsys):
    main(["query", str(store / "copy"), "--where", "model.heds == 1"])
    err = capsys.readouterr().err
    assert "did you mean 'model.heads'" in err and "available columns:" in err
    assert "task.cooccurrence" in err and "attn_acc" in err


def test_cli_phase_writes_the_figure_and_cells(store, tmp_path, capsys):
    code = main(["phase", str(store / "copy"), "--x", "task.cooccurrence", "--y",
                 "task.hardness", "--facet", "model.heads", "-o", str(tmp_path / "phase.svg"),
                 "--threshold", "0.9", "--cells", str(tmp_path / "cells.csv")])
    assert code == 0
    assert "36 cells" in capsys.readouterr().out
    assert (tmp_path / "phase.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    cells = pd.read_csv(tmp_path / "cells.csv")
    assert len(cells) == 36 and cells["n_trials"].sum() == 144


# ---------------------------------------------------------------- S3 (moto)

@pytest.fixture(scope="module")
def s3_results(tmp_path_factory):
    """A small copy sweep in a local moto S3 server, as an s3:// results URI."""
    local = tmp_path_factory.mktemp("s3-source")
    small_copy_sweep(local, cooccurrence=(0.0, 1.0), hardness=(0.0,), heads=(1, 2), seeds=3,
                     failed=0.0, diverged=0.0)
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="bucket")
    for path in Path(local, "copy").rglob("*"):
        if path.is_file():
            client.upload_file(str(path), "bucket", f"results/{path.relative_to(local)}")
    yield local, f"s3://bucket/results?endpoint_override={endpoint}&scheme=http&region=us-east-1"
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_s3_uri_loads_and_queries(s3_results, capsys):
    root, uri = s3_results
    local = load(root, "copy")
    remote = load(uri, "copy", where="model.heads == 2")
    assert sorted(remote.trials["trial_id"]) == sorted(
        local.trials.loc[local.trials["model.heads"] == 2, "trial_id"])
    assert len(remote.trajectories) == len(local.trajectories) // 2
    assert remote.manifest["sweep"] == "copy"
    frame = sql(uri, "SELECT count(*) AS n FROM trials JOIN trajectories USING (trial_id)",
                "copy")
    assert frame["n"].item() == len(local.trajectories)
    base, _, options = uri.partition("?")
    assert main(["query", f"{base}/copy?{options}", "--columns", "seed", "--only", "--limit",
                 "2", "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header == "seed,trial_id"

"""Files that are whole but not the sweep's (issue 26): a Parquet file of a foreign schema is a
damaged file (`sweeper.results.conformance`), while files of older and newer versions stay
readable; a manifest or progress file that is JSON but not an object never makes a reader
traceback, and `sweeper run` refuses a damaged manifest in one line, writing nothing. The real
sweep's readers and recovery over foreign files are in tests/test_damaged_store.py."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import synthetic_stores as synthetic
from sweep_helpers import TINY, cli, cli_subprocess, parquet_files, variant, write_sweep

import analysis
from sweeper.results import Store, reading
from sweeper.results.conformance import Footer, file_problem, foreign_files, read_as
from sweeper.results.reading import QUARANTINE

SWEEP = "copy"
BY_SWEEPER = {b"sweeper.schema_version": b"2"}


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A synthetic copy sweep of 4 packs of 2 trials (no training)."""
    root = tmp_path_factory.mktemp("foreign")
    synthetic.write_four_pack_sweep(root, SWEEP)
    return root


@pytest.fixture
def results(stored, tmp_path) -> Path:
    return Path(shutil.copytree(stored, tmp_path / "results"))


def _rewrite(path: Path, change) -> None:
    """Write a file again with `change(table)` applied, keeping its metadata."""
    table = pq.read_table(path)
    pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), path)


def _retyped(column: str, type_: pa.DataType):
    def change(table: pa.Table) -> pa.Table:
        i = table.column_names.index(column)
        return table.set_column(i, column, table.column(column).cast(type_))
    return change


def _schema(metadata: dict | None = None, **columns: pa.DataType) -> pa.Schema:
    fields = {"trial_id": pa.string(), "sweep": pa.string(), "pack_id": pa.string(),
              "status": pa.string(), "error": pa.string(), "wall_time_s": pa.float64(),
              "host": pa.string(), "node_id": pa.string(), "attempts": pa.int32(), **columns}
    return pa.schema(list(fields.items()), metadata=metadata or BY_SWEEPER)


def _footers(schemas: dict[str, pa.Schema]) -> dict[str, Footer]:
    return {path: Footer.of(schema) for path, schema in schemas.items()}


# ---------------------------------------------------------------- what counts as foreign

@pytest.mark.parametrize(("table", "schema", "why"), [
    ("trials", pa.schema([("a", pa.int64())]), "no column 'trial_id'"),
    ("trials", _schema(status=pa.int64()), "column 'status' holds int64, not text"),
    ("trials", _schema(learned=pa.string()), "column 'learned' holds string, not booleans"),
    ("trials", _schema(final_loss=pa.string()), "column 'final_loss' holds string"),
    ("trajectories", pa.schema([("trial_id", pa.string())]), "no column 'step'"),
    ("trajectories", pa.schema([("trial_id", pa.int64()), ("step", pa.int32())]),
     "column 'trial_id' holds int64, not text"),
    ("trajectories", pa.schema([("trial_id", pa.string()), ("step", pa.int32()),
                                ("accuracy", pa.string())]),
     "column 'accuracy' holds string, not numbers or lists of numbers"),
    ("trials", _schema({**BY_SWEEPER, b"sweeper.replaces": b"{x"}),
     "sweeper.replaces is not a JSON list"),
    ("trials", pa.schema([("trial_id", pa.string())] * 2), "no column 'sweep'"),
])
def test_a_file_without_a_required_column_or_of_another_kind_is_foreign(table, schema, why):
    problem = file_problem(schema, table)
    assert problem is not None and why in problem


def test_a_column_of_another_kind_than_the_sweeps_other_files_is_foreign():
    usual = {f"p{i}": _schema(**{"task.length": pa.int64()}) for i in range(3)}
    odd = _schema(**{"task.length": pa.string()})
    foreign = foreign_files(_footers({**usual, "odd": odd}), "trials")
    assert list(foreign) == ["odd"]
    assert "column 'task.length' holds string, where the sweep's other files hold numbers" \
        in foreign["odd"]


def test_files_sweeper_wrote_outvote_a_file_it_did_not_write():
    ours = _schema(**{"task.length": pa.int64()})
    theirs = _schema({b"pandas": b"{}"}, **{"task.length": pa.string()})
    assert list(foreign_files(_footers({"ours": ours, "theirs": theirs}), "trials")) == ["theirs"]


def test_older_and_newer_files_conform_and_read_as_one_schema():
    """No `shared_with` (before sharing), version 1's `optim.lr`, a metric added since, a column
    widened (int32 to int64, int to float) or all null: readable together."""
    schemas = {
        "old": _schema(**{"optim.lr": pa.float64(), "task.length": pa.int32()}),
        "new": _schema(shared_with=pa.string(), final_mass_onset=pa.float64(),
                       **{"train.lr": pa.float64(), "task.length": pa.int64()}),
        "wide": _schema(**{"train.lr": pa.float64(), "task.length": pa.float64()}),
        "nulls": _schema(**{"train.lr": pa.null(), "task.length": pa.null()}),
    }
    assert foreign_files(_footers(schemas), "trials") == {}
    merged = read_as(_footers(schemas).values())
    assert merged.field("task.length").type == pa.float64()
    assert {"optim.lr", "train.lr", "shared_with", "final_mass_onset"} <= set(merged.names)


# ---------------------------------------------------------------- the store

def test_recovery_moves_a_foreign_file_aside_and_keeps_every_stored_trial(results):
    store = Store.open(str(results))
    stored = store.stored_ids(SWEEP)
    stray = results / SWEEP / "trials" / "part-0000000000000000.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), stray)
    odd = parquet_files(results, SWEEP, "trials")[-1]
    _rewrite(odd, _retyped("task.cooccurrence", pa.string()))  # sweeper's metadata kept
    store = Store.open(str(results))
    assert store.stored_ids(SWEEP) == stored - set(pq.read_table(odd)["trial_id"].to_pylist())
    store.recover(SWEEP)
    quarantine = results / SWEEP / QUARANTINE
    assert (quarantine / "trials" / stray.name).exists()
    assert (quarantine / "trials" / odd.name).exists()
    assert (quarantine / "trajectories" / odd.name).exists()  # its pack goes with it
    assert not stray.exists() and not odd.exists()
    assert store.compact(SWEEP)[1] == len(stored) - 2


def test_compaction_keeps_a_column_that_only_later_files_have(results):
    """Files are read under the union of their schemas, not the first file's."""
    first = parquet_files(results, SWEEP, "trials")[0]
    _rewrite(first, lambda table: table.drop_columns(["final_loss"]))
    store = Store.open(str(results))
    store.compact(SWEEP)
    trials = store.read(SWEEP, "trials").to_pandas()
    assert trials["final_loss"].isna().sum() == 2 and trials["final_loss"].notna().sum() == 6


def test_analysis_skips_a_foreign_file_with_one_warning(results, capsys):
    victim = parquet_files(results, SWEEP, "trajectories")[0]
    _rewrite(victim, _retyped("step", pa.string()))
    loaded = analysis.load(results, SWEEP)
    assert len(loaded.trials) == 8  # a trajectories file counts when read
    assert set(loaded.trajectories["trial_id"]) == set(loaded.trials["trial_id"]) - set(
        pq.read_table(victim)["trial_id"].to_pylist())
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 1 and victim.name in warnings[0] and "'step'" in warnings[0]


def test_the_dashboard_skips_a_foreign_file_with_one_warning(results, capsys):
    from analysis.dashboard.data import SweepView

    trials = parquet_files(results, SWEEP, "trials")
    _rewrite(trials[0], _retyped("task.hardness", pa.string()))
    trajectories = parquet_files(results, SWEEP, "trajectories")[1]
    _rewrite(trajectories, lambda table: table.drop_columns(["trial_id"]))
    view = SweepView(pafs.LocalFileSystem(), str(results), SWEEP)
    assert trials[0].name not in view.committed() and len(view.committed()) == 3
    assert view.metrics()
    assert view.phase("task.cooccurrence", "task.hardness", None)["cells"]
    curves = sum(len(view.cell([{"column": "task.cooccurrence", "value": c},
                                {"column": "task.hardness", "value": h}])["curves"])
                 for c in (0.0, 0.5) for h in (0.0, 1.0))
    assert curves == 8 - 2 - 2  # neither the skipped trials nor the foreign file's curves
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 2 and all(w.startswith("warning: skipping damaged file")
                                      for w in warnings)


# ---------------------------------------------------------------- manifests and progress

NOT_OBJECTS = ["[1, 2]", '"x"', "null", "3", "{bad", "[" * 100_000]


@pytest.mark.parametrize("text", NOT_OBJECTS, ids=["list", "string", "null", "number",
                                                   "not-json", "deep"])
def test_readers_warn_of_a_manifest_that_is_not_an_object_and_read_the_results(results,
                                                                               tmp_path, text):
    (results / SWEEP / "manifest.json").write_text(text)
    folder = results / SWEEP
    commands = [["status", SWEEP, "--results", results], ["compact", SWEEP, "--results", results],
                ["query", folder, "--format", "csv"],
                ["phase", folder, "--x", "task.cooccurrence", "--y", "task.hardness",
                 "--facet", "none", "-o", tmp_path / "phase.png"],
                ["report", folder, "-o", tmp_path / "report.html"]]
    for argv in commands:
        reading._WARNED.clear()  # as in a process of its own: each command warns once
        rc, out, err = cli(argv)
        assert rc == 0, (argv[0], err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("warning: skipping damaged manifest"), \
            (argv[0], err)
    assert cli(["status", SWEEP, "--results", results])[1].startswith(f"{SWEEP}: 8 done")


def test_run_refuses_a_manifest_that_is_not_an_object_in_one_line_and_writes_nothing(
        results, tmp_path):
    folder = results / SWEEP
    (folder / "manifest.json").write_text("[1, 2]")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    path = write_sweep(tmp_path / "s.yaml", variant(TINY, name=SWEEP))
    plan = cli_subprocess(["plan", path, "--results", results, "--no-estimate"])
    run = cli_subprocess(["run", path, "--results", results, "--executor", "local"])
    for done in (plan, run):  # plan refuses what run refuses, in the same words
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "manifest.json: damaged (a JSON list)" in lines[0]
        assert f"move it aside (into {folder}/{QUARANTINE}/)" in lines[0]
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    assert (folder / "manifest.json").read_text() == "[1, 2]"


def test_status_reads_a_progress_file_that_is_not_an_object(results):
    (results / SWEEP / "manifest.json").write_text(json.dumps({"trials_expanded": 8}))
    (results / SWEEP / "progress.json").write_text('["running"]')
    rc, out, err = cli(["status", SWEEP, "--results", results, "--json"])
    assert rc == 0 and not err, err
    assert json.loads(out)["driver"] == "stored"


def test_a_foreign_file_in_a_memory_store_is_skipped_and_moved_aside():
    """Every backend: footers are read through pyarrow.fs."""
    store = Store.open("memory://foreign-check")
    sink = io.BytesIO()
    pq.write_table(pa.table({"trial_id": [1]}), sink)
    stray = store.path("m", "trials", "part-0123456789abcdef.parquet")
    store._put(stray, sink.getvalue())
    assert store.stored_ids("m") == set()
    assert store.recover("m") == [stray]

"""A store with damaged files: truncated, garbage or empty `part-*.parquet` files, and whole
Parquet files of a foreign schema (other columns, or the same columns with other types), are
skipped by every reader with a one-line warning, and `sweeper run` moves them aside and trains
their packs again, storing each trial once."""

from __future__ import annotations

import io

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sweep_helpers import (
    TINY,
    TINY_STEPS,
    cli_subprocess,
    mounted,
    parquet_files,
    unmount,
    write_sweep,
)

from sweeper.results import Store


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _other_types(data: bytes) -> bytes:
    """The same file (columns, metadata) with its trial ids stored as numbers."""
    table = pq.read_table(io.BytesIO(data))
    ids = pa.array(range(table.num_rows), pa.int64())
    return _parquet(table.set_column(table.column_names.index("trial_id"), "trial_id", ids))


DAMAGES = {
    "truncated": lambda data: data[: len(data) // 2],
    "garbage": lambda data: bytes(range(256)) * 4,
    "empty": lambda data: b"",
    "foreign columns": lambda data: _parquet(pa.table({"a": [1, 2], "b": ["x", "y"]})),
    "foreign types": _other_types,
}


@pytest.fixture(scope="module")
def sweep_results(tmp_path_factory):
    """A real (tiny) sweep on the local executor: 4 trials in 4 packs."""
    root = tmp_path_factory.mktemp("damaged")
    path = write_sweep(root / "tiny.yaml", {**TINY, "pack_size": 1})
    proc = cli_subprocess(["run", path, "--results", root / "results", "--executor", "local"])
    assert proc.returncode == 0, proc.stderr
    return root, path


def _copy(src, dst):
    dst.mkdir(parents=True)
    for f in src.rglob("*"):
        if f.is_file():
            target = dst / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.read_bytes())
    return dst


@pytest.mark.parametrize("table", ["trials", "trajectories"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_readers_skip_a_damaged_file_with_one_warning(sweep_results, tmp_path, table, damage):
    root, _ = sweep_results
    results = _copy(root / "results", tmp_path / "results")
    victim = parquet_files(results, "tiny", table)[0]
    victim.write_bytes(DAMAGES[damage](victim.read_bytes()))
    commands = [["status", "tiny"], ["query", results / "tiny", "--format", "csv"],
                ["query", results / "tiny", "--sql", "SELECT count(*) FROM trajectories"],
                ["query", results / "tiny", "--table", "trajectories", "--columns",
                 "step,accuracy", "--format", "csv"],
                ["phase", results / "tiny", "--x", "task.cooccurrence", "--y", "seed",
                 "--facet", "none", "-o", tmp_path / "phase.png"],
                ["report", results / "tiny", "-o", tmp_path / "report.html"]]
    for argv in commands:
        proc = cli_subprocess([*argv, "--results", results] if argv[0] == "status" else argv)
        assert proc.returncode == 0, f"{argv[0]}: {proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr
        warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
        if table == "trajectories" and argv[-1] == "csv" and "--table" not in argv:
            assert not warnings  # a query of trials reads no trajectories file
            continue
        assert len(warnings) == 1 and victim.name in warnings[0], (argv[0], proc.stderr)
    status = cli_subprocess(["status", "tiny", "--results", results])
    assert status.stdout.startswith("tiny: 3 done")  # the damaged pack counts as not stored


@pytest.mark.parametrize(("table", "damage"), [("trials", "truncated"),
                                               ("trajectories", "truncated"),
                                               ("trials", "foreign columns"),
                                               ("trajectories", "foreign types")])
def test_run_quarantines_a_damaged_file_and_trains_its_pack_again(sweep_results, tmp_path,
                                                                    table, damage):
    root, path = sweep_results
    results = _copy(root / "results", tmp_path / "results")
    victim = parquet_files(results, "tiny", table)[0]
    victim.write_bytes(DAMAGES[damage](victim.read_bytes()))
    proc = cli_subprocess(["run", path, "--results", results, "--executor", "local"])
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")
                and "cannot resolve a cell" not in ln]  # the seeds warning: TINY has 2
    assert len(warnings) == 1 and f"moved damaged {victim}" in warnings[0], proc.stderr
    assert (results / "tiny" / "quarantine" / table / victim.name).exists()
    trials = pd.read_parquet(results / "tiny" / "trials")
    assert len(trials) == 4 and trials["trial_id"].is_unique
    store = Store.open(str(results))
    assert len(store.stored_ids("tiny")) == 4
    assert sum(pq_rows(p) for p in parquet_files(results, "tiny", "trajectories")) == 4 * 3
    # the pack damaged again after it trained again (under its name): both copies are kept
    first = (results / "tiny" / "quarantine" / table / victim.name).read_bytes()
    assert victim.exists()  # trained again, stored under the same name
    victim.write_bytes(b"damaged again")
    proc = cli_subprocess(["run", path, "--results", results, "--executor", "local"])
    assert proc.returncode == 0, proc.stderr
    kept = sorted((results / "tiny" / "quarantine" / table).iterdir())
    assert [k.read_bytes() for k in kept] == [first, b"damaged again"], kept
    compact = cli_subprocess(["compact", "tiny", "--results", results])
    assert compact.returncode == 0 and "Traceback" not in compact.stderr


def pq_rows(path) -> int:
    return pq.read_metadata(path).num_rows


@pytest.fixture
def small_disk(tmp_path):
    """A 200 KiB tmpfs (root only: skipped where mounting is not allowed), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not mounted("-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)):
        pytest.skip("mounting a small tmpfs needs root")
    yield disk
    unmount(disk)


def test_a_full_disk_is_one_line_keeps_what_was_stored_and_the_same_command_resumes(
        small_disk, tmp_path):
    import shutil

    sweep = {**TINY, "seeds": 4, "pack_size": 1,
             "axes": {"task": {"cooccurrence": {"grid": [0.0, 0.25, 0.5, 0.75]}}}}
    path = write_sweep(tmp_path / "tiny.yaml", sweep)
    full = cli_subprocess(["run", path, "--results", small_disk / "r", "--executor", "local"])
    assert full.returncode == 1, full.stderr
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("sweeper run: error: could not write") and "No space left" in last
    assert "Traceback" not in full.stderr
    assert not [f for f in small_disk.rglob(".tmp-*")], "a failed write left its temp file"
    stored = parquet_files(small_disk / "r", "tiny", "trials")
    assert 0 < len(stored) < 16
    # the space comes back (here: the folder moves to a larger disk); the same command resumes
    results = shutil.copytree(small_disk / "r", tmp_path / "results")
    again = cli_subprocess(["run", path, "--results", results, "--executor", "local"])
    assert again.returncode == 0, again.stderr
    trials = pd.concat(pd.read_parquet(f) for f in parquet_files(results, "tiny", "trials"))
    assert len(trials) == 16 and trials["trial_id"].is_unique
    assert set(Store.open(str(results)).done_ids("tiny")) == set(trials["trial_id"])


@pytest.mark.parametrize("command", ["run", "compact"])
def test_two_folders_of_one_sweep_put_together_count_each_trial_once(tmp_path, command):
    """Each trial trained once in each folder, the files of one copied into the other: readers
    count each id once, and a run or compaction merges the files that hold ids twice into one
    pair keeping the first copy of each (the store's own rule), with its own trajectory."""
    import shutil

    from sweep_helpers import variant

    sweep = write_sweep(tmp_path / "s.yaml", variant(TINY, name="s"))
    for root, extra in (("a", []), ("b", ["--pack-size", "1"])):
        done = cli_subprocess(["run", sweep, "--results", tmp_path / root, "--executor",
                               "local", *extra])
        assert done.returncode == 0, done.stderr
    for table in ("trials", "trajectories"):
        for path in (tmp_path / "b" / "s" / table).glob("part-*.parquet"):
            shutil.copy(path, tmp_path / "a" / "s" / table)
    status = cli_subprocess(["status", sweep, "--results", tmp_path / "a", "--json"])
    assert status.returncode == 0 and '"done": 4' in status.stdout, status.stdout
    argv = ([command, sweep, "--results", tmp_path / "a"]
            + (["--executor", "local"] if command == "run" else []))
    done = cli_subprocess(argv)
    assert done.returncode == 0 and "4 trial ids stored twice" in done.stderr, done.stderr
    store = Store.open(str(tmp_path / "a"))
    trials = store.read("s", "trials").to_pandas()
    assert len(trials) == 4 and trials["trial_id"].is_unique
    steps = store.read("s", "trajectories").to_pandas().groupby("trial_id").size()
    assert (steps == len(TINY_STEPS)).all() and len(steps) == 4


def test_of_an_id_stored_twice_the_copy_kept_is_the_first_that_did_not_fail(tmp_path):
    """Two folders put together where one copy of a trial failed: the merge keeps the good
    one whatever the file names' order, and an id twice in one file is kept once."""
    import yaml
    from sweep_helpers import fake_results, variant

    from sweeper.plan import expand
    from sweeper.search_space import parse_sweep
    from sweeper.spec import TrialResult

    specs = expand(parse_sweep(yaml.safe_dump(variant(TINY, name="s"))))
    store = Store.open(str(tmp_path))
    good = fake_results(specs)
    store.write_pack("s", [TrialResult.failed(specs[0], "boom"), *good[1:2]])
    store.write_pack("s", good[:2])
    store.write_pack("s", good[2:])
    store.recover("s")
    trials = store.read("s", "trials").to_pandas().set_index("trial_id")
    assert trials.index.is_unique and len(trials) == len(specs)
    assert trials.loc[specs[0].trial_id, "status"] == "ok"

"""The Parquet store: typed round trips, metadata, whole files, recovery after a crash at any
point of a pack write or a compaction, compaction without loss or doubling, safe sweep names."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from sweep_helpers import TINY_STEPS, all_files, fake_result, fake_results, sweep_text, variant

from sweeper.plan import expand
from sweeper.results import TABLE_SCHEMA_VERSION as SCHEMA_VERSION
from sweeper.results import (
    ResultsInputError,
    Store,
    check_sweep_name,
    pack_id,
    trajectories_table,
    trials_table,
)
from sweeper.search_space import parse_sweep
from sweeper.spec import TrialResult

SWEEP = "tiny"


@pytest.fixture(scope="module")
def specs():
    """2 co-occurrences x 2 heads x 2 seeds = 8 specs."""
    return expand(parse_sweep(sweep_text(variant(**{"axes.model.heads": {"grid": [1, 2]}}))))


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "results"))


def _rows(table: pa.Table, keys=("trial_id",)) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(r[k] for k in keys))


def _snapshot(store: Store) -> tuple[list[dict], list[dict]]:
    return (_rows(store.read(SWEEP, "trials")),
            _rows(store.read(SWEEP, "trajectories"), ("trial_id", "step")))


def _write_in_packs(store: Store, specs, size: int = 2) -> list[str]:
    return [store.write_pack(SWEEP, fake_results(specs[i:i + size]))
            for i in range(0, len(specs), size)]


# -- round trip --------------------------------------------------------------------------------
def test_write_pack_and_read_back_typed_columns(store, specs):
    results = fake_results(specs[:4])
    pack = store.write_pack(SWEEP, results, attempts=1, node_id="node-1")
    assert pack == pack_id(r.trial_id for r in results)
    trials = store.read(SWEEP, "trials")
    types = dict(zip(trials.schema.names, trials.schema.types))
    expected = {"trial_id": pa.string(), "sweep": pa.string(), "status": pa.string(),
                "attempts": pa.int32(), "task.id": pa.string(), "task.length": pa.int64(),
                "task.cooccurrence": pa.float64(), "task.hardness": pa.float64(),
                "task.vocab": pa.int64(), "task.mapping": pa.string(),
                "task.repeat": pa.bool_(), "task.content_tokens": pa.int64(),
                "task.lift": pa.float64(), "model.id": pa.string(), "model.heads": pa.int64(),
                "model.width": pa.int64(), "train.optimizer": pa.string(),
                "train.lr": pa.float64(), "train.steps": pa.int64(), "seed": pa.int64(),
                "learned": pa.bool_(), "steps_to_learn": pa.int64(),
                "final_accuracy": pa.float64(), "best_loss": pa.float64(),
                "wall_time_s": pa.float64(), "node_id": pa.string()}
    for name, typ in expected.items():
        assert types[name] == typ, name
    by_id = {r["trial_id"]: r for r in trials.to_pylist()}
    assert set(by_id) == {r.trial_id for r in results}
    for r in results:
        row = by_id[r.trial_id]
        for key, value in r.spec.flat().items():
            assert row[key] == value, key
        assert row["status"] == "ok" and row["sweep"] == SWEEP and row["pack_id"] == pack
        assert row["node_id"] == "node-1" and row["host"] == "testhost"
        for key, value in r.outcomes.items():
            assert row[key] == value, key

    traj = store.read(SWEEP, "trajectories")
    assert traj.num_rows == len(results) * len(TINY_STEPS)
    assert traj.schema.field("step").type == pa.int32()
    assert traj.schema.field("loss").type == pa.float64()
    assert traj.schema.field("attn_acc_head").type == pa.list_(pa.float64())
    one = results[1]
    rows = _rows(store.read(SWEEP, "trajectories", filter=ds.field("trial_id") == one.trial_id),
                 ("step",))
    assert [r["step"] for r in rows] == list(TINY_STEPS)
    assert [r["loss"] for r in rows] == one.trajectory["loss"]
    assert [r["attn_acc_head"] for r in rows] == one.trajectory["attn_acc_head"]


def test_pandas_and_pyarrow_read_the_folders(store, specs):
    _write_in_packs(store, specs)
    root = store.root + "/" + SWEEP
    trials = pd.read_parquet(root + "/trials")
    assert len(trials) == len(specs) and trials["trial_id"].is_unique
    assert set(trials["model.heads"]) == {1, 2}
    traj = pq.read_table(root + "/trajectories")
    assert traj.num_rows == len(specs) * len(TINY_STEPS)


def test_failed_trial_is_stored_with_error_and_no_trajectory(store, specs):
    failed = TrialResult.failed(specs[0], "RuntimeError: boom")
    store.write_pack(SWEEP, [failed, fake_result(specs[1])], attempts=3)
    rows = {r["trial_id"]: r for r in store.read(SWEEP, "trials").to_pylist()}
    assert rows[specs[0].trial_id]["status"] == "failed"
    assert rows[specs[0].trial_id]["error"] == "RuntimeError: boom"
    assert rows[specs[0].trial_id]["attempts"] == 3
    assert rows[specs[0].trial_id]["final_accuracy"] is None
    traj = store.read(SWEEP, "trajectories")
    assert set(traj.column("trial_id").to_pylist()) == {specs[1].trial_id}
    assert store.status_counts(SWEEP) == {"failed": 1, "ok": 1}


def test_tables_are_built_in_a_stable_order(specs):
    results = fake_results(specs[:3])
    a = trajectories_table(results)
    b = trajectories_table(list(reversed(results)))
    assert a.equals(b)
    assert trials_table(results, SWEEP, "p").num_rows == 3


def test_every_file_carries_schema_version_and_provenance(store, specs):
    _write_in_packs(store, specs)
    store.compact(SWEEP)
    more = expand(parse_sweep(sweep_text(variant(seeds=[7]))))
    store.write_pack(SWEEP, fake_results(more))  # plain files beside the compacted pair
    files = [p for p in all_files(store.root) if p.suffix == ".parquet"]
    assert files
    for path in files:
        meta = pq.read_schema(path).metadata
        assert meta[b"sweeper.schema_version"] == str(SCHEMA_VERSION).encode()
        provenance = json.loads(meta[b"sweeper.provenance"])
        assert {"sweeper", "host", "written", "torch", "git_commit", "git_dirty"} <= set(
            provenance)


def test_files_are_written_whole_and_no_temporary_file_is_left(store, specs):
    _write_in_packs(store, specs)
    store.write_manifest(SWEEP, {"task": "copy-v1"})
    names = [p.relative_to(store.root).as_posix() for p in all_files(store.root)]
    assert not [n for n in names if ".tmp" in n]
    assert f"{SWEEP}/manifest.json" in names
    assert all(n == f"{SWEEP}/manifest.json" or n.endswith(".parquet") for n in names)
    assert len([n for n in names if "/trials/" in n]) == len(specs) // 2
    manifest = json.loads((Path(store.root) / SWEEP / "manifest.json").read_text())
    assert manifest["task"] == "copy-v1"


class _Killed(BaseException):
    """The process's end (SIGKILL): no `except` or cleanup of the store's runs."""


class _CrashBeforeRename(pafs.LocalFileSystem):
    """A disk on which the process dies between writing a temporary file and renaming it."""

    def move(self, src, dest):
        raise _Killed("killed before the rename")


class _RenameFails(pafs.LocalFileSystem):
    """A disk whose rename fails (a folder made read-only, a lost mount)."""

    def move(self, src, dest):
        raise OSError(30, "Read-only file system")


def test_a_crash_before_the_rename_leaves_no_half_file(store, specs):
    _write_in_packs(store, specs[:2])
    before = _snapshot(store)
    crashing = Store(_CrashBeforeRename(), store.root, store.uri)
    with pytest.raises(_Killed, match="killed before the rename"):
        crashing.write_pack(SWEEP, fake_results(specs[2:4]))
    leftovers = [p for p in all_files(store.root) if p.name.startswith(".tmp-")]
    assert leftovers, "the temporary file is what a crash leaves"
    assert _snapshot(store) == before  # readers never see it
    assert store.stored_ids(SWEEP) == {s.trial_id for s in specs[:2]}
    store.recover(SWEEP)
    assert not [p for p in all_files(store.root) if p.name.startswith(".tmp-")]
    assert _snapshot(store) == before


def test_a_failed_rename_is_a_write_error_that_leaves_no_temp_file(store, specs):
    from sweeper.results.errors import ResultsWriteError

    _write_in_packs(store, specs[:2])
    before = _snapshot(store)
    failing = Store(_RenameFails(), store.root, store.uri)
    with pytest.raises(ResultsWriteError, match="could not write .*Read-only file system"):
        failing.write_pack(SWEEP, fake_results(specs[2:4]))
    assert not [p for p in all_files(store.root) if p.name.startswith(".tmp-")]
    assert _snapshot(store) == before


def test_write_manifest_merges_and_keeps_created(store):
    store.write_manifest(SWEEP, {"a": 1})
    first = store.read_manifest(SWEEP)
    store.write_manifest(SWEEP, {"b": 2})
    second = store.read_manifest(SWEEP)
    assert second["a"] == 1 and second["b"] == 2 and second["sweep"] == SWEEP
    assert second["created"] == first["created"]
    assert second["schema_version"] == SCHEMA_VERSION
    assert Store.open(store.root).read_manifest("other") is None


# -- recovery ----------------------------------------------------------------------------------
def test_recover_removes_trajectories_orphaned_by_a_crash(store, specs):
    _write_in_packs(store, specs[:4])
    committed = _snapshot(store)
    # The crash: the next pack's trajectories file is written, its trials file never is.
    crashed = fake_results(specs[4:6])
    name = f"part-{pack_id(r.trial_id for r in crashed)}.parquet"
    store._put_table(store.path(SWEEP, "trajectories", name), trajectories_table(crashed))
    orphan = store.path(SWEEP, "trajectories", name)
    assert store.fs.get_file_info(orphan).type == pafs.FileType.File
    assert _snapshot(store) == committed  # the orphan does not count
    assert orphan not in store.files(SWEEP, "trajectories")

    removed = store.recover(SWEEP)
    assert any(name in r for r in removed)
    assert store.fs.get_file_info(orphan).type == pafs.FileType.NotFound
    assert _snapshot(store) == committed
    # The pack is then written again, once.
    store.write_pack(SWEEP, crashed)
    trials, traj = _snapshot(store)
    assert len(trials) == 6 == len({r["trial_id"] for r in trials})
    assert len(traj) == 6 * len(TINY_STEPS)


def test_recover_is_a_no_op_on_a_clean_or_missing_sweep(store, specs):
    assert store.recover("nothing-here") == []
    _write_in_packs(store, specs)
    before = _snapshot(store)
    assert store.recover(SWEEP) == []
    assert _snapshot(store) == before


def _interrupted_compaction(store: Store, delete_originals: int = 0) -> tuple[list[str], str]:
    """What compact() leaves when killed after writing the merged pair: the originals stay
    (all of them, or all but the first `delete_originals` trials files)."""
    originals = [p.rsplit("/", 1)[1] for p in store.files(SWEEP, "trials")]
    trials = store.read(SWEEP, "trials")
    traj = store.read(SWEEP, "trajectories")
    name = "part-compact-crashed0000.parquet"
    extra = {"replaces": json.dumps(originals)}
    store._put_table(store.path(SWEEP, "trajectories", name), traj, extra)
    store._put_table(store.path(SWEEP, "trials", name), trials, extra)
    for old in originals[:delete_originals]:
        store.fs.delete_file(store.path(SWEEP, "trials", old))
    return originals, name


class _Listed(set):
    """The names of a listing, iterated in a chosen order (a set's order depends on the hash
    seed of the process, so each order is tried on purpose)."""

    compact_first = True

    def __iter__(self):
        names = sorted(set.__iter__(self))
        return iter(sorted(names, key=lambda n: n.startswith("part-compact-")
                           != self.compact_first))


@pytest.fixture(params=["compact-file-listed-first", "compact-file-listed-last"])
def listing_order(request, monkeypatch):
    original = Store._names

    class Listed(_Listed):
        compact_first = request.param == "compact-file-listed-first"

    monkeypatch.setattr(Store, "_names", lambda self, sweep, table: Listed(
        original(self, sweep, table)))
    return request.param


@pytest.mark.parametrize("deleted", [0, 2], ids=["before-deleting", "while-deleting"])
def test_recover_finishes_an_interrupted_compaction(store, specs, deleted, listing_order):
    _write_in_packs(store, specs, size=1)
    before = _snapshot(store)
    originals, name = _interrupted_compaction(store, deleted)
    store.recover(SWEEP)
    trials_names = [p.rsplit("/", 1)[1] for p in store.files(SWEEP, "trials")]
    traj_names = [p.rsplit("/", 1)[1] for p in store.files(SWEEP, "trajectories")]
    assert trials_names == traj_names == [name]
    assert not set(originals) & {p.name for p in all_files(store.root)}
    assert _snapshot(store) == before  # nothing lost, nothing doubled


def test_readers_see_each_row_once_before_recover_runs(store, specs):
    """Between a crash in compact() and the next recover(), `sweeper status` and every
    Store.read must not count the merged rows twice."""
    _write_in_packs(store, specs)
    before = _snapshot(store)
    _interrupted_compaction(store)
    assert store.status_counts(SWEEP) == {"ok": len(specs)}
    assert _snapshot(store) == before


def test_a_compaction_killed_before_its_trials_file_loses_nothing(store, specs):
    _write_in_packs(store, specs)
    before = _snapshot(store)
    traj = store.read(SWEEP, "trajectories")
    store._put_table(store.path(SWEEP, "trajectories", "part-compact-half.parquet"), traj,
                     {"replaces": json.dumps(["x"])})
    assert _snapshot(store) == before
    store.recover(SWEEP)
    assert "part-compact-half.parquet" not in {p.name for p in all_files(store.root)}
    assert _snapshot(store) == before


# -- compaction --------------------------------------------------------------------------------
def test_compact_keeps_every_row_once(store, specs):
    _write_in_packs(store, specs, size=1)
    before = _snapshot(store)
    assert len(store.files(SWEEP, "trials")) == len(specs)
    files_before, rows = store.compact(SWEEP)
    assert (files_before, rows) == (len(specs), len(specs))
    assert len(store.files(SWEEP, "trials")) == 1 == len(store.files(SWEEP, "trajectories"))
    assert _snapshot(store) == before
    # A compacted sweep grows and compacts again; the compact file is itself replaced.
    more = expand(parse_sweep(sweep_text(variant(seeds=[7]))))
    store.write_pack(SWEEP, fake_results(more))
    assert store.compact(SWEEP) == (2, len(specs) + len(more))
    trials, traj = _snapshot(store)
    assert len(trials) == len({r["trial_id"] for r in trials}) == len(specs) + len(more)
    assert len(traj) == len(trials) * len(TINY_STEPS)
    assert len([p for p in all_files(store.root) if p.suffix == ".parquet"]) == 2


def test_compacted_trajectories_are_sorted_and_filterable(store, specs):
    _write_in_packs(store, specs, size=3)
    store.compact(SWEEP)
    path = store.files(SWEEP, "trajectories")[0]
    table = pq.read_table(path)
    keys = list(zip(table.column("trial_id").to_pylist(), table.column("step").to_pylist()))
    assert keys == sorted(keys)
    target = specs[3].trial_id
    one = store.read(SWEEP, "trajectories", filter=ds.field("trial_id") == target)
    assert set(one.column("trial_id").to_pylist()) == {target}
    assert one.num_rows == len(TINY_STEPS)


def test_compact_of_one_file_writes_nothing(store, specs):
    store.write_pack(SWEEP, fake_results(specs))
    before = all_files(store.root)
    assert store.compact(SWEEP) == (1, len(specs))
    assert all_files(store.root) == before


# -- names -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".", "", "/abs", "a\\b", "x" * 129,
                                  "-dash-first", ".hidden", "sp ace", "ümlaut", "a/../b",
                                  None, 7])
def test_check_sweep_name_rejects_escapes(name):
    with pytest.raises(ResultsInputError, match="allowed"):
        check_sweep_name(name)


@pytest.mark.parametrize("name", ["quick", "a.b-c_1", "Sweep2", "x" * 128, "2026-12-02"])
def test_check_sweep_name_accepts_plain_names(name):
    assert check_sweep_name(name) == name


def test_store_paths_never_leave_the_root(store):
    with pytest.raises(ResultsInputError):
        store.path("../outside", "trials")
    with pytest.raises(ResultsInputError):
        store.write_manifest("a/b", {})
    assert store.path("ok", "trials", "x") == store.root + "/ok/trials/x"

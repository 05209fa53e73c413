"""The store's contract (sweeper.results.store's docstring), run over every backend: a local
folder, an in-memory filesystem, and S3 (moto's server on loopback, started by this module).

A new backend is covered by adding it to BACKENDS."""

from __future__ import annotations

import json
import uuid

import pyarrow.parquet as pq
import pytest
from sweep_helpers import TINY_STEPS, S3Server, fake_results, sweep_text, variant

from sweeper.plan import expand
from sweeper.results import (
    TABLE_SCHEMA_VERSION,
    FileStore,
    MemoryStore,
    Store,
    committed_files,
    pack_id,
)
from sweeper.results.records import trajectories_table, trials_table
from sweeper.search_space import parse_sweep
from sweeper.spec import TrialResult

SWEEP = "contract"
BACKENDS = ("local", "memory", "s3")


@pytest.fixture(scope="module")
def s3_server():
    pytest.importorskip("moto")
    with S3Server() as server:
        server.client().create_bucket(Bucket="contract")
        yield server


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path, monkeypatch) -> Store:
    kind = request.param
    if kind == "local":
        return Store.open(str(tmp_path / "results"))
    if kind == "memory":
        return Store.open(f"memory://{uuid.uuid4().hex}")
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    server = request.getfixturevalue("s3_server")
    return Store.open(server.uri("contract", uuid.uuid4().hex[:8]))


@pytest.fixture(scope="module")
def specs():
    """2 co-occurrences x 2 heads x 2 seeds = 8 specs."""
    return expand(parse_sweep(sweep_text(variant(**{"axes.model.heads": {"grid": [1, 2]}}))))


def _in_packs(store: Store, specs, size: int = 2) -> list[str]:
    return [store.write_pack(SWEEP, fake_results(specs[i:i + size]))
            for i in range(0, len(specs), size)]


def _read(store: Store, table: str) -> list[dict]:
    data = store.read(SWEEP, table)
    return [] if data is None else sorted(data.to_pylist(), key=lambda r: (r["trial_id"],
                                                                          r.get("step", 0)))


def test_backends_are_one_class_each(store):
    assert type(store) in (FileStore, MemoryStore)
    assert isinstance(store, Store)


def test_a_pack_round_trips_with_its_typed_columns_and_trajectories(store, specs):
    packs = _in_packs(store, specs[:4])
    assert packs == [pack_id(s.trial_id for s in specs[i:i + 2]) for i in (0, 2)]
    trials = _read(store, "trials")
    assert {r["trial_id"] for r in trials} == {s.trial_id for s in specs[:4]}
    assert all(r["sweep"] == SWEEP and r["status"] == "ok" for r in trials)
    assert {r["train.lr"] for r in trials} == {1e-3}  # one name per setting
    assert len(_read(store, "trajectories")) == 4 * len(TINY_STEPS)
    assert store.stored_ids(SWEEP) == {s.trial_id for s in specs[:4]}
    assert store.status_counts(SWEEP) == {"ok": 4}
    assert store.sweeps() == [SWEEP]


def test_trajectories_count_only_once_their_trials_file_commits_them(store, specs):
    _in_packs(store, specs[:2])
    # a crash between the two writes of a pack: its trajectories file alone
    orphan = fake_results(specs[2:4])
    name = f"part-{pack_id(r.trial_id for r in orphan)}.parquet"
    from sweeper.results import trajectories_table

    store._put_table(store.path(SWEEP, "trajectories", name), trajectories_table(orphan))
    assert len(_read(store, "trajectories")) == 2 * len(TINY_STEPS)
    assert store.stored_ids(SWEEP) == {s.trial_id for s in specs[:2]}
    removed = store.recover(SWEEP)
    assert any(name in path for path in removed)


def test_compaction_keeps_every_row_once_and_a_crash_in_it_is_finished_by_recover(store, specs):
    _in_packs(store, specs)
    before = (_read(store, "trials"), _read(store, "trajectories"))
    assert store.compact(SWEEP) == (4, 8)
    assert (_read(store, "trials"), _read(store, "trajectories")) == before
    assert [p.rsplit("/", 1)[1][:13] for p in store.files(SWEEP, "trials")] == ["part-compact-"]
    # a crash after the compacted files are written, before the old ones are deleted:
    more = fake_results(specs[:2], offset=0.5)  # the replaced files reappear on disk
    pack = pack_id(r.trial_id for r in more)
    store._put_pair(SWEEP, f"part-{pack}.parquet", trajectories_table(more),
                    trials_table(more, SWEEP, pack, 1, None), None)
    compacted = store.files(SWEEP, "trials")[0]
    meta = pq.read_schema(compacted, filesystem=store.fs).metadata
    replaced = json.loads(meta[b"sweeper.replaces"])
    assert f"part-{pack_id(r.trial_id for r in more)}.parquet" in replaced
    assert len(_read(store, "trials")) == 8  # the replaced pack is not counted again
    store.recover(SWEEP)
    assert len(store.files(SWEEP, "trials")) == 1 and len(_read(store, "trials")) == 8


def test_a_failed_trial_is_stored_with_its_error_and_no_trajectory(store, specs):
    store.write_pack(SWEEP, [TrialResult.failed(specs[0], "RuntimeError: boom"),
                             *fake_results(specs[1:2])], attempts=3)
    rows = {r["trial_id"]: r for r in _read(store, "trials")}
    failed = rows[specs[0].trial_id]
    assert failed["status"] == "failed" and failed["attempts"] == 3
    assert failed["learned"] is None and failed["final_accuracy"] is None
    assert {r["trial_id"] for r in _read(store, "trajectories")} == {specs[1].trial_id}


def test_every_file_carries_the_table_version_and_provenance(store, specs):
    _in_packs(store, specs[:2])
    for table in ("trials", "trajectories"):
        [path] = store.files(SWEEP, table)
        meta = pq.read_schema(path, filesystem=store.fs).metadata
        assert meta[b"sweeper.schema_version"] == str(TABLE_SCHEMA_VERSION).encode()
        provenance = json.loads(meta[b"sweeper.provenance"])
        assert {"sweeper", "pyarrow", "host", "written", "git_commit", "git_dirty"} <= set(
            provenance)


def test_the_manifest_round_trips_and_keeps_its_creation_time(store):
    assert store.read_manifest(SWEEP) is None
    store.write_manifest(SWEEP, {"task": "copy-v1"})
    first = store.read_manifest(SWEEP)
    store.write_manifest(SWEEP, {"trials_expanded": 8})
    second = store.read_manifest(SWEEP)
    assert second["task"] == "copy-v1" and second["trials_expanded"] == 8
    assert second["created"] == first["created"] and "provenance" in second


def test_temporary_files_are_never_read_and_recover_removes_them(store, specs):
    _in_packs(store, specs[:2])
    store._put(store.path(SWEEP, "trials", ".tmp-half"), b"PAR1 half a file")
    assert store.stored_ids(SWEEP) == {s.trial_id for s in specs[:2]}
    assert any(".tmp-half" in p for p in store.recover(SWEEP))


def test_the_commit_rule_on_names_alone():
    names = {"trials": ["part-a.parquet", "part-b.parquet", "part-compact-x.parquet"],
             "trajectories": ["part-a.parquet", "part-b.parquet", "part-c.parquet",
                              "part-compact-x.parquet"]}
    chosen = committed_files(names, lambda name: ["part-a.parquet"])
    assert chosen == {"trials": ["part-b.parquet", "part-compact-x.parquet"],
                      "trajectories": ["part-b.parquet", "part-compact-x.parquet"]}


# -- merges beside a writer (Store.merge_tiers) --------------------------------------------------
def _on_disk(store: Store, table: str) -> set[str]:
    from sweeper.results.reading import part_files

    return set(part_files(store.fs, store.path(SWEEP, table)))


def test_merges_as_packs_land_keep_every_row_once_in_few_files(store, specs):
    written = []
    for spec in specs:  # eight packs of one, merged two at a time as they land
        written.append(store.write_pack(SWEEP, fake_results([spec])))
        store.merge_tiers(SWEEP, grace_s=3600, fanout=2)
    trials, trajectories = _read(store, "trials"), _read(store, "trajectories")
    assert sorted(r["trial_id"] for r in trials) == sorted(s.trial_id for s in specs)
    assert len(trajectories) == len(specs) * len(TINY_STEPS)
    assert {r["pack_id"] for r in trials} == set(written)  # rows keep the pack they came in
    committed = {p.rsplit("/", 1)[1] for p in store.files(SWEEP, "trials")}
    assert len(committed) <= 2 and all(n.startswith("part-compact-") for n in committed)
    # the merges' inputs stay for readers that listed them before (the grace period) ...
    kept = _on_disk(store, "trials") - committed
    assert kept and all(pq.read_metadata(store.path(SWEEP, "trials", n), filesystem=store.fs)
                        for n in kept)
    # ... and go once it is over, every row still there once
    store.delete_replaced(SWEEP, grace_s=0)
    assert _on_disk(store, "trials") == committed == _on_disk(store, "trajectories")
    assert (_read(store, "trials"), _read(store, "trajectories")) == (trials, trajectories)


def test_a_merge_keeps_the_failed_rows_a_retry_superseded_out(store, specs):
    failed = [TrialResult.failed(s, "RuntimeError: boom") for s in specs[:2]]
    first = store.write_pack(SWEEP, failed)
    store.write_pack(SWEEP, fake_results(specs[2:4]))
    store.compact(SWEEP)
    assert store.files(SWEEP, "trials")[0].rsplit("/", 1)[1].startswith("part-compact-")
    # the retry's pack has the failed pack's name, which the merged file replaces: it is
    # written under another, and counts
    retry = store.write_pack(SWEEP, fake_results(specs[:2]),
                             supersedes=[s.trial_id for s in specs[:2]])
    assert retry != first
    rows = _read(store, "trials")
    assert sorted(r["trial_id"] for r in rows) == sorted(s.trial_id for s in specs[:4])
    assert {r["status"] for r in rows} == {"ok"}
    store.write_pack(SWEEP, fake_results(specs[4:6]))
    store.merge_tiers(SWEEP, grace_s=0, fanout=2)  # the retry merged with another pack
    assert len(store.files(SWEEP, "trials")) == 2
    assert [r["status"] for r in _read(store, "trials")] == ["ok"] * 6


def test_merges_of_merges_never_count_a_row_twice_whichever_file_goes_first(store, specs):
    """A merged file names every file it replaces through the merges it merged, so deleting a
    middle merge before its inputs (a crash, recovery) counts none of them again."""
    for spec in specs:
        store.write_pack(SWEEP, fake_results([spec]))
        store.merge_tiers(SWEEP, grace_s=3600, fanout=2)  # every input kept on disk
    kept = _on_disk(store, "trials") - {p.rsplit("/", 1)[1] for p in store.files(SWEEP,
                                                                               "trials")}
    for name in sorted(kept):  # in name order: middle merges (part-compact-*) first
        for table in ("trials", "trajectories"):
            store.fs.delete_file(store.path(SWEEP, table, name))
        assert len(_read(store, "trials")) == len(specs)
    store.recover(SWEEP)
    assert store.compact(SWEEP)[1] == len(specs)


def test_a_failed_pack_retried_after_merges_counts_in_the_store_and_its_summary(store, specs):
    from sweeper.results.summary import SummaryWriter

    failed = store.write_pack(SWEEP, [TrialResult.failed(s, "boom") for s in specs[:2]])
    for i in range(2, 8, 2):
        store.write_pack(SWEEP, fake_results(specs[i:i + 2]))
        store.merge_tiers(SWEEP, grace_s=0, fanout=2)
    store.delete_replaced(SWEEP)
    SummaryWriter(store, SWEEP).write()  # the first run's summary
    writer = SummaryWriter(store, SWEEP, every_s=0)  # the next run retries the failed trials
    again = store.write_pack(SWEEP, fake_results(specs[:2]),
                             supersedes=[s.trial_id for s in specs[:2]])
    writer.add(again, fake_results(specs[:2]), supersedes=[s.trial_id for s in specs[:2]])
    writer.write()
    assert again != failed
    assert store.status_counts(SWEEP) == {"ok": 8}
    cells = writer.summary.cells
    assert (int(cells["ok"].sum()), int(cells["failed"].sum()), int(cells["n_trials"].sum())) \
        == (8, 0, 8)

"""Merging a sweep's files as it is written (`Store.merge_tiers`): which files merge, and the
readers that follow a merge without reading again what they had (the cell summary, the
dashboard's trials)."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import synthetic_stores as synthetic

from analysis.dashboard.data import SweepView
from sweeper.results import Store
from sweeper.results.store import size_class, tier_group, whole_groups
from sweeper.results.summary import CellSummary, current_summary, read_summary

LOCAL = pafs.LocalFileSystem()


def test_size_classes_are_powers_of_the_fanout():
    assert [size_class(r, 8) for r in (0, 1, 7, 8, 63, 64, 511, 512)] == [0, 0, 0, 1, 1, 2, 2, 3]


def test_a_tier_merges_once_it_holds_fanout_files_smallest_first():
    sizes = {f"p{i}": 10 for i in range(7)}
    assert tier_group(sizes, fanout=8, max_rows=10**6) is None  # seven: not yet
    sizes["p7"] = 12
    assert tier_group(sizes, fanout=8, max_rows=10**6) == [f"p{i}" for i in range(8)]
    sizes.update({"big": 600, "big2": 700})  # another class, of two: left alone
    assert set(tier_group(sizes, fanout=8, max_rows=10**6)) == {f"p{i}" for i in range(8)}


def test_no_merge_reads_more_than_its_row_bound():
    sizes = {f"p{i}": 300 for i in range(8)}
    group = tier_group(sizes, fanout=8, max_rows=1000)
    assert group is not None and sum(sizes[n] for n in group) <= 1000 and len(group) == 3
    assert tier_group({"a": 600, "b": 600}, fanout=2, max_rows=1000) is None  # whole files
    assert whole_groups({"a": 600, "b": 600, "c": 300}, max_rows=1000) == [["a"], ["b", "c"]]


def test_a_sweeps_driver_allocates_arrow_memory_from_the_system_pool(tmp_path):
    """Arrow's mimalloc pool keeps what a long-running writer frees (its resident memory grew
    with N); the driver's Recorder switches this process to the C library's pool for the run."""
    import io

    import pyarrow as pa

    from sweeper.recording import Progress, Recorder

    before = pa.default_memory_pool()
    try:
        recorder = Recorder(Store.open(str(tmp_path)), "s", Progress(None, stream=io.StringIO()))
        assert pa.default_memory_pool().backend_name == "system"
        recorder.close()  # the run's end: a notebook that ran a sweep reads as before
        assert pa.default_memory_pool().backend_name == before.backend_name
    finally:
        pa.set_memory_pool(before)


def test_a_merged_store_counts_as_the_same_store_in_packs(tmp_path):
    grid = dict(cooccurrence=(0.0, 0.5, 1.0), hardness=(0.0, 1.0), heads=(1, 2), seeds=3,
                pack_size=2)
    plain = synthetic.write_copy_sweep(tmp_path / "a", "s", **grid)
    merged = synthetic.write_copy_sweep(tmp_path / "b", "s", merge=True, **grid)
    store = Store.open(str(tmp_path / "b"))
    scan = store.scan("s")
    assert len(scan.files["trials"]) < len(list((plain / "trials").glob("part-*")))
    names = [p.rsplit("/", 1)[1] for p in scan.files["trials"]]
    # the writer's summary covers packs; every merged file holds some of them: no rebuild
    whole = read_summary(LOCAL, str(merged))
    same, changed = current_summary(LOCAL, str(merged), names, whole, packs=scan.packs)
    assert not changed and same.trials == read_summary(LOCAL, str(plain)).trials
    # a summary that lacks some packs of a merged file reads those packs' rows only
    some = sorted(whole.files)[: len(whole.files) // 2]
    reads: list[list[str]] = []

    def read_trials(files):
        reads.append(list(files))
        from sweeper.results.summary import read_trial_files

        return read_trial_files(LOCAL, str(merged), files)

    lagging = CellSummary.empty()
    lagging.add(read_trial_files_of(merged, names, set(some)), some)
    caught, changed = current_summary(LOCAL, str(merged), names, lagging, read_trials,
                                      packs=scan.packs)
    assert changed and caught.trials == whole.trials and caught.files == whole.files
    counts = ["n_trials", "ok", "failed"]
    key = [c for c in whole.cells.columns if c.startswith(("task.", "model.", "train."))]
    assert (caught.cells.sort_values(key)[counts].to_numpy()
            == whole.cells.sort_values(key)[counts].to_numpy()).all()


def read_trial_files_of(folder, names, packs):
    from sweeper.results.layout import part_name
    from sweeper.results.summary import read_trial_files

    rows = read_trial_files(LOCAL, str(folder), names)
    return rows[rows["pack_id"].map(part_name).isin(packs)]


def test_the_dashboard_follows_merges_without_reading_its_trials_again(tmp_path, monkeypatch):
    grid = dict(cooccurrence=(0.0, 1.0), hardness=(0.0,), heads=(1,), seeds=4, pack_size=1)
    folder = synthetic.write_copy_sweep(tmp_path, "s", **grid)
    view = SweepView(LOCAL, str(tmp_path), "s")
    before = view.trials()
    store = Store.open(str(tmp_path))
    assert store.merge_tiers("s", grace_s=0, fanout=2) > 0  # every file replaced
    import analysis.dashboard.data as data

    def no_reads(*args, **kwargs):
        raise AssertionError("read its trials again")

    monkeypatch.setattr(data, "read_trial_files", no_reads)
    assert len(view.trials()) == len(before) == 8
    view.refresh()
    assert view.summary.trials == 8 and (folder / "trials").exists()


def test_a_reader_that_listed_a_merges_inputs_before_they_went_lists_again(tmp_path,
                                                                          monkeypatch):
    import analysis
    import sweeper.results.store as store_module

    grid = dict(cooccurrence=(0.0, 1.0), hardness=(0.0,), heads=(1,), seeds=4, pack_size=1)
    listed = store_module.part_files
    readers = {"store": lambda root: Store.open(str(root)).read("s", "trials").num_rows,
               "load": lambda root: len(analysis.load(root, "s").trials)}
    for name, read in readers.items():
        root = tmp_path / name
        synthetic.write_copy_sweep(root, "s", **grid)
        writer = Store.open(str(root))

        def racing(fs, folder, writer=writer):  # the writer merges and deletes between a
            found = listed(fs, folder)  # listing and the reads that follow it
            if folder.endswith("/trials") and not racing.done:
                racing.done = True
                assert writer.merge_tiers("s", grace_s=0, fanout=2) > 0
                writer.delete_replaced("s")
            return found

        racing.done = False
        monkeypatch.setattr(store_module, "part_files", racing)
        assert read(root) == 8 and racing.done
        monkeypatch.setattr(store_module, "part_files", listed)
    root = tmp_path / "lazy"
    synthetic.write_copy_sweep(root, "s", **grid)
    res = analysis.load(root, "s")
    Store.open(str(root)).compact("s")  # the files load() listed are gone when read
    assert res.trajectories["trial_id"].nunique() == 8


def test_phase_reads_stored_outcomes_when_they_are_current_and_draws_the_same(tmp_path,
                                                                              monkeypatch):
    """Packs carry the stamp of the rules their outcomes were derived by: at the default
    thresholds phase reads them as stored (no trajectory read) and gets what recomputing
    gives; other thresholds recompute."""
    import analysis
    import analysis.phase as phase
    from sweeper.results import DEFAULT_THRESHOLDS, Thresholds

    synthetic.write_copy_sweep(tmp_path, "s", cooccurrence=(0.0, 0.5, 1.0), hardness=(0.0, 1.0),
                               heads=(1, 2), seeds=4, merge=True)
    results = analysis.load(tmp_path, "s")
    assert phase.stored_outcomes_current(results, DEFAULT_THRESHOLDS)
    assert not phase.stored_outcomes_current(results, Thresholds(accuracy=0.5))
    recomputed = phase.compute_phase(
        phase.with_outcomes(results.trials, phase.outcome_trajectories(results)),
        "task.cooccurrence", "task.hardness", "model.heads", outcome="attention_learned")

    def no_trajectories(*args, **kwargs):
        raise AssertionError("read trajectories")

    monkeypatch.setattr(phase, "outcome_trajectories", no_trajectories)
    stored = phase.phase_from_results(analysis.load(tmp_path, "s"), "task.cooccurrence",
                                      "task.hardness", "model.heads",
                                      outcome="attention_learned", bins=None)
    columns = ["p", "n", "state"]
    assert stored.cells[columns].equals(recomputed.cells[columns])


def _record_packs(store, packs: int, between=None):
    """A driver's Recorder storing `packs` packs of 16 fake trials (3 logged steps: 64 rows
    a pack, class 2) into sweep "s"; `between(recorder)` after each. Returns the recorder,
    closed, and the specs."""
    import io

    import yaml
    from sweep_helpers import TINY, fake_results, variant

    from sweeper.plan import expand
    from sweeper.recording import Progress, Recorder
    from sweeper.search_space import parse_sweep

    sweep = parse_sweep(yaml.safe_dump(variant(TINY, name="s", seeds=16 * packs // 2)))
    specs = expand(sweep)
    recorder = Recorder(store, "s", Progress(None, stream=io.StringIO()))
    for k in range(0, len(specs), 16):
        pack = specs[k:k + 16]
        recorder.finished(pack, fake_results(pack))
        if between is not None:
            between(recorder)
    recorder.close()
    return recorder, specs


def _assert_merged_once(store, specs):
    from sweeper.results.store import MERGE_FANOUT

    trials = store.read("s", "trials").column("trial_id").to_pylist()
    assert sorted(trials) == sorted(s.trial_id for s in specs)
    sizes = store._sizes("s", store.scan("s"))
    classes = [size_class(rows) for rows in sizes.values()]
    assert max(classes) >= 3, sizes  # packs (class 2) were merged, and merges merged
    assert all(classes.count(c) < MERGE_FANOUT for c in set(classes)), sizes


def _count_children(monkeypatch) -> list:
    """The merge children started from now on (their arguments, one entry each)."""
    from sweeper.results import merging

    started = []
    real_start = merging._start_child
    monkeypatch.setattr(merging, "_start_child",
                        lambda *a: started.append(a) or real_start(*a))
    return started


def test_a_drivers_merges_run_in_one_child_and_store_every_trial_once(tmp_path, monkeypatch):
    """Every merge of a sweep's driver is made by one long-lived child process
    (`sweeper.results.merging`): the driver's own `merge_tiers` is never called, the child is
    started once for the whole run, every trial is stored once and each size class is left
    with fewer than the fan-out of files."""

    def not_here(*args, **kwargs):
        raise AssertionError("the driver merged")

    monkeypatch.setattr(Store, "merge_tiers", not_here)
    started = _count_children(monkeypatch)
    store = Store.open(str(tmp_path))
    recorder, specs = _record_packs(store, 64)
    assert "warning" not in recorder.progress.stream.getvalue()
    assert recorder.merges.jobs >= 2 and len(started) == 1
    _assert_merged_once(store, specs)


def test_a_merge_child_that_dies_costs_at_most_a_warning_and_a_fresh_one_takes_the_next_job(
        tmp_path, monkeypatch):
    """A merge child killed mid-run (the OOM killer) costs at most one warning line (none when
    it had answered its job): the sweep goes on, the next job starts a fresh child, and the
    store ends merged with every trial once."""
    import signal


    started = _count_children(monkeypatch)
    store = Store.open(str(tmp_path))
    killed = []

    def kill_the_first_child(recorder):
        merges = recorder.merges
        if not killed and merges is not None and merges._in_flight:
            killed.append(merges._child.pid)
            os.kill(merges._child.pid, signal.SIGKILL)
            merges._child.wait()

    recorder, specs = _record_packs(store, 64, between=kill_the_first_child)
    said = recorder.progress.stream.getvalue()
    assert killed and len(started) == 2, (killed, started)
    assert said.count("warning") <= 1, said
    assert said.count("warning") == said.count("could not merge the sweep's files"), said
    _assert_merged_once(store, specs)


def test_a_merge_child_that_ends_after_its_jobs_is_replaced_without_a_warning(
        tmp_path, monkeypatch):
    """A child that ends itself (here after every job) says so in its last answer: the driver
    starts a fresh one for the next job, loses no merge and warns of nothing."""

    monkeypatch.setenv("SWEEPER_MERGE_JOBS_PER_CHILD", "1")
    started = _count_children(monkeypatch)
    store = Store.open(str(tmp_path))
    recorder, specs = _record_packs(store, 72)
    assert "warning" not in recorder.progress.stream.getvalue()
    assert len(started) == recorder.merges.jobs >= 3
    _assert_merged_once(store, specs)


def test_a_merge_child_ends_itself_after_its_jobs_and_answers_each(tmp_path, monkeypatch):
    """The child answers one line a request and ends after JOBS_PER_CHILD of them, so what
    its merges leave to the allocator goes back with it."""
    import io

    from sweeper.results import merging

    monkeypatch.setattr(merging, "JOBS_PER_CHILD", 2)
    monkeypatch.setattr(merging, "CHILD_RESIDENT_MB", float("inf"))  # this test's process
    answers = io.StringIO()
    requests = io.BytesIO(b"merge\n" * 5)
    assert merging.serve(str(tmp_path), "s", requests, answers) == 0
    assert answers.getvalue() == "done 0\ndone 0 last\n"  # "last": the driver starts another
    assert requests.read() == b"merge\n" * 3  # the rest is the next child's

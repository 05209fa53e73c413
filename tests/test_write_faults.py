"""A full disk and a read-only folder (issue 26): every command that writes (run's lease,
manifest, study and packs; compact; `phase -o`, `--cells`, `report -o`, `seeds -o`) fails in
one line, exit 1, leaving nothing half-written and no lease. On real disks where the container
allows mounting (a tmpfs filled to 0 bytes free, a read-only bind), in child processes for
`run`; and everywhere by injecting ENOSPC and EROFS at each write point. A disk that fills in
the middle of a run: tests/test_damaged_store.py."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import synthetic_stores as synthetic
from sweep_helpers import (
    TINY,
    all_files,
    cli,
    cli_subprocess,
    fake_results,
    fill,
    mounted,
    parquet_files,
    unmount,
    variant,
    write_sweep,
)

from sweeper.results import Store
from sweeper.results.errors import ResultsWriteError
from sweeper.results.files import write_whole_file
from sweeper.results.lease import LEASE, acquire

SWEEP = "copy"
NO_SPACE = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
READ_ONLY = OSError(errno.EROFS, os.strerror(errno.EROFS))


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A synthetic copy sweep of 4 packs (no training)."""
    root = tmp_path_factory.mktemp("faults")
    synthetic.write_four_pack_sweep(root, SWEEP)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file and folder under root, with the files' bytes."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"/"
            for p in sorted(root.rglob("*"))}


def assert_one_error_line(rc: int, err: str, command: str, cause: str) -> None:
    """One error line (after the lines a run says before a wait: a probe that trains)."""
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("estimate: timing")]
    assert rc == 1 and len(lines) == 1, (command, err)
    assert lines[0].startswith(f"sweeper {command}: error: could not write") and cause in lines[0]


def writing_commands(store: Path, out: Path, elsewhere: Path) -> dict[str, list]:
    """The commands that write, each writing under `out` (reading the sweep in `store`)."""
    folder = store / SWEEP
    axes = ["--x", "task.cooccurrence", "--y", "task.hardness", "--facet", "none"]
    return {"compact": ["compact", SWEEP, "--results", store],
            "phase": ["phase", folder, *axes, "-o", out / "phase.png"],
            "phase --cells": ["phase", folder, *axes, "-o", elsewhere / "phase.png",
                              "--cells", out / "cells.csv"],
            "report": ["report", folder, "-o", out / "new" / "report.html"],
            "seeds": ["seeds", folder, "-o", out / "seeds.png"]}


# ---------------------------------------------------------------- real disks

@pytest.fixture
def full_disk(tmp_path, stored):
    """A 1 MiB tmpfs holding a copy of the sweep, then filled: 0 bytes free."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not mounted("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)):
        pytest.skip("mounting a small tmpfs needs root")
    shutil.copytree(stored, disk / "results")
    fill(disk)
    yield disk
    unmount(disk)


@pytest.fixture
def read_only(tmp_path, stored):
    """A read-only bind of a folder holding a copy of the sweep."""
    source, view = tmp_path / "source", tmp_path / "view"
    shutil.copytree(stored, source / "results")
    view.mkdir()
    if not mounted("--bind", str(source), str(view)):
        pytest.skip("a read-only bind mount needs root")
    if not mounted("-o", "remount,bind,ro", str(view)):
        unmount(view)
        pytest.skip("a read-only bind mount needs root")
    yield view
    unmount(view)


def test_on_a_full_disk_every_command_that_writes_is_one_line_and_leaves_nothing(
        full_disk, tmp_path):
    before = snapshot(full_disk)
    sweep = write_sweep(tmp_path / "s.yaml", variant(TINY, name=SWEEP))
    for root in (full_disk / "results", full_disk / "new"):  # a stored sweep, a new root
        proc = cli_subprocess(["run", sweep, "--results", root, "--executor", "local"])
        assert_one_error_line(proc.returncode, proc.stderr, "run", "No space left on device")
        # refused before the lease is taken: the line names the full folder
        assert f"could not write in {full_disk}" in proc.stderr and snapshot(full_disk) == before
    commands = writing_commands(full_disk / "results", full_disk, tmp_path)
    for name, argv in commands.items():
        rc, _, err = cli(argv)
        assert_one_error_line(rc, err, name.split()[0], "No space left on device")
        assert snapshot(full_disk) == before, name


def test_in_a_read_only_folder_every_command_that_writes_is_one_line_and_reads_work(
        read_only, tmp_path):
    before = snapshot(read_only)
    sweep = write_sweep(tmp_path / "s.yaml", variant(TINY, name=SWEEP))
    proc = cli_subprocess(["run", sweep, "--results", read_only / "results", "--executor",
                           "local"])
    assert_one_error_line(proc.returncode, proc.stderr, "run", "Read-only file system")
    for name, argv in writing_commands(read_only / "results", read_only, tmp_path).items():
        rc, _, err = cli(argv)
        assert_one_error_line(rc, err, name.split()[0], "Read-only file system")
    rc, out, err = cli(["query", read_only / "results" / SWEEP, "--format", "csv"])
    assert rc == 0 and not err and len(out.splitlines()) == 1 + 8
    assert snapshot(read_only) == before


# ---------------------------------------------------------------- the lease

def _fail_on(monkeypatch, name: str, error: OSError, when=lambda *a: True) -> None:
    """Make `os.<name>` raise `error` (when `when(*args)`)."""
    real = getattr(os, name)

    def failing(*args, **kwargs):
        if when(*args):
            raise error
        return real(*args, **kwargs)
    monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize(("point", "error"), [("pwrite", NO_SPACE), ("ftruncate", NO_SPACE),
                                              ("open", READ_ONLY)])
def test_a_lease_that_cannot_be_written_is_one_line_and_leaves_no_file_or_folder(
        tmp_path, monkeypatch, point, error):
    store = Store.open(str(tmp_path / "new" / "results"))
    _fail_on(monkeypatch, point, error,
             when=lambda *a: point != "open" or str(a[0]).endswith(LEASE))
    with pytest.raises(ResultsWriteError, match=rf"could not write .*{LEASE} \({error.strerror}"):
        acquire(store, SWEEP)
    monkeypatch.undo()
    assert not (tmp_path / "new").exists()


def test_a_lease_that_cannot_be_written_keeps_a_stored_sweeps_folder(tmp_path, stored,
                                                                      monkeypatch):
    shutil.copytree(stored, tmp_path / "results")
    before = snapshot(tmp_path)
    _fail_on(monkeypatch, "pwrite", NO_SPACE)
    with pytest.raises(ResultsWriteError):
        acquire(Store.open(str(tmp_path / "results")), SWEEP)
    monkeypatch.undo()
    assert snapshot(tmp_path) == before


def test_a_start_that_stores_nothing_in_a_new_folder_leaves_no_lease(tmp_path):
    store = Store.open(str(tmp_path / "results"))
    with acquire(store, SWEEP):
        assert (tmp_path / "results" / SWEEP / LEASE).exists()
    assert not (tmp_path / "results").exists()
    with acquire(store, SWEEP):  # a run that wrote: the (empty) lease file stays, as ever
        store.write_manifest(SWEEP, {"trials_expanded": 0})
    assert (tmp_path / "results" / SWEEP / LEASE).read_bytes() == b""


def test_a_lease_file_deleted_after_it_was_opened_is_not_held(tmp_path, monkeypatch):
    """A driver that locks a file a failed start deleted lets it go and takes the path."""
    import json

    import sweeper.results.lease as lease

    store = Store.open(str(tmp_path / "results"))
    real_open, opened = lease._open_lease, []

    def open_then_lose(where: str):
        fd, created = real_open(where)
        opened.append(where)
        if len(opened) == 1:  # the first file opened is deleted before it is locked
            os.unlink(where)
        return fd, created
    monkeypatch.setattr(lease, "_open_lease", open_then_lose)
    with acquire(store, SWEEP) as held:
        assert len(opened) == 2  # opened again, by its path
        written = json.loads((tmp_path / "results" / SWEEP / LEASE).read_text())
        assert written["token"] == held.holder["token"]


def test_run_whose_first_write_fails_leaves_no_lease_and_no_folder(tmp_path, monkeypatch):
    def no_room(self, path, data):
        raise ResultsWriteError(f"could not write {path} (No space left on device)")
    monkeypatch.setattr(Store, "_put", no_room)
    sweep = write_sweep(tmp_path / "s.yaml", TINY)
    rc, _, err = cli(["run", sweep, "--results", tmp_path / "results", "--executor", "local"])
    assert_one_error_line(rc, err, "run", "manifest.json (No space left on device)")
    assert not (tmp_path / "results").exists()


def test_an_optuna_study_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path,
                                                                              monkeypatch):
    import optuna
    from sqlalchemy.exc import OperationalError

    def full(*args, **kwargs):
        raise OperationalError("CREATE TABLE", {}, Exception("database or disk is full"))
    monkeypatch.setattr(optuna.storages, "RDBStorage", full)
    search = {"type": "optuna", "trials": 2, "objective": "best_accuracy",
              "direction": "maximize"}
    sweep = write_sweep(tmp_path / "s.yaml", variant(TINY, search=search, axes={
        "task": {"cooccurrence": {"uniform": [0.0, 1.0]}}}))
    rc, _, err = cli(["run", sweep, "--results", tmp_path / "results", "--executor", "local"])
    assert_one_error_line(rc, err, "run", "optuna.db (database or disk is full)")
    assert not (tmp_path / "results").exists()


def test_run_in_a_folder_it_cannot_write_is_one_line_exit_1(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    sweep = write_sweep(tmp_path / "s.yaml", TINY)
    rc, _, err = cli(["run", sweep, "--results", tmp_path / "results", "--executor", "local"])
    assert_one_error_line(rc, err, "run", "Permission denied")
    assert not (tmp_path / "results").exists()


# ---------------------------------------------------------------- the store

class _FailingDisk(pafs.LocalFileSystem):
    """A local disk whose renames, deletes and new folders at paths containing `where` fail
    with `error` (a temporary file is written, as on a disk that fills at its rename)."""

    def __init__(self, where: str, error: OSError):
        super().__init__()
        self.where, self.error = where, error

    def move(self, src, dest):
        if self.where in dest:
            raise self.error
        return super().move(src, dest)

    def delete_file(self, path):
        if self.where in path:
            raise self.error
        return super().delete_file(path)

    def create_dir(self, path, recursive=True):
        if self.where in path:
            raise self.error
        return super().create_dir(path, recursive=recursive)


def _failing(store_root: Path, where: str, error: OSError) -> Store:
    return Store(_FailingDisk(where, error), str(store_root), str(store_root))


def test_a_pack_whose_trials_file_cannot_be_written_leaves_nothing(tmp_path, stored):
    from sweeper.spec import make_spec

    shutil.copytree(stored, tmp_path / "results")
    before = snapshot(tmp_path)
    spec = make_spec("copy-v1", "seq2seq", {"length": 4}, {"width": 8},
                     {"steps": 20, "eval_every": 10}, seed=0)
    store = _failing(tmp_path / "results", "/trials/part-", NO_SPACE)
    with pytest.raises(ResultsWriteError, match="No space left on device"):
        store.write_pack(SWEEP, fake_results([spec]))
    assert snapshot(tmp_path) == before  # its trajectories file went again, no temp file


def test_a_compaction_that_cannot_write_leaves_the_store_as_it_was(tmp_path, stored):
    shutil.copytree(stored, tmp_path / "results")
    before = snapshot(tmp_path)
    store = _failing(tmp_path / "results", "/trials/part-compact-", NO_SPACE)
    with pytest.raises(ResultsWriteError, match="No space left on device"):
        store.compact(SWEEP)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(("victim", "action"), [("orphan", "delete"), ("damaged", "move aside")])
def test_recovery_in_a_read_only_folder_is_one_line(tmp_path, stored, victim, action):
    shutil.copytree(stored, tmp_path / "results")
    trials = parquet_files(tmp_path / "results", SWEEP, "trials")[0]
    if victim == "orphan":  # a crash between a pack's two files
        trials.unlink()
    else:
        trials.write_bytes(b"not parquet")
    before = snapshot(tmp_path)
    store = _failing(tmp_path / "results", f"/{SWEEP}/", READ_ONLY)
    with pytest.raises(ResultsWriteError, match=f"could not {action} .*Read-only file system"):
        store.recover(SWEEP)
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- outputs

def test_an_output_that_cannot_be_written_leaves_no_file_and_an_older_one_as_it_was(
        tmp_path, monkeypatch):
    older = tmp_path / "report.html"
    older.write_text("the older report")
    _fail_on(monkeypatch, "replace", NO_SPACE)
    for path in (older, tmp_path / "new" / "deeper" / "phase.png"):
        with pytest.raises(ResultsWriteError, match=f"could not write {path} "
                                                    r"\(No space left on device\)"):
            write_whole_file(path, b"data")
    monkeypatch.undo()
    assert older.read_text() == "the older report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


@pytest.mark.parametrize("error", [NO_SPACE, READ_ONLY], ids=["full", "read-only"])
def test_analysis_outputs_that_cannot_be_written_are_one_line(tmp_path, stored, monkeypatch,
                                                              error):
    out = tmp_path / "out"
    commands = writing_commands(stored, out, tmp_path)
    del commands["compact"]
    _fail_on(monkeypatch, "replace", error, when=lambda src, dest: str(out) in str(dest))
    for name, argv in commands.items():
        rc, _, err = cli(argv)
        assert_one_error_line(rc, err, name.split()[0], error.strerror)
    assert not out.exists() and not [p for p in all_files(tmp_path) if ".tmp-" in p.name]

"""Tune's temporary state never outlives the driver that made it: a run removes the folders of
drivers that are gone (killed before their `finally` ran)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

ray_tune = pytest.importorskip("sweeper.executors.ray_tune")


def _folder(root, name: str, pid: int | None, age_s: float = 0.0) -> str:
    path = root / f"{ray_tune.TUNE_PREFIX}{name}"
    path.mkdir()
    (path / "tuner.pkl").write_bytes(b"state")
    if pid is not None:
        (path / "owner.pid").write_text(str(pid))
    if age_s:
        past = time.time() - age_s
        os.utime(path, (past, past))
    return str(path)


def test_the_folders_of_gone_drivers_are_removed_and_live_ones_kept(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    dead = _folder(tmp_path, "dead", dead_pid)
    live = _folder(tmp_path, "live", os.getpid())
    old_unowned = _folder(tmp_path, "old", None, age_s=2 * 86_400)
    new_unowned = _folder(tmp_path, "new", None)  # perhaps an older sweeper, still running
    other = tmp_path / "not-ours"
    other.mkdir()
    removed = ray_tune.remove_stale_tune_storage(str(tmp_path))
    assert sorted(removed) == sorted([dead, old_unowned])
    assert os.path.isdir(live) and os.path.isdir(new_unowned) and other.is_dir()

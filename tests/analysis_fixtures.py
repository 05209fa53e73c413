"""Helpers shared by the analysis tests: synthetic stores and a filesystem that counts reads.

Test modules import the fixtures from here (tests/conftest.py belongs to sweeper's tests).
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
import synthetic_stores as synthetic


def small_copy_sweep(root: Path, name: str = "copy", **kwargs) -> Path:
    """A copy-v1 sweep: 4 c x 3 h x 3 heads x 4 seeds = 144 trials, 21 logged steps."""
    kwargs.setdefault("failed", 0.03)
    kwargs.setdefault("diverged", 0.03)
    return synthetic.write_copy_sweep(root, name, **kwargs)


def small_topic_sweep(root: Path, name: str = "topic", **kwargs) -> Path:
    """A topic-v1 sweep: 4 rho x 4 m x 3 classifiers x 3 seeds = 144 trials."""
    return synthetic.write_topic_sweep(root, name, **kwargs)


_ONCE: dict[str, object] = {}


def _once(key: str, make):
    """Build a session fixture's value once, although each test module that imports the
    fixture gets its own definition of it (these are not conftest fixtures)."""
    if key not in _ONCE:
        _ONCE[key] = make()
    return _ONCE[key]


def _make_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    small_copy_sweep(root)
    small_topic_sweep(root)
    return root


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Path:
    """A results root with a copy sweep and a topic sweep. Tests must not change it."""
    return _once("store", lambda: _make_store(tmp_path_factory))


@pytest.fixture(scope="session")
def copy_report(store, tmp_path_factory):
    """The copy sweep's report, written once: (Report, path of the HTML file)."""
    from analysis.load import load
    from analysis.report import write_report

    def make():
        path = tmp_path_factory.mktemp("report") / "report.html"
        return write_report(load(store, "copy"), path), path
    return _once("copy_report", make)


class _CountingFile(io.RawIOBase):
    """A read-only file that adds the bytes it serves to a counter."""

    def __init__(self, inner, path: str, counts: Counter):
        self.inner, self.path, self.counts = inner, path, counts

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.inner.seek(offset, whence)

    def tell(self) -> int:
        return self.inner.tell()

    def readinto(self, buffer) -> int:
        data = self.inner.read(len(buffer))
        buffer[:len(data)] = data
        self.counts[self.path] += len(data)
        return len(data)

    def close(self) -> None:
        self.inner.close()
        super().close()

    def size(self) -> int:
        return self.inner.size()


class CountingHandler(pafs.FileSystemHandler):
    """Delegates to the local filesystem; records every file opened and the bytes read."""

    def __init__(self):
        self.local = pafs.LocalFileSystem()
        self.opened: Counter = Counter()
        self.bytes_read: Counter = Counter()

    def reset(self) -> None:
        self.opened.clear()
        self.bytes_read.clear()

    def _open(self, path: str):
        self.opened[path] += 1
        handle = open(path, "rb")  # noqa: SIM115 - closed by pyarrow through the wrapper
        return pa.PythonFile(_CountingFile(handle, path, self.bytes_read), mode="r")

    def open_input_file(self, path):
        return self._open(path)

    def open_input_stream(self, path):
        return self._open(path)

    def get_type_name(self):
        return "counting"

    def equals(self, other):
        return self is other

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def create_dir(self, path, recursive):
        raise NotImplementedError

    def delete_dir(self, path):
        raise NotImplementedError

    def delete_dir_contents(self, path, missing_dir_ok=False):
        raise NotImplementedError

    def delete_root_dir_contents(self):
        raise NotImplementedError

    def delete_file(self, path):
        raise NotImplementedError

    def move(self, src, dest):
        raise NotImplementedError

    def copy_file(self, src, dest):
        raise NotImplementedError

    def open_output_stream(self, path, metadata):
        raise NotImplementedError

    def open_append_stream(self, path, metadata):
        raise NotImplementedError


def counting_filesystem() -> tuple[pafs.PyFileSystem, CountingHandler]:
    handler = CountingHandler()
    return pafs.PyFileSystem(handler), handler


def trials_frame(cells: dict[tuple, tuple[int, int]], *, x: str = "task.cooccurrence",
                 y: str = "task.hardness", facet: str = "model.heads") -> pd.DataFrame:
    """Trials with exact counts: {(facet, x, y): (successes, seeds)} -> one row per seed."""
    rows = []
    for (f, xv, yv), (k, n) in cells.items():
        for seed in range(n):
            rows.append({"sweep": "s", "trial_id": f"{f}-{xv}-{yv}-{seed}", "status": "ok",
                         facet: f, x: xv, y: yv, "seed": seed, "learned": seed < k,
                         "steps_to_learn": 10 * (seed + 1) if seed < k else None,
                         "attention_onset": 5 * (seed + 1) if seed < k else None})
    frame = pd.DataFrame(rows)
    frame["steps_to_learn"] = frame["steps_to_learn"].astype("Int64")
    frame["attention_onset"] = frame["attention_onset"].astype("Int64")
    return frame


@contextlib.contextmanager
def serving_dashboard(root: Path, sweep: str | None):
    """A dashboard of `sweep` under `root` on a free loopback port, in a thread: yields its base
    URL and stops it on exit."""
    from analysis.dashboard.server import make_server

    httpd, _ = make_server(str(root), sweep, port=0)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()

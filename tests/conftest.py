"""Shared test set-up: one torch thread, so timings and float reductions do not depend on the
machine's core count; the native kernels built before the first test; a Ray temp dir of a
test's own."""

import atexit
import os
import shutil
import tempfile

import pytest
import torch

torch.set_num_threads(1)

# The estimate's probe cache (sweeper.estimate.probed_step_cost) of this test session only,
# inherited by the processes the tests start: nothing is written to the user's ~/.cache.
os.environ["SWEEPER_CACHE_DIR"] = tempfile.mkdtemp(prefix="sweeper_cache_")
atexit.register(shutil.rmtree, os.environ["SWEEPER_CACHE_DIR"], ignore_errors=True)


def pytest_sessionstart(session):
    """Build (or load) the native kernels once, before any test: a first build takes one to
    four minutes on a 2-core machine, and no test's wait for a child process should include it.
    Where they cannot be built this prints the one-line notice and the tests that need them
    skip (or fail under SWEEPER_REQUIRE_NATIVE=1)."""
    from sweeper.layers import native

    native.ops()


@pytest.fixture
def ray_tmpdir(monkeypatch):
    """A short temp dir of its own for any Ray this test starts, in this process or in a child
    (RAY_TMPDIR is inherited; socket paths must stay short)."""
    path = tempfile.mkdtemp(prefix="rst_", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", path)
    yield path
    shutil.rmtree(path, ignore_errors=True)

"""Shared test set-up: one torch thread, so timings and float reductions do not depend on the
machine's core count; a Ray temp dir of a test's own."""

import shutil
import tempfile

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def ray_tmpdir(monkeypatch):
    """A short temp dir of its own for any Ray this test starts, in this process or in a child
    (RAY_TMPDIR is inherited; socket paths must stay short)."""
    path = tempfile.mkdtemp(prefix="rst_", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", path)
    yield path
    shutil.rmtree(path, ignore_errors=True)

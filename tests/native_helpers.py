"""The native (C++) recurrence in tests: required where CI says so, else skipped if absent."""

from __future__ import annotations

import os

import pytest

from sweeper.layers import native


def require_native():
    """The compiled module; a skip where it cannot be built, a failure where it must be
    (SWEEPER_REQUIRE_NATIVE=1, as .ci/run sets: a broken build must not pass as a skip)."""
    ops = native.ops()
    if ops is None:
        if os.environ.get("SWEEPER_REQUIRE_NATIVE") == "1":
            pytest.fail("the native kernels did not build (SWEEPER_REQUIRE_NATIVE=1)")
        pytest.skip("the native kernels are not built here (no compiler?)")
    return ops

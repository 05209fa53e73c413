"""What made an artefact: package versions, host, time, and the code's git commit."""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import os
import socket
import subprocess
import sys

PACKAGES = ("sweeper", "torch", "ray", "pyarrow", "pandas", "numpy", "optuna")


def _version(package: str) -> str | None:
    module = sys.modules.get(package)  # what this process runs, if loaded (never imported here)
    if module is not None and getattr(module, "__version__", None):
        return str(module.__version__)
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def code_version() -> dict[str, object]:
    """The git commit of sweeper's source tree and whether it had uncommitted changes
    (None where sweeper is not run from a git checkout)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", here, *args], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": None, "git_dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}


@functools.cache
def _static() -> dict[str, object]:
    versions = {p: v for p in PACKAGES if (v := _version(p)) is not None}
    return {**versions, "python": sys.version.split()[0], "host": socket.gethostname(),
            **code_version()}


def provenance() -> dict[str, object]:
    """Versions, host, git commit and dirty flag, and the time of writing."""
    return {**_static(), "written": dt.datetime.now(dt.timezone.utc).isoformat()}

"""Writing local files whole, and the one line a write that fails is.

A command's outputs (a figure, a report, a table of cells, a stage-2 sweep file) go through
`write_whole_file`: a temporary name in the target's folder, then a rename, so that a full
disk or a read-only folder leaves neither a half file nor the temporary one (nor the folders
the write made), and the command ends in one line, exit status 1 (`ResultsWriteError`, as the
store's own writes: `Store._put`).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from sweeper.results.errors import ResultsWriteError
from sweeper.results.layout import TEMP_PREFIX


def could_not_write(path: str | os.PathLike, exc: BaseException, kept: str,
                    action: str = "write") -> ResultsWriteError:
    """The one line of a write (or a move, a delete) that failed: the file, the cause as the
    system names it ('No space left on device', 'Read-only file system'), what is kept and
    what to do (`kept`)."""
    why = getattr(exc, "strerror", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return ResultsWriteError(f"could not {action} {os.fspath(path)} ({why}); {kept}")


# what a command whose first write failed says, and what an output that could not be written
NOTHING_WRITTEN = "nothing was written: fix the cause and run the same command again"
LEFT_AS_IT_WAS = "it is left as it was: fix the cause and run the same command again"


def make_folders(folder: str | os.PathLike) -> list[str]:
    """Make a folder and its missing parents; returns those it made, outermost first (what
    `remove_folders` takes away again when the write they were made for fails)."""
    missing: list[str] = []
    probe = os.path.abspath(folder)
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    made: list[str] = []
    try:
        for path in reversed(missing):
            try:
                os.mkdir(path)
            except FileExistsError:
                if not os.path.isdir(path):
                    raise
                continue  # made by another process meanwhile: not this write's to remove
            made.append(path)
    except OSError:
        remove_folders(made)  # a folder that cannot be made leaves none of its parents
        raise
    return made


def remove_folders(made: list[str]) -> None:
    """Remove folders `make_folders` made, innermost first, where they are still empty."""
    for path in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def write_whole_file(path: str | os.PathLike, data: bytes) -> Path:
    """Write a local file whole (a temporary name in its folder, then a rename). A write that
    fails leaves nothing it made (the temporary file, new folders; an older file of that name
    stays as it was) and raises ResultsWriteError (one line)."""
    path = Path(path)
    made: list[str] = []
    tmp = path.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
    try:
        made = make_folders(path.parent)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        remove_folders(made)
        raise could_not_write(path, exc, LEFT_AS_IT_WAS) from exc
    return path

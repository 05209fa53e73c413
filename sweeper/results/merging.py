"""A sweep driver's merges, made by one long-lived child process beside the driver.

A driver merges its sweep's files as it writes them (`Store.merge_tiers`), so that the store is
read at the price of a compacted one while the sweep runs. Merging in the driver itself made
its resident memory grow with the sweep (each merge's working set, sorted Arrow tables of up
to MERGE_MAX_ROWS rows, left to the C allocator: docs/scaling.md measures it), so every merge
runs in a child, `python -m sweeper.results.merging URI SWEEP`, started once when the sweep
first has files to merge:

- after each stored pack the driver lists the folder (footers it has read are kept) and, when
  a size class is full and no job is in flight, writes one line to the child's stdin; the child
  merges until nothing is due and answers one line (`done N`, or `error WHY`);
- the driver never waits for a job, except at the run's end (`close`: it waits for the job in
  flight, asks for one last one if packs landed meanwhile, and ends the child), so the store
  is left merged and the next driver, once the lease is given back, merges no file this one
  is merging;
- the child ends itself after `JOBS_PER_CHILD` jobs or once its resident memory passes
  `CHILD_RESIDENT_MB`, and the driver starts a fresh one for the next job: what the large
  merges leave to the allocator goes back to the system with the process. Its start (~1 s of
  a core) is paid once per run, or per that many jobs, not per job;
- it dies with the driver (PR_SET_PDEATHSIG), so no merge outlives the lease it was made
  under; a merge killed halfway leaves only a temporary file, which recovery removes. It runs
  in a session of its own: a signal to the driver's process group is the driver's to act on.

A store only this process reaches (memory://) is merged here, after each pack.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from typing import BinaryIO, TextIO

from sweeper.results.errors import ResultsWriteError
from sweeper.results.store import Store

# a child ends after this many jobs (a fresh one takes the next); the environment may say fewer
JOBS_PER_CHILD = max(1, int(os.environ.get("SWEEPER_MERGE_JOBS_PER_CHILD", "256") or 256))
CHILD_RESIDENT_MB = 400  # ... or once its resident memory is past this, after a job
ANSWER_TIMEOUT_S = 600.0  # a job bounded in rows takes seconds: past this the child is hung


class DriverMerges:
    """The merges of one sweep by its driver (`Recorder`): `after_pack` after each stored pack,
    `close` at the run's end.

    The child is a process of its own (not multiprocessing's spawn, which imports the caller's
    main script again: a notebook's or a script's `sweeper.run(...)` would run twice)."""

    def __init__(self, store: Store, sweep: str):
        self.store, self.sweep = store, sweep
        self._child: subprocess.Popen | None = None
        self._in_flight = False
        self._answer = b""
        self.jobs = 0  # jobs asked of children in this run (tests and benchmarks read it)

    def after_pack(self) -> None:
        """Ask the child to merge when a size class is full and no job is in flight. Raises
        what a merge raised (the caller warns once: upkeep never ends a sweep)."""
        if self.store.in_process:
            self.store.merge_tiers(self.sweep)
            return
        if self._in_flight and not self._answered(wait=False):
            return
        if self.store.merge_due(self.sweep):
            self._ask()

    def close(self, quietly: bool = False) -> None:
        """The run's end: wait for the job in flight, ask for a last one when something is due
        (packs that landed while it ran), and end the child. A merge that failed is raised
        (the caller warns), unless `quietly` (a run ending on an error: no last job)."""
        try:
            if self._in_flight:
                self._answered(wait=True)
            last = not quietly and not self.store.in_process  # even with no child now (one
            if last and self.store.merge_due(self.sweep):  # that ended after its jobs): the
                self._ask()  # store is left merged
                self._answered(wait=True)
        except Exception:  # noqa: BLE001 - the run's own error is the one to show
            if not quietly:
                raise
        finally:
            self._end_child()

    def _ask(self) -> None:
        if self._child is None or self._child.poll() is not None:
            self._end_child()
            self._child = _start_child(self.store.uri, self.sweep)
        try:
            self._child.stdin.write(b"merge\n")
            self._child.stdin.flush()
        except OSError as exc:  # it died before reading: its stderr says why
            self._failed(f"could not reach it ({exc})")
        self._in_flight = True
        self.jobs += 1

    def _answered(self, wait: bool) -> bool:
        """Whether the job in flight is answered (`wait`: block until it is); a failed job is
        raised here."""
        out = self._child.stdout.fileno()
        while b"\n" not in self._answer:
            if not select.select([out], [], [], ANSWER_TIMEOUT_S if wait else 0)[0]:
                if wait:
                    self._failed(f"no answer in {ANSWER_TIMEOUT_S:g} s")
                return False
            chunk = os.read(out, 4096)
            if not chunk:
                self._failed("it ended without answering")
            self._answer += chunk
        line, self._answer = self._answer.split(b"\n", 1)
        self._in_flight = False
        answer = line.decode(errors="replace")
        if answer.endswith(" last"):  # it ends after this answer: the next job starts another
            self._end_child()
        if not answer.startswith("done"):
            why = answer.removeprefix("error ").removesuffix(" last")
            raise ResultsWriteError(f"a merge in the child process failed ({why[:300]})")
        return True

    def _failed(self, how: str) -> None:
        """The child is gone (or hung) mid-job: its exit status and last stderr line say why."""
        self._in_flight, self._answer = False, b""
        child, self._child = self._child, None
        child.kill()
        status = child.wait()
        child.stderr.seek(0)
        err = child.stderr.read().decode(errors="replace").strip().splitlines()[-1:]
        for stream in (child.stdin, child.stdout, child.stderr):
            try:
                stream.close()
            except OSError:  # a pipe to a dead process
                pass
        last = f"; its last line: {err[0][:300]}" if err else ""
        raise ResultsWriteError(f"the merge child process failed ({how}, exit status "
                                f"{status}{last})")

    def _end_child(self) -> None:
        """Close its stdin (it ends after the job it is on) and wait for it."""
        child, self._child = self._child, None
        self._in_flight, self._answer = False, b""
        if child is None:
            return
        try:
            child.stdin.close()
        except OSError:
            pass
        try:
            child.wait(timeout=600)
        except subprocess.TimeoutExpired:  # a merge is bounded: this is a hung child
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()


def _start_child(uri: str, sweep: str) -> subprocess.Popen:
    """Its stderr goes to a temporary file (a pipe nobody reads while it runs could fill and
    stop it); `child.stderr` is that file."""
    import tempfile

    errors = tempfile.TemporaryFile()
    child = subprocess.Popen(
        [sys.executable, "-m", "sweeper.results.merging", uri, sweep],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
        env={**_child_environment(), PARENT_VARIABLE: str(os.getpid())},
        start_new_session=True)  # a signal to the driver's group (Ctrl-C, scancel) is the
    # driver's to act on: it stops the sweep and ends the child itself
    child.stderr = errors
    return child


PARENT_VARIABLE = "SWEEPER_MERGE_PARENT"  # the driver's pid, in the child's environment


def _die_with_parent() -> None:
    """In the child, first: the kernel kills it if the driver dies (SIGKILL, the OOM killer),
    so no merge outlives the lease it was made under; a driver already gone ends it here."""
    import ctypes
    import signal

    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    parent = os.environ.get(PARENT_VARIABLE)
    if parent and os.getppid() != int(parent):
        sys.exit(0)


def _child_environment() -> dict[str, str]:
    """The driver's environment, with the folder sweeper is imported from first on the path
    (a checkout run without installing it)."""
    env = dict(os.environ)  # sweeper/results/merging.py: three folders below the root
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def _resident_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def serve(uri: str, sweep: str, requests: BinaryIO, answers: TextIO) -> int:
    """In the child: one `merge_tiers` a request line, one answer line each, until stdin
    closes, `JOBS_PER_CHILD` jobs are done or the process is past `CHILD_RESIDENT_MB`."""
    from sweeper.results.store import use_system_allocator

    use_system_allocator()
    store = Store.open(uri)
    for jobs, _ in enumerate(requests, start=1):
        try:
            answer = f"done {store.merge_tiers(sweep)}"
        except Exception as exc:  # noqa: BLE001 - said to the driver, which warns
            answer = f"error {' '.join(str(exc).split()) or type(exc).__name__}"
        last = jobs >= JOBS_PER_CHILD or _resident_mb() > CHILD_RESIDENT_MB
        answers.write(answer + (" last\n" if last else "\n"))  # "last": it ends now, and
        answers.flush()  # the driver starts a fresh child for the next job
        if last:
            break
    return 0


def main(argv: list[str]) -> int:
    """`python -m sweeper.results.merging URI SWEEP` (the driver's child, in a session of its
    own). It leaves Ctrl-C to the driver (which stops the sweep and ends it); a SIGTERM ends it
    where it is, which a merge survives (the commit rule)."""
    import signal

    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    uri, sweep = argv
    answers = os.fdopen(os.dup(1), "w")  # the answers' own descriptor: anything else that
    os.dup2(2, 1)  # writes to stdout (a library's print) goes to stderr, not into them
    return serve(uri, sweep, sys.stdin.buffer, answers)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

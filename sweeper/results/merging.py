"""A sweep driver's merges: the small ones in the driver after each pack, the large ones in a
short-lived child process.

A driver merges its sweep's files as it writes them (`Store.merge_tiers`), so that the store is
read at the price of a compacted one while the sweep runs. The large merges (size classes from
`CHILD_CLASS` on: up to MERGE_MAX_ROWS rows read, sorted and written at once) run in a child
process that ends when they are made: the driver neither waits for them nor holds their
working set, and what they leave to the C allocator goes back with the child. The small ones
(packs merged 8 by 8, then those by 8: the classes below it) stay in the driver, where a child's
start (~1 s) would cost more than they do. (What this does and does not change in the driver's
resident memory over a long sweep: docs/scaling.md.)

The two sides merge disjoint size classes (`Store.merge_tiers(classes=...)`): a merge's output
has a higher class than its inputs, so no file is ever merged by both. The child runs beside
the driver without it waiting (one merge job at a time; a pack that lands while one runs asks
again after the next pack), under the store's own commit rule, as any merge does beside
readers and a writer. A store only this process reaches (memory://) merges everything here.
"""

from __future__ import annotations

import os
import subprocess
import sys

from sweeper.results.errors import ResultsWriteError
from sweeper.results.store import MERGE_FANOUT, MERGE_MAX_ROWS, Store, tier_group

CHILD_CLASS = 5  # files of >= 8**5 = 32,768 rows (trials + trajectories) merge in the child
ALL_CLASSES = range(0, 64)


class DriverMerges:
    """The merges of one sweep by its driver (`Recorder`): `after_pack` after each stored pack,
    `close` at the run's end (it waits for the child's merge in flight).

    The child is `python -m sweeper.results.merging URI SWEEP CLASS`, a process of its own
    (not multiprocessing's spawn, which imports the caller's main script again: a notebook's
    or a script's `sweeper.run(...)` would run twice)."""

    def __init__(self, store: Store, sweep: str, child_class: int = CHILD_CLASS):
        self.store, self.sweep = store, sweep
        self.here = ALL_CLASSES if store.in_process else range(0, child_class)
        self.there = None if store.in_process else range(child_class, ALL_CLASSES.stop)
        self._child: subprocess.Popen | None = None

    def after_pack(self) -> None:
        """Merge what is small here; start a child for what is large, unless one runs. Raises
        what a merge raised (the caller warns once: upkeep never ends a sweep)."""
        self.store.merge_tiers(self.sweep, classes=self.here)
        if self.there is None or not self._finished():
            return
        sizes = self.store._sizes(self.sweep, self.store.scan(self.sweep))
        if tier_group(sizes, MERGE_FANOUT, MERGE_MAX_ROWS, self.there) is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "sweeper.results.merging", self.store.uri, self.sweep,
                 str(self.there.start)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True, env=_child_environment(),
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def _finished(self, wait: bool = False) -> bool:
        """Whether no child's merge is in flight; a finished one's failure is raised here."""
        if self._child is None:
            return True
        if not wait and self._child.poll() is None:
            return False
        child, self._child = self._child, None
        _, err = child.communicate()
        if child.returncode != 0:
            last = (err or "").strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
            raise ResultsWriteError(f"a merge in a child process failed ({last[0][:300]})")
        return True

    def close(self, quietly: bool = False) -> None:
        """Wait for the child's merge in flight (the run's end reads the store, and the next
        driver may merge the same files once the lease is given back); a merge that failed
        is raised (the caller warns), unless `quietly` (a run ending on an error)."""
        try:
            self._finished(wait=True)
        except Exception:  # noqa: BLE001 - the run's own error is the one to show
            if not quietly:
                raise


def _die_with_parent() -> None:
    """In the child, before it runs: the kernel kills it if the driver dies (SIGKILL, the
    OOM killer), so no merge outlives the lease it was made under (a killed merge leaves
    only a temporary file, which the next run's recovery removes)."""
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_environment() -> dict[str, str]:
    """The driver's environment, with the folder sweeper is imported from first on the path
    (a checkout run without installing it)."""
    env = dict(os.environ)  # sweeper/results/merging.py: three folders below the root
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def merge_large(uri: str, sweep: str, from_class: int) -> int:
    """In the child: the merges of size classes from `from_class` on (returns how many)."""
    from sweeper.results.store import use_system_allocator

    use_system_allocator()
    return Store.open(uri).merge_tiers(sweep, classes=range(from_class, ALL_CLASSES.stop))


def main(argv: list[str]) -> int:
    """`python -m sweeper.results.merging URI SWEEP CLASS` (the driver's child). It leaves
    Ctrl-C to the driver (which stops the sweep and waits for it); a SIGTERM ends it where it
    is, which a merge survives (the commit rule)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    uri, sweep, from_class = argv
    merge_large(uri, sweep, int(from_class))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

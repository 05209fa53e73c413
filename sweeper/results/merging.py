"""A sweep driver's merges: the small ones in the driver after each pack, the large ones in a
short-lived child process.

A driver merges its sweep's files as it writes them (`Store.merge_tiers`), so that the store is
read at the price of a compacted one while the sweep runs. Measured on a real tiny sweep of
30,000 trials on embedded Ray (docs/scaling.md): with merges in the driver its resident memory
grew ~3.5 KB a stored trial (516 MB at 9,400 trials, 579 at 27,000); with merges off it stayed
flat (487 at 10,900, 497 at 24,800). What grows is memory the merges' reads, sorts and writes
leave to the C allocator (glibc's mmap threshold fixed at 128 kB, or two arenas, did not
change the slope). So the large merges, size classes from `CHILD_CLASS` on, run in a child
process that ends after `CHILD_MERGES` of them and gives its memory back with it; the small
ones (packs merged 8 by 8, then those by 8: the classes below it) stay in the driver, where a
child's start (~1 s) would cost more than they do.

The two sides merge disjoint size classes (`Store.merge_tiers(classes=...)`): a merge's output
has a higher class than its inputs, so no file is ever merged by both. The child runs beside
the driver without it waiting (one merge job at a time; a pack that lands while one runs asks
again after the next pack), under the store's own commit rule, as any merge does beside
readers and a writer. A store only this process reaches (memory://) merges everything here.
"""

from __future__ import annotations

import multiprocessing
import signal
from concurrent.futures import Future, ProcessPoolExecutor

from sweeper.results.store import MERGE_FANOUT, MERGE_MAX_ROWS, Store, tier_group

CHILD_CLASS = 5  # files of >= 8**5 = 32,768 rows (trials + trajectories) merge in the child
CHILD_MERGES = 8  # merge jobs a child makes before it exits (and returns its memory)
ALL_CLASSES = range(0, 64)


class DriverMerges:
    """The merges of one sweep by its driver (`Recorder`): `after_pack` after each stored pack,
    `close` at the run's end (it waits for the child's merge in flight)."""

    def __init__(self, store: Store, sweep: str, child_class: int = CHILD_CLASS):
        self.store, self.sweep = store, sweep
        self.here = ALL_CLASSES if store.in_process else range(0, child_class)
        self.there = None if store.in_process else range(child_class, ALL_CLASSES.stop)
        self._pool: ProcessPoolExecutor | None = None
        self._job: Future | None = None

    def after_pack(self) -> None:
        """Merge what is small here; start a child for what is large, unless one runs. Raises
        what a merge raised (the caller warns once: upkeep never ends a sweep)."""
        self.store.merge_tiers(self.sweep, classes=self.here)
        if self.there is None or not self._finished():
            return
        sizes = self.store._sizes(self.sweep, self.store.scan(self.sweep))
        if tier_group(sizes, MERGE_FANOUT, MERGE_MAX_ROWS, self.there) is not None:
            self._job = self._children().submit(merge_large, self.store.uri, self.sweep,
                                                self.there.start)

    def _finished(self) -> bool:
        """Whether no child's merge is in flight; a finished one's failure is raised here."""
        if self._job is None:
            return True
        if not self._job.done():
            return False
        job, self._job = self._job, None
        job.result()
        return True

    def _children(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                max_tasks_per_child=CHILD_MERGES, initializer=_ignore_interrupts)
        return self._pool

    def close(self) -> None:
        """Wait for the child's merge in flight (the run's end reads the store) and stop the
        child; a merge that failed is raised (the caller warns)."""
        try:
            if self._job is not None:
                self._job.result()
        finally:
            self._job = None
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


def merge_large(uri: str, sweep: str, from_class: int) -> int:
    """In the child: the merges of size classes from `from_class` on (returns how many)."""
    from sweeper.results.store import use_system_allocator

    use_system_allocator()
    return Store.open(uri).merge_tiers(sweep, classes=range(from_class, ALL_CLASSES.stop))


def _ignore_interrupts() -> None:
    """A child leaves Ctrl-C to the driver (which stops the sweep and closes the pool); a
    SIGTERM ends it where it is, which a merge survives (the commit rule)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

"""Interrupts that say so: SIGINT and SIGTERM stop a sweep cleanly, a second one abandons it.

The first signal asks the run to stop: its strategy proposes nothing more (`Stoppable`), the
packs already training finish and are stored, and the command ends with
`interrupted: N trials pending; run the same command to resume` and status 130 (SIGINT) or
143 (SIGTERM). A second signal raises `Interrupted` at once: running packs are abandoned
(nothing half-stored: a pack is committed whole or not at all) and the status is the same. A
driver waiting for another driver's lease leaves on the first signal (`Interrupted`, nothing
written): it has nothing running to finish. The same holds on every executor (the Ray executor
puts these handlers back after Ray has started, `sweeper.executors.ray_tune`).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


def exit_status_of(signum: int | None) -> int:
    """What a command stopped by `signum` exits with (128 + the signal's number)."""
    return EXIT_STATUS.get(signum, 130)


class Interrupted(KeyboardInterrupt):
    """A signal ended the command before the run could stop cleanly; `str()` says what was
    left, `exit_status` is the signal's (what the command line exits with)."""

    def __init__(self, signum: int | None, why: str):
        super().__init__(why)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return exit_status_of(self.signum)


@dataclass
class StopRequest:
    """Set by the first signal; read by the run's strategy wrapper and the command."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    @property
    def exit_status(self) -> int:
        return exit_status_of(self.signum)

    def interrupted(self, why: str) -> Interrupted:
        return Interrupted(self.signum, why)


@contextmanager
def stop_on_signals(stream=None) -> Iterator[StopRequest]:
    """Catch SIGINT and SIGTERM while the block runs (main thread only; elsewhere the process's
    handlers stay as they are), and restore the previous handlers after."""
    stream = sys.stderr if stream is None else stream
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handle(signum: int, frame: Any) -> None:
        if request.requested:
            request.signum = signum
            raise request.interrupted("the running packs were abandoned (nothing of them "
                                      "stored); run the same command to resume")
        request.signum = signum
        request.event.set()
        stream.write(f"\n{signal.Signals(signum).name}: stopping once the running packs are "
                     "stored (again to abandon them)\n")
        stream.flush()

    previous = {s: signal.signal(s, handle) for s in EXIT_STATUS}
    try:
        yield request
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class Stoppable:
    """A strategy that proposes nothing more once a stop is requested (see the strategy
    protocol, `sweeper.strategies.base`); everything else is the wrapped strategy's."""

    def __init__(self, strategy: Any, request: StopRequest):
        self._strategy, self._request = strategy, request

    def __getattr__(self, name: str) -> Any:
        return getattr(self._strategy, name)

    @property
    def done(self) -> bool:
        return self._request.requested or self._strategy.done

    def ask(self, n: int) -> list:
        return [] if self._request.requested else self._strategy.ask(n)

"""One driver per sweep: a lease on the sweep's folder, taken before anything is written.

`sweeper run` (and `compact`) hold `<sweep>/lease.json` for as long as they write. A second
driver finds it held and stops at once naming the holder (`LeaseHeld`, exit status 2), or
waits for it (`wait=True`). Exactly-once storage then holds however many drivers are started:
only the holder plans, trains and writes.

How each backend makes taking the lease atomic, and how a dead holder's lease is freed:

- **Local disks** (and filesystems every node shares): an exclusive `flock` on the lease file,
  held by an open descriptor. The kernel releases it when the holder exits, however it exits
  (SIGKILL included), so a killed driver's lease is free at once; the file keeps the holder's
  host, pid and start time for messages. The file stays (empty) after a driver ends, except
  that a start leaves no trace where it fails: one that could not write the file (a full
  disk, a read-only folder), or that stored nothing in a sweep folder it made, deletes the file
  it created (while holding its lock) and the folders it made. A driver that locks a file no
  longer at its path (compared by inode) lets it go and opens the path again, so no two
  drivers ever hold two files.
- **S3**: a conditional put. Taking: `If-None-Match: *` (only one create succeeds).
  Heartbeat: every HEARTBEAT_S the holder rewrites it with `If-Match: <its ETag>`. A lease whose
  heartbeat is older than STALE_AFTER_S (its holder was killed), or whose holder was a process
  of this host that is gone (`_stale`: a run that ended while the store was unreachable could
  not delete it), is taken over with `If-Match: <the stale ETag>`, so of two drivers taking
  over one wins. A holder whose heartbeat write is refused has lost the lease and says so.
- **In memory** (tests): a lock per lease, within the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sweeper.results.errors import ResultsInputError
from sweeper.results.files import NOTHING_WRITTEN, could_not_write, make_folders, remove_folders

LEASE = "lease.json"
HEARTBEAT_S = 5.0
STALE_AFTER_S = 30.0
WAIT_POLL_S = 1.0


class LeaseHeld(ResultsInputError):
    """Another driver holds the sweep (exit status 2)."""


class WaitStopped(Exception):
    """The caller's `stop` was set while it waited for the lease (a signal): nothing taken."""


def _stale(holder: dict[str, Any]) -> bool:
    """Whether a lease on an object store is no longer held: no heartbeat for STALE_AFTER_S,
    or its driver was a process of this host that is gone (a run that ended while the store
    was unreachable could not delete it: the next run here need not wait for the beat)."""
    if time.time() - float(holder.get("heartbeat", 0)) >= STALE_AFTER_S:
        return True
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: alive
        return False
    return False


def _holder(token: str) -> dict[str, Any]:
    now = time.time()
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": now,
            "heartbeat": now, "token": token, "argv": " ".join(sys.argv)[:300]}


def describe(holder: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
    text = f"{holder.get('host', '?')} pid {holder.get('pid', '?')} since {started}"
    if holder.get("beats"):  # S3 leases beat; a local flock needs none (the kernel knows)
        beat = time.time() - float(holder.get("heartbeat", holder.get("started", 0)))
        text += f" (last heartbeat {beat:.0f} s ago)"
    return text


@dataclass
class Lease:
    """A held lease; `release()` (or leaving the `with` block) gives it back."""

    sweep: str
    holder: dict[str, Any]
    took_over: dict[str, Any] | None = None  # the dead holder it replaced, if any
    _release: Any = field(default=None, repr=False)

    def release(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def acquire(store: Any, sweep: str, wait: bool = False, stream=None,
            stop: threading.Event | None = None) -> Lease:
    """Take the sweep's lease, or raise `LeaseHeld` naming the holder; with `wait`, poll until
    it is free (saying once that it waits), or until `stop` is set (`WaitStopped`)."""
    stream = sys.stderr if stream is None else stream
    stop = threading.Event() if stop is None else stop
    told = False
    while True:
        try:
            lease = _try(store, sweep)
        except LeaseHeld as held:
            if not wait:
                raise
            if not told:
                stream.write(f"waiting: {str(held).split('; allowed')[0]}\n")
                stream.flush()
                told = True
            if stop.wait(WAIT_POLL_S):
                raise WaitStopped(sweep) from None
            continue
        if lease.took_over is not None:
            stream.write(f"note: took over the lease of sweep {sweep} from "
                         f"{describe(lease.took_over)}, which is no longer running\n")
            stream.flush()
        return lease


def holder_of(store: Any, sweep: str) -> dict[str, Any] | None:
    """The driver holding the sweep's lease now (its host, pid, start), None when none does:
    read without taking it or writing anything, so that `sweeper status` knows a sweep whose
    driver has started before its first write (while Ray starts, an estimate's probe)."""
    if store.uri.startswith("memory://"):
        with _MEMORY_LOCK:
            return dict(_MEMORY[f"{store.uri}/{sweep}"]) if f"{store.uri}/{sweep}" in _MEMORY \
                else None
    if store.is_local:
        return _local_holder(os.path.join(store.path(sweep), LEASE))
    if store.uri.startswith("s3://") and store.put_object is not None:
        from botocore.exceptions import BotoCoreError, ClientError

        client, bucket, key = _s3_client(store, sweep)
        try:
            holder = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read() or b"{}")
        except (ClientError, BotoCoreError, ValueError):
            return None
        return None if _stale(holder) else holder
    return None


def _local_holder(path: str) -> dict[str, Any] | None:
    """Whether a process holds the lock on `path` (a shared lock cannot be had beside its
    exclusive one), and who."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_fd(fd) or {"host": "another process"}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _held(sweep: str, holder: dict[str, Any]) -> LeaseHeld:
    return LeaseHeld(f"sweep {sweep}: being run by {describe(holder)}; allowed: one driver per "
                     "sweep (wait for it, or pass --wait)")


def _try(store: Any, sweep: str) -> Lease:
    if store.uri.startswith("memory://"):
        return _memory(store, sweep)
    if store.is_local:
        return _local(store, sweep)
    if store.uri.startswith("s3://") and store.put_object is not None:
        return _s3(store, sweep)
    return Lease(sweep, _holder(uuid.uuid4().hex))  # other filesystems: no lease (documented)


# -- local disks: flock --------------------------------------------------------------------
def _local(store: Any, sweep: str) -> Lease:
    """Lock the lease file and write the holder into it. A start that cannot (a full disk, a
    read-only folder) leaves nothing it made, the file and new folders included, and is one
    line (ResultsWriteError, exit 1)."""
    import fcntl

    path = os.path.join(store.path(sweep), LEASE)
    made: list[str] = []
    fd, created = None, False
    try:
        made = make_folders(os.path.dirname(path))
        fd, created = _open_lease(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_fd(fd)
            os.close(fd)
            raise _held(sweep, holder or {"host": "another process"}) from None
        if not _still_at(fd, path):  # a failed start deleted it after this opened it
            os.close(fd)
            return _local(store, sweep)
        previous = _read_fd(fd)
        holder = _holder(uuid.uuid4().hex)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
    except OSError as exc:
        _undo_start(path, fd, created, made)
        raise could_not_write(path, exc, NOTHING_WRITTEN) from exc

    def release() -> None:
        with contextlib.suppress(OSError):  # a folder made read-only since: the lock still goes
            os.ftruncate(fd, 0)
            if created and os.listdir(os.path.dirname(path)) == [LEASE]:
                _undo_start(path, None, created, made)  # a start that stored nothing: no trace
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    return Lease(sweep, holder, previous or None, release)


def _open_lease(path: str) -> tuple[int, bool]:
    """The lease file's descriptor, and whether this call created the file."""
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            pass
        except FileNotFoundError:  # its folder went with a failed start's file: make it again
            os.makedirs(os.path.dirname(path), exist_ok=True)
            continue
        try:
            return os.open(path, os.O_RDWR), False
        except FileNotFoundError:
            continue  # deleted in between (a failed start's): create it


def _still_at(fd: int, path: str) -> bool:
    """Whether the file locked is still the one at `path` (not deleted since it was opened)."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _undo_start(path: str, fd: int | None, created: bool, made: list[str]) -> None:
    """What a failed start made goes again: the lease file it created (deleted while its
    lock is held: a driver that locks it after is told by `_still_at`), the folders it made;
    and its descriptor is closed (`fd`; None: the caller closes it)."""
    if created:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
    remove_folders(made)


def _read_fd(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 1 << 16, 0)
        return json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}


# -- S3: conditional puts and a heartbeat ------------------------------------------------
def _s3(store: Any, sweep: str) -> Lease:
    client, bucket, key = _s3_client(store, sweep)
    from botocore.exceptions import BotoCoreError, ClientError

    holder = {**_holder(uuid.uuid4().hex), "beats": True}
    try:
        etag, took_over = _s3_take(client, bucket, key, sweep, holder)
    except (ClientError, BotoCoreError) as exc:  # refused, not held: a write that failed
        raise could_not_write(f"s3://{bucket}/{key}", exc, NOTHING_WRITTEN) from exc
    state = {"etag": etag, "lost": False}
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            holder["heartbeat"] = time.time()
            try:
                state["etag"] = client.put_object(Bucket=bucket, Key=key,
                                                  Body=json.dumps(holder).encode(),
                                                  IfMatch=state["etag"])["ETag"]
            except ClientError as exc:
                if _precondition_failed(exc):
                    state["lost"] = True
                    sys.stderr.write(f"warning: sweep {sweep}: the lease was taken over by "
                                     "another driver (this one stalled)\n")
                    return
            except Exception:  # noqa: BLE001 - a missed beat is retried at the next one
                pass

    thread = threading.Thread(target=beat, name=f"lease-{sweep}", daemon=True)
    thread.start()

    def release() -> None:
        stop.set()
        thread.join(timeout=HEARTBEAT_S * 2)
        if not state["lost"]:
            try:
                current = client.get_object(Bucket=bucket, Key=key)
                if json.loads(current["Body"].read() or b"{}").get("token") == holder["token"]:
                    client.delete_object(Bucket=bucket, Key=key)
            except ClientError:
                pass
            except Exception as exc:  # noqa: BLE001 - a store gone away: the run's own error
                # (a write that failed) is what the user must read, not this one's traceback
                sys.stderr.write(f"warning: sweep {sweep}: could not release its lease "
                                 f"({type(exc).__name__}); the next run here takes it over "
                                 f"at once, elsewhere after {STALE_AFTER_S:g} s\n")

    return Lease(sweep, holder, took_over, release)


def _s3_take(client: Any, bucket: str, key: str, sweep: str,
             holder: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Put the lease if none is there, or over a stale one; (its ETag, the dead holder)."""
    from botocore.exceptions import ClientError

    try:
        return client.put_object(Bucket=bucket, Key=key, Body=json.dumps(holder).encode(),
                                 IfNoneMatch="*")["ETag"], None
    except ClientError as exc:
        if not _precondition_failed(exc):
            raise
    current = client.get_object(Bucket=bucket, Key=key)
    previous = json.loads(current["Body"].read() or b"{}")
    if not _stale(previous):
        raise _held(sweep, previous)
    try:
        return client.put_object(Bucket=bucket, Key=key, Body=json.dumps(holder).encode(),
                                 IfMatch=current["ETag"])["ETag"], previous
    except ClientError as again:
        if _precondition_failed(again):  # another driver took it over first
            raise _held(sweep, previous) from None
        raise


def _s3_client(store: Any, sweep: str):
    from sweeper.results.store import s3_client

    bucket, _, key = store.path(sweep, LEASE).partition("/")
    return s3_client(store.uri), bucket, key


def _precondition_failed(exc: Exception) -> bool:
    error = getattr(exc, "response", {}).get("Error", {})
    return error.get("Code") in ("PreconditionFailed", "412", "ConditionalRequestConflict")


# -- in memory: one lock per lease in this process -----------------------------------------
_MEMORY: dict[str, dict[str, Any]] = {}
_MEMORY_LOCK = threading.Lock()


def _memory(store: Any, sweep: str) -> Lease:
    key = f"{store.uri}/{sweep}"
    with _MEMORY_LOCK:
        if key in _MEMORY:
            raise _held(sweep, _MEMORY[key])
        holder = _MEMORY[key] = _holder(uuid.uuid4().hex)

    def release() -> None:
        with _MEMORY_LOCK:
            _MEMORY.pop(key, None)

    return Lease(sweep, holder, None, release)

"""The native (C++) kernels, built on first use and cached; None where they cannot be.

    ops = native.ops()   # the compiled module, or None (a one-line notice, once)

`recurrence.cpp` fuses each time step of the LSTM and GRU (forward and backward) into one
pass per tile of sequences (the W_hh product in registers, the cell on the gates in cache);
`attention.cpp` computes a sequence's attention scores, softmax and mixture in one pass;
`readout.cpp` a sigmoid readout and its token loss; `probes.cpp` the copy family's KTIW probe.
`sweeper.layers.recurrence`, `.attention` and `.readout` keep torch code as the reference
paths and use it wherever this returns None: no C++ compiler, no `ninja`, a failed build, or
`SWEEPER_NATIVE=0` in the environment (the way to compare the two paths).

The build goes through torch.utils.cpp_extension into its cache (TORCH_EXTENSIONS_DIR, by
default ~/.cache/torch_extensions), once per machine and torch version: 30-90 s on 2 cores, then
a load of well under a second. The module's name carries the instruction set it was compiled for
(`-march` is chosen from this CPU's flags), so a cache shared by machines of different kinds
keeps one build per kind. `sweeper run` builds it in the driver before its workers start (so
that its notices reach the terminal). Processes that start at once take turns on an advisory
lock of this module's own (`flock`, which the system releases when its holder dies, however it
dies); whoever holds it and finds torch's lock file in the build folder knows that file was left
by a killed build, and removes it, instead of waiting on it forever.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

FOLDER = Path(__file__).parent
SOURCES = [FOLDER / name for name in ("bindings.cpp", "recurrence.cpp", "attention.cpp",
                                         "readout.cpp", "probes.cpp")]
HEADERS = [FOLDER / name for name in ("fast_math.h", "small_gemm.h")]
STALE_LOCK_S = 15 * 60  # longer than any build: a lock this old belongs to a killed build

_ops: ModuleType | None = None
_tried = False


def enabled() -> bool:
    """False when the environment asks for the reference path (SWEEPER_NATIVE=0)."""
    return os.environ.get("SWEEPER_NATIVE", "1").strip().lower() not in ("0", "false", "no")


def ops(before_build: Callable[[], None] | None = None) -> ModuleType | None:
    """The compiled kernels, built on the first call of a process; None if unavailable.
    `before_build`: called first when this call builds them (not when it loads a cached
    build)."""
    global _ops, _tried
    if not enabled():
        return None
    if not _tried:
        _tried = True
        try:
            _ops = _build(before_build)
        except Exception as error:  # noqa: BLE001 - any build failure falls back
            reason = " ".join(str(error).split())[:200] or type(error).__name__
            print(f"sweeper: native kernels unavailable ({reason}); using the reference "
                  "path (slower; see docs/performance.md)", file=sys.stderr)
            _ops = None
    return _ops


def loaded() -> ModuleType | None:
    """The kernels where this process has already built or loaded them (`ops`), else None:
    never a build, for code that may run where no training did (`sweeper.metrics`)."""
    return _ops if enabled() else None


@functools.cache
def instruction_set() -> tuple[str, list[str]]:
    """The widest vector instruction set this CPU has: a name and the compiler flags for it
    (read once a process: the attention asks at every call)."""
    try:
        flags = set()
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        flags = set()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512", ["-march=x86-64-v4"]
    if {"avx2", "fma", "bmi2"} <= flags:
        return "avx2", ["-march=x86-64-v3"]
    return "generic", []


def build_name() -> str:
    """The cache name: instruction set and a hash of the sources, the flags and the Python
    environment. torch rebuilds a cached module whose build settings changed, and a module built
    in another virtualenv has other include paths: without the environment in the name, two
    environments on one machine sharing the cache rebuild each other's module on every load
    (seen: two test suites side by side, each waiting minutes on the other's builds). The
    sources' folder is in it for the same reason: torch's build file names the sources by path,
    so two checkouts of the same code (a worktree, a clone) rebuilt each other's module."""
    import torch

    isa, flags = instruction_set()
    folder = str(SOURCES[0].parent.resolve())
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES + HEADERS)
                            + " ".join(_cflags(flags)).encode()
                            + f"{sys.prefix}|{torch.__version__}|{folder}".encode())
    return f"sweeper_kernels_{isa}_{digest.hexdigest()[:10]}"


def _cflags(isa_flags: list[str]) -> list[str]:
    # No -ffast-math: inf and NaN must keep their meaning (a diverged model's loss). Without
    # errno and traps GCC vectorises the elementwise loops, the float exp included; the dot
    # products are vectorised where marked (`omp simd reduction`: no OpenMP runtime).
    return ["-O3", *isa_flags, "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd"]


def _build(before_build: Callable[[], None] | None = None) -> ModuleType:
    from torch.utils import cpp_extension

    _put_ninja_on_path()
    name = build_name()
    build_dir = Path(cpp_extension._get_build_directory(name, verbose=False))
    with _one_builder(build_dir) as alone:
        if alone:  # no live process builds: torch's lock file, if any, is a killed build's
            (build_dir / "lock").unlink(missing_ok=True)
        else:
            _remove_stale_lock(build_dir / "lock")
        if not any(build_dir.glob(f"{name}*.so")):
            if before_build is not None:
                before_build()
            print("sweeper: building the native kernels (once per machine, about a minute)",
                  file=sys.stderr)
        return cpp_extension.load(name=name, sources=[str(p) for p in SOURCES], verbose=False,
                                  extra_cflags=_cflags(instruction_set()[1]))


@contextlib.contextmanager
def _one_builder(build_dir: Path):
    """Holds an exclusive `flock` on `build_dir`/../NAME.flock while a process builds or loads
    the kernels; yields True when held, False where flock is unavailable (then a stale torch
    lock is known only by its age, `STALE_LOCK_S`)."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield False
        return
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir.parent / f"{build_dir.name}.flock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:  # a file system without locks
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _put_ninja_on_path() -> None:
    """torch runs `ninja` from PATH; the `ninja` package's binary is there only in an activated
    environment, so its folder is added (a venv's python run by its full path finds it too)."""
    try:
        import ninja
    except ImportError:
        return
    folder = getattr(ninja, "BIN_DIR", None)
    if folder and folder not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")


def _remove_stale_lock(lock: Path) -> None:
    try:
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink()
    except FileNotFoundError:
        pass

"""Which device trials train on: a sweep moved to another device, the check that a CUDA
device exists where the packs train, and the native CPU kernels built before workers start.
Below the command line, so that the library (`sweeper.api`) and the executors use it without
importing the command line."""

from __future__ import annotations

from sweeper.errors import SweeperInputError


def with_device(sweep, device: str):
    """The sweep on another device; on a GPU each pack asks Ray for one GPU unless the file's
    `resources.gpu` says otherwise (packs are sized to fill it: packing.MAX_GPU_PACK)."""
    from dataclasses import replace

    from sweeper.spec import check_device, make_spec

    check_device(device, "--device/device")
    fixed = sweep.fixed
    make_spec(sweep.task, sweep.model, fixed["task"], fixed["model"], fixed["train"], 0, device)
    resources = dict(sweep.resources)
    if device.startswith("cuda") and not resources["gpu"]:
        resources["gpu"] = 1
    return replace(sweep, device=device, resources=resources)


def check_cuda_here(device: str) -> None:
    """A CUDA device must exist on this machine when the packs train here (local executor or
    embedded Ray); on a cluster (--address) the workers' GPUs are Ray's to find."""
    import torch

    index = int(device.split(":")[1]) if ":" in device else 0
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if index >= count:
        allowed = "cpu" + (f", cuda, cuda:0..{count - 1}" if count else "")
        raise SweeperInputError(f"device: got {device!r}, but this machine has {count} CUDA "
                                f"device(s); allowed here: {allowed}")


def prepare_native_kernels(sweep, plan, store, before_build=None) -> None:
    """Build (or load) the native kernels in this process before the workers start, when
    trials will train on this machine's CPU: its one-line notices (building once; or
    unavailable, so the reference path trains) reach this terminal instead of the workers' logs,
    and the workers load the cached build instead of each waiting on it. `before_build`: called
    first when they are built, not loaded (`native.ops`)."""
    if sweep.device != "cpu":
        return
    if plan.specs and {s.trial_id for s in plan.specs} <= store.done_ids(sweep.name):
        return  # nothing will train
    from sweeper.layers import native

    native.ops(before_build)

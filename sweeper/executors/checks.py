"""What each executor refuses before it starts, without starting or importing it: the
executors' `check` methods call these, and so does `sweeper plan`, which refuses what `run`
would while importing neither Ray nor torch (tests/test_startup.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from sweeper.errors import SweeperInputError

if TYPE_CHECKING:
    from sweeper.search_space import SweepFile


def check_local(sweep: SweepFile) -> None:
    """The local executor: no scheduler (ASHA is Ray Tune's), and the CUDA device asked for."""
    if sweep.scheduler is not None:
        raise SweeperInputError("scheduler: early stopping (asha) runs on Ray Tune only; "
                                "allowed with --executor local: no scheduler key")
    if sweep.device != "cpu":
        from sweeper.devices import check_cuda_here

        check_cuda_here(sweep.device)


def check_ray(sweep: SweepFile, store: Any, address: str | None, num_cpus: int | None,
              results_shared: bool) -> None:
    """Packs train on this machine (embedded Ray): its CUDA device must exist, and one pack's
    CPUs and GPUs must fit in it (else Ray keeps the pack pending for ever); on a cluster (any
    --address: an autoscaling one may start with only its head) the workers' hosts must reach
    the results, so a driver-local path needs --results-shared."""
    if sweep.device != "cpu" and address is None:
        from sweeper.devices import check_cuda_here

        check_cuda_here(sweep.device)
    cpus = num_cpus or os.cpu_count() or 1
    if address is None and sweep.resources["cpu"] > cpus:
        # Ray would keep the pack pending for ever: no node of this cluster can grow
        raise SweeperInputError(f"resources.cpu: got {sweep.resources['cpu']:g} per pack; "
                                f"allowed: at most {cpus} (this machine's CPUs, or "
                                "--num-cpus) on embedded Ray")
    if address is None and sweep.resources["gpu"]:
        import torch

        gpus = torch.cuda.device_count()
        if sweep.resources["gpu"] > gpus:
            raise SweeperInputError(f"resources.gpu: got {sweep.resources['gpu']:g} per "
                                    f"pack; allowed: at most {gpus} (this machine's GPUs) "
                                    "on embedded Ray")
    if address is not None and store.is_local and not results_shared:
        raise SweeperInputError(f"--results: got the local path {store.root!r} on a Ray "
                                "cluster; allowed: an object-store URI (s3://...) or a "
                                "shared filesystem marked with --results-shared")


def check_executor(name: str, sweep: SweepFile, store: Any, *, address: str | None = None,
                   num_cpus: int | None = None, results_shared: bool = False) -> None:
    """`make_executor(name, ...).check(sweep, store)`, without making it."""
    if name == "local":
        check_local(sweep)
    else:
        check_ray(sweep, store, address, num_cpus, results_shared)

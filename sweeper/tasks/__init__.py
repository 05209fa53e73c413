"""The task registry: `make_task("copy-v1", **params)`, `TASKS.ids()`."""

from __future__ import annotations

from typing import Any

from sweeper.registry import Registry

TASKS = Registry("task")


def make_task(id: str, **params: Any) -> Any:
    return TASKS.make(id, **params)


# Registration happens on import of each task module.
from sweeper.tasks import copy as _copy  # noqa: E402,F401
from sweeper.tasks import topic as _topic  # noqa: E402,F401

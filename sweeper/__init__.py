"""sweeper: sweeps of small attention trainings, trajectories in Parquet, phase diagrams.

    import sweeper
    result = sweeper.run("search_spaces/quick.yaml", executor="local")   # -> SweepResult
    res = result.load()                                                  # -> analysis.Results

The results contract (torch-free) is `sweeper.results`; `analysis` reads through it.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["SweepResult", "__version__", "run"]


def run(sweep, **kwargs: Any):
    """Run a sweep (a file path, YAML text or a mapping): see `sweeper.api.run`."""
    from sweeper.api import run as _run

    return _run(sweep, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "SweepResult":
        from sweeper.api import SweepResult

        return SweepResult
    raise AttributeError(f"module 'sweeper' has no attribute {name!r}")

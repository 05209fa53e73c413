"""Analysis of sweeper results: load, query, recompute outcomes, phase diagrams, plots, report.

Reads the Parquet store through the results contract, `sweeper.results` (docs/data-model.md),
and imports nothing else of sweeper, and never torch or ray.
Plotting (`analysis.plots`, `analysis.report`) is imported on demand, so loading and
querying do not pay for matplotlib.

    import analysis
    res = analysis.load("results", sweep="quick", where="model.heads == 1")
    phase = analysis.phase_from_results(res, "task.cooccurrence", "task.hardness",
                                        "model.heads")
"""

from sweeper.results import Thresholds, wilson_interval

from .errors import AnalysisInputError
from .load import Results, load
from .notebook import plot_phase, plot_trajectories  # noqa: F401 - installs the notebook methods
from .outcomes import recompute_outcomes, with_outcomes
from .phase import PhaseDiagram, compute_phase, phase_from_results
from .query import connect, format_frame, query_frame, sql

__all__ = [
    "AnalysisInputError", "PhaseDiagram", "Results", "Thresholds", "compute_phase", "connect",
    "format_frame", "load", "phase_from_results", "query_frame", "recompute_outcomes", "sql",
    "wilson_interval", "with_outcomes",
]

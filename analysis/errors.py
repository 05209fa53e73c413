"""Errors the analysis raises on purpose.

`analysis` imports nothing of `sweeper` but `sweeper.results`, whose `ResultsInputError` is
the root of every input error; the CLI prints one on one line and exits with status 2.
"""

from __future__ import annotations

from collections.abc import Iterable

from sweeper.results.errors import ResultsInputError, did_you_mean

__all__ = ["AnalysisInputError", "did_you_mean", "unknown_column"]


class AnalysisInputError(ResultsInputError):
    """Bad input from the user: a column name, a `where` string, an SQL query, a path."""


def unknown_column(given: str, available: Iterable[str], where: str = "") -> AnalysisInputError:
    """The one-line error for a column that is in neither table; lists what is available."""
    available = sorted(set(available))
    context = f" in {where}" if where else ""
    return AnalysisInputError(
        f"unknown column {given!r}{context}{did_you_mean(given, available)}; "
        f"available columns: {', '.join(available) or '(none)'}")

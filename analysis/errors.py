"""Errors the analysis raises on purpose.

`analysis` must not import `sweeper`, so this is its own small hierarchy. The CLI prints an
`AnalysisInputError`'s message on one line and exits with status 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AnalysisInputError(ValueError):
    """Bad input from the user: a column name, a `where` string, an SQL query, a path."""


def did_you_mean(given: str, allowed: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a close match exists, else ''."""
    close = difflib.get_close_matches(str(given), list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_column(given: str, available: Iterable[str], where: str = "") -> AnalysisInputError:
    """The one-line error for a column that is in neither table; lists what is available."""
    available = sorted(set(available))
    context = f" in {where}" if where else ""
    return AnalysisInputError(
        f"unknown column {given!r}{context}{did_you_mean(given, available)}; "
        f"available columns: {', '.join(available) or '(none)'}")

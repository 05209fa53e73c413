"""The root of every input error about results; `sweeper.errors` and `analysis.errors` build on
it, so a command catches one class and prints one line (exit status 2)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ResultsInputError(ValueError):
    """Bad input about results: a sweep name, a results root, a column, a threshold."""


def did_you_mean(given: str, allowed: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a close match exists, else ''."""
    close = difflib.get_close_matches(str(given), list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""

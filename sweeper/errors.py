"""The exception hierarchy. Every message says what was given and what is allowed.

The CLI turns any `SweeperInputError` into one line on stderr and exit status 2.
"""

from __future__ import annotations

from collections.abc import Iterable

from sweeper.results.errors import ResultsInputError, did_you_mean, shown

__all__ = ["ParameterError", "SweeperError", "SweeperInputError", "UnknownNameError",
           "did_you_mean"]


class SweeperError(Exception):
    """Base of every error sweeper raises on purpose."""


class SweeperInputError(SweeperError, ResultsInputError):
    """Bad input from the user: a file, a flag, a parameter. Exit status 2, nothing written."""


class UnknownNameError(SweeperInputError):
    """A name (task id, parameter, key) that is not one of the allowed ones."""

    def __init__(self, what: str, given: str, allowed: Iterable[str]):
        allowed = sorted(allowed)
        self.what, self.given, self.allowed = what, given, allowed
        super().__init__(f"unknown {what} {shown(given)}{did_you_mean(given, allowed)}; "
                         f"allowed: {', '.join(allowed) or '(none)'}")


class ParameterError(SweeperInputError):
    """A parameter value of the wrong type or out of range."""

"""The exception hierarchy. Every message says what was given and what is allowed.

The CLI turns any `SweeperInputError` into one line on stderr and exit status 2, and a
`StoreStepError` (as a `sweeper.results.errors.ResultsWriteError`) into one line and status 1.
"""

from __future__ import annotations

from collections.abc import Iterable

from sweeper.results.errors import ResultsInputError, did_you_mean, shown

__all__ = ["ParameterError", "StoreStepError", "SweeperError", "SweeperInputError",
           "UnknownNameError", "did_you_mean"]


class SweeperError(Exception):
    """Base of every error sweeper raises on purpose."""


class SweeperInputError(SweeperError, ResultsInputError):
    """Bad input from the user: a file, a flag, a parameter. Exit status 2, nothing written."""


class StoreStepError(SweeperError, RuntimeError):
    """Storing a finished pack raised something other than a write error (a bug, a strategy
    that cannot take the results). The sweep stops, as on a full disk: storing again, or
    training the pack again, would meet the same error, for ever on an executor that retries.
    A pack is committed whole or not at all, what was stored stays, and the same command
    resumes. Commands print one line and exit with status 1; the cause is chained."""


class UnknownNameError(SweeperInputError):
    """A name (task id, parameter, key) that is not one of the allowed ones."""

    def __init__(self, what: str, given: str, allowed: Iterable[str]):
        allowed = sorted(allowed)
        self.what, self.given, self.allowed = what, given, allowed
        super().__init__(f"unknown {what} {shown(given)}{did_you_mean(given, allowed)}; "
                         f"allowed: {', '.join(allowed) or '(none)'}")


class ParameterError(SweeperInputError):
    """A parameter value of the wrong type or out of range."""

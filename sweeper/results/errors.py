"""The root of every input error about results; `sweeper.errors` and `analysis.errors` build on
it, so a command catches one class and prints one line (exit status 2)."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any, NoReturn, TypeVar


class ResultsInputError(ValueError):
    """Bad input about results: a sweep name, a results root, a column, a threshold."""


class ResultsWriteError(RuntimeError):
    """The store could not write a file (a full disk, a folder made read-only, a lost mount):
    nothing half-written is left as a result, what was stored before stays, and the same
    command resumes once the cause is fixed. Commands print one line and exit with status 1."""


SHOWN_CHARS = 60  # what a message shows of a value given


def shown(value: Any) -> str:
    """`repr(value)`, kept short for a one-line message: a long string or list is cut, and a
    huge integer is described (its repr alone would fail past 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        digits = len(str(abs(value))) if value.bit_length() < 14_000 else None
        return (f"an integer of {digits:,} digits" if digits else
                f"an integer of about {int(value.bit_length() * math.log10(2)):,} digits")
    try:
        text = repr(value)
    except ValueError:  # a huge integer inside a container
        text = f"a {type(value).__name__} holding a huge integer"
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"


def did_you_mean(given: str, allowed: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a close match exists, else ''."""
    close = difflib.get_close_matches(str(given), list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def closed_pipe_exit() -> int:
    """What a command does when its output pipe closes (`sweeper plan FILE | head -1`): stop
    quietly, as any Unix tool does on SIGPIPE, with status 128 + SIGPIPE. Standard output is
    pointed at /dev/null first, so that the interpreter's last flush cannot raise again."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def one_line(message: str) -> str:
    """An error message as one line a terminal prints as it is: whitespace runs (a newline in a
    value, a YAML problem's context) become one space, and other control characters (an
    escape sequence in a name) are shown escaped."""
    text = " ".join(str(message).split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class OneLineParser(argparse.ArgumentParser):
    """argparse with a usage error as one line, exit status 2 (as every other input error of
    the commands): `sweeper plan: error: argument --rows: ... (see sweeper plan --help)`.
    Subcommands' parsers are made of the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


# ---------------------------------------------------------------- whose words an error uses

# Messages name what the user typed: a command's flag (`--extend`, `--results`). Called from
# Python, the same refusal names the function's argument instead; this table is the one place
# that says which argument a flag is (a message naming both, "--pack-size/pack_size", needs no
# entry). Switches become `name=True`; a flag with a value becomes its argument's name.
PYTHON_ARGUMENTS = {
    "--extend": "extend=True", "--wait": "wait=True", "--results-shared": "results_shared=True",
    "--results": "results", "--where": "where", "--set": "sets", "--metric": "metric",
    "--columns": "columns", "--by": "by", "--name": "name", "--device": "device",
}
# a command's positional arguments, renamed where a message starts with them ("RESULTS: got")
POSITIONAL_ARGUMENTS = {"RESULTS": "results", "SWEEP": "sweep"}
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?:/([a-z_][a-z0-9_]*))?(:?)")
_POSITIONAL = re.compile(r"^(" + "|".join(POSITIONAL_ARGUMENTS) + r")(?=:)")
_COMMAND_LINE: ContextVar[bool] = ContextVar("sweeper_command_line", default=False)
F = TypeVar("F", bound=Callable[..., Any])


def in_python_words(message: str) -> str:
    """`message` with each command-line flag it names replaced by the Python argument
    (`PYTHON_ARGUMENTS`): "... or --extend to add ..." -> "... or extend=True to add ...",
    "--results: got ..." -> "results: got ...", "with --results set" -> "with results= set";
    a message starting with a positional argument ("RESULTS: got ...") names the argument."""
    def python(match: re.Match) -> str:
        flag, named, colon = match.groups()
        argument = named or PYTHON_ARGUMENTS.get(flag)
        if argument is None:
            return match.group(0)
        if colon or "=" in argument:
            return argument + colon
        return argument + "="
    message = _POSITIONAL.sub(lambda m: POSITIONAL_ARGUMENTS[m.group(1)], message)
    return _FLAG.sub(python, message)


@contextlib.contextmanager
def command_line() -> Iterator[None]:
    """Inside it, input errors keep the command line's words: the commands run in it."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def python_arguments(func: F) -> F:
    """`func` (a Python entry point: `sweeper.run`, `analysis.load`, ...) with the input errors
    it raises worded for Python (`in_python_words`), unless a command called it
    (`command_line`): one mechanism instead of a second copy of every message."""
    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ResultsInputError as exc:
            if not _COMMAND_LINE.get() and exc.args and isinstance(exc.args[0], str):
                exc.args = (in_python_words(exc.args[0]), *exc.args[1:])
            raise
    return call  # type: ignore[return-value]

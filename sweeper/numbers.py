"""The one rule for a number that enters a sweep, wherever it enters: a sweep file, `--set`,
`sweeper.run(...)`'s keywords, a command's flags, a registered parameter (`Param.check`), the
dashboard's query.

A number is typed (an integer field takes an integer, or a float with no fractional part such
as YAML's `1e4`; true and false are not numbers), finite (never NaN or infinity) and bounded
(within the field's range, and every integer within int64, the widest column the results
store has). A value that breaks the rule is one line naming the field, what was given (shown
short: a 5,000-digit integer is not printed) and what is allowed.

Below every other module of sweeper (it imports only the errors: the results contract's, and
`sweeper.errors` when it raises one), so that the results contract (outcome thresholds), the
registry, the sweep file's readers, the command line and `analysis` all read the same rule.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import numbers
import struct
import sys
from collections.abc import Callable
from typing import Any

from sweeper.results.errors import SHOWN_CHARS, shown  # noqa: F401 - part of the rule's API

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_SEED = INT64_MAX  # the trials table stores a seed as int64 (a larger one fails to store)
MAX_INTEGER_TEXT = 100  # an integer written longer is refused unread (int64 needs 19 digits)


def bound_text(bound: float) -> str:
    """A bound as a message shows it: int64's largest as 2^63-1, an integer exactly."""
    if bound == INT64_MAX:
        return "2^63-1"
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def bounds_text(low: float | None, high: float | None, low_open: bool = False,
                high_open: bool = False) -> str:
    """`>= 1 and <= 8` (or `> 0`, `< 1` for open ends); '' with neither bound."""
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {bound_text(low)}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {bound_text(high)}")
    return " and ".join(parts)


def check_int(value: Any, where: str, low: int | None = None, high: int | None = None, *,
              allowed: str | None = None,
              error: type[Exception] | None = None) -> int:
    """`value` as an int within low..high (inclusive; int64's range when a bound is None), or
    `error` (default ParameterError) naming `where`. A float with no fractional part counts
    (YAML reads `1e4` as one)."""
    lowest = INT64_MIN if low is None else max(low, INT64_MIN)
    highest = INT64_MAX if high is None else min(high, INT64_MAX)
    number = _integral(value)
    if number is None or not lowest <= number <= highest:
        text = allowed or f"an integer {bounds_text(low, highest if high is None else high)}"
        raise (error or _parameter_error())(f"{where}: got {shown(value)}; allowed: {text}")
    return number


def check_float(value: Any, where: str, low: float | None = None, high: float | None = None,
                *, low_open: bool = False, high_open: bool = False,
                allowed: str | None = None,
                error: type[Exception] | None = None) -> float:
    """`value` as a finite float within low..high (an open end excludes its bound), or `error`
    naming `where`. -0.0 is 0.0 (one number, one trial id); a subnormal (0 < |x| < 2.2e-308)
    is refused: torch's workers flush it to 0 (`torch.set_flush_denormal`), so it would train
    as 0 under another trial's id."""
    number = _real(value)
    if number is not None and _subnormal(value):
        raise (error or _parameter_error())(
            f"{where}: got {shown(value)}, a subnormal number (trained as 0); allowed: 0 or a "
            f"magnitude of at least {sys.float_info.min:.1e}")
    ok = number is not None and (
        low is None or (number > low if low_open else number >= low)) and (
        high is None or (number < high if high_open else number <= high))
    if not ok:
        text = allowed or ("a number " + bounds_text(low, high, low_open, high_open)).strip()
        raise (error or _parameter_error())(f"{where}: got {shown(value)}; allowed: {text}")
    return number


def _subnormal(value: Any) -> bool:
    """Whether `value` is a subnormal float, read from its bits: a process where torch has
    trained has the CPU's flush-to-zero flags on, and there any float arithmetic (a
    comparison, x + 0.0) sees a subnormal as 0."""
    try:
        bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    except (OverflowError, TypeError, ValueError, struct.error):
        return False
    return (bits >> 52) & 0x7FF == 0 and bits & ((1 << 52) - 1) != 0


def _parameter_error() -> type[Exception]:
    """`sweeper.errors.ParameterError`, the default error, imported when raised: the results
    contract reads this rule too (outcome thresholds), and `sweeper.errors` imports it."""
    from sweeper.errors import ParameterError

    return ParameterError


def _integral(value: Any) -> int | None:
    """An integer's value (a whole finite float's too), or None for anything else."""
    if _is_bool(value):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    number = _real(value)
    return int(number) if number is not None and number.is_integer() else None


def _real(value: Any) -> float | None:
    """A finite real number as a float, or None (NaN, infinity, an integer too large for a
    float, a bool, anything that is not a number)."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return number + 0.0 if math.isfinite(number) else None  # + 0.0: -0.0 is 0.0


def _is_bool(value: Any) -> bool:
    """True and false (Python's and numpy's) are not numbers here."""
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def read_number(text: str) -> Any:
    """A number written as text (a flag, a query parameter): an int when it reads as one, else
    a float, else the text itself, for the rule to refuse showing it. Text longer than
    MAX_INTEGER_TEXT is not read (Python reads at most 4,300 digits)."""
    if len(text) > MAX_INTEGER_TEXT:
        return text
    for parse in (int, float):
        with contextlib.suppress(ValueError):
            return parse(text)
    return text


def int_argument(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse `type=` for an integer flag, by the same rule: `--port 99999` is one line,
    `argument --port: got 99999; allowed: an integer >= 0 and <= 65535`, exit status 2."""
    def parse(text: str) -> int:
        try:
            return check_int(read_number(text), "", low, high, error=ValueError)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(": ")) from None

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse

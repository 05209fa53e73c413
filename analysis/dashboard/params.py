"""The dashboard API's query parameters, read by the rules every input of sweeper follows: each
route names the parameters it takes, each is given at most once, a number follows the one rule
for numbers (`sweeper.numbers`), a sweep name the name rule, and a cell's conditions are JSON
of a known shape. Anything else is an `AnalysisInputError`, which the server answers with 400
and one line; never a 500 with an exception's text.
"""

from __future__ import annotations

import json
from typing import Any

from sweeper.numbers import check_float, check_int, read_number, shown

from ..errors import AnalysisInputError

# The parameters of each API route ("token" is the server's, allowed everywhere).
ROUTES: dict[str, tuple[str, ...]] = {
    "/api/sweeps": (),
    "/api/state": ("sweep",),
    "/api/phase": ("sweep", "x", "y", "facet", "outcome", "min_seeds"),
    "/api/cell": ("sweep", "cell", "metrics", "where"),
    "/api/failed": ("sweep",),
    "/api/search": ("sweep",),
    "/api/metrics": ("sweep",),
    "/api/trials": ("sweep", "where", "sort", "order", "offset", "limit"),
    "/api/curves": ("sweep", "trials", "metrics"),
}
MAX_TRIAL_IDS = 500  # the curves of a selection: MAX_CURVES of data.py is drawn per cell
MAX_MIN_SEEDS = 100_000
MAX_TABLE_PAGE = 10_000  # trials table rows in one answer
MAX_OFFSET = 10**9
MAX_CELL_CHARS = 100_000  # a cell's conditions as JSON: a few hundred characters in practice
MAX_CONDITIONS = 64
CONDITION_KEYS = ("column", "value", "lo", "hi", "closed")


class Params:
    """One request's query parameters (`parse_qs` of it) for the route `path`."""

    def __init__(self, path: str, query: dict[str, list[str]]):
        allowed = ROUTES.get(path, ())
        for name, values in query.items():
            if name == "token":
                continue
            if name not in allowed:
                raise AnalysisInputError(f"{shown(name)}: unknown parameter of {path}; allowed: "
                                         f"{', '.join(allowed) or 'none'}")
            if len(values) > 1:
                raise AnalysisInputError(f"{name}: given {len(values)} times; allowed: once")
        self.query = query

    def text(self, name: str, default: str | None = None) -> str | None:
        return self.query.get(name, [default])[0]

    def required(self, name: str, what: str) -> str:
        value = self.text(name)
        if not value:
            raise AnalysisInputError(f"{name}: required; allowed: {what}")
        return value

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        """An integer parameter, by the one rule for numbers."""
        text = self.text(name)
        if text is None:
            return default
        return check_int(read_number(text), name, low, high, error=AnalysisInputError)

    def choice(self, name: str, allowed: tuple[str, ...]) -> str:
        """One of `allowed` (the first when not given)."""
        value = self.text(name) or allowed[0]
        if value not in allowed:
            raise AnalysisInputError(f"{name}: got {shown(value)}; allowed: {', '.join(allowed)}")
        return value

    def names(self, name: str, limit: int) -> list[str]:
        """A comma-separated list of names (trial ids), at most `limit`, each once."""
        values = list(dict.fromkeys(v for v in (self.text(name) or "").split(",") if v))
        if not values:
            raise AnalysisInputError(f"{name}: required; allowed: comma-separated trial ids")
        if len(values) > limit:
            raise AnalysisInputError(f"{name}: {len(values)} given; allowed: up to {limit}")
        return values

    def conditions(self, name: str) -> list[dict[str, Any]]:
        """A cell's conditions: a JSON list of {column, value} or {column, lo, hi}, each number
        finite (NaN and Infinity are not JSON numbers here)."""
        text = self.text(name, "[]") or "[]"
        if len(text) > MAX_CELL_CHARS:
            raise AnalysisInputError(f"{name}: {len(text):,} characters; allowed: up to "
                                     f"{MAX_CELL_CHARS:,}")
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5,000-digit integer
            raise AnalysisInputError(f"{name}: not JSON ({_first_line(exc)}); allowed: a JSON "
                                     "list of conditions") from None
        if not isinstance(data, list) or len(data) > MAX_CONDITIONS:
            raise AnalysisInputError(f"{name}: got {shown(data)}; allowed: a JSON list of at "
                                     f"most {MAX_CONDITIONS} conditions")
        return [_condition(item, f"{name}[{i}]") for i, item in enumerate(data)]


def _condition(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict) or set(item) - set(CONDITION_KEYS) \
            or not isinstance(item.get("column"), str):
        raise AnalysisInputError(f"{where}: got {shown(item)}; allowed: {{column, value}} or "
                                 "{column, lo, hi[, closed]} with column a column name")
    if "lo" in item or "hi" in item:
        lo = check_float(item.get("lo"), f"{where}.lo", error=AnalysisInputError)
        hi = check_float(item.get("hi"), f"{where}.hi", lo, error=AnalysisInputError)
        closed = item.get("closed", False)
        if not isinstance(closed, bool):
            raise AnalysisInputError(f"{where}.closed: got {shown(closed)}; allowed: true, false")
        span = {"column": item["column"], "lo": lo, "hi": hi}
        return {**span, "closed": True} if closed else span
    value = item.get("value")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return {"column": item["column"], "value": value}
    if isinstance(value, int):
        return {"column": item["column"], "value": check_int(value, f"{where}.value",
                                                              error=AnalysisInputError)}
    return {"column": item["column"],
            "value": check_float(value, f"{where}.value", error=AnalysisInputError,
                                 allowed="a finite number, a string, true/false or null")}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:120]

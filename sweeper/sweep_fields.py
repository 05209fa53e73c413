"""The sweep file's parts every reader shares: its error, its Axis and Search records, and the
field readers that turn a bad value into one line naming the field and what is allowed.

`sweeper.search_space` reads the file with them; each search strategy reads its own `search:`
section with them (`sweeper.strategies`), so the rules of a search type live with its strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sweeper.errors import SweeperInputError, did_you_mean

DOCS = "docs/sweep-files.md"


class SweepFileError(SweeperInputError):
    """A sweep file that does not follow the schema; the message starts with the path and
    ends by pointing to the format's page."""

    def __init__(self, message: str):
        super().__init__(message if message.endswith(f"(see {DOCS})") else
                         f"{message} (see {DOCS})")

@dataclass(frozen=True)
class Axis:
    group: str  # task, model or train
    name: str
    kind: str  # grid, choice, uniform, loguniform, int
    values: tuple[Any, ...]  # grid/choice values, or (low, high)

    @property
    def path(self) -> str:
        return f"{self.group}.{self.name}"

    @property
    def column(self) -> str:
        """Its column in TrialSpec.flat() and the trials table: the same name."""
        return self.path


@dataclass(frozen=True)
class Search:
    type: str = "grid"
    trials: int | None = None
    objective: str | None = None
    direction: str = "maximize"
    seed: int = 0
    # boundary search (sweeper.strategies.boundary): trials is its trial budget
    outcome: str | None = None  # None: the family's phase outcome
    target: float = 0.5
    margin: float = 0.1
    seeds_per_proposal: int | None = None  # None: 2 (at most the cap)
    max_seeds: int | None = None  # the refinement cap (None: all of the sweep's seeds)
    model: str = "gp"

def fail(path: str, got: Any, allowed: str) -> SweepFileError:
    return SweepFileError(f"{path}: got {got!r}; allowed: {allowed}")


def mapping_at(value: Any, path: str, keys: tuple[str, ...] | None = None) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(path, value, "a mapping" + (f" with keys {', '.join(keys)}" if keys else ""))
    if keys is not None:
        for key in value:
            if key not in keys:
                where = f"{path}.{key}" if path else str(key)
                raise SweepFileError(f"{where}: unknown key{suggest(str(key), list(keys))}; "
                                     f"allowed: {', '.join(keys)}")
    return value


def int_at(value: Any, path: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low \
            or (high is not None and value > high):
        raise fail(path, value, f"an integer >= {low}" + (f" and <= {high}" if high else ""))
    return value


def number_at(value: Any, path: str, low: float, strict: bool = False,
               high: float | None = None) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or value < low or (strict and value == low) or (high is not None and value > high):
        bounds = f"a number {'>' if strict else '>='} {low:g}"
        raise fail(path, value, bounds + (f" and <= {high:g}" if high is not None else ""))
    return float(value)

def suggest(name: str, names: list[str]) -> str:
    return f" {name!r}{did_you_mean(name, names)}"

def suggest_plain(given: Any, allowed: tuple[str, ...]) -> str:
    return did_you_mean(str(given), allowed)

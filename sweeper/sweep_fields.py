"""The sweep file's parts every reader shares: its error, its Axis and Search records, and the
field readers that turn a bad value into one line naming the field and what is allowed.

`sweeper.search_space` reads the file with them; each search strategy reads its own `search:`
section with them (`sweeper.strategies`), so the rules of a search type live with its strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sweeper.errors import SweeperInputError, did_you_mean
from sweeper.numbers import SHOWN_CHARS, check_float, check_int, shown

if TYPE_CHECKING:
    from sweeper.families import Family
    from sweeper.spec import TrialSpec

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
    return SweepFileError(f"{path}: got {shown(got)}; allowed: {allowed}")


def mapping_at(value: Any, path: str, keys: tuple[str, ...] | None = None) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(path, value, "a mapping" + (f" with keys {', '.join(keys)}" if keys else ""))
    if keys is not None:
        for key in value:
            if key not in keys:
                where = key_path(path, key)
                raise SweepFileError(f"{where}: unknown key{suggest(str(key), list(keys))}; "
                                     f"allowed: {', '.join(keys)}")
    return value


def int_at(value: Any, path: str, low: int, high: int | None = None) -> int:
    """An integer field of the sweep file, by the one rule for numbers (`sweeper.numbers`)."""
    return check_int(value, path, low, high, error=SweepFileError)


def number_at(value: Any, path: str, low: float, strict: bool = False,
               high: float | None = None) -> float:
    """A number field (`strict`: above `low`, not at it), by the one rule for numbers."""
    return check_float(value, path, low, high, low_open=strict, error=SweepFileError)


def key_path(path: str, key: Any) -> str:
    """`path.key` as a message names it: a key that is not a short printable word (a newline,
    a control character, 10,000 characters) is shown quoted and cut (`sweeper.numbers.shown`),
    so that the message stays one line a terminal prints as it is."""
    text = str(key)
    plain = len(text) <= SHOWN_CHARS and text.isprintable() and not any(c.isspace() for c in text)
    text = text if plain and text else shown(key)
    return f"{path}.{text}" if path else text


def suggest(name: str, names: list[str]) -> str:
    return f" {shown(name)}{did_you_mean(name, names)}"

def suggest_plain(given: Any, allowed: tuple[str, ...]) -> str:
    return did_you_mean(str(given), allowed)


# Bounds of the file's run settings, shared with the flags and keywords that override them
MAX_CPUS, MAX_GPUS = 1024, 64  # per pack: beyond any node; what a cluster has is checked at run
MAX_PACK_SIZE, MAX_RETRIES = 100_000, 100
# The least share of a CPU or GPU a pack may ask for: Ray keeps 4 decimals of a resource, and
# 100 packs sharing one CPU is already more than one CPU can train.
MIN_SHARE = 0.01


def run_options(pack_size: Any = None, retries: Any = None, num_cpus: Any = None
                ) -> tuple[int | None, int | None, int | None]:
    """The numbers a run takes beside its file (`--pack-size`, `--retries`, `--num-cpus`, and
    `sweeper.run`'s keywords), by the bounds the file's own fields have; None: not given."""
    def checked(value: Any, flag: str, low: int, high: int) -> int | None:
        return None if value is None else check_int(value, flag, low, high)

    return (checked(pack_size, "--pack-size/pack_size", 1, MAX_PACK_SIZE),
            checked(retries, "--retries/retries", 0, MAX_RETRIES),
            checked(num_cpus, "--num-cpus/num_cpus", 1, MAX_CPUS))


class Sweep(Protocol):
    """What the layers below the sweep file read of a parsed one (`search_space.SweepFile`):
    named here, in the floor both sides import, so that the strategies, the cells and the
    estimate can take a sweep without importing the module that reads the file (which asks
    the strategies for their rules)."""

    name: str
    task: str
    model: str
    fixed: dict[str, dict[str, Any]]
    axes: tuple[Axis, ...]
    seeds: tuple[int, ...]
    search: Search
    resources: dict[str, float]
    pack_size: int | None
    device: str

    @property
    def family(self) -> Family: ...


class Plan(Protocol):
    """What the strategies and the estimate read of a run's plan (`sweeper.plan.Plan`; named
    here, not imported, so that the plan may ask the strategies for their rules)."""

    sweep: Sweep
    specs: list[TrialSpec]  # every spec when the cells are known up front, else []
    stored: set[str]  # trial ids stored before this run

    @property
    def sharing(self) -> Any: ...  # sweeper.plan.Sharing

    @property
    def budget(self) -> int: ...

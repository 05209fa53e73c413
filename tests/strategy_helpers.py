"""A strategy written in the tests, to show that any strategy drives any executor through the
protocol of `sweeper.strategies.base` alone."""

from __future__ import annotations

from sweeper.packing import form_packs
from sweeper.spec import TrialResult
from sweeper.strategies import Context, Pack, SearchRules
from sweeper.strategies.grid import grid_cells


class ScriptedStrategy(SearchRules):
    """Adaptive in miniature: the sweep's pending specs in packs of one, proposed in two
    rounds, the second only once every pack of the first was told. Records every call.

    `ScriptedStrategy.last` is the instance `start` made last (tests that run it through the
    registry look at it afterwards).
    """

    last: ScriptedStrategy | None = None

    @classmethod
    def cells(cls, sweep) -> list[dict]:
        """The grid's cells (it stands in for grid search)."""
        return grid_cells(sweep)

    def __init__(self, packs: list[Pack]):
        half = (len(packs) + 1) // 2
        self.rounds = [packs[:half], packs[half:]]
        self.current: list[Pack] = []
        self.out = 0
        self.events: list[tuple] = []  # ("ask", n, [ids...]) / ("tell", ids, statuses or None)
        self.planned: int | None = sum(len(p) for p in packs)
        self.closed = False

    @classmethod
    def start(cls, context: Context) -> ScriptedStrategy:
        cls.last = cls(form_packs(context.plan.pending, 1))
        return cls.last

    def ask(self, n: int) -> list[Pack]:
        if not self.current and self.out == 0 and self.rounds:
            self.current = self.rounds.pop(0)
        packs, self.current = self.current[:n], self.current[n:]
        self.out += len(packs)
        self.events.append(("ask", n, [tuple(s.trial_id for s in p) for p in packs]))
        return packs

    def tell(self, pack: Pack, results: list[TrialResult] | None) -> None:
        self.out -= 1
        statuses = None if results is None else tuple(r.status for r in results)
        self.events.append(("tell", tuple(s.trial_id for s in pack), statuses))

    @property
    def done(self) -> bool:
        return not self.rounds and not self.current

    def close(self) -> None:
        self.closed = True

    # -- what the tests check ------------------------------------------------------------------
    def asked(self) -> list[tuple[str, ...]]:
        return [ids for event in self.events if event[0] == "ask" for ids in event[2]]

    def told(self) -> list[tuple[str, ...]]:
        return [event[1] for event in self.events if event[0] == "tell"]

    def check_rounds(self) -> None:
        """Every pack asked once and told once; the second round asked only after the first
        was told in full (the executor waited instead of giving up)."""
        asked, told = self.asked(), self.told()
        assert len(asked) == len(set(asked)) and sorted(asked) == sorted(told), self.events
        half = (len(asked) + 1) // 2
        first_round, second_round = set(asked[:half]), asked[half:]
        last_first_tell = max(i for i, e in enumerate(self.events)
                              if e[0] == "tell" and e[1] in first_round)
        first_second_ask = min(i for i, e in enumerate(self.events)
                               if e[0] == "ask" and set(e[2]) & set(second_round))
        assert last_first_tell < first_second_ask, self.events

"""Search strategies: what trains next, apart from where it trains (`sweeper.executors`):
grid, random, optuna (ask/tell) and boundary (cells whose success share is still unsure of its
side of a target, `sweeper.strategies.boundary`).

The protocol (`ask` / `tell` / `done`, contract in `sweeper.strategies.base`) is all an executor
knows of a strategy. `STRATEGIES` is the one place that maps a sweep file's `search.type` to its
strategy, and the strategy class its search type's rules (`SearchRules`: its cells, budget,
whether it is adaptive), so nothing outside this package branches on the type; a new strategy
is a module with a class that follows the protocol and one entry here
(the sweep-file schema in `sweeper.search_space` lists the keys each type takes). Entries are
imported on use: a grid sweep never imports Optuna.
"""

from __future__ import annotations

from importlib import import_module

from sweeper.errors import UnknownNameError
from sweeper.strategies.base import Context, Pack, PlannedPacks, SearchRules, Strategy

__all__ = ["STRATEGIES", "Context", "Pack", "PlannedPacks", "SearchRules", "Strategy",
           "make_strategy", "strategy_class"]

STRATEGIES: dict[str, str] = {
    "grid": "sweeper.strategies.grid:GridStrategy",
    "random": "sweeper.strategies.random:RandomStrategy",
    "optuna": "sweeper.strategies.optuna:OptunaStrategy",
    "boundary": "sweeper.strategies.boundary:BoundaryStrategy",
}


def strategy_class(search_type: str) -> type:
    if search_type not in STRATEGIES:
        raise UnknownNameError("search.type", search_type, STRATEGIES)
    module, name = STRATEGIES[search_type].split(":")
    return getattr(import_module(module), name)


def make_strategy(context: Context) -> Strategy:
    """The strategy of `context.sweep.search.type`, started on what is stored."""
    return strategy_class(context.sweep.search.type).start(context)

"""Admission: the checks on a sweep before it runs (`sweeper run` and `sweeper.run` make them
before anything is written; `sweeper plan` shows what they would say).

Memory: refuse a sweep whose trial or fixed pack needs more memory than this machine has, and
give the bytes the packs training here may use together (automatic packs are cut to fit them,
`sweeper.packing.form_packs`). Beside the wall-time estimate (`sweeper.estimate`): both judge a
sweep's cost before it runs.

Calibration: warn when trials at a scale their family calibrated (`Family.calibrations`) run
for a budget outside the range the calibration measured, where the family's measurements stop
meaning what its claims need (copy: token accuracy no longer needs attention). A warning, not a
refusal: such sweeps are how the range is measured and how what happens beyond it is studied,
and the phase outcome (copy: attention learned) still means what it says there.

Resolution: warn when the seeds a cell will have can never resolve it in the phase diagram
(every cell would show as unreliable or insufficient), for sweeps read as a yes/no outcome.
"""

from __future__ import annotations

import os

MEMORY_SHARE = 0.8  # of this machine's memory, what trials training here may use together


def admit_here(sweep, specs: list, pack_size: int | None = None) -> int | None:
    """What this machine must have for the sweep to train here (the local executor, embedded
    Ray): its CUDA device, when the sweep asks for one, and the memory of one trial and of one
    fixed pack (`check_memory`, whose budget it returns). `sweeper run` and `sweeper plan`
    both call it, before anything is written or allocated (plan's estimate trains a timed
    probe), so that plan refuses what run refuses."""
    if sweep.device != "cpu":
        from sweeper.devices import check_cuda_here

        check_cuda_here(sweep.device)
    return check_memory(sweep, specs, pack_size)


def check_memory(spec, specs: list, pack_size: int | None = None,
                 available: int | None = None) -> int | None:
    """Refuse a sweep whose one trial, or one pack of a size it fixes, needs more memory than
    this machine has (the family's estimate, `TrialSpec.memory_bytes`), naming the setting;
    checked over `specs` (every trial of a grid, random or boundary sweep), or the fixed
    settings of an Optuna one (no specs). Returns the bytes the packs may use together
    (automatic pack sizes are cut to fit, `packing.form_packs`); None when unknown.

    A fixed pack is checked alone: with several packs running at once, their sum may exceed
    what one fits in (automatic packs are cut for that sum)."""
    from sweeper.errors import SweeperInputError

    available = available or _physical_memory()
    if not available:
        return None
    budget = memory_budget(available)
    specs = specs or [_fixed_spec(spec)]
    need, worst = max(((s.memory_bytes(), i) for i, s in enumerate(specs)))
    worst = specs[worst]
    if need > budget:
        flat = worst.flat()
        shown = ", ".join(f"{k} {flat[k]}" for k in ("task.length", "task.samples",
                                                     "task.vocab", "model.width",
                                                     "model.dim", "train.batch_size",
                                                     "train.eval_size") if k in flat)
        raise SweeperInputError(f"fixed/axes: one trial needs about {need / 2**30:,.1f} GiB "
                                f"({shown}); allowed: what fits in this machine's "
                                f"{available / 2**30:,.1f} GiB (a smaller batch, width or length)")
    from sweeper.strategies import strategy_class

    # the sweep's search type says whether it fixes its packs' size (a proposal's seeds)
    fixed = strategy_class(spec.search.type).fixed_packs(spec, specs, pack_size, need)
    if fixed is not None and need > 0:
        field, trials, pack_bytes = fixed
        if pack_bytes > budget:
            raise SweeperInputError(f"{field}: got {trials}; a pack of {trials} trials needs "
                                    f"about {pack_bytes / 2**30:,.1f} GiB; allowed: at most "
                                    f"{max(1, budget // need)} on this machine's "
                                    f"{available / 2**30:,.1f} GiB")
    return budget


def _fixed_spec(sweep):
    """A trial of the sweep's fixed settings (axes at their defaults): what a search that
    proposes its cells while it runs (no specs up front) is judged by."""
    from sweeper.spec import make_spec

    return make_spec(sweep.task, sweep.model, sweep.fixed["task"], sweep.fixed["model"],
                     sweep.fixed["train"])


def calibration_warnings(sweep, specs: list) -> list[str]:
    """One warning line per calibrated scale of the sweep's family (`Family.calibrations`)
    whose trials among `specs` have a budget (train.steps) outside its range: the field, the
    budgets outside, the range and why. A search without specs up front (Optuna) is judged by
    its fixed settings, its axes unknown: a scale or budget it searches is not judged."""
    calibrations = sweep.family.calibrations
    if not calibrations:
        return []
    if specs:
        configs = [s.flat() for s in specs]
    else:
        searched = {axis.column for axis in sweep.axes}
        configs = [{k: v for k, v in _fixed_spec(sweep).flat().items() if k not in searched}]
    warnings = []
    for calibration in calibrations:
        outside = sorted({c["train.steps"] for c in configs if "train.steps" in c
                          and calibration.at_scale(c)
                          and calibration.outside(c["train.steps"])})
        if outside:
            warnings.append(calibration.warning(sweep.family.name, outside))
    return warnings


def resolution_warnings(sweep) -> list[str]:
    """The empty-picture warning (`results.cells.resolution_warning`, at the phase diagram's
    defaults) when the sweep's cells are judged by a yes/no outcome: its family's phase outcome
    for a grid, random or boundary search (a boundary search's seeds are its cap), an Optuna
    search's objective when that is a yes/no outcome. An Optuna search that optimises a number
    judges no cell by its seeds: no warning."""
    from sweeper.results.cells import resolution_warning
    from sweeper.strategies import strategy_class

    rules = strategy_class(sweep.search.type)
    question = rules.judged_outcome(sweep.search, sweep.family)
    kinds = {rule.column: rule.kind for rule in sweep.family.outcome_rules}
    if kinds.get(question) != "success":
        return []
    warning = resolution_warning(rules.seeds_per_cell(sweep.search, sweep.seeds))
    return [warning] if warning else []


def power_notes(sweep) -> list[str]:
    """What the sweep's seeds can detect, for a sweep whose axes compare head counts or head
    sets (`sweeper.results.stats.power_note`): said before anything trains."""
    from sweeper.results.stats import counts_heads, power_note

    heads = [a for a in sweep.axes if counts_heads(a.column) and len(a.values) > 1]
    sets = [a for a in sweep.axes if a.name == "head_seeds" and len(a.values) > 1]
    if not heads and not sets:
        return []
    what = (f"two values of {heads[0].column}" if heads else "two head sets")
    return [power_note(len(sweep.seeds), what)]


def memory_budget(available: int | None = None) -> int | None:
    """The bytes trials training on this machine may use together (MEMORY_SHARE of it)."""
    available = available or _physical_memory()
    return int(MEMORY_SHARE * available) if available else None


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0

"""Snell et al.'s head-initialisation experiment: are averaged heads a lottery?

If H averaged heads recovered only because each is an independent lottery ticket, an H-head
model would learn at the rate 1 - prod(1 - p_i), p_i each head's rate alone. Snell et al. argue
more: averaging changes the dynamics, so one good head among bad ones learns reliably. The
experiment that can tell them apart fixes the base network (`model.base_seed`) and draws each
head from its own seed (`model.head_seeds`, the same tensors in any model that lists the seed):

- **Stage 1** (`head_classes`): one-head models, many head seeds x a few data seeds. A head is
  *good* if its attention learns in every classifying data seed, *bad* if in none, *mixed*
  otherwise. Held-out data seeds (the last `holdout` of them) measure each class's rate alone
  on data the classification never saw: the rate the lottery must use, since the classifying
  seeds select bad heads for failing (in-sample, bad is 0 by construction).
- **Stage 2** (`stage2_sweep`): H-head models of H bad heads, H - 1 bad + 1 good, and H heads
  stage 1 never saw, on fresh data seeds.
- **The table** (`head_init_table`): per condition, the rate attention learned with its Wilson
  interval beside the lottery's prediction from the stage-1 class rates, how many heads
  aligned, and whether the aligned head was the good one.

Compute a data object here; `sweeper heads` prints and writes them (analysis/cli.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweeper.numbers import MAX_SEED, check_int
from sweeper.results.cells import COUNTED_STATUSES, wilson_interval
from sweeper.results.layout import check_sweep_name
from sweeper.results.outcomes import DEFAULT_THRESHOLDS, Thresholds, item_maxima

from .errors import AnalysisInputError

OUTCOME = "attention_learned"
HEAD_SEEDS, HEADS, BASE_SEED = "model.head_seeds", "model.heads", "model.base_seed"
CLASSES = ("good", "bad", "mixed")
UNSEEN = "unseen"  # a head seed stage 1 did not train
CLASS_COLUMNS = ("head_seed", "n", "learned", "class", "holdout_n", "holdout_learned")


def head_seed_lists(trials: pd.DataFrame) -> pd.Series:
    """Each trial's `model.head_seeds` as a list of ints (stored as its JSON text)."""
    if HEAD_SEEDS not in trials.columns or trials[HEAD_SEEDS].isna().any():
        raise AnalysisInputError(
            f"{HEAD_SEEDS}: the sweep's trials do not all list their head seeds; allowed: a "
            f"sweep with {HEAD_SEEDS} set in every trial (search_spaces/snell_head_init_stage1"
            ".yaml)")
    return trials[HEAD_SEEDS].map(lambda v: [int(s) for s in (json.loads(v)
                                                             if isinstance(v, str) else v)])


def _counted(trials: pd.DataFrame) -> pd.DataFrame:
    if OUTCOME not in trials.columns:
        raise AnalysisInputError(f"{OUTCOME}: not a column of the sweep's trials; allowed: a "
                                 "copy sweep (its family stores whether attention learned)")
    ok = trials["status"].isin(COUNTED_STATUSES) & trials[OUTCOME].notna()
    return trials[ok]


@dataclass(frozen=True)
class HeadClasses:
    """Stage 1's verdict on each head seed and each class's rate alone.

    heads: one row per head seed (CLASS_COLUMNS): classifying trials `n`, how many `learned`,
    its `class`, and its held-out trials. rates: one row per class and for all heads together
    (`all`, the rate of a head stage 1 did not pick): trials, learned, rate and Wilson interval,
    on held-out seeds when there are any (`source` says which). base_seed: the base network
    stage 1 trained every head on.
    """

    heads: pd.DataFrame
    rates: pd.DataFrame
    base_seed: int | None
    classify_seeds: tuple[int, ...]
    holdout_seeds: tuple[int, ...]

    def seeds_of(self, name: str) -> list[int]:
        return self.heads.loc[self.heads["class"] == name, "head_seed"].astype(int).tolist()

    def class_of(self, seed: int) -> str:
        row = self.heads.loc[self.heads["head_seed"] == seed, "class"]
        return str(row.iloc[0]) if len(row) else UNSEEN

    def rate(self, name: str) -> tuple[float, float, float]:
        """(rate, low, high) of a class alone; an unseen head has the rate of all heads."""
        row = self.rates.loc[self.rates["class"] == ("all" if name == UNSEEN else name)]
        if row.empty:
            return (np.nan, np.nan, np.nan)
        return tuple(float(row[c].iloc[0]) for c in ("rate", "low", "high"))


def head_classes(trials: pd.DataFrame, holdout: int | None = None) -> HeadClasses:
    """Classify stage 1's head seeds (module docstring). `holdout`: how many of the data seeds
    (the largest) to hold out of the classification; default 1 when there are at least 4, else
    0 (the class rates are then in-sample and the lottery's bad rate is 0 by construction)."""
    trials = _counted(trials)
    if trials.empty:
        raise AnalysisInputError("the sweep has no finished trials to classify heads by")
    heads = trials[HEADS].astype(int)
    if (heads != 1).any():
        raise AnalysisInputError(f"{HEADS}: got {sorted(heads.unique().tolist())}; allowed: "
                                 "1 in every trial of stage 1 (one head alone per trial)")
    bases = trials[BASE_SEED].dropna().unique() if BASE_SEED in trials.columns else []
    if len(bases) > 1 or (len(bases) == 1 and trials[BASE_SEED].isna().any()):
        raise AnalysisInputError(f"{BASE_SEED}: stage 1 trains heads on {len(bases)} base "
                                 "networks; allowed: one (a fixed model.base_seed)")
    seeds = sorted(int(s) for s in trials["seed"].unique())
    if holdout is None:
        holdout = 1 if len(seeds) >= 4 else 0
    if not 0 <= holdout < len(seeds):
        raise AnalysisInputError(f"--holdout: got {holdout}; allowed: 0 to {len(seeds) - 1} "
                                 f"(stage 1 has {len(seeds)} data seeds)")
    held = set(seeds[len(seeds) - holdout:])
    frame = pd.DataFrame({"head_seed": [s[0] for s in head_seed_lists(trials)],
                          "held": trials["seed"].astype(int).isin(held).to_numpy(),
                          "learned": trials[OUTCOME].astype(bool).to_numpy()})
    classify, test = frame[~frame["held"]], frame[frame["held"]]
    table = classify.groupby("head_seed")["learned"].agg(n="size", learned="sum")
    table["class"] = np.select([table["learned"] == table["n"], table["learned"] == 0],
                               ["good", "bad"], "mixed")
    out = test.groupby("head_seed")["learned"].agg(holdout_n="size", holdout_learned="sum")
    table = table.join(out).fillna({"holdout_n": 0, "holdout_learned": 0}).reset_index()
    table = table.astype({"n": int, "learned": int, "holdout_n": int, "holdout_learned": int})
    rates = _class_rates(table, "holdout" if holdout else "classifying")
    return HeadClasses(table[list(CLASS_COLUMNS)], rates,
                       int(bases[0]) if len(bases) else None,
                       tuple(s for s in seeds if s not in held), tuple(sorted(held)))


def _class_rates(table: pd.DataFrame, source: str) -> pd.DataFrame:
    n, k = (("holdout_n", "holdout_learned") if source == "holdout" else ("n", "learned"))
    rows = []
    for name in (*CLASSES, "all"):
        part = table if name == "all" else table[table["class"] == name]
        trials, learned = int(part[n].sum()), int(part[k].sum())
        low, high = wilson_interval(learned, trials)
        rows.append({"class": name, "heads": len(part), "trials": trials, "learned": learned,
                     "rate": learned / trials if trials else np.nan, "low": float(low),
                     "high": float(high), "source": source})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- stage 2

CONDITIONS = ("bad", "one_good", "unseen")


def stage2_sets(classes: HeadClasses, heads: int = 8, sets: int = 8,
                seed: int = 0) -> dict[str, list[list[int]]]:
    """Per condition, `sets` lists of `heads` distinct head seeds: all bad; bad with one good
    (its position cycles through the heads, so position cannot explain a result); seeds stage
    1 never trained (above its largest). Drawn reproducibly from `seed`."""
    bad, good = classes.seeds_of("bad"), classes.seeds_of("good")
    if heads < 2:
        raise AnalysisInputError(f"--heads: got {heads}; allowed: 2 or more (one good head "
                                 "among bad ones needs at least two heads)")
    if len(bad) < heads:
        raise AnalysisInputError(f"stage 1 has {len(bad)} bad heads; allowed: at least "
                                 f"--heads {heads} (train more head seeds in stage 1)")
    if not good:
        raise AnalysisInputError("stage 1 has no good head (one whose attention learned in "
                                 "every classifying data seed): train more head seeds")
    possible = min(math.comb(len(bad), heads),  # all bad; one good at each position:
                   heads * math.perm(len(bad), heads - 1) * len(good))
    if sets > possible:
        raise AnalysisInputError(f"--sets: got {sets}; allowed: at most {possible} (stage 1's "
                                 f"{len(bad)} bad and {len(good)} good heads make {possible} "
                                 f"distinct sets of {heads} per condition; a set listed twice "
                                 "would be one cell)")
    rng = np.random.default_rng(seed)
    first_unseen = int(classes.heads["head_seed"].max()) + 1
    out: dict[str, list[list[int]]] = {c: [] for c in CONDITIONS}
    for i in range(sets):
        out["bad"].append(_new_set(out["bad"], lambda: sorted(
            int(s) for s in rng.choice(bad, heads, replace=False))))
        out["one_good"].append(_new_set(out["one_good"], lambda i=i: _with_good(
            rng, bad, good, heads, i % heads)))
        out["unseen"].append(list(range(first_unseen + i * heads, first_unseen + (i + 1) * heads)))
    return out


def _new_set(taken: list[list[int]], draw) -> list[int]:
    """A draw not in `taken` (sets repeat only when few exist: the caller checked there are
    enough)."""
    while (candidate := draw()) in taken:
        pass
    return candidate


def _with_good(rng: np.random.Generator, bad: list[int], good: list[int], heads: int,
               position: int) -> list[int]:
    ones = [int(s) for s in rng.choice(bad, heads - 1, replace=False)]
    ones.insert(position, int(rng.choice(good)))
    return ones


def stage2_sweep(stage1_file: Mapping[str, Any], classes: HeadClasses, *, heads: int = 8,
                 sets: int = 8, data_seeds: Sequence[int] = (1000, 1001, 1002, 1003),
                 name: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Stage 2's sweep file from stage 1's (its mapping, overrides applied): the same task,
    scale, training and base network, `heads` heads from `stage2_sets`, on `data_seeds`
    (fresh: not stage 1's)."""
    import copy

    if classes.base_seed is None:
        raise AnalysisInputError(f"{BASE_SEED}: stage 1 left it null; allowed: a fixed base "
                                 "network, so stage 2's heads meet the base they were judged on")
    out = copy.deepcopy(dict(stage1_file))
    out["name"] = name or f"{out['name'].removesuffix('_stage1')}_stage2"
    fixed = out.setdefault("fixed", {}) or {}
    model = fixed.setdefault("model", {}) or {}
    model.update({"heads": heads, "base_seed": classes.base_seed})
    model.pop("head_seeds", None)
    fixed["model"], out["fixed"] = model, fixed
    conditions = stage2_sets(classes, heads, sets, seed)
    axes = {"model": {"head_seeds": {"grid": [s for c in CONDITIONS for s in conditions[c]]}}}
    out["axes"] = axes
    out["seeds"] = _fresh_seeds(data_seeds, classes)
    if name is not None:
        check_sweep_name(name, "--name")
    return out


def _fresh_seeds(data_seeds: Sequence[int], classes: HeadClasses) -> list[int]:
    """Stage 2's data seeds: distinct, storable, and none of stage 1's (its heads were judged on
    those)."""
    seeds = [check_int(s, "--data-seeds", 0, MAX_SEED, error=AnalysisInputError)
             for s in data_seeds]
    if len(set(seeds)) != len(seeds):
        raise AnalysisInputError(f"--data-seeds: got {seeds}; allowed: distinct seeds")
    used = sorted(set(seeds) & set(classes.classify_seeds + classes.holdout_seeds))
    if used:
        raise AnalysisInputError(f"--data-seeds: got {used}, stage 1's own; allowed: seeds "
                                 "stage 1 did not train on (its heads were judged on them)")
    return seeds


# ---------------------------------------------------------------- the table

TABLE_COLUMNS = ("condition", "good", "bad", "mixed", "unseen", "n", "learned", "rate", "low",
                 "high", "lottery", "lottery_low", "lottery_high", "verdict", "heads_aligned",
                 "mean_aligned", "lottery_aligned", "good_aligned", "bad_aligned")


def condition_name(counts: Mapping[str, int]) -> str:
    """'7 bad + 1 good', '8 bad', '8 unseen': the composition of a trial's heads."""
    parts = [f"{counts[c]} {c}" for c in ("bad", "good", "mixed", UNSEEN) if counts.get(c)]
    return " + ".join(parts)


def head_init_table(trials: pd.DataFrame, trajectories: pd.DataFrame, classes: HeadClasses,
                    thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """Stage 2's table, one row per composition of heads (module docstring; TABLE_COLUMNS):
    the observed rate and its Wilson interval; the lottery, 1 - prod(1 - p_class) over the
    trial's heads with each class's rate alone from stage 1 (its interval from the class
    rates' intervals); verdict: 'beyond lottery' / 'below lottery' when the intervals do not
    overlap, else 'as lottery'; heads_aligned: trials with 0, 1, 2, ... heads whose attention
    accuracy reached the attention_learned threshold, `mean_aligned` their mean and
    `lottery_aligned` the mean independent heads would give (the sum of the heads' rates
    alone); good_aligned / bad_aligned: trials where a good / a bad head did (independent, a
    good head aligns at the good rate alone, whatever its company)."""
    trials = _counted(trials).copy()
    if trials.empty:
        raise AnalysisInputError("the sweep has no finished trials")
    lists = head_seed_lists(trials)
    reached = _heads_reached(trajectories, trials["trial_id"], thresholds.attention_learned)
    rows = []
    for i, (trial_id, seeds) in enumerate(zip(trials["trial_id"], lists)):
        kinds = [classes.class_of(s) for s in seeds]
        aligned = reached.get(trial_id, [])
        rows.append({"trial_id": trial_id, "learned": bool(trials[OUTCOME].iloc[i]),
                     **{c: kinds.count(c) for c in (*CLASSES, UNSEEN)},
                     "aligned": int(sum(aligned)),
                     "good_aligned": any(a and k == "good" for a, k in zip(aligned, kinds)),
                     "bad_aligned": any(a and k == "bad" for a, k in zip(aligned, kinds)),
                     **_lottery(kinds, classes)})
    per_trial = pd.DataFrame(rows)
    groups = per_trial.groupby(["good", "bad", "mixed", UNSEEN], sort=False)
    table = pd.DataFrame([_condition_row(key, part) for key, part in groups])
    return table[list(TABLE_COLUMNS)].sort_values(["good", "unseen", "bad"]).reset_index(drop=True)


def _heads_reached(trajectories: pd.DataFrame, trial_ids: pd.Series,
                   level: float) -> dict[str, list[bool]]:
    """Per trial, whether each head's attention accuracy reached `level` at some step."""
    rows = trajectories[trajectories["trial_id"].isin(set(trial_ids))]
    best = item_maxima(rows, ["trial_id"], "attn_acc_head")
    out: dict[str, list[bool]] = {}
    for (trial_id, _head), value in best.items():
        out.setdefault(trial_id, []).append(bool(value >= level))
    return out


def _lottery(kinds: Sequence[str], classes: HeadClasses) -> dict[str, float]:
    """1 - prod(1 - p) over the heads, at the class rates and at their interval bounds
    (monotone in each p, so bounds map to bounds)."""
    rates = np.array([classes.rate(k) for k in kinds])  # [H, (rate, low, high)]
    fail = np.prod(1.0 - rates, axis=0)
    return {"lottery": 1 - fail[0], "lottery_low": 1 - fail[1], "lottery_high": 1 - fail[2],
            "lottery_aligned": float(rates[:, 0].sum())}


def _condition_row(key: tuple, part: pd.DataFrame) -> dict[str, Any]:
    counts = dict(zip(["good", "bad", "mixed", UNSEEN], (int(k) for k in key)))
    n, learned = len(part), int(part["learned"].sum())
    low, high = (float(v) for v in wilson_interval(learned, n))
    lottery = {c: float(part[c].iloc[0]) for c in ("lottery", "lottery_low", "lottery_high",
                                                   "lottery_aligned")}
    verdict = ("beyond lottery" if low > lottery["lottery_high"] else
               "below lottery" if high < lottery["lottery_low"] else "as lottery")
    aligned = part["aligned"].value_counts().sort_index()
    return {"condition": condition_name(counts), **counts, "n": n, "learned": learned,
            "rate": learned / n, "low": low, "high": high, **lottery, "verdict": verdict,
            "heads_aligned": " ".join(f"{int(a)}:{int(c)}" for a, c in aligned.items()),
            "mean_aligned": float(part["aligned"].mean()),
            "good_aligned": int(part["good_aligned"].sum()) if counts["good"] else None,
            "bad_aligned": int(part["bad_aligned"].sum()) if counts["bad"] else None}

"""Snell et al.'s head-initialisation experiment, paired: are averaged heads a lottery?

If H averaged heads recovered only because each is a lottery ticket, an H-head model would
learn when one of its heads would have learned alone. Snell et al. argue more: averaging
changes the dynamics, so heads that fail alone learn in company. The experiment that can tell
them apart fixes the base network (`model.base_seed`) and draws each head from its own seed
(`model.head_seeds`, the same tensors in any model that lists the seed), on several bases:

- **Stage 1** (`head_classes`): one-head models, many head seeds x a few classifying data seeds
  on each base. A head is *good* on its base if its attention learns in every classifying seed,
  *bad* if in none, *mixed* otherwise.
- **Stage 2** (`stage2_sweeps`): per base, H-head models of H bad heads, H - 1 bad + 1 good
  (its position cycling), and H random heads, on fresh data seeds; and the **alone** sweep
  (`alone_sweep`): every stage-1 head alone on those same data seeds and bases, so that each
  multi-head trial is paired with its own heads alone on the same base and the same data.
- **The paired table** (`paired_trials`, `paired_table`): per condition, the model's outcome
  against its heads' outcomes alone trial by trial (exact McNemar), P(model learns | no head
  learns alone), heads aligning in company against alone, and the independent-heads prediction
  from class rates on the same seeds, each verdict with its power (sweeper.results.stats).

Compute data objects here; `sweeper heads` prints and writes them (analysis/cli.py).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweeper.numbers import MAX_SEED, check_int
from sweeper.results.cells import COUNTED_STATUSES
from sweeper.results.layout import check_sweep_name
from sweeper.results.outcomes import DEFAULT_THRESHOLDS, Thresholds
from sweeper.results.stats import exact_interval

from .errors import AnalysisInputError

OUTCOME = "attention_learned"
HEAD_SEEDS, HEADS, BASE_SEED = "model.head_seeds", "model.heads", "model.base_seed"
CLASSES = ("good", "bad", "mixed")
CLASS_COLUMNS = ("base_seed", "head_seed", "n", "learned", "class")


def head_seed_lists(trials: pd.DataFrame) -> pd.Series:
    """Each trial's `model.head_seeds` as a list of ints (stored as its JSON text)."""
    if HEAD_SEEDS not in trials.columns or trials[HEAD_SEEDS].isna().any():
        raise AnalysisInputError(
            f"{HEAD_SEEDS}: the sweep's trials do not all list their head seeds; allowed: a "
            f"sweep with {HEAD_SEEDS} set in every trial (search_spaces/snell_heads_stage1"
            ".yaml)")
    return trials[HEAD_SEEDS].map(lambda v: [int(s) for s in (json.loads(v)
                                                             if isinstance(v, str) else v)])


def base_seeds(trials: pd.DataFrame, role: str) -> pd.Series:
    """Each trial's `model.base_seed` (int); refused where a trial leaves it null (its base
    would then be its data seed's, and no head would meet the same base twice)."""
    if BASE_SEED not in trials.columns or trials[BASE_SEED].isna().any():
        raise AnalysisInputError(f"{BASE_SEED}: {role} leaves it null in some trials; allowed: "
                                 "a fixed base network per trial (an int or an axis of ints)")
    return trials[BASE_SEED].astype(int)


def _counted(trials: pd.DataFrame) -> pd.DataFrame:
    if OUTCOME not in trials.columns:
        raise AnalysisInputError(f"{OUTCOME}: not a column of the sweep's trials; allowed: a "
                                 "copy sweep (its family stores whether attention learned)")
    ok = trials["status"].isin(COUNTED_STATUSES) & trials[OUTCOME].notna()
    return trials[ok]


def one_head_runs(trials: pd.DataFrame, role: str) -> pd.DataFrame:
    """One row per counted one-head trial: base_seed, head_seed, seed, learned, step (its
    `attention_steps`: the first step attention reached the threshold, NaN where never), and
    budget (its `train.steps`)."""
    trials = _counted(trials)
    if trials.empty:
        raise AnalysisInputError(f"{role} has no finished trials")
    heads = trials[HEADS].astype(int)
    if (heads != 1).any():
        hint = (" (a stage-2 sweep is read with --classes STAGE1 --alone ALONE)"
                if role == "stage 1" else "")
        raise AnalysisInputError(f"{HEADS}: got {sorted(heads.unique().tolist())} in {role}; "
                                 f"allowed: 1 in every trial (one head alone per trial){hint}")
    steps = (trials["attention_steps"].astype(float).to_numpy()
             if "attention_steps" in trials.columns else np.full(len(trials), np.nan))
    head_seeds = [s[0] for s in head_seed_lists(trials)]
    budget = (trials[STEPS].astype(int).to_numpy() if STEPS in trials.columns
              else np.full(len(trials), -1))
    return pd.DataFrame({"base_seed": base_seeds(trials, role).to_numpy(),
                         "head_seed": head_seeds,
                         "seed": trials["seed"].astype(int).to_numpy(),
                         "learned": trials[OUTCOME].astype(bool).to_numpy(), "step": steps,
                         "budget": budget})


@dataclass(frozen=True)
class HeadClasses:
    """Stage 1's verdict on each head seed on each base network.

    heads: one row per (base_seed, head_seed) (CLASS_COLUMNS): classifying trials `n`, how
    many `learned`, its `class`. rates: per base and class, trials, learned, the rate and its
    exact (Clopper-Pearson) interval on the classifying seeds: in-sample, so bad is 0 and good
    1 by construction; the rates the lottery uses come from the alone sweep (`paired_table`).
    """

    heads: pd.DataFrame
    rates: pd.DataFrame
    classify_seeds: tuple[int, ...]

    @property
    def bases(self) -> list[int]:
        return sorted(int(b) for b in self.heads["base_seed"].unique())

    def on(self, base: int) -> pd.DataFrame:
        return self.heads[self.heads["base_seed"] == base]

    def seeds_of(self, base: int, name: str) -> list[int]:
        part = self.on(base)
        return part.loc[part["class"] == name, "head_seed"].astype(int).tolist()

    def class_of(self, base: int, seed: int) -> str:
        part = self.on(base)
        row = part.loc[part["head_seed"] == seed, "class"]
        if not len(row):
            raise AnalysisInputError(f"head seed {seed} on base {base}: stage 1 did not train "
                                     "it; allowed: heads stage 1 classified on that base")
        return str(row.iloc[0])


def head_classes(trials: pd.DataFrame) -> HeadClasses:
    """Classify stage 1's head seeds on each base (module docstring)."""
    runs = one_head_runs(trials, "stage 1")
    table = runs.groupby(["base_seed", "head_seed"])["learned"].agg(n="size", learned="sum")
    table["class"] = np.select([table["learned"] == table["n"], table["learned"] == 0],
                               ["good", "bad"], "mixed")
    table = table.reset_index().astype({"n": int, "learned": int})
    rows = []
    for base, part in table.groupby("base_seed"):
        for name in (*CLASSES, "all"):
            sub = part if name == "all" else part[part["class"] == name]
            n, k = int(sub["n"].sum()), int(sub["learned"].sum())
            low, high = exact_interval(k, n)
            rows.append({"base_seed": int(base), "class": name, "heads": len(sub), "trials": n,
                         "learned": k, "rate": k / n if n else np.nan, "low": low,
                         "high": high})
    seeds = tuple(sorted(int(s) for s in runs["seed"].unique()))
    return HeadClasses(table[list(CLASS_COLUMNS)], pd.DataFrame(rows), seeds)


# ---------------------------------------------------------------- stage 2

CONDITIONS = ("bad", "one_good", "random")


def condition_of(kinds: Sequence[str]) -> str:
    """The condition a set of head classes belongs to: all bad, one good among bad, or random
    (any other composition; `stage2_sets` never draws the first two as random)."""
    if all(k == "bad" for k in kinds):
        return "bad"
    if kinds.count("good") == 1 and kinds.count("bad") == len(kinds) - 1:
        return "one_good"
    return "random"


def stage2_sets(classes: HeadClasses, base: int, heads: int = 8, sets: int = 6,
                seed: int = 0) -> dict[str, list[list[int]]]:
    """Per condition, `sets` distinct lists of `heads` distinct head seeds of one base: all
    bad; bad with one good (its position cycles, so position cannot explain a result); random
    (drawn from every head stage 1 classified on the base, redrawn when it is all bad or one
    good among bad, so that each condition is its own). Reproducible from `seed`."""
    bad, good = classes.seeds_of(base, "bad"), classes.seeds_of(base, "good")
    every = classes.on(base)["head_seed"].astype(int).tolist()
    if heads < 2:
        raise AnalysisInputError(f"--heads: got {heads}; allowed: 2 or more (one good head "
                                 "among bad ones needs at least two heads)")
    if len(bad) < heads:
        raise AnalysisInputError(f"stage 1 has {len(bad)} bad heads on base {base}; allowed: "
                                 f"at least --heads {heads} (train more head seeds in stage 1)")
    if not good:
        raise AnalysisInputError(f"stage 1 has no good head on base {base} (one whose "
                                 "attention learned in every classifying data seed): train "
                                 "more head seeds")
    possible = min(math.comb(len(bad), heads),  # all bad; one good at each position:
                   heads * math.perm(len(bad), heads - 1) * len(good))
    if sets > possible:
        raise AnalysisInputError(f"--sets: got {sets}; allowed: at most {possible} (stage 1's "
                                 f"{len(bad)} bad and {len(good)} good heads on base {base} "
                                 f"make {possible} distinct sets of {heads} per condition; a "
                                 "set listed twice would be one cell)")
    rng = np.random.default_rng([seed, base])
    kind = dict(zip(every, (classes.class_of(base, s) for s in every)))
    out: dict[str, list[list[int]]] = {c: [] for c in CONDITIONS}
    for i in range(sets):
        out["bad"].append(_new_set(out["bad"], lambda: sorted(
            int(s) for s in rng.choice(bad, heads, replace=False))))
        out["one_good"].append(_new_set(out["one_good"], lambda i=i: _with_good(
            rng, bad, good, heads, i % heads)))
        out["random"].append(_new_set(out["random"], lambda: _random_set(rng, every, kind,
                                                                         heads)))
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


def _random_set(rng: np.random.Generator, every: list[int], kind: Mapping[int, str],
                heads: int) -> list[int]:
    for _ in range(10_000):
        drawn = [int(s) for s in rng.choice(every, heads, replace=False)]
        if condition_of([kind[s] for s in drawn]) == "random":
            return drawn
    raise AnalysisInputError(f"stage 1's heads draw no random set of {heads} that is not all "
                             "bad or one good among bad; allowed: a stage 1 with mixed heads")


def stage2_sweeps(stage1_file: Mapping[str, Any], classes: HeadClasses, *, heads: int = 8,
                  sets: int = 6, data_seeds: Sequence[int] = (3000, 3001, 3002, 3003),
                  prefix: str | None = None, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Stage 2's sweep files from stage 1's (its mapping): one `heads`-head sweep per base
    network (`{prefix}_stage2_base{b}`: a head set is a set on its own base only), and the
    alone sweep (`{prefix}_alone`: every stage-1 head alone on every base and on stage 2's
    data seeds: the paired runs). The same task, scale and training; fresh data seeds."""
    prefix = prefix or str(stage1_file["name"]).removesuffix("_stage1")
    check_sweep_name(f"{prefix}_stage2_base0", "--name")
    seeds = _fresh_seeds(data_seeds, classes)
    out = {}
    for base in classes.bases:
        sweep = _with_model(stage1_file, f"{prefix}_stage2_base{base}", heads, base, seeds)
        conditions = stage2_sets(classes, base, heads, sets, seed)
        sweep["axes"] = {"model": {"head_seeds": {"grid": [
            s for c in CONDITIONS for s in conditions[c]]}}}
        out[sweep["name"]] = sweep
    alone = _with_model(stage1_file, f"{prefix}_alone", 1, None, seeds)
    every = sorted(int(s) for s in classes.heads["head_seed"].unique())
    alone["axes"] = {"model": {"base_seed": {"grid": classes.bases},
                               "head_seeds": {"grid": [[s] for s in every]}}}
    out[alone["name"]] = alone
    return out


def _with_model(stage1_file: Mapping[str, Any], name: str, heads: int, base: int | None,
                seeds: list[int]) -> dict[str, Any]:
    out = copy.deepcopy(dict(stage1_file))
    out["name"] = name
    fixed = out.setdefault("fixed", {}) or {}
    model = dict(fixed.get("model") or {})
    model["heads"] = heads
    model.pop("head_seeds", None)
    model.pop("base_seed", None)
    if base is not None:
        model["base_seed"] = base
    fixed["model"], out["fixed"] = model, fixed
    out["seeds"] = seeds
    return out


def _fresh_seeds(data_seeds: Sequence[int], classes: HeadClasses) -> list[int]:
    """Stage 2's data seeds: distinct, storable, and none of stage 1's (its heads were judged on
    those)."""
    seeds = [check_int(s, "--data-seeds", 0, MAX_SEED, error=AnalysisInputError)
             for s in data_seeds]
    if len(set(seeds)) != len(seeds):
        raise AnalysisInputError(f"--data-seeds: got {seeds}; allowed: distinct seeds")
    used = sorted(set(seeds) & set(classes.classify_seeds))
    if used:
        raise AnalysisInputError(f"--data-seeds: got {used}, stage 1's own; allowed: seeds "
                                 "stage 1 did not train on (its heads were judged on them)")
    return seeds


# ---------------------------------------------------------------- the paired table

STEPS = "train.steps"


def arm_of(trials: pd.DataFrame) -> pd.Series:
    """Each stage-2 trial's arm: its budget and how its heads merge ("400 steps, mean")."""
    steps = (trials[STEPS].astype(int).astype(str) if STEPS in trials.columns
             else pd.Series("?", index=trials.index))
    merge = (trials["model.head_merge"].fillna("mean").astype(str)
             if "model.head_merge" in trials.columns else pd.Series("mean", index=trials.index))
    return steps + " steps, " + merge


def paired_trials(trials: pd.DataFrame, trajectories: pd.DataFrame, alone: pd.DataFrame,
                  classes: HeadClasses,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """One row per counted stage-2 trial, paired with its heads alone: arm, base_seed, seed,
    head_seeds, condition, learned (the model's attention), steps (when), and per head (lists
    in the model's head order): kinds (class on its base), alone (learned alone on this base
    and data seed), alone_step, aligned (its attention accuracy reached the threshold in
    company) and aligned_step; any_alone (some head learned alone)."""
    trials = _counted(trials).copy()
    if trials.empty:
        raise AnalysisInputError("stage 2 has no finished trials")
    level = thresholds.attention_learned
    runs = one_head_runs(alone, "the alone sweep")
    key = ["base_seed", "head_seed", "seed", "budget"]
    twice = runs[runs.duplicated(key, keep=False)]
    if len(twice):
        b, h, d, n = twice.iloc[0][key]
        raise AnalysisInputError(f"--alone: head {h} on base {b}, data seed {d}, {n} steps is "
                                 "stored twice; allowed: one alone run per head, base, data "
                                 "seed and budget")
    alone_by = {tuple(int(v) for v in k): (bool(ok), step) for k, ok, step in zip(
        runs[key].itertuples(index=False), runs["learned"], runs["step"])}
    budgets = set(runs["budget"].astype(int))
    reached = _heads_first_step(trajectories, trials["trial_id"], level)
    lists, bases = head_seed_lists(trials), base_seeds(trials, "stage 2")
    steps = (trials["attention_steps"] if "attention_steps" in trials.columns
             else pd.Series(np.nan, index=trials.index))
    budget = (trials[STEPS].astype(int) if STEPS in trials.columns
              else pd.Series(-1, index=trials.index))
    rows = []
    for (trial_id, arm, base, seed, learned, step, spent), heads in zip(zip(
            trials["trial_id"], arm_of(trials), bases, trials["seed"].astype(int),
            trials[OUTCOME].astype(bool), steps, budget), lists):
        kinds = [classes.class_of(base, h) for h in heads]
        if trial_id not in reached:
            raise AnalysisInputError(f"stage 2's trial {trial_id} has no trajectory with "
                                     "attn_acc_head; allowed: trials that logged each head's "
                                     "attention accuracy (a copy sweep's own trainings)")
        alone_runs = _alone_runs(alone_by, budgets, base, heads, seed, int(spent))
        rows.append({"trial_id": trial_id, "arm": arm, "base_seed": base, "seed": seed,
                     "budget": int(spent), "head_seeds": heads,
                     "condition": condition_of(kinds), "learned": learned,
                     "steps": step, "kinds": kinds,
                     "alone": [a[0] for a in alone_runs] if alone_runs else None,
                     "alone_step": [a[1] for a in alone_runs] if alone_runs else None,
                     "aligned": [bool(np.isfinite(f)) for f in reached[trial_id]],
                     "aligned_step": reached[trial_id]})
    out = pd.DataFrame(rows)
    out["any_alone"] = out["alone"].map(lambda a: any(a) if a is not None else None)
    return out


def _alone_runs(alone_by: Mapping, budgets: set[int], base: int, heads: Sequence[int],
                seed: int, budget: int) -> list[tuple[bool, float]] | None:
    """The trial's heads alone on its base and data seed at its own budget; None where the
    alone sweep trained no run at that budget (an arm of another budget: its heads alone are
    unknown, not the 400-step ones); one line where a head's run is missing."""
    if budget not in budgets:
        return None
    missing = [h for h in heads if (base, h, seed, budget) not in alone_by]
    if missing:
        raise AnalysisInputError(f"--alone: head {missing[0]} on base {base}, data seed "
                                 f"{seed} is not stored there; allowed: an alone sweep that "
                                 "trains every stage-2 head on its base and data seed "
                                 "(`sweeper heads STAGE1 --stage2` writes it)")
    return [alone_by[(base, h, seed, budget)] for h in heads]


def _heads_first_step(trajectories: pd.DataFrame, trial_ids: pd.Series,
                      level: float) -> dict[str, list[float]]:
    """Per trial, each head's first step with attention accuracy >= level (NaN: never)."""
    rows = trajectories[trajectories["trial_id"].isin(set(trial_ids))]
    logged = [v is not None and len(v) > 0 for v in rows["attn_acc_head"]]
    rows = rows[np.array(logged, dtype=bool)] if len(rows) else rows
    out: dict[str, list[float]] = {}
    for trial_id, part in rows.groupby("trial_id", sort=False):
        part = part.sort_values("step")
        heads = np.stack(part["attn_acc_head"].map(np.asarray).to_numpy())  # [steps, H]
        reached = heads >= level
        first = np.where(reached.any(axis=0), part["step"].to_numpy()[reached.argmax(axis=0)],
                         np.nan)
        out[trial_id] = [float(v) for v in first]
    return out


TABLE_COLUMNS = (
    "arm", "base_seed", "condition", "n", "learned", "rate", "low", "high", "any_alone",
    "any_alone_rate", "independent", "independent_low", "independent_high", "both",
    "model_only", "heads_only", "neither", "learned_if_none_alone", "if_none_low",
    "if_none_high", "p_value", "power", "needed", "verdict", "sets", "sets_model_more",
    "sets_heads_more", "sets_p_value", "sets_power", "sets_needed", "sets_verdict",
    "failed_alone", "aligned_of_failed", "aligned_of_failed_rate", "learned_alone",
    "aligned_of_learned", "aligned_of_learned_rate", "mean_aligned")


def paired_table(per_trial: pd.DataFrame, alone_rates: pd.DataFrame, *,
                 effect: float | None = None, by_base: bool = False) -> pd.DataFrame:
    """Per arm and condition (TABLE_COLUMNS): the model's rate and exact interval; any_alone:
    trials where some head learned alone (the lottery of tickets fixed by init and data);
    independent: 1 - prod(1 - p_class) from each class's rate alone on the same bases and
    data seeds (`class_rates`), its bounds those rates' interval bounds through the same map
    (a range, not a confidence interval); the paired counts (both, model_only, heads_only,
    neither) and the exact McNemar test over trials with its power; the same question with
    each head set as one unit (`sets_*`: a sign test over the sets whose trials lean one way,
    for trials of one set share their heads); learned_if_none_alone: P(model learns | no head
    learned alone); heads that failed alone and how many aligned in company, and the converse.
    An arm whose budget the alone sweep did not train has only the model's columns. by_base:
    one row per base network too (`base_seed`; "all" when pooled)."""
    from sweeper.results.stats import EFFECT

    effect = EFFECT if effect is None else effect
    rows = []
    keys = ["arm", "base_seed", "condition"] if by_base else ["arm", "condition"]
    for key, part in per_trial.groupby(keys, sort=True):
        arm, condition = key[0], key[-1]
        n, k = len(part), int(part["learned"].sum())
        row = {"arm": arm, "base_seed": key[1] if by_base else "all",
               "condition": condition, "n": n, "learned": k, "rate": k / n,
               **_interval(k, n), "mean_aligned": float(part["aligned"].map(sum).mean())}
        if part["alone"].notna().all():
            row.update(_paired_columns(part, alone_rates, effect))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def compact_table(table: pd.DataFrame) -> pd.DataFrame:
    """The paired table as a terminal shows it: each count with its rate and interval in one
    cell, the verdicts beside their power (the whole table: `--cells`, `--format`, `--json`)."""
    def share(k, n, low=None, high=None) -> str:
        if pd.isna(k) or not n:
            return "-"
        text = f"{int(k)}/{int(n)}"
        return text + (f" ({low:.2f}-{high:.2f})" if low is not None and pd.notna(low) else "")

    rows = []
    for r in table.itertuples(index=False):
        paired = pd.notna(r.model_only)
        rows.append({
            "arm": r.arm, **({"base": r.base_seed} if len(set(table["base_seed"])) > 1 else {}),
            "condition": r.condition,
            "model learned": share(r.learned, r.n, r.low, r.high),
            "a head alone": share(r.any_alone, r.n) if paired else "-",
            "independent": (f"{r.independent:.2f} ({r.independent_low:.2f}-"
                            f"{r.independent_high:.2f})") if paired else "-",
            "model only / heads only": (f"{int(r.model_only)} / {int(r.heads_only)}"
                                        if paired else "-"),
            "learned if none alone": share(r.model_only, r.model_only + r.neither,
                                           r.if_none_low, r.if_none_high) if paired else "-",
            "p": f"{r.p_value:.2g}" if paired else "-",
            "power": f"{r.power:.2f}" if paired else "-",
            "verdict (trials)": r.verdict if paired else "no alone runs at this budget",
            "verdict (head sets)": (f"{r.sets_verdict} (power {r.sets_power:.2f})"
                                    if paired else "-"),
            "aligned | failed alone": (share(r.aligned_of_failed, r.failed_alone)
                                       if paired else "-"),
            "aligned | learned alone": (share(r.aligned_of_learned, r.learned_alone)
                                        if paired else "-"),
            "mean aligned": f"{r.mean_aligned:.2f}"})
    return pd.DataFrame(rows)


def _paired_columns(part: pd.DataFrame, alone_rates: pd.DataFrame,
                    effect: float) -> dict[str, Any]:
    from sweeper.results.stats import compare_paired

    n = len(part)
    learned, any_alone = part["learned"].astype(bool), part["any_alone"].astype(bool)
    both = int((learned & any_alone).sum())
    model_only = int((learned & ~any_alone).sum())
    heads_only = int((~learned & any_alone).sum())
    neither = n - both - model_only - heads_only
    test = compare_paired(both, model_only, heads_only, neither, effect=effect,
                          higher="beyond lottery", lower="below lottery", same="as lottery",
                          unit="trials")
    lean = (learned.astype(int) - any_alone.astype(int)).groupby(
        [part["base_seed"], part["head_seeds"].map(tuple)]).sum()
    sets = compare_paired(int((lean == 0).sum()), int((lean > 0).sum()),
                          int((lean < 0).sum()), 0, effect=effect, higher="beyond lottery",
                          lower="below lottery", same="as lottery", unit="head sets")
    failed = [a for al, ag in zip(part["alone"], part["aligned"])
              for a, ok in zip(ag, al) if not ok]
    won = [a for al, ag in zip(part["alone"], part["aligned"]) for a, ok in zip(ag, al) if ok]
    return {"any_alone": int(any_alone.sum()), "any_alone_rate": any_alone.mean(),
            **_independent(part, alone_rates), "both": both, "model_only": model_only,
            "heads_only": heads_only, "neither": neither,
            "learned_if_none_alone": (model_only / (model_only + neither)
                                      if model_only + neither else np.nan),
            **_interval(model_only, model_only + neither, "if_none_"),
            "p_value": test.p_value, "power": test.power, "needed": test.needed,
            "verdict": test.verdict, "sets": len(lean), "sets_model_more": int((lean > 0).sum()),
            "sets_heads_more": int((lean < 0).sum()), "sets_p_value": sets.p_value,
            "sets_power": sets.power, "sets_needed": sets.needed, "sets_verdict": sets.verdict,
            "failed_alone": len(failed),
            "aligned_of_failed": int(sum(failed)),
            "aligned_of_failed_rate": sum(failed) / len(failed) if failed else np.nan,
            "learned_alone": len(won), "aligned_of_learned": int(sum(won)),
            "aligned_of_learned_rate": sum(won) / len(won) if won else np.nan}


def _interval(k: int, n: int, prefix: str = "") -> dict[str, float]:
    low, high = exact_interval(k, n)
    return {f"{prefix}low": low, f"{prefix}high": high}


def class_rates(alone: pd.DataFrame, classes: HeadClasses, seeds: Sequence[int]) -> pd.DataFrame:
    """Each class's rate alone per budget and base on stage 2's data seeds (the alone sweep's
    runs of every head of the class, not only the heads a set drew), with its exact
    interval."""
    runs = one_head_runs(alone, "the alone sweep")
    runs = runs[runs["seed"].isin(set(seeds))].copy()
    runs["class"] = [classes.class_of(b, h) for b, h in zip(runs["base_seed"],
                                                             runs["head_seed"])]
    rows = []
    for (budget, base, name), part in runs.groupby(["budget", "base_seed", "class"]):
        n, k = len(part), int(part["learned"].sum())
        rows.append({"budget": int(budget), "base_seed": int(base), "class": name,
                     "trials": n, "learned": k, "rate": k / n, **_interval(k, n)})
    return pd.DataFrame(rows)


def _independent(part: pd.DataFrame, rates: pd.DataFrame) -> dict[str, float]:
    """The independent-heads prediction, averaged over the trials: 1 - prod(1 - p_class) at
    each class's rate on the trial's base and at its interval's bounds."""
    table = rates.set_index(["budget", "base_seed", "class"])
    values = []
    for budget, base, kinds in zip(part["budget"], part["base_seed"], part["kinds"]):
        p = np.array([table.loc[(budget, base, k), ["rate", "low", "high"]].to_numpy(float)
                      for k in kinds])
        values.append(1 - np.prod(1 - p, axis=0))
    mean = np.mean(values, axis=0)
    return {"independent": mean[0], "independent_low": mean[1], "independent_high": mean[2]}


COMPARISON_COLUMNS = ("what", "first", "second", "n", "estimate", "p_value", "power", "needed",
                      "verdict", "test")


def comparisons(per_trial: pd.DataFrame, *, effect: float | None = None) -> pd.DataFrame:
    """Conditions against each other within an arm (one good among bad, random, against all
    bad: Fisher's exact, trials taken as independent although a head set runs on several data
    seeds), arms against the main arm (`_main_arm`: the shortest budget with averaged heads) on
    the same trials (the same base, head set and data seed: exact McNemar), and, where the
    alone sweep trained the arm's budget, the good head's speed in company against alone on
    the same seed (a sign test: exact McNemar on later / earlier)."""
    from sweeper.results.stats import EFFECT, compare_paired, compare_rates

    effect = EFFECT if effect is None else effect
    rows = []
    for arm, part in per_trial.groupby("arm", sort=True):
        by = dict(tuple(part.groupby("condition")))
        for other in ("one_good", "random"):
            if other in by and "bad" in by:
                a, b = by[other]["learned"], by["bad"]["learned"]
                test = compare_rates(int(a.sum()), len(a), int(b.sum()), len(b), effect=effect,
                                     higher="higher", lower="lower", same="no difference",
                                     unit="trials a condition")
                rows.append(_comparison_row(f"{arm}: model learned", other, "bad", test))
        if "one_good" in by and by["one_good"]["alone"].notna().all():
            good = by["one_good"]
            test = _earlier(_good_steps(good, "alone_step"), _good_steps(good, "aligned_step"),
                            higher="slower in company", lower="faster in company")
            rows.append(_comparison_row(f"{arm}: good head aligned earlier alone", "alone",
                                        "in company", test))
    arms = sorted(per_trial["arm"].unique())
    key = ["base_seed", "seed", per_trial["head_seeds"].map(tuple).rename("set")]
    reference = _main_arm(arms)
    indexed = per_trial.set_index(key)
    for arm in arms:
        if arm == reference:
            continue
        columns = ["learned", "condition", "kinds", "aligned_step"]
        joined = indexed[indexed["arm"] == arm][columns].join(
            indexed[indexed["arm"] == reference][["learned", "aligned_step"]].rename(
                columns={"learned": "learned_ref", "aligned_step": "aligned_step_ref"}),
            how="inner")
        for condition, part in joined.groupby("condition"):
            x, y = part["learned"].astype(bool), part["learned_ref"].astype(bool)
            test = compare_paired(int((x & y).sum()), int((x & ~y).sum()),
                                  int((~x & y).sum()), int((~x & ~y).sum()), effect=effect,
                                  higher="more learn", lower="fewer learn", same="the same")
            rows.append(_comparison_row(f"{condition}: model learned", arm, reference, test))
            if condition == "one_good":
                test = _earlier(_good_steps(part, "aligned_step"),
                                _good_steps(part, "aligned_step_ref"),
                                higher=f"earlier with {arm}", lower=f"later with {arm}")
                rows.append(_comparison_row("one_good: good head aligned earlier", arm,
                                            reference, test))
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def _good_steps(part: pd.DataFrame, column: str) -> np.ndarray:
    """The good head's first aligned step in each trial of `part` (inf: never)."""
    steps = [s[k.index("good")] for s, k in zip(part[column], part["kinds"])]
    return np.array([v if np.isfinite(v) else np.inf for v in steps], float)


def _main_arm(arms: Sequence[str]) -> str:
    """The arm the others are paired against: the shortest budget with averaged heads."""
    mean = [a for a in arms if a.endswith("mean")] or list(arms)
    return min(mean, key=lambda a: int(a.split()[0]) if a.split()[0].isdigit() else 0)


def _earlier(first: np.ndarray, second: np.ndarray, *, higher: str, lower: str):
    """Sign test (exact McNemar on the discordant pairs) of "first reaches it earlier" over
    paired steps (inf: never): ties where both reached it at one step, or neither did."""
    from sweeper.results.stats import compare_paired

    ties = int(((first == second) & np.isfinite(first)).sum())
    never = int((np.isinf(first) & np.isinf(second)).sum())
    return compare_paired(ties, int((first < second).sum()), int((first > second).sum()),
                          never, higher=higher, lower=lower, same="as fast", unit="trials")


def _comparison_row(what: str, first: str, second: str, test) -> dict[str, Any]:
    return {"what": what, "first": first, "second": second, "n": test.n,
            "estimate": test.estimate, "p_value": test.p_value, "power": test.power,
            "needed": test.needed, "verdict": test.verdict, "test": test.test}


def good_head_steps(per_trial: pd.DataFrame) -> pd.DataFrame:
    """Per arm, the good head of `one_good` trials: aligned alone and in company (of n), and
    the median first-aligned step of each (alone: NaN where the alone sweep did not train
    the arm's budget)."""
    rows = []
    for arm, part in per_trial[per_trial["condition"] == "one_good"].groupby("arm"):
        i = [k.index("good") for k in part["kinds"]]
        alone = np.array([s[j] if s is not None else np.nan
                          for s, j in zip(part["alone_step"], i)], float)
        company = np.array([s[j] for s, j in zip(part["aligned_step"], i)], float)
        known = part["alone"].notna().all()
        rows.append({"arm": arm, "n": len(part),
                     "aligned_alone": int(np.isfinite(alone).sum()) if known else None,
                     "aligned_in_company": int(np.isfinite(company).sum()),
                     "median_step_alone": float(np.nanmedian(alone)) if np.isfinite(alone).any()
                     else np.nan,
                     "median_step_in_company": float(np.nanmedian(company))
                     if np.isfinite(company).any() else np.nan})
    return pd.DataFrame(rows)

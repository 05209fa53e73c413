"""The numbers the two papers report, computed from a sweep's trials and trajectories.

Each table function takes the trials (with outcomes, see `with_outcomes`) and trajectories of a
sweep and returns a plain DataFrame with one row per setting (the `by` columns), so tests can
check it on hand-built frames and `docs/results.md` can quote it. Thresholds and windows are
arguments; nothing is read from the trainer's stored outcomes.

    sweeper papers results --figures figures   # every table, as Markdown; PNGs in figures/
    python -m analysis.papers ...              # the same
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.results import COUNTED_STATUSES, wilson_interval
from sweeper.results.outcomes import DEFAULT_THRESHOLDS, Thresholds
from sweeper.results.words import count

from .errors import AnalysisInputError
from .outcomes import with_outcomes


def _counted(trials: pd.DataFrame) -> pd.DataFrame:
    if "status" not in trials.columns:
        return trials
    return trials[trials["status"].isin(COUNTED_STATUSES)]


def _check(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise AnalysisInputError(f"{what} have no {', '.join(map(repr, missing))}; available: "
                                 + ", ".join(map(str, frame.columns)))


def final_values(trajectories: pd.DataFrame, metric: str, at_most: int | None = None
                 ) -> pd.Series:
    """Per trial, the metric at its last logged step (at or before `at_most` if given)."""
    _check(trajectories, ["trial_id", "step", metric], "trajectories")
    rows = trajectories if at_most is None else trajectories[trajectories["step"] <= at_most]
    last = rows.sort_values("step").groupby("trial_id", sort=False).tail(1)
    return last.set_index("trial_id")[metric]


def max_values(trajectories: pd.DataFrame, metric: str, from_step: int = 0) -> pd.Series:
    """Per trial, the largest value of a scalar metric at steps >= `from_step`."""
    _check(trajectories, ["trial_id", "step", metric], "trajectories")
    rows = trajectories[trajectories["step"] >= from_step]
    return pd.to_numeric(rows[metric], errors="coerce").groupby(rows["trial_id"]).max()


def _per_trial(trials: pd.DataFrame, columns: dict[str, pd.Series]) -> pd.DataFrame:
    frame = _counted(trials).copy()
    for name, values in columns.items():
        frame[name] = frame["trial_id"].map(values).astype(float)
    return frame


def _group(frame: pd.DataFrame, by: Sequence[str]):
    _check(frame, by, "trials")
    return frame.groupby(list(by), sort=True, dropna=False)


def learning_table(trials: pd.DataFrame, trajectories: pd.DataFrame, by: Sequence[str],
                   thresholds: Thresholds = DEFAULT_THRESHOLDS,
                   window: tuple[int, int] = (55, 110), stuck_step: int = 190) -> pd.DataFrame:
    """Snell et al.'s copy numbers per setting: how many seeds learn (accuracy >= threshold)
    with a 95% Wilson interval, when (median and quartiles of steps_to_learn, how many within
    `window`), and where the others are stuck (their accuracy at the last step <= stuck_step).
    """
    trials = with_outcomes(trials, trajectories, thresholds)
    frame = _per_trial(trials, {"stuck": final_values(trajectories, "accuracy", stuck_step)})
    rows = []
    for key, g in _group(frame, by):
        learned = g["learned"].fillna(False).astype(bool)
        steps = g.loc[learned, "steps_to_learn"].astype(float)
        stuck = g.loc[~learned, "stuck"]
        low, high = wilson_interval(int(learned.sum()), len(g))
        attn_low, attn_high = wilson_interval(int(g["attention_learned"].fillna(False)
                                                  .astype(bool).sum()), len(g))
        attention = g["attention_learned"].fillna(False).astype(bool)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))),
                     "seeds": len(g), "learned": int(learned.sum()),
                     "attention_learned": int(attention.sum()),
                     "learned_with_attention": int((learned & attention).sum()),
                     "attention_low": float(attn_low), "attention_high": float(attn_high),
                     "share": learned.mean(), "share_low": float(low), "share_high": float(high),
                     "steps_median": steps.median(), "steps_q25": steps.quantile(0.25),
                     "steps_q75": steps.quantile(0.75),
                     "in_window": int(steps.between(*window).sum()),
                     "stuck_median": stuck.median(), "stuck_min": stuck.min(),
                     "stuck_max": stuck.max()})
    return pd.DataFrame(rows)


PAPER_SCALE_SECONDS = 108.0  # one paper-scale copy training here (d 256, L 40, 200 steps)


def scale_table(trials: pd.DataFrame, trajectories: pd.DataFrame,
                thresholds: Thresholds = DEFAULT_THRESHOLDS,
                paper_seconds: float = PAPER_SCALE_SECONDS) -> pd.DataFrame:
    """The faithful-scale criteria per setting (task.length, model.width, model.heads and
    train.steps, those the sweep has), from a sweep over them with co-occurrence 0 and 0.5 and
    attention learned and uniform (snell_scale):

    - (a) uniform_easy_max: the largest final token accuracy with attention frozen uniform on
      easy data (copying needs attention: <= 0.5); uniform_hard_max, the same on hard data;
    - (b) attention_given_learned: of the learned-attention runs that reach token accuracy
      >= thresholds.accuracy, the share that also reach attention accuracy >=
      thresholds.attention_learned (>= 0.95);
    - (c) easy_learned, hard_learned: seeds reaching token accuracy on easy (>= 90%) and hard
      data (split: some, not all), and the same for attention (easy_attention,
      hard_attention);
    - (d) cost: the median wall time of a trial over a paper-scale one (<= 1/20).
    """
    _check(trials, ["task.length", "model.attention", "task.cooccurrence"], "trials")
    by = [c for c in ("task.length", "model.width", "model.heads", "train.steps")
          if c in trials.columns]
    trials = with_outcomes(trials, trajectories, thresholds)
    frame = _per_trial(trials, {"final_acc": final_values(trajectories, "accuracy")})
    rows = []
    for key, g in _group(frame, by):
        learned_model = g[g["model.attention"] == "learned"]
        uniform_easy = g[(g["model.attention"] == "uniform") & (g["task.cooccurrence"] > 0)]
        easy = learned_model[learned_model["task.cooccurrence"] > 0]
        hard = learned_model[learned_model["task.cooccurrence"] == 0]
        reached = learned_model["learned"].fillna(False).astype(bool)
        with_attention = learned_model["attention_learned"].fillna(False).astype(bool)

        def count(part: pd.DataFrame, column: str) -> str:
            return f"{int(part[column].fillna(False).astype(bool).sum())}/{len(part)}"

        uniform_hard = g[(g["model.attention"] == "uniform") & (g["task.cooccurrence"] == 0)]
        rows.append({
            **dict(zip(by, key)),
            "uniform_easy_max": uniform_easy["final_acc"].max(),
            "uniform_hard_max": uniform_hard["final_acc"].max(),
            "attention_given_learned": ((reached & with_attention).sum() / reached.sum()
                                        if reached.any() else np.nan),
            "easy_learned": count(easy, "learned"), "easy_attention": count(easy,
                                                                            "attention_learned"),
            "hard_learned": count(hard, "learned"), "hard_attention": count(hard,
                                                                            "attention_learned"),
            "cost": learned_model["wall_time_s"].median() / paper_seconds,
        })
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ScaleCriteria:
    """The thresholds of a faithful small scale (docs/results.md, snell_scale): (a) uniform
    attention on easy data ends at token accuracy <= uniform_easy_max, so copying needs
    attention; (b) of the runs that copy, a share >= attention_given_learned also attends;
    (c) easy data learns (token accuracy) in a share >= easy_learned of its seeds. (d), the
    cost, grows with the budget and says nothing about what token accuracy means: not here."""

    uniform_easy_max: float = 0.5
    attention_given_learned: float = 0.95
    easy_learned: float = 0.9


SCALE_CRITERIA = ScaleCriteria()


def _fraction(count: str) -> float:
    """'7/8' (scale_table's counts) as 0.875; NaN for '0/0'."""
    hits, total = (int(part) for part in count.split("/"))
    return hits / total if total else float("nan")


def criteria_columns(table: pd.DataFrame, criteria: ScaleCriteria = SCALE_CRITERIA
                     ) -> pd.DataFrame:
    """`scale_table`'s rows with whether each criterion holds (a, b, c) and all of them
    (holds). (b) holds when no run copies: none copies without attending."""
    given = table["attention_given_learned"]
    return table.assign(
        a=table["uniform_easy_max"] <= criteria.uniform_easy_max,
        b=given.isna() | (given >= criteria.attention_given_learned),
        c=table["easy_learned"].map(_fraction) >= criteria.easy_learned,
    ).assign(holds=lambda t: t["a"] & t["b"] & t["c"])


def budget_table(trials: pd.DataFrame, trajectories: pd.DataFrame,
                 budgets: Sequence[int] | None = None,
                 thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 criteria: ScaleCriteria = SCALE_CRITERIA) -> pd.DataFrame:
    """The faithful-scale criteria at each step budget b: `scale_table` (without its cost) on
    the trajectories up to step b, with `criteria_columns`; train.steps is b.

    Training has no learning-rate schedule (Adam at a constant rate), so a run's first b steps
    are a b-step run's: one long sweep (snell_budget) measures every shorter budget. budgets:
    default every logged step > 0 up to the shortest trial's train.steps."""
    _check(trajectories, ["trial_id", "step"], "trajectories")
    if budgets is None:
        longest = int(_counted(trials)["train.steps"].min())
        steps = trajectories["step"].unique()
        budgets = sorted(int(s) for s in steps if 0 < s <= longest)
    tables = [scale_table(trials.assign(**{"train.steps": int(b)}),
                          trajectories[trajectories["step"] <= b], thresholds)
              for b in budgets]
    table = pd.concat(tables, ignore_index=True).drop(columns="cost")
    return criteria_columns(table, criteria)


def calibrated_range(table: pd.DataFrame, around: int | None = None
                     ) -> tuple[int, int] | None:
    """The budgets [low, high] of `budget_table` where every criterion holds for every
    setting: the unbroken run of budgets containing `around` (None when it fails there), or
    without it the longest run (the earliest of equal ones); None when no budget holds."""
    holds = table.groupby("train.steps", sort=True)["holds"].all()
    runs: list[list[int]] = []
    current: list[int] = []
    for budget, ok in holds.items():
        if ok:
            current.append(int(budget))
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    if around is not None:
        runs = [r for r in runs if r[0] <= around <= r[-1]]
    if not runs:
        return None
    best = max(runs, key=len)
    return best[0], best[-1]


def ktiw_table(trials: pd.DataFrame, trajectories: pd.DataFrame, by: Sequence[str],
               thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """The KTIW claim per setting: medians over seeds of the final and best KTIW-probe
    accuracy, the final uniform-attention and token accuracy, and how many seeds learned."""
    trials = with_outcomes(trials, trajectories, thresholds)
    frame = _per_trial(trials, {
        "ktiw_final": final_values(trajectories, "ktiw_acc"),
        "ktiw_best": max_values(trajectories, "ktiw_acc"),
        "uniform_final": final_values(trajectories, "uniform_acc"),
        "accuracy_final": final_values(trajectories, "accuracy"),
        "attn_final": final_values(trajectories, "attn_acc")})
    frame["learned"] = frame["learned"].fillna(False).astype(int)
    aggregations = {"seeds": ("trial_id", "size"), "learned": ("learned", "sum"),
                    **{c: (c, "median") for c in ("ktiw_final", "ktiw_best", "uniform_final",
                                                   "accuracy_final", "attn_final")}}
    return _group(frame, by).agg(**aggregations).reset_index()


def _mean_of_lists(values: pd.Series) -> pd.Series:
    return values.map(lambda v: float(np.mean(v)) if v is not None and len(v) else np.nan)


def topic_table(trials: pd.DataFrame, trajectories: pd.DataFrame, by: Sequence[str],
                thresholds: Thresholds = DEFAULT_THRESHOLDS, transient: int = 200
                ) -> pd.DataFrame:
    """Lu et al.'s numbers per setting: when the loss leaves its ln C plateau (median, first
    and last seed; `exited` counts seeds that did), final loss, topic attention and topic score
    (mean over topic words), the identity's largest relative residual over the whole run and
    after the first `transient` steps (median over seeds), and the largest distractor score."""
    trials = with_outcomes(trials, trajectories, thresholds)
    scores = trajectories[["trial_id", "step"]].assign(
        score=_mean_of_lists(trajectories["topic_score"]))
    frame = _per_trial(trials, {
        "loss_final": final_values(trajectories, "loss"),
        "attention_final": final_values(trajectories, "topic_attention"),
        "score_final": final_values(scores, "score"),
        "residual_max": max_values(trajectories, "identity_residual"),
        "residual_late": max_values(trajectories, "identity_residual", transient),
        "distractor_max": max_values(trajectories, "distractor_score_max")})
    frame["exit"] = frame["plateau_exit"].astype(float)
    aggregations = {"seeds": ("trial_id", "size"), "exited": ("exit", "count"),
                    "exit_median": ("exit", "median"), "exit_first": ("exit", "min"),
                    "exit_last": ("exit", "max"),
                    **{c: (c, "median") for c in ("loss_final", "attention_final", "score_final",
                                                   "residual_max", "residual_late")},
                    "distractor_max": ("distractor_max", "max")}
    return _group(frame, by).agg(**aggregations).reset_index()


def markdown(frame: pd.DataFrame) -> str:
    """A GitHub Markdown table; floats as `plots.short_number` writes them, NaN as blank."""
    from .plots import short_number

    def cell(value: object) -> str:
        return short_number(float(value)) if isinstance(value, float | np.floating) else str(value)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |",
             "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |"
              for row in frame.itertuples(index=False)]
    return "\n".join(lines)


# ------------------------------------------------------------ the shipped sweeps, end to end

def _section(results_root: str, sweep: str, figures: Path | None) -> str | None:
    """The tables (and figures) of one shipped sweep, or None when it is not stored."""
    from . import plots
    from .load import load

    try:
        res = load(results_root, sweep)
    except AnalysisInputError:
        return None
    trials, traj = res.trials, res.trajectories
    out = [f"## {sweep}: {count(len(trials), 'trial')} stored"]

    def draw(fig, name: str) -> None:
        if figures is not None:
            out.append(f"![{sweep}]({plots.save(fig, figures / name)})")

    if sweep in ("snell_copy", "snell_multihead", "quick"):
        by = {"snell_copy": ["task.cooccurrence"], "snell_multihead": ["model.heads"],
              "quick": ["task.cooccurrence", "task.hardness", "model.heads"]}[sweep]
        table = learning_table(trials, traj, by)
        out.append(markdown(table))
        if sweep == "snell_multihead":
            attention = table.assign(share=table["attention_learned"] / table["seeds"],
                                     share_low=table["attention_low"],
                                     share_high=table["attention_high"],
                                     learned=table["attention_learned"])
            draw(plots.share_figure(attention, "model.heads", "learned to attend"),
                 f"{sweep}_share.png")
        cells = [dict(zip(by, k if isinstance(k, tuple) else (k,)))
                 for k in table[by].itertuples(index=False)]
        draw(plots.seed_lines_figure(trials, traj, cells[:4]), f"{sweep}_seeds.png")
    elif sweep == "snell_uniform":
        by = ["task.cooccurrence", "model.attention"]
        table = ktiw_table(trials, traj, by)
        out.append(markdown(table))
        cells = [dict(zip(by, k)) for k in table[by].itertuples(index=False)]
        draw(plots.trajectory_figure(trials, traj, cells, ("ktiw_acc", "uniform_acc",
                                                           "accuracy", "attn_acc")),
             f"{sweep}.png")
    elif sweep == "snell_phase":
        by = ["task.cooccurrence", "task.hardness", "model.heads"]
        out.append(markdown(learning_table(trials, traj, by)[
            by + ["seeds", "attention_learned", "learned", "learned_with_attention"]]))
    elif sweep == "snell_scale":
        out.append(markdown(scale_table(trials, traj)))
    elif sweep == "snell_budget":
        table = budget_table(trials, traj)
        found = calibrated_range(table)
        out.append(markdown(table[table["train.steps"] % 100 == 0]))
        out.append(f"calibrated range: {found[0]}-{found[1]} steps (every criterion holds for "
                   "every setting at each logged budget in it)" if found else
                   "calibrated range: none (no logged budget meets every criterion)")
    elif sweep == "snell_output_bias":
        by = ["task.hardness", "model.output_bias", "task.cooccurrence"]
        out.append(markdown(learning_table(trials, traj, by)[
            by + ["seeds", "learned", "attention_learned", "share_low", "share_high"]]))
    elif sweep in ("lu_topic", "lu_phase"):
        by = (["model.classifier", "model.train_keys", "model.train_embeddings"]
              if sweep == "lu_topic" else ["task.cooccurrence", "task.distractors"])
        table = topic_table(trials, traj, by)
        out.append(markdown(table))
        if sweep == "lu_topic":
            trained = [{"model.classifier": c, "model.train_keys": True,
                        "model.train_embeddings": True} for c in ("fc", "tc", "tl")]
            ablations = [{"model.classifier": "fc", "model.train_keys": k,
                          "model.train_embeddings": e} for k, e in ((False, True), (True, False))]
            draw(plots.topic_figure(trials, traj, trained), f"{sweep}_identity.png")
            draw(plots.trajectory_figure(trials, traj, trained + ablations,
                                         ("loss", "topic_attention")), f"{sweep}_loss.png")
        else:
            draw(plots.heatmap_figure(table, "task.distractors", "task.cooccurrence",
                                      "exit_median", "median step the loss leaves its plateau"),
                 f"{sweep}_exit.png")
            draw(plots.heatmap_figure(table, "task.distractors", "task.cooccurrence",
                                      "attention_final", "final attention on the topic word"),
                 f"{sweep}_attention.png")
    return "\n\n".join(out)


SHIPPED = ("snell_scale", "snell_budget", "snell_output_bias", "snell_copy", "snell_multihead",
           "snell_phase", "snell_uniform", "lu_topic", "lu_phase", "quick")


def add_arguments(parser: argparse.ArgumentParser, default_results: str = "results") -> None:
    """The arguments of `sweeper papers` and `python -m analysis.papers` (one parser text)."""
    parser.add_argument("results", nargs="?", default=default_results,
                        help=f"the results root holding the shipped sweeps (default: "
                             f"{default_results})")
    parser.add_argument("--sweep", action="append", choices=SHIPPED,
                        help="only these sweeps (default: every one stored)")
    parser.add_argument("--figures", type=Path,
                        help="write each sweep's figures into this folder (PNG; none unless "
                             "given: docs/figures is the shipped results' own)")


def run(args: argparse.Namespace) -> int:
    """Print every stored shipped sweep's tables as Markdown (`--figures`: and draw them)."""
    if "://" not in str(args.results) and not Path(args.results).is_dir():
        print(f"papers: error: results: no folder {str(args.results)!r}; allowed: a results "
              "root holding shipped sweeps", file=sys.stderr)
        return 2
    try:
        sections = [_section(args.results, s, args.figures) for s in args.sweep or SHIPPED]
    except AnalysisInputError as exc:
        print(f"papers: error: {exc}", file=sys.stderr)
        return 2
    print("\n\n".join(s for s in sections if s) or "no shipped sweep is stored there")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m analysis.papers`: the same as `sweeper papers`."""
    parser = argparse.ArgumentParser(prog="python -m analysis.papers", description=__doc__
                                     .splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

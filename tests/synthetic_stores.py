"""Synthetic sweep stores for tests and benchmarks, written through the real store (a test
fixture: it lives in tests/, benchmarks import it from there).

Trajectories are made up here; everything else is sweeper's: trial ids (`TrialSpec`), pack ids,
file names, metadata, the trials table's schema, and the outcomes (derived from the synthetic
trajectories by the same code the trainer uses), so a synthetic store cannot drift from a real
one. The curves are shaped like the papers' (a KTIW plateau, then attention and accuracy
rising; a loss plateau, then escape), with a success probability that falls with hardness,
rises with co-occurrence and rises with heads, so the phase diagrams have every regime in them.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from sweeper.families import family_of, outcome_rules
from sweeper.results import Metric, OutcomeRule, Store, derive_outcomes, label_entropy
from sweeper.results.summary import SummaryWriter
from sweeper.spec import TrialSpec

_STR, _I64, _F64, _BOOL = pa.string(), pa.int64(), pa.float64(), pa.bool_()
_LIST = pa.list_(pa.float64())

COPY_CONFIG = {
    "task.id": _STR, "task.length": _I64, "task.cooccurrence": _F64, "task.hardness": _F64,
    "task.vocab": _I64, "task.mapping": _STR, "task.repeat": _BOOL,
    "task.content_tokens": _I64, "task.lift": _F64,
    "model.id": _STR, "model.width": _I64, "model.heads": _I64, "model.cell": _STR,
    "model.attention": _STR, "model.shared_embedding": _BOOL,
    "train.optimizer": _STR, "train.lr": _F64, "train.batch_size": _I64, "train.steps": _I64,
    "train.eval_every": _I64, "train.eval_size": _I64, "seed": _I64,
}
TOPIC_CONFIG = {
    "task.id": _STR, "task.classes": _I64, "task.topic_words": _I64, "task.distractors": _I64,
    "task.vocab": _I64, "task.samples": _I64, "task.cooccurrence": _F64,
    "model.id": _STR, "model.classifier": _STR, "model.dim": _I64, "model.train_keys": _BOOL,
    "model.train_embeddings": _BOOL, "model.query_std": _F64, "model.embedding_std": _F64,
    "train.optimizer": _STR, "train.lr": _F64, "train.batch_size": _I64, "train.steps": _I64,
    "train.eval_every": _I64, "train.eval_size": _I64, "seed": _I64,
}
DERIVED = ("task.content_tokens", "task.lift")  # follow from the config: not hashed
COPY_SCALARS = ("loss", "accuracy", "attn_acc", "attn_mass", "attn_offset", "attn_peak_mass",
                "attn_concentration", "ktiw_acc", "uniform_acc",
                "loss_block", "accuracy_block", "attn_acc_block",
                "loss_open", "accuracy_open", "attn_acc_open")
COPY_LISTS = ("attn_acc_head", "attn_mass_head")
LOWER_IS_BETTER = ("loss", "loss_block", "loss_open", "identity_residual",
                   "distractor_score_max", "distractor_norm_max")
TOPIC_SCALARS = ("loss", "accuracy", "val_accuracy", "topic_attention", "identity_residual",
                 "topic_score_mean", "distractor_score_max", "distractor_norm_max")
TOPIC_LISTS = ("topic_score", "topic_qv", "identity_lhs", "identity_rhs")


# ---------------------------------------------------------------- helpers

def metrics(topic: bool) -> tuple[Metric, ...]:
    """The families' metric declarations, as synthetic trajectories log them (a test checks
    that they are the trainer's)."""
    scalars, lists = (TOPIC_SCALARS, TOPIC_LISTS) if topic else (COPY_SCALARS, COPY_LISTS)
    return (*(Metric(n, lower_is_better=n in LOWER_IS_BETTER) for n in scalars),
            *(Metric(n, per_item=True) for n in lists))


def trial_spec(flat: dict) -> TrialSpec:
    """A flat config row as the trainer's spec, whose `config()` is what a trial id hashes."""
    groups: dict[str, dict[str, Any]] = {"task": {}, "model": {}, "train": {}}
    for key, value in flat.items():
        group, _, name = key.partition(".")
        if group in groups and name != "id" and key not in DERIVED:
            groups[group][name] = value
    return TrialSpec(task=flat["task.id"], model=flat["model.id"], task_params=groups["task"],
                     model_params=groups["model"], train=groups["train"], seed=flat["seed"])


def logged_steps(steps: int, eval_every: int) -> np.ndarray:
    """0, every eval_every steps, and the last step."""
    return np.unique(np.r_[np.arange(0, steps + 1, eval_every), steps]).astype(np.int32)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _first_step(mask: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Per row, the first step where mask holds, NaN where it never does."""
    hit = mask.any(axis=1)
    return np.where(hit, steps[mask.argmax(axis=1)], np.nan)


@dataclass
class _Pack:
    """Trials of one pack (same shapes) and their curves, (trials, steps[, heads])."""
    pack_id: str
    trials: pd.DataFrame
    steps: np.ndarray
    scalars: dict[str, np.ndarray] = field(default_factory=dict)
    lists: dict[str, np.ndarray] = field(default_factory=dict)
    rows: np.ndarray | None = None  # (trials, steps) bool: which rows exist


# ---------------------------------------------------------------- configs

def copy_configs(cooccurrence: Sequence[float] = (0.0, 0.25, 0.5, 1.0),
                 hardness: Sequence[float] = (0.0, 0.5, 1.0),
                 heads: Sequence[int] = (1, 2, 4), seeds: int = 4, steps: int = 200,
                 eval_every: int = 10, length: int = 10, width: int = 64,
                 attention: Sequence[str] = ("learned",)) -> pd.DataFrame:
    """One row per trial of a copy-v1 x seq2seq grid (config columns, trial_id); a trial
    with attention "uniform" never learns (its accuracy stays on the KTIW plateau)."""
    rows = []
    for c, h, H, mode, seed in itertools.product(cooccurrence, hardness, heads, attention,
                                                 range(seeds)):
        n_tokens = length + round(c * length)
        rows.append({
            "task.id": "copy-v1", "task.length": length,
            "task.cooccurrence": float(c), "task.hardness": float(h),
            "task.vocab": None, "task.mapping": "identity", "task.repeat": False,
            "task.content_tokens": n_tokens, "task.lift": (n_tokens - 1) / (length - 1),
            "model.id": "seq2seq", "model.width": width, "model.heads": int(H),
            "model.cell": "lstm", "model.attention": mode, "model.shared_embedding": H == 1,
            "train.optimizer": "adam", "train.lr": 1e-3, "train.batch_size": 64,
            "train.steps": steps, "train.eval_every": eval_every, "train.eval_size": 256,
            "seed": seed})
    return _with_ids(rows)


def topic_configs(cooccurrence: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
                  distractors: Sequence[int] = (5, 10, 20, 50),
                  classifiers: Sequence[str] = ("fc", "tc", "tl"), seeds: int = 3,
                  steps: int = 5000, eval_every: int = 250) -> pd.DataFrame:
    """One row per trial of a topic-v1 x kq-attention grid."""
    rows = []
    for rho in cooccurrence:
        for m in distractors:
            for clf in classifiers:
                for seed in range(seeds):
                    rows.append({
                        "task.id": "topic-v1", "task.classes": 4, "task.topic_words": 2,
                        "task.distractors": int(m), "task.vocab": 5000, "task.samples": 5000,
                        "task.cooccurrence": float(rho),
                        "model.id": "kq-attention", "model.classifier": clf, "model.dim": 10,
                        "model.train_keys": True, "model.train_embeddings": True,
                        "model.query_std": 0.3, "model.embedding_std": 1e-6,
                        "train.optimizer": "sgd", "train.lr": 0.1, "train.batch_size": None,
                        "train.steps": steps, "train.eval_every": eval_every,
                        "train.eval_size": 950, "seed": seed})
    return _with_ids(rows)


def _with_ids(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame.insert(0, "trial_id", [trial_spec(r).trial_id for r in rows])
    return frame


def _packs(configs: pd.DataFrame, by: list[str], pack_size: int) -> list[pd.DataFrame]:
    """Group trials that share shapes, then cut each group into packs of at most pack_size."""
    packs = []
    for _, group in configs.groupby(by, sort=True):
        for start in range(0, len(group), pack_size):
            packs.append(group.iloc[start:start + pack_size])
    return packs


# ---------------------------------------------------------------- curves

def copy_success_probability(c: np.ndarray, h: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """The synthetic truth: hard to learn at low c or high h, easier with more heads."""
    logit = -2.0 + 8.0 * c * (1.0 - h) + 1.5 * np.log2(heads) - 2.0 * h
    return 1.0 / (1.0 + np.exp(-logit))


def _copy_curves(pack: _Pack, rng: np.random.Generator, copiers: float = 0.0) -> None:
    t = pack.trials
    k, steps = len(t), pack.steps.astype(float)
    budget = float(t["train.steps"].iloc[0])
    p = copy_success_probability(t["task.cooccurrence"].to_numpy(float),
                                 t["task.hardness"].to_numpy(float),
                                 t["model.heads"].to_numpy(float))
    good = (rng.random(k) < p) & (t["model.attention"] != "uniform").to_numpy()
    t_learn = np.where(good, rng.uniform(0.25, 0.75, k) * budget, 3 * budget)
    t_ktiw = np.where(good, t_learn * rng.uniform(0.3, 0.55, k),
                      rng.uniform(0.3, 1.5, k) * budget)
    t_attn = np.where(good, t_learn * rng.uniform(0.65, 0.9, k), 3 * budget)
    width = budget / 40
    s = steps[None, :]

    def rise(at):
        return _sigmoid((s - at[:, None]) / width)

    chance = 1.0 / (t["task.content_tokens"].to_numpy(float) + 2)[:, None]
    plateau = 0.66
    noise = rng.normal(0, 0.005, (k, len(steps)))
    uniform = chance + (plateau - chance) * rise(t_ktiw)
    acc = np.clip(uniform + (1 - plateau) * rise(t_learn) + noise, 0, 1)
    attn = np.clip(0.05 + 0.93 * rise(t_attn) + noise, 0, 1)
    hard = t["task.hardness"].to_numpy(float)[:, None]
    sc = pack.scalars
    sc["accuracy"], sc["attn_acc"] = acc, attn
    sc["loss"] = (1.02 - acc) * np.log(1 / chance)
    sc["attn_mass"] = 0.85 * attn
    sc["ktiw_acc"] = np.clip(0.02 + 0.96 * rise(t_ktiw) + noise, 0, 1)
    sc["uniform_acc"] = np.clip(uniform + noise, 0, 1)
    sc["accuracy_block"] = np.clip(acc - 0.05 * hard, 0, 1)
    sc["accuracy_open"] = np.clip(acc + 0.02 * (1 - hard), 0, 1)
    sc["loss_block"] = (1.02 - sc["accuracy_block"]) * np.log(1 / chance)
    sc["loss_open"] = (1.02 - sc["accuracy_open"]) * np.log(1 / chance)
    sc["attn_acc_block"] = np.clip(attn - 0.05 * hard, 0, 1)
    sc["attn_acc_open"] = np.clip(attn + 0.02 * (1 - hard), 0, 1)
    n_heads = int(t["model.heads"].iloc[0])
    spread = rng.normal(0, 0.05, (k, 1, n_heads))
    pack.lists["attn_acc_head"] = np.clip(attn[:, :, None] + spread, 0, 1)
    pack.lists["attn_mass_head"] = np.clip(0.85 * attn[:, :, None] + spread, 0, 1)
    _attention_peak(pack, good, rise, rng, copiers)


def _attention_peak(pack: _Pack, good: np.ndarray, rise, rng: np.random.Generator,
                    copiers: float) -> None:
    """Where the best head's attention peaks: on the aligned word as attention learns; near
    uniform for the failures, of which a share `copiers` copy through their state late in
    training (accuracy to ~0.97), half attending a fixed 2-5 positions ahead (concentrated:
    regime offset), half diffusely (regime diffuse). With copiers = 0 no random number is
    drawn, so the other curves of a store stay as they were."""
    sc, k = pack.scalars, len(good)
    uniform = 1.0 / (pack.trials["task.length"].to_numpy(float) + 1)[:, None]
    sc["attn_peak_mass"] = np.maximum(sc["attn_mass"], uniform)
    sc["attn_offset"] = np.zeros_like(sc["attn_mass"])
    if copiers:
        copies = ~good & (rng.random(k) < copiers)
        shifted = copies & (rng.random(k) < 0.5)
        late = rise(np.full(k, 0.6 * float(pack.trials["train.steps"].iloc[0])))
        sc["accuracy"] = np.where(copies[:, None],
                                  np.maximum(sc["accuracy"], 0.97 * late), sc["accuracy"])
        ahead = rng.integers(2, 6, k).astype(float)[:, None]
        sc["attn_offset"] = np.where(shifted[:, None] & (late > 0.5), ahead, sc["attn_offset"])
        sc["attn_peak_mass"] = np.where(shifted[:, None], uniform * (1 + 2 * late),
                                        sc["attn_peak_mass"])
    sc["attn_concentration"] = sc["attn_peak_mass"] / uniform


def _topic_curves(pack: _Pack, rng: np.random.Generator) -> None:
    t = pack.trials
    k, steps = len(t), pack.steps.astype(float)
    m = t["task.distractors"].to_numpy(float)
    rho = t["task.cooccurrence"].to_numpy(float)
    n_classes = int(t["task.classes"].iloc[0])
    n_words = n_classes * int(t["task.topic_words"].iloc[0])
    clf = t["model.classifier"].iloc[0]
    base, final = {"fc": (1300, 3.8), "tc": (2300, 3.2), "tl": (3700, 2.0)}.get(clf, (2000, 3))
    escape = base * (m / 20) ** 1.5 / rho**2 * rng.uniform(0.8, 1.2, k)
    jitter = rng.uniform(0.9, 1.1, (k, 1, n_words))
    rise = _sigmoid((steps[None, :] - escape[:, None]) / (0.15 * escape[:, None]))
    score = final * rho[:, None, None] * rise[:, :, None] * jitter  # (k, T, W)
    rhs = 2 * score + (2 / m[:, None, None]) * (np.exp(score) - 1)
    lhs = rhs * (1 + rng.normal(0, 0.002, rhs.shape))
    sc, ls = pack.scalars, pack.lists
    floor = label_entropy(np.full(k, n_classes, dtype=float), rho)[:, None]  # weak rho: higher
    sc["loss"] = floor + (math.log(n_classes) - floor) * (1 - rise) + 0.01
    sc["accuracy"] = np.clip(0.25 + 0.76 * rise + rng.normal(0, 0.005, rise.shape), 0, 1)
    sc["val_accuracy"] = np.clip(sc["accuracy"] + rng.normal(0, 0.01, rise.shape), 0, 1)
    sc["topic_attention"] = np.exp(score).mean(axis=2) / (np.exp(score).mean(axis=2) + m[:, None])
    sc["identity_residual"] = (np.abs(lhs - rhs) / np.maximum(np.abs(rhs), 1e-12)).max(axis=2)
    sc["topic_score_mean"] = score.mean(axis=2)
    sc["distractor_score_max"] = np.abs(rng.normal(0, 0.005, rise.shape))
    sc["distractor_norm_max"] = np.abs(rng.normal(0, 0.01, rise.shape))
    ls["topic_score"], ls["identity_lhs"], ls["identity_rhs"] = score, lhs, rhs
    ls["topic_qv"] = np.sqrt(np.maximum(lhs, 0))


# ---------------------------------------------------------------- records and writing

@dataclass
class SyntheticTrial:
    """One synthetic trial as the store takes it (a `sweeper.results.Record`)."""

    trial_id: str
    status: str
    error: str | None
    wall_time_s: float
    diverged_step: int | None
    trajectory: dict[str, list]
    config: dict[str, Any]
    types: dict[str, pa.DataType]
    metrics: tuple[Metric, ...]
    outcomes: dict[str, Any] = field(default_factory=dict)
    host: str = "synthetic-host"
    outcome_rules: tuple[OutcomeRule, ...] = ()  # the family's: its own outcome columns

    def columns(self) -> dict[str, Any]:
        return self.config

    def column_types(self) -> dict[str, pa.DataType]:
        return self.types


def _mark_failures(pack: _Pack, rng: np.random.Generator, failed: float,
                   diverged: float) -> pd.DataFrame:
    """Status per trial: some trials fail (no rows), some diverge (rows end at a NaN loss)."""
    k, n_steps = len(pack.trials), len(pack.steps)
    draw = rng.random(k)
    status = np.where(draw < failed, "failed", np.where(draw < failed + diverged, "diverged", "ok"))
    rows = np.ones((k, n_steps), bool)
    rows[status == "failed"] = False
    div_at = rng.integers(1, n_steps, k)
    div_step = np.full(k, np.nan)
    for i in np.flatnonzero(status == "diverged"):
        rows[i, div_at[i] + 1:] = False
        pack.scalars["loss"][i, div_at[i]] = np.nan
        div_step[i] = pack.steps[div_at[i]]
    pack.rows = rows
    error = np.where(status == "failed", "RuntimeError: worker died (synthetic)",
                     np.where(status == "diverged", "loss is nan (synthetic)", None))
    return pd.DataFrame({"status": status, "error": error, "diverged_step": div_step},
                        index=pack.trials.index)


def _records(pack: _Pack, config_types: dict[str, pa.DataType], topic: bool,
             rng: np.random.Generator, failed: float, diverged: float) -> list[SyntheticTrial]:
    status = _mark_failures(pack, rng, failed, diverged)
    declared = metrics(topic)
    records = []
    for i, (_, trial) in enumerate(pack.trials.iterrows()):
        rows = pack.rows[i]
        trajectory: dict[str, list] = {"step": pack.steps[rows].tolist()}
        for name, values in pack.scalars.items():
            trajectory[name] = values[i][rows].tolist()
        for name, values in pack.lists.items():
            trajectory[name] = values[i][rows].tolist()
        config = {c: (None if isinstance(v, float) and math.isnan(v) else v)
                  for c, v in trial.items() if c in config_types}
        st = status.iloc[i]
        div = st["diverged_step"]
        error = st["error"] if isinstance(st["error"], str) else None
        records.append(SyntheticTrial(
            trial["trial_id"], str(st["status"]), error, float(rng.uniform(0.5, 2.0)),
            None if math.isnan(div) else int(div), trajectory, config, config_types, declared))
    _derive(records, declared)
    return records


def _derive(records: list[SyntheticTrial], declared: tuple[Metric, ...]) -> None:
    """The stored outcomes: sweeper.results' own derivation, at its default thresholds."""
    names = [m.name for m in declared if not m.per_item]
    frame = pd.DataFrame({
        "trial_id": [r.trial_id for r in records for _ in r.trajectory["step"]],
        "step": [s for r in records for s in r.trajectory["step"]],
        **{n: [v for r in records for v in r.trajectory[n]] for n in names}})
    trials = pd.DataFrame([{"trial_id": r.trial_id, **r.config} for r in records])
    rules = outcome_rules(trials["task.id"].unique())
    outcomes = derive_outcomes(frame, trials, declared, rules=rules).set_index("trial_id")
    for r in records:
        row = outcomes.loc[r.trial_id]
        r.outcomes = {c: (None if pd.isna(v) else (v.item() if hasattr(v, "item") else v))
                      for c, v in row.items()}
        r.outcome_rules = rules


def _manifest(sweep: str, task: str, model: str, n_trials: int) -> dict:
    outcome = family_of(task).phase_outcome  # as the trainer's manifest
    return {"sweep_file": f"# synthetic sweep {sweep}\nname: {sweep}\ntask: {task}\n",
            "task": task, "model": model, "trials_expanded": n_trials, "outcome": outcome,
            "synthetic": True}


def _write_sweep(root: str | os.PathLike, sweep: str, configs: pd.DataFrame, *, topic: bool,
                 pack_by: list[str], pack_size: int, seed: int, failed: float,
                 diverged: float, copiers: float = 0.0, manifest: dict | None = None,
                 merge: bool = False, config_types: dict[str, pa.DataType] | None = None
                 ) -> Path:
    """merge: merge files as a running sweep's writer does after each pack
    (`Store.merge_tiers`, their inputs deleted at once), else one file per pack and table."""
    store = Store.open(os.fspath(root))
    rng = np.random.default_rng(seed)
    config_types = config_types or (TOPIC_CONFIG if topic else COPY_CONFIG)
    budget = configs[["train.steps", "train.eval_every"]].iloc[0]
    steps = logged_steps(int(budget["train.steps"]), int(budget["train.eval_every"]))
    summary = SummaryWriter(store, sweep)  # cells.parquet, as a sweep's Recorder keeps it
    for group in _packs(configs, pack_by, pack_size):
        pack = _Pack("", group, steps)
        if topic:
            _topic_curves(pack, rng)
        else:
            _copy_curves(pack, rng, copiers)
        records = _records(pack, config_types, topic, rng, failed, diverged)
        summary.add(store.write_pack(sweep, records), records, write=False)
        if merge:
            store.merge_tiers(sweep, grace_s=0.0)
    summary.write()
    store.write_manifest(sweep, {**_manifest(sweep, configs["task.id"].iloc[0],
                                             configs["model.id"].iloc[0], len(configs)),
                                 **(manifest or {})})
    return Path(root) / sweep


def write_copy_sweep(root: str | os.PathLike, sweep: str = "copy", *, pack_size: int = 16,
                     seed: int = 0, failed: float = 0.0, diverged: float = 0.0,
                     copiers: float = 0.0, merge: bool = False, **grid) -> Path:
    """Write a copy-v1 sweep under root/sweep; `grid` goes to `copy_configs`; copiers: the
    share of failures that copy without aligning (`_attention_peak`); merge: as a running
    sweep's writer merges (`_write_sweep`)."""
    return _write_sweep(root, sweep, copy_configs(**grid), topic=False,
                        pack_by=["task.cooccurrence", "model.heads"], pack_size=pack_size,
                        seed=seed, failed=failed, diverged=diverged, copiers=copiers,
                        merge=merge)


def write_planned_copy_sweep(root: str | os.PathLike, sweep_file: str, *, pack_size: int = 16,
                             seed: int = 0, failed: float = 0.0, diverged: float = 0.0,
                             merge: bool = False) -> Path:
    """A copy-v1 sweep whose trials are those a sweep file (its text) expands to, with the
    sweep file in its manifest, so that `sweeper status` and `plan` count it as a real one."""
    from sweeper.plan import expand
    from sweeper.search_space import parse_sweep

    parsed = parse_sweep(sweep_file)
    specs = expand(parsed)
    configs = pd.DataFrame([s.flat() for s in specs])
    configs.insert(0, "trial_id", [s.trial_id for s in specs])
    return _write_sweep(root, parsed.name, configs, topic=False,
                        pack_by=["task.cooccurrence", "model.heads"], pack_size=pack_size,
                        seed=seed, failed=failed, diverged=diverged, merge=merge,
                        config_types=specs[0].column_types(),
                        manifest={"sweep_file": sweep_file, "synthetic": True})


def write_topic_sweep(root: str | os.PathLike, sweep: str = "topic", *, pack_size: int = 16,
                      seed: int = 0, failed: float = 0.0, diverged: float = 0.0,
                      **grid) -> Path:
    """Write a topic-v1 sweep under root/sweep; `grid` goes to `topic_configs`."""
    return _write_sweep(root, sweep, topic_configs(**grid), topic=True,
                        pack_by=["task.distractors", "model.classifier"], pack_size=pack_size,
                        seed=seed, failed=failed, diverged=diverged)


RANDOM_SWEEP_FILE = """name: {name}
task: copy-v1
model: seq2seq
search: {{type: random, trials: {cells}}}
seeds: {seeds}
axes:
  task:
    cooccurrence: {{uniform: [0.0, 1.0]}}
    hardness: {{uniform: [0.0, 1.0]}}
  model:
    heads: {{choice: {heads}}}
"""


def write_random_copy_sweep(root: str | os.PathLike, sweep: str = "random", *, cells: int = 60,
                            seeds: int = 2, heads: Sequence[int] = (1, 2), seed: int = 0,
                            steps: int = 100) -> Path:
    """A copy-v1 random search: `cells` configurations whose co-occurrence and hardness are
    drawn uniformly from [0, 1] (continuous: every cell its own values) and whose heads are
    drawn from `heads`, `seeds` seeds each; its manifest says search random, as a real one."""
    rng = np.random.default_rng(seed)
    configs = pd.concat([copy_configs(cooccurrence=(round(float(rng.random()), 6),),
                                      hardness=(round(float(rng.random()), 6),),
                                      heads=(int(rng.choice(heads)),), seeds=seeds, steps=steps)
                         for _ in range(cells)], ignore_index=True)
    text = RANDOM_SWEEP_FILE.format(name=sweep, cells=cells, seeds=list(range(seeds)),
                                    heads=list(heads))
    return _write_sweep(root, sweep, configs, topic=False,
                        pack_by=["task.cooccurrence", "model.heads"], pack_size=16, seed=seed,
                        failed=0.0, diverged=0.0,
                        manifest={"search": "random", "search_draws_cells": True,
                                  "search_samples_level_set": False, "sweep_file": text})


def compact_sweep(folder: str | os.PathLike, row_groups: int | None = None) -> None:
    """`sweeper compact` on a synthetic sweep: the store's own compaction, with the
    trajectories cut into `row_groups` row groups sorted by trial_id (default: the store's).

    Row groups then cover disjoint trial_id ranges, so statistics skip all but one of them for
    a single trial (a pack's own ids are spread over the whole hash space).
    """
    path = Path(folder)
    Store.open(str(path.parent)).compact(path.name, row_groups=row_groups)


def write_four_pack_sweep(root: str | os.PathLike, sweep: str = "copy") -> Path:
    """A small copy sweep for the file-fault tests: 4 cells of 2 seeds, 4 packs of 2 trials."""
    return write_copy_sweep(root, sweep, cooccurrence=(0.0, 0.5), hardness=(0.0, 1.0),
                            heads=(1,), seeds=2, steps=20, pack_size=2)

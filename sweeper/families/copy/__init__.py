"""The copy family (Snell, Zhong, Klein, Steinhardt 2021): copying with controlled co-occurrence.

The whole declaration: the task `copy-v1` (task.py), the model `seq2seq` (config.py; the module
is model.py), the experiment that trains them (experiment.py, with the batches of data.py), what
a trajectory logs, and the outcome its phase diagrams draw: whether attention learned, because at
small scale an LSTM can copy through its state without attending (docs/results.md); `regime`
says which solution a run found instead. probes.py measures the mechanisms behind its results
on freshly trained models.
"""

from __future__ import annotations

from sweeper.families.base import Calibration, Family
from sweeper.families.copy import config, task
from sweeper.families.copy.task import COMPONENTS
from sweeper.results.rules import Category, Condition, OutcomeRule
from sweeper.results.schema import Metric

# Which solution a run found, at its final evaluation: the first that holds. A yes/no cannot
# tell them apart: at the calibrated scale trained 3x longer, one-head runs that never align
# copy 0.97-0.995 of tokens with attention accuracy ~0 (docs/results.md).
REGIME = OutcomeRule("regime", "category", doc="which solution a run found", categories=(
    Category("aligned", (Condition("attn_acc", ">=", "attention_learned"),),
             doc="attention learned: the best head's attention accuracy reached the "
                 "attention_learned threshold"),
    Category("not_copying", (Condition("accuracy", "<", "accuracy"),),
             doc="token accuracy below the accuracy threshold, attention not aligned"),
    Category("offset", (Condition("attn_concentration", ">=", "concentration"),
                        Condition("attn_offset", "!=", 0)),
             doc="copies, the best head's attention concentrated (peak mass at least "
                 "`concentration` times uniform's 1/S) at a fixed distance from the aligned word"),
    Category("partly_aligned", (Condition("attn_concentration", ">=", "concentration"),),
             doc="copies, attention concentrated on the aligned word, but its argmax there too "
                 "rarely for the attention_learned threshold"),
    Category("diffuse", doc="copies with attention neither aligned nor at a fixed distance "
                            "from it (spread out, or fixed on one position such as the "
                            "source's EOS): the LSTM carries the sequence in its state"),
))

# Whether attention learned: the best head's attention accuracy `attn_acc` over content steps
# reached the attention_learned threshold (the first step: attention_steps), how many heads'
# did, the onsets: the first steps with attn_acc, ktiw_acc >= their thresholds, and the regime.
COPY_OUTCOMES = (
    OutcomeRule("attention_learned", "success", "attn_acc", "attention_learned",
                steps="attention_steps",
                label="attention learned: best head's attention accuracy"),
    OutcomeRule("attention_steps", "first_step", "attn_acc", "attention_learned"),
    OutcomeRule("attention_heads", "items_reaching", "attn_acc_head", "attention_learned"),
    OutcomeRule("attention_onset", "first_step", "attn_acc", "attention"),
    OutcomeRule("ktiw_onset", "first_step", "ktiw_acc", "ktiw"),
    REGIME,
)


# Where the attention of the best head (the highest aligned mass) peaks, over content steps
# averaged over the batch (`sweeper.metrics.best_head_peak`): which solution a run found.
ATTENTION_PEAK = (
    Metric("attn_offset", doc="source position minus aligned position where the best head's "
                              "attention mass peaks (0: aligned; best_attn_offset: the largest)"),
    Metric("attn_peak_mass", doc="the best head's mean attention at that offset (uniform: 1/S)"),
    Metric("attn_concentration", doc="attn_peak_mass in units of uniform's 1/S (S = L + 1 "
                                     "source positions): 1 for uniform attention"),
)


# The small scale the shipped Snell sweeps use, chosen at 400 steps by snell_scale's criteria
# (docs/results.md), and the budgets for which those criteria hold, measured by snell_budget
# (analysis.papers.budget_table on 1,200-step trajectories, every 20 steps, 8 seeds, one and
# four heads). At the scale are the trials with these values, whatever their co-occurrence,
# hardness, heads, attention, output bias, evaluation and seeds: length, width and cell set
# what the recurrent state can carry, optimizer, rate and batch how fast it learns to.
SMALL_SCALE = Calibration(
    name="small scale",
    scale={"task.length": 16, "model.width": 32, "model.cell": "lstm",
           "train.optimizer": "adam", "train.lr": 0.003, "train.batch_size": 128},
    steps=(400, 660),
    below="token accuracy runs ahead of attention: at 180-380 steps runs copy before they "
          "attend (of those that copy, 12 of 13 one-head runs attend at 300 steps, 15 of 16 "
          "four-head runs at 380; under 160 easy data does not learn)",
    above="the state copies: one-head runs copy without attending from 680 steps, uniform "
          "attention reaches 0.51 token accuracy on easy data at 720 (0.76-0.86 on hard data "
          "at 1,200): token accuracy no longer needs attention",
    measured_by="search_spaces/snell_budget.yaml, docs/results.md",
)


def copy_metrics(components: tuple[str, ...] = COMPONENTS) -> tuple[Metric, ...]:
    """What a copy experiment logs: loss, token accuracy, attention accuracy and aligned mass
    (the best head's, and per head), where the best head's attention peaks (`ATTENTION_PEAK`),
    the KTIW probe, accuracy with attention forced uniform, and loss / accuracy / attention
    accuracy on each component of the data."""
    return tuple(
        [Metric("loss", lower_is_better=True), Metric("accuracy"), Metric("attn_acc"),
         Metric("attn_mass"), Metric("attn_acc_head", per_item=True),
         Metric("attn_mass_head", per_item=True), *ATTENTION_PEAK, Metric("ktiw_acc"),
         Metric("uniform_acc")]
        + [m for c in components for m in (Metric(f"loss_{c}", lower_is_better=True),
                                           Metric(f"accuracy_{c}"), Metric(f"attn_acc_{c}"))])


def memory_bytes(task: dict, model: dict, train: dict) -> int:
    """Peak bytes of one copy trial's training step (float32), within a small factor: the
    recurrences' saved gates and states, the attention scores, the logits, each kept for the
    backward pass; the parameters with their gradients and Adam's two moments. Scaled by 1.5
    to what was measured (peak RSS growth 276, 78, 1,185 MB for (L, d, B) = (40, 256, 128),
    (16, 32, 512), (100, 256, 256); these estimates: 302, 62, 1,446 MB)."""
    L, d, H = task["length"], model["width"], model["heads"]
    V = (task["vocab"] or L + round(task["cooccurrence"] * L)) + 2
    B = max(train["batch_size"] or 1, train["eval_size"])
    T = S = L + 1
    activations = B * ((S + T) * d * 16 + H * T * S * 3 + T * V * 4)
    parameters = (2 * V * d + 16 * d * d + 2 * H * d * d + 2 * d * d + d * V) * 4
    return int(4 * 1.5 * (activations + parameters))


FAMILY = Family(
    name="copy",
    doc=__doc__.splitlines()[0],
    tasks=(task.TASK,),
    models=(config.MODEL,),
    experiment="sweeper.families.copy.experiment:CopyExperiment",
    metrics=copy_metrics(),
    phase_outcome="attention_learned",
    outcomes=COPY_OUTCOMES,
    derived=("task.content_tokens", "task.lift"),
    summary_columns=("loss", "accuracy", "attn_acc", "ktiw_acc", "uniform_acc"),
    seed_metrics=("accuracy", "attn_acc"),
    labels={"task.content_tokens": "content tokens N", "task.lift": "lift (N-1)/(L-1)"},
    memory_bytes=memory_bytes,
    calibrations=(SMALL_SCALE,),
    small={"task": {"length": 5, "hardness": 0.5}, "model": {"width": 8, "heads": 2},
           "train": {"batch_size": 8, "eval_size": 8, "steps": 6, "eval_every": 3}},
)

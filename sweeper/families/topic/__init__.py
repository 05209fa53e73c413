"""The topic family (Lu, Mao, Nayak, ICLR 2021): attention learning to find a topic word.

The whole declaration: the task `topic-v1` (task.py, sampled once per trial by data.py), the
model `kq-attention` (config.py; the module is model.py), the experiment that trains them
(experiment.py: full-batch SGD by default, as the paper), what a trajectory logs (the topic
word's score and the conserved quantity of the paper's identity, per topic word), and the
outcome its phase diagrams draw (token accuracy `learned`; `plateau_exit` beside it).
"""

from __future__ import annotations

from sweeper.families.base import Family
from sweeper.families.topic import config, task
from sweeper.results.rules import OutcomeRule
from sweeper.results.schema import Metric

METRICS = (
    Metric("loss", lower_is_better=True), Metric("accuracy"), Metric("val_accuracy"),
    Metric("topic_attention"), Metric("topic_score", per_item=True),
    Metric("topic_qv", per_item=True), Metric("identity_lhs", per_item=True),
    Metric("identity_rhs", per_item=True), Metric("identity_residual", lower_is_better=True),
    Metric("topic_score_mean"), Metric("distractor_score_max", lower_is_better=True),
    Metric("distractor_norm_max", lower_is_better=True),
)
# The first step whose loss is below the plateau level: `plateau` of the way from the loss
# floor H(y | topic word) up to ln C (`sweeper.results.plateau_level`).
PLATEAU_EXIT = OutcomeRule("plateau_exit", "below_plateau", "loss", "plateau",
                           config=("task.classes", "task.cooccurrence"))


def memory_bytes(task: dict, model: dict, train: dict) -> int:
    """Peak bytes of one topic trial, within a small factor: its sentences as word ids and the
    bag indices built from them (int64, a few copies), the logits, and the word table with its
    gradient and optimiser state (float32). Measured: 504 MB peak RSS growth for 200,000
    sentences of 51 words over 50,000 words (this estimate: 520 MB)."""
    n, m = task["samples"], task["distractors"] + 1
    words = task["classes"] * task["topic_words"] + task["vocab"]
    return 8 * n * m * 6 + 4 * n * task["classes"] * 4 + 4 * words * (model["dim"] + 1) * 8


FAMILY = Family(
    name="topic",
    doc=__doc__.splitlines()[0],
    tasks=(task.TASK,),
    models=(config.MODEL,),
    experiment="sweeper.families.topic.experiment:TopicExperiment",
    metrics=METRICS,
    phase_outcome="learned",
    outcomes=(PLATEAU_EXIT,),
    train_defaults={"optimizer": "sgd", "lr": 0.1, "batch_size": None, "steps": 5000,
                    "eval_every": 50},
    full_batch=True,
    summary_columns=("loss", "accuracy", "topic_attention", "topic_score_mean",
                     "identity_residual"),
    figures=("identity",),
    seed_metrics=("loss", "topic_attention", "accuracy"),
    memory_bytes=memory_bytes,
    small={"task": {"classes": 3, "vocab": 40, "samples": 200, "distractors": 5},
           "model": {"dim": 4, "classifier": "tl"}, "train": {"steps": 6, "eval_every": 3}},
)

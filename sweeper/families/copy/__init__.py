"""The copy family (Snell, Zhong, Klein, Steinhardt 2021): copying with controlled co-occurrence.

The whole declaration: the task `copy-v1` (task.py), the model `seq2seq` (config.py; the module
is model.py), the experiment that trains them (experiment.py, with the batches of data.py), what
a trajectory logs, and the outcome its phase diagrams draw: whether attention learned, because at
small scale an LSTM can copy through its state without attending (docs/results.md).
"""

from __future__ import annotations

from sweeper.families import Family
from sweeper.families.copy import config, task
from sweeper.families.copy.task import COMPONENTS
from sweeper.results.schema import Metric


def copy_metrics(components: tuple[str, ...] = COMPONENTS) -> tuple[Metric, ...]:
    """What a copy experiment logs: loss, token accuracy, attention accuracy and aligned mass
    (the best head's, and per head), the KTIW probe, accuracy with attention forced uniform, and
    loss / accuracy / attention accuracy on each component of the data."""
    return tuple(
        [Metric("loss", lower_is_better=True), Metric("accuracy"), Metric("attn_acc"),
         Metric("attn_mass"), Metric("attn_acc_head", per_item=True),
         Metric("attn_mass_head", per_item=True), Metric("ktiw_acc"), Metric("uniform_acc")]
        + [m for c in components for m in (Metric(f"loss_{c}", lower_is_better=True),
                                           Metric(f"accuracy_{c}"), Metric(f"attn_acc_{c}"))])


FAMILY = Family(
    name="copy",
    doc=__doc__.splitlines()[0],
    tasks=(task.TASK,),
    models=(config.MODEL,),
    experiment="sweeper.families.copy.experiment:CopyExperiment",
    metrics=copy_metrics(),
    phase_outcome="attention_learned",
    summary_columns=("loss", "accuracy", "attn_acc", "ktiw_acc", "uniform_acc"),
    labels={"task.content_tokens": "content tokens N", "task.lift": "lift (N-1)/(L-1)"},
    small={"task": {"length": 5, "hardness": 0.5}, "model": {"width": 8, "heads": 2},
           "train": {"batch_size": 8, "eval_size": 8, "steps": 6, "eval_every": 3}},
)

"""What a task family trains and measures: batches, the training loss and the evaluation.

An experiment holds K models of one shape (a pack; K = 1 for one trial). `train_loss()` returns
one mean loss per model [K]; `evaluate()` returns each metric of `sweeper.trajectory.METRICS` as
a [K] tensor (or [K, n] for per-head and per-word metrics).
"""

from __future__ import annotations

from typing import Protocol

import torch

from sweeper.spec import TrialSpec


class Experiment(Protocol):
    model: torch.nn.Module

    def train_loss(self) -> torch.Tensor: ...

    def evaluate(self) -> dict[str, torch.Tensor]: ...


def make_experiment(specs: list[TrialSpec], dtype: torch.dtype, device: str) -> Experiment:
    from sweeper.experiments.copy import CopyExperiment
    from sweeper.experiments.topic import TopicExperiment

    family = specs[0].family
    return {"copy": CopyExperiment, "topic": TopicExperiment}[family](specs, dtype, device)

"""Each task family's metric declarations (what its trajectories log, one column each).

The trainer, the store's schemas (`sweeper.results.schema`) and the docs
(`docs/data-model.md`) follow this declaration.
"""

from __future__ import annotations

import pyarrow as pa

from sweeper.results.schema import Metric, scalar
from sweeper.results.schema import trajectory_schema as _trajectory_schema

COPY_METRICS = tuple(
    [Metric("loss", lower_is_better=True), Metric("accuracy"), Metric("attn_acc"),
     Metric("attn_mass"), Metric("attn_acc_head", per_item=True),
     Metric("attn_mass_head", per_item=True), Metric("ktiw_acc"), Metric("uniform_acc")]
    + [m for c in ("block", "open") for m in (Metric(f"loss_{c}", lower_is_better=True),
                                            Metric(f"accuracy_{c}"), Metric(f"attn_acc_{c}"))]
)
TOPIC_METRICS = (
    Metric("loss", lower_is_better=True), Metric("accuracy"), Metric("val_accuracy"),
    Metric("topic_attention"), Metric("topic_score", per_item=True),
    Metric("topic_qv", per_item=True), Metric("identity_lhs", per_item=True),
    Metric("identity_rhs", per_item=True), Metric("identity_residual", lower_is_better=True),
    Metric("topic_score_mean"), Metric("distractor_score_max", lower_is_better=True),
    Metric("distractor_norm_max", lower_is_better=True),
)
METRICS = {"copy": COPY_METRICS, "topic": TOPIC_METRICS}

# The outcome each family's phase diagrams, run summaries, cell tables and reports use by
# default (written into each sweep's manifest, where `analysis` reads it): copy's claim is
# about attention, and at small scale an LSTM can copy without it.
PHASE_OUTCOME = {"copy": "attention_learned", "topic": "learned"}


def trajectory_schema(family: str) -> pa.Schema:
    return _trajectory_schema(METRICS[family])


def scalar_metrics(family: str) -> tuple[Metric, ...]:
    return scalar(METRICS[family])

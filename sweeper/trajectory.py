"""The Arrow schemas of the two tables and the schema version.

Each task family declares its metrics once here; the trainer, the store and the docs
(`docs/data-model.md`) follow this declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Metric:
    name: str
    per_item: bool = False  # a list per row (per head, per topic word)
    lower_is_better: bool = False


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


def trajectory_schema(family: str) -> pa.Schema:
    fields = [pa.field("trial_id", pa.string()), pa.field("step", pa.int32())]
    for m in METRICS[family]:
        fields.append(pa.field(m.name, pa.list_(pa.float64()) if m.per_item else pa.float64()))
    return pa.schema(fields)


def scalar_metrics(family: str) -> tuple[Metric, ...]:
    return tuple(m for m in METRICS[family] if not m.per_item)

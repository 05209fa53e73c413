"""docs/data-model.md documents every column of every registered family's tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.families import TASKS, family_of
from sweeper.results import trajectory_schema, trials_schema
from sweeper.spec import make_spec

DOC = (Path(__file__).resolve().parents[1] / "docs" / "data-model.md").read_text()


def _pairs() -> list[tuple[str, str]]:
    """One (task, model) pair per task: every task with a model that trains on it."""
    pairs = []
    for task in TASKS.ids():
        pairs.append((task, family_of(task).model_ids[0]))
    return pairs


@pytest.mark.parametrize(("task", "model"), _pairs())
def test_every_column_is_documented(task, model):
    spec = make_spec(task, model)
    columns = trials_schema(spec.column_types(), spec.metrics, spec.family.outcome_rules).names
    columns += trajectory_schema(spec.metrics).names
    missing = [c for c in columns if f"`{c}`" not in DOC]
    assert not missing, f"docs/data-model.md lacks {missing}"

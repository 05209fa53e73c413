"""Trial specs: stable trial ids, canonical configs that round-trip, pack keys."""

from __future__ import annotations

import json

import pytest

from sweeper.errors import SweeperInputError
from sweeper.families import MODELS, TASKS, family_of
from sweeper.registry import Param
from sweeper.results import CONFIG_SCHEMA_VERSION
from sweeper.spec import TRAIN_PARAMS, make_spec, spec_from_config


def _model_for(task_id: str) -> str:
    return family_of(task_id).model_ids[0]


def _alternatives(p: Param, current) -> list:
    """Valid-looking values other than `current`, to try in turn."""
    if p.choices is not None:
        return [c for c in p.choices if c != current]
    if p.type is bool:
        return [not current]
    if p.type is list:  # seq2seq's head_seeds: one seed per head (one head by default)
        return [[1], [2, 3]]
    base = current if current is not None else (p.low if p.low is not None else 1)
    out = []
    for value in (base + 1, base * 2, base - 1, base / 2, p.low, p.high, 20, 0.5):
        if value is None:
            continue
        value = p.type(value) if p.type is int else float(value)
        if value != current and value not in out:
            out.append(value)
    return out


def _changed_spec(base: dict, group: str, p: Param):
    """A spec differing from `base` in parameter `p` of `group` only, or None if none is valid.
    A value the entry reads as the current one (seq2seq's `head_merge: mean` is its null) is
    the same model, not an alternative."""
    current = getattr(make_spec(**base), group)[p.name]  # a TrialSpec field
    for value in _alternatives(p, current):
        kwargs = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
        kwargs[group] = {**kwargs[group], p.name: value}
        try:
            spec = make_spec(**kwargs)
        except SweeperInputError:
            continue
        if getattr(spec, group)[p.name] != current:
            return spec
    return None


def _base(task_id: str) -> dict:
    return {"task": task_id, "model": _model_for(task_id), "task_params": {},
            "model_params": {}, "train": {}, "seed": 3}


# -- trial ids ---------------------------------------------------------------------------------
def test_trial_id_is_stable_for_equal_configs():
    a = make_spec("copy-v1", "seq2seq", {"length": 6}, {"heads": 2}, {"lr": 0.01}, seed=1)
    b = make_spec("copy-v1", "seq2seq", {"length": 6}, {"heads": 2}, {"lr": 0.01}, seed=1)
    assert a.trial_id == b.trial_id
    assert len(a.trial_id) == 16 and int(a.trial_id, 16) >= 0
    assert a == b


def test_trial_id_does_not_depend_on_spelling_defaults_or_number_types():
    implicit = make_spec("copy-v1", "seq2seq")
    explicit = make_spec("copy-v1", "seq2seq", {"length": 10.0, "cooccurrence": 0.5,
                                                "hardness": 0, "mapping": "identity"},
                         {"width": 64, "heads": 1}, {"optimizer": "adam", "lr": 0.001,
                                                     "batch_size": 64.0}, seed=0)
    assert implicit.trial_id == explicit.trial_id


def test_trial_id_is_a_pinned_hash_of_the_canonical_json():
    # If this changes, every stored sweep's ids change: bump CONFIG_SCHEMA_VERSION only when
    # what a config means changes. The copy id changed once, on purpose, when seq2seq gained
    # projection_bias and output_bias and copy's vocab became part of every config (the same
    # config now trains another model); topic's is the one every store so far holds.
    spec = make_spec("copy-v1", "seq2seq")
    doc = json.loads(spec.canonical_json())
    assert doc["schema_version"] == CONFIG_SCHEMA_VERSION == 1
    assert spec.canonical_json() == json.dumps(doc, sort_keys=True, separators=(",", ":"))
    assert spec.trial_id == "db0b61a9df62b51e"
    assert make_spec("topic-v1", "kq-attention", seed=3).trial_id == "fe0cff1f52cf1b48"


def test_a_new_metric_or_table_version_leaves_trial_ids_alone(monkeypatch):
    import dataclasses

    from sweeper.families import FAMILIES
    from sweeper.results import Metric, schema

    before = make_spec("copy-v1", "seq2seq", seed=4).trial_id
    copy = FAMILIES["copy"]
    monkeypatch.setitem(FAMILIES, "copy", dataclasses.replace(
        copy, metrics=(*copy.metrics, Metric("new_metric"))))
    monkeypatch.setattr(schema, "TABLE_SCHEMA_VERSION", schema.TABLE_SCHEMA_VERSION + 1)
    assert make_spec("copy-v1", "seq2seq", seed=4).trial_id == before


def test_trial_id_is_independent_of_device():
    cpu = make_spec("topic-v1", "kq-attention", seed=2)
    cuda = make_spec("topic-v1", "kq-attention", seed=2, device="cuda")
    assert cuda.device == "cuda"
    assert cpu.trial_id == cuda.trial_id
    assert cpu == cuda  # the device says where, not what


@pytest.mark.parametrize("task_id", TASKS.ids())
def test_trial_id_differs_when_any_task_or_model_parameter_differs(task_id):
    base = _base(task_id)
    ref = make_spec(**base)
    entries = [("task_params", TASKS.get(task_id)), ("model_params", MODELS.get(base["model"]))]
    checked = 0
    for group, entry in entries:
        for p in entry.params:
            other = _changed_spec(base, group, p)
            assert other is not None, f"no valid alternative value found for {group}.{p.name}"
            assert other.trial_id != ref.trial_id, f"{group}.{p.name} does not change the id"
            checked += 1
    assert checked == len(entries[0][1].params) + len(entries[1][1].params)


@pytest.mark.parametrize("task_id", TASKS.ids())
def test_trial_id_differs_when_any_training_field_or_the_seed_differs(task_id):
    base = _base(task_id)
    ref = make_spec(**base)
    ids = {ref.trial_id}
    for p in TRAIN_PARAMS:
        # a margin is a parameter of the stop rule: changed where the rule is on
        under = {**base, "train": {"stop": "decided"}} if p.name == "stop_margin" else base
        other = _changed_spec(under, "train", p)
        assert other is not None, p.name
        assert other.trial_id not in ids, f"train.{p.name} does not change the id"
        ids.add(other.trial_id)
    reseeded = make_spec(**{**base, "seed": base["seed"] + 1})
    assert reseeded.trial_id not in ids


def test_trial_ids_of_different_tasks_differ():
    assert (make_spec("copy-v1", "seq2seq").trial_id
            != make_spec("topic-v1", "kq-attention").trial_id)


# -- round trips -------------------------------------------------------------------------------
ROUND_TRIP = [
    ("copy-v1", "seq2seq", {"length": 7, "hardness": 0.25, "mapping": "permutation"},
     {"heads": 3, "cell": "gru", "shared_embedding": False}, {"optimizer": "sgd", "lr": 0.5}),
    ("copy-v1", "seq2seq", {"length": 5, "vocab": 9, "repeat": True}, {"attention": "uniform"},
     {"steps": 17, "eval_every": 3, "eval_size": 11, "batch_size": 5}),
    ("topic-v1", "kq-attention", {"distractors": 7, "cooccurrence": 0.6, "classes": 3},
     {"classifier": "tl", "train_keys": False, "embedding_std": 0.2}, {"batch_size": 32}),
    ("topic-v1", "kq-attention", {}, {}, {}),
]


@pytest.mark.parametrize("task,model,tp,mp,tr", ROUND_TRIP)
def test_spec_from_config_round_trips_through_json(task, model, tp, mp, tr):
    spec = make_spec(task, model, tp, mp, tr, seed=5)
    again = spec_from_config(json.loads(json.dumps(spec.config())))
    assert again == spec
    assert again.trial_id == spec.trial_id
    assert again.config() == spec.config()
    assert spec_from_config(spec.config(), device="cuda").device == "cuda"


def test_config_groups_hold_every_resolved_parameter():
    spec = make_spec("copy-v1", "seq2seq", {"length": 4})
    config = spec.config()
    assert set(config) == {"task", "model", "optim", "train", "seed"}
    assert config["task"]["id"] == "copy-v1"
    assert set(config["task"]) - {"id"} == {p.name for p in TASKS.get("copy-v1").params}
    optional = set(MODELS.get("seq2seq").optional)  # hashed only when set (null here)
    assert set(config["model"]) - {"id"} == {p.name for p in MODELS.get("seq2seq").params} \
        - optional
    assert config["optim"] == {"name": "adam", "lr": 1e-3}


def test_family_defaults_give_topic_the_papers_full_batch_sgd():
    spec = make_spec("topic-v1", "kq-attention")
    assert spec.train["optimizer"] == "sgd" and spec.train["lr"] == 0.1
    assert spec.train["batch_size"] is None and spec.train["steps"] == 5000


def test_flat_columns_include_the_derived_lift():
    flat = make_spec("copy-v1", "seq2seq", {"length": 10, "cooccurrence": 0.5}).flat()
    assert flat["task.length"] == 10 and flat["model.heads"] == 1 and flat["train.lr"] == 1e-3
    assert flat["task.content_tokens"] == 15
    assert flat["task.lift"] == pytest.approx(14 / 9)
    assert flat["seed"] == 0


# -- pack keys ---------------------------------------------------------------------------------
def test_specs_differing_in_seed_lr_and_distribution_weights_share_a_pack_key():
    a = make_spec("copy-v1", "seq2seq", {"length": 6, "vocab": 9}, seed=0)
    b = make_spec("copy-v1", "seq2seq", {"length": 6, "vocab": 9, "hardness": 0.7,
                                         "mapping": "permutation"}, train={"lr": 0.1}, seed=4)
    c = make_spec("copy-v1", "seq2seq", {"length": 6, "cooccurrence": 0.5}, seed=1)  # N = 9
    assert a.pack_key() == b.pack_key() == c.pack_key()
    t1 = make_spec("topic-v1", "kq-attention", {"cooccurrence": 1.0}, seed=0)
    t2 = make_spec("topic-v1", "kq-attention", {"cooccurrence": 0.3}, train={"lr": 1.0}, seed=1)
    assert t1.pack_key() == t2.pack_key()


@pytest.mark.parametrize("change", [
    {"task_params": {"length": 7}}, {"task_params": {"cooccurrence": 2.0}},  # N + 2: 11 -> 20
    {"task_params": {"repeat": True}}, {"model_params": {"width": 16}},
    {"model_params": {"heads": 2}}, {"model_params": {"cell": "gru"}},
    {"train": {"optimizer": "sgd"}}, {"train": {"steps": 7}}, {"train": {"batch_size": 8}},
    {"device": "cuda"},
])
def test_specs_differing_in_shape_do_not_share_a_pack_key(change):
    base = {"task": "copy-v1", "model": "seq2seq", "task_params": {"length": 6},
            "model_params": {}, "train": {}}
    merged = {k: ({**base[k], **change[k]} if isinstance(base.get(k), dict) else change[k])
              for k in change}
    assert make_spec(**{**base, **merged}).pack_key() != make_spec(**base).pack_key()

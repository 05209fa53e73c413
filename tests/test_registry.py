"""The task and model registries: every entry builds, bad names and values fail with one message
that names the parameter and what is allowed."""

from __future__ import annotations

import math

import pytest

from sweeper.errors import ParameterError, SweeperInputError, UnknownNameError
from sweeper.families import MODELS, TASKS, families_of_model, family_of
from sweeper.registry import Param
from sweeper.spec import make_spec


# -- every registered entry builds ------------------------------------------------------------
def make_task(id: str, **params):
    return TASKS.make(id, **params)


@pytest.mark.parametrize("task_id", TASKS.ids())
def test_make_task_builds_every_registered_task_from_its_defaults(task_id):
    task = make_task(task_id)
    assert task_id in {t.id for t in family_of(task_id).tasks}
    assert isinstance(task.shape(), tuple)
    assert isinstance(task.derived(), dict)


@pytest.mark.parametrize("task_id", TASKS.ids())
def test_every_task_parameter_declares_a_valid_default(task_id):
    entry = TASKS.get(task_id)
    for p in entry.params:
        assert p.check(p.default, p.name) == p.default
        assert p.allowed()  # the listing has something to say about every parameter


@pytest.mark.parametrize("model_id", MODELS.ids())
def test_every_registered_model_builds_and_names_a_task_family(model_id):
    cfg = MODELS.make(model_id)
    assert families_of_model(model_id), f"no family trains {model_id}"
    assert all(f.tasks for f in families_of_model(model_id))
    assert isinstance(cfg.shape(), tuple)


def test_task_ids_are_versioned_and_listed_sorted():
    ids = TASKS.ids()
    assert ids == sorted(ids)
    assert {"copy-v1", "topic-v1"} <= set(ids)
    assert all("-v" in i and i.rsplit("-v", 1)[1].isdigit() for i in ids)


def test_registering_an_id_twice_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        TASKS.add(TASKS.get("copy-v1"))


# -- did you mean ----------------------------------------------------------------------------
def test_unknown_task_id_suggests_the_closest_one():
    with pytest.raises(UnknownNameError) as err:
        make_task("copy-v2")
    assert "did you mean 'copy-v1'" in str(err.value)
    assert "topic-v1" in str(err.value)  # the allowed ids are listed
    assert isinstance(err.value, SweeperInputError)


def test_unknown_model_id_suggests_the_closest_one():
    with pytest.raises(UnknownNameError, match="did you mean 'seq2seq'"):
        MODELS.get("seq2sq")


def test_unknown_task_parameter_suggests_the_closest_one():
    with pytest.raises(UnknownNameError, match="did you mean 'length'"):
        make_task("copy-v1", lenght=5)


def test_unknown_parameter_in_a_spec_is_named_with_its_group():
    with pytest.raises(UnknownNameError, match="did you mean 'model.heads'"):
        make_spec("copy-v1", "seq2seq", model_params={"head": 2})
    with pytest.raises(UnknownNameError, match="did you mean 'train.lr'"):
        make_spec("copy-v1", "seq2seq", train={"lr_": 0.1})


def test_a_name_far_from_every_allowed_one_gets_no_suggestion():
    with pytest.raises(UnknownNameError) as err:
        make_task("zzzzzz")
    assert "did you mean" not in str(err.value)


# -- wrong types and out-of-range values -------------------------------------------------------
BAD_VALUES = [
    # (registry, id, params, parameter named, text of the allowed range)
    ("task", "copy-v1", {"length": 1}, "length", ">= 2"),
    ("task", "copy-v1", {"length": 2.5}, "length", "an integer"),
    ("task", "copy-v1", {"length": True}, "length", "an integer"),
    ("task", "copy-v1", {"length": "10"}, "length", "an integer"),
    ("task", "copy-v1", {"cooccurrence": -0.1}, "cooccurrence", ">= 0"),
    ("task", "copy-v1", {"cooccurrence": math.nan}, "cooccurrence", "a number"),
    ("task", "copy-v1", {"cooccurrence": math.inf}, "cooccurrence", "a number"),
    ("task", "copy-v1", {"cooccurrence": False}, "cooccurrence", "a number"),
    ("task", "copy-v1", {"hardness": 1.5}, "hardness", ">= 0 and <= 1"),
    ("task", "copy-v1", {"hardness": -0.01}, "hardness", ">= 0 and <= 1"),
    ("task", "copy-v1", {"mapping": "random"}, "mapping", "one of 'identity', 'permutation'"),
    ("task", "copy-v1", {"repeat": 1}, "repeat", "true or false"),
    ("task", "copy-v1", {"vocab": 0}, "vocab", ">= 1"),
    ("task", "copy-v1", {"length": 10, "vocab": 5}, "vocab", ">= length"),
    ("task", "topic-v1", {"classes": 0}, "classes", ">= 1"),
    ("task", "topic-v1", {"topic_words": 0}, "topic_words", ">= 1"),
    ("task", "topic-v1", {"distractors": -1}, "distractors", ">= 0"),
    ("task", "topic-v1", {"samples": 1}, "samples", ">= 2"),
    ("task", "topic-v1", {"cooccurrence": 1.5}, "cooccurrence", "<= 1"),
    ("task", "topic-v1", {"classes": 1, "cooccurrence": 0.5}, "cooccurrence", "1 when classes"),
    ("model", "seq2seq", {"heads": 0}, "heads", ">= 1"),
    ("model", "seq2seq", {"heads": True}, "heads", "an integer"),
    ("model", "seq2seq", {"width": 0}, "width", ">= 1"),
    ("model", "seq2seq", {"cell": "rnn"}, "cell", "one of 'lstm', 'gru'"),
    ("model", "seq2seq", {"attention": "hard"}, "attention", "'learned', 'uniform'"),
    ("model", "seq2seq", {"shared_embedding": "yes"}, "shared_embedding", "true or false"),
    ("model", "kq-attention", {"classifier": "mlp"}, "classifier", "'fc', 'tc', 'tl'"),
    ("model", "kq-attention", {"dim": 0}, "dim", ">= 1"),
    ("model", "kq-attention", {"query_std": -1.0}, "query_std", ">= 0"),
    ("model", "kq-attention", {"train_keys": 0}, "train_keys", "true or false"),
]


@pytest.mark.parametrize("kind,id,params,name,allowed", BAD_VALUES,
                         ids=[f"{b[1]}-{b[3]}={list(b[2].values())[-1]!r}" for b in BAD_VALUES])
def test_bad_value_raises_input_error_naming_parameter_and_allowed_range(kind, id, params, name,
                                                                        allowed):
    registry = TASKS if kind == "task" else MODELS
    with pytest.raises(SweeperInputError) as err:
        registry.make(id, **params)
    message = str(err.value)
    assert message.startswith(f"{name}:"), message
    assert "allowed" in message and allowed in message, message
    assert "\n" not in message  # one line for the CLI


def test_bad_value_in_a_spec_is_prefixed_with_its_group():
    with pytest.raises(ParameterError, match=r"^task\.length: got 1; allowed: an integer >= 2"):
        make_spec("copy-v1", "seq2seq", task_params={"length": 1})
    with pytest.raises(ParameterError, match=r"^model\.heads: got 0; allowed"):
        make_spec("copy-v1", "seq2seq", model_params={"heads": 0})
    with pytest.raises(ParameterError, match=r"^train\.lr: got -1"):
        make_spec("copy-v1", "seq2seq", train={"lr": -1})
    with pytest.raises(ParameterError, match=r"^task\.vocab: got 5; allowed: >= length"):
        make_spec("copy-v1", "seq2seq", task_params={"length": 10, "vocab": 5})


@pytest.mark.parametrize("seed", [-1, True, 1.5, "0"])
def test_bad_seed_is_refused(seed):
    with pytest.raises(ParameterError, match="^seed: "):
        make_spec("copy-v1", "seq2seq", seed=seed)


def test_model_of_the_wrong_family_is_refused_naming_the_allowed_models():
    with pytest.raises(ParameterError, match="allowed for topic-v1: kq-attention"):
        make_spec("topic-v1", "seq2seq")


def test_full_batch_is_refused_for_copy():
    with pytest.raises(ParameterError, match="train.batch_size"):
        make_spec("copy-v1", "seq2seq", train={"batch_size": None})


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cuda:0\n", "cuda:", 0])
def test_unknown_device_is_refused(device):
    with pytest.raises(ParameterError, match="^device: got .*; allowed: cpu, cuda or cuda:N$"):
        make_spec("copy-v1", "seq2seq", device=device)


# -- coercion of good values -------------------------------------------------------------------
def test_integral_float_is_accepted_as_int_and_int_as_float():
    task = make_task("copy-v1", length=6.0, cooccurrence=0)
    assert task.length == 6 and isinstance(task.length, int)
    assert task.cooccurrence == 0.0 and isinstance(task.cooccurrence, float)


def test_nullable_parameter_accepts_none_and_others_do_not():
    assert make_task("copy-v1", vocab=None).content_tokens == 15  # 10 + round(0.5 * 10)
    with pytest.raises(ParameterError, match="length"):
        make_task("copy-v1", length=None)


def test_param_allowed_text_lists_bounds_and_null():
    p = Param("x", float, None, low=0, high=1, nullable=True)
    assert p.allowed() == "a number >= 0 and <= 1 (or null)"
    assert p.check(None, "x") is None
    assert p.check(1, "x") == 1.0

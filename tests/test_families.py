"""One contract suite over every registered task family (built-in or plugin): no per-family code.

Registering a family (`sweeper.families.register_family`, or the `sweeper.families` entry-point
group) is enough to get it listed, validated, trained, stored and summarised by these tests,
through the family's own small config (`Family.small`). Each test is parametrized over
every (family, task, model) the registries hold when the suite starts.
"""

from __future__ import annotations

import math

import pytest
import torch

from sweeper.families import MODELS, TASKS, families, family_of
from sweeper.report import trial_summary
from sweeper.results import OUTCOME_COLUMNS, SUCCESS_OUTCOMES, Store, trajectory_schema
from sweeper.search_space import parse_sweep
from sweeper.spec import make_spec, spec_from_config, spec_from_flat
from sweeper.train import train, train_pack

CASES = [(f.name, t.id, m) for f in families().values() for t in f.tasks for m in f.model_ids]
IDS = [f"{task}-{model}" for _, task, model in CASES]
FAMILY_NAMES = sorted(families())


def _spec(task: str, model: str, seed: int = 0):
    small = family_of(task).small
    return make_spec(task, model, small.get("task"), small.get("model"), small.get("train"),
                     seed)


def _flat(value) -> list[float]:
    return [float(v) for v in (value if isinstance(value, list) else [value])]


# -- the declaration ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_a_family_declares_what_every_part_reads(name):
    family = families()[name]
    names = [m.name for m in family.metrics]
    assert len(names) == len(set(names)), "metric names repeat"
    assert {"loss", "accuracy"} <= set(names), "every family logs loss and accuracy"
    assert set(family.summary_columns) <= set(names)
    assert family.phase_outcome in SUCCESS_OUTCOMES
    assert family.tasks and family.models and family.small
    module, _, attr = family.experiment.partition(":")
    assert module and attr, "experiment is 'module:Class'"
    for task in family.tasks:
        assert family_of(task.id) is family
        TASKS.make(task.id)  # every default is valid
        assert task.id.rsplit("-v", 1)[-1].isdigit(), "task ids are versioned: name-vN"
    for model in family.model_ids:
        MODELS.make(model)


@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_a_sweep_file_over_the_family_validates(name, task, model):
    small = family_of(task).small
    text = "\n".join([f"name: contract-{name}", f"task: {task}", f"model: {model}",
                      "fixed: " + repr({k: dict(v) for k, v in small.items()}).replace("'", ""),
                      "seeds: 2"])
    sweep = parse_sweep(text)
    assert sweep.family is families()[name]


# -- training -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_a_trial_logs_every_declared_metric_at_every_evaluation(name, task, model):
    spec = _spec(task, model)
    result = train(spec)
    steps, every = spec.train["steps"], spec.train["eval_every"]
    assert result.status == "ok"
    assert result.trajectory["step"] == sorted({*range(0, steps + 1, every), steps})
    assert set(result.trajectory) == {"step"} | {m.name for m in spec.metrics}
    for metric in spec.metrics:
        for value in result.trajectory[metric.name]:
            assert isinstance(value, list) == metric.per_item, metric.name
            assert all(math.isfinite(v) for v in _flat(value)), metric.name
    assert set(result.outcomes) >= set(OUTCOME_COLUMNS)
    assert isinstance(result.outcomes[family_of(task).phase_outcome], bool)
    assert trial_summary(result, "out").startswith(f"trial {result.trial_id}")


@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_training_is_deterministic_given_the_seed_and_differs_across_seeds(name, task, model):
    a, b = train(_spec(task, model, seed=3)), train(_spec(task, model, seed=3))
    c = train(_spec(task, model, seed=4))
    assert a.trajectory == b.trajectory
    assert a.trajectory["loss"] != c.trajectory["loss"]


@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_a_pack_trains_each_model_as_it_trains_alone(name, task, model):
    specs = [_spec(task, model, seed=s) for s in (1, 2)]
    packed = train_pack(specs, dtype=torch.float64)
    for spec, result in zip(specs, packed):
        alone = train_pack([spec], dtype=torch.float64)[0]
        for metric in spec.metrics:
            for x, y in zip(result.trajectory[metric.name], alone.trajectory[metric.name]):
                assert _flat(x) == pytest.approx(_flat(y), rel=1e-7, abs=1e-9), metric.name


def _steps(experiment, optimizer, n: int) -> None:
    """n optimiser steps of a pack, as `train_pack` takes them (every model alive)."""
    for _ in range(n):
        optimizer.zero_grad()
        losses = experiment.train_loss()
        alive = torch.ones_like(losses, dtype=torch.bool)
        losses.sum().backward()
        optimizer.step(alive)


@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_models_that_leave_a_pack_leave_the_others_as_they_train_alone(name, task, model):
    """`Experiment.keep` and `PackedOptimizer.keep`: a pack of three that drops its middle
    model after a few steps trains the other two as a pack of them alone does."""
    from sweeper.optim import PackedOptimizer
    from sweeper.train import make_experiment

    specs = [_spec(task, model, seed=s) for s in (1, 2, 3)]
    if getattr(make_experiment(specs[:1], torch.float64, "cpu"), "keep", None) is None:
        pytest.skip(f"{name}'s experiment has no keep(): a decided model stays in, masked")

    def pack(chosen):
        experiment = make_experiment(chosen, torch.float64, "cpu")
        lr = torch.tensor([s.train["lr"] for s in chosen], dtype=torch.float64)
        return experiment, PackedOptimizer(list(experiment.model.parameters()), lr,
                                           chosen[0].train["optimizer"])

    shrunk, optimizer = pack(specs)
    _steps(shrunk, optimizer, 4)
    shrunk.keep([0, 2])
    optimizer = optimizer.keep(list(shrunk.model.parameters()), [0, 2])
    _steps(shrunk, optimizer, 4)
    pair, pair_optimizer = pack([specs[0], specs[2]])
    _steps(pair, pair_optimizer, 8)
    got, want = shrunk.evaluate(), pair.evaluate()
    assert set(got) == set(want)
    for metric, value in want.items():
        assert got[metric].shape == value.shape, metric
        assert torch.allclose(got[metric], value, rtol=1e-7, atol=1e-9, equal_nan=True), metric


@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_training_leaves_the_global_rng_alone(name, task, model):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    train(_spec(task, model))
    assert torch.equal(torch.rand(3), expected)


# -- storing ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_a_trained_pack_stores_and_reads_back_with_its_config(name, task, model):
    specs = [_spec(task, model, seed=s) for s in (0, 1)]
    results = train_pack(specs)
    store = Store.open(f"memory://contract-{name}-{model}")
    store.write_pack("contract", results)
    trials = store.read("contract", "trials")
    assert sorted(trials.column("trial_id").to_pylist()) == sorted(s.trial_id for s in specs)
    for column, type_ in specs[0].column_types().items():
        assert trials.schema.field(column).type == type_, column
    trajectories = store.read("contract", "trajectories")
    assert set(trajectory_schema(specs[0].metrics).names) <= set(
        trajectories.schema.names)
    assert trajectories.num_rows == sum(len(r.trajectory["step"]) for r in results)
    assert spec_from_config(specs[0].config()) == specs[0]
    for row in trials.to_pandas().to_dict("records"):  # what was stored is what the id names
        assert spec_from_flat(row).trial_id == row["trial_id"]



@pytest.mark.parametrize(("name", "task", "model"), CASES, ids=IDS)
def test_a_memory_estimate_grows_with_the_batch(name, task, model):
    if family_of(task).memory_bytes is None:
        pytest.skip("the family declares no memory estimate")
    small = _spec(task, model)
    bigger = make_spec(task, model, small.task_params, small.model_params,
                       {**small.train, "batch_size": 64 * (small.train["batch_size"] or 1),
                        "eval_size": 64 * small.train["eval_size"]})
    assert 0 < small.memory_bytes() <= bigger.memory_bytes()

"""The trainer: packing equivalence (float64), divergence, trajectory structure."""

from __future__ import annotations

import math

import pytest
import torch
from sweep_helpers import derive_outcomes

from sweeper.errors import SweeperError
from sweeper.families import families
from sweeper.optim import PackedOptimizer
from sweeper.spec import make_spec
from sweeper.train import make_experiment, train, train_pack

F64 = torch.float64
TOL = 1e-9


def assert_same_trajectory(a: dict, b: dict, tol: float = TOL) -> None:
    assert a.keys() == b.keys()
    assert a["step"] == b["step"]
    for name in a:
        for step, x, y in zip(a["step"], a[name], b[name]):
            xs, ys = (x, y) if isinstance(x, list) else ([x], [y])
            assert len(xs) == len(ys), name
            for u, v in zip(xs, ys):
                if math.isnan(v):
                    assert math.isnan(u), f"{name} at step {step}"
                elif math.isinf(v):
                    assert u == v, f"{name} at step {step}: {u} {v}"
                else:
                    assert abs(u - v) <= tol * max(1.0, abs(v)), f"{name} at step {step}: {u} {v}"


def assert_same_outcomes(a: dict, b: dict, tol: float = TOL) -> None:
    """Outcome dicts equal key by key: None, booleans and names (regime) exactly, numbers within
    `tol`.

    Written out rather than `pytest.approx(dict)`, whose handling of None changed in pytest 9.
    """
    assert a.keys() == b.keys()
    for name, x in a.items():
        y = b[name]
        if x is None or y is None or any(isinstance(v, bool | str) for v in (x, y)):
            assert x is y or x == y and type(x) is type(y), f"{name}: {x!r} {y!r}"
        elif isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), f"{name}: {x!r} {y!r}"
        else:
            assert abs(x - y) <= tol * max(1.0, abs(y)), f"{name}: {x!r} {y!r}"


def _copy_specs(optimizer: str, lrs: list[float]) -> list:
    """Three copy specs of one pack with different seeds and per-model knobs, vocabulary
    included (N = 6, 5, 6: the second model's is padded)."""
    variants = [{"length": 4, "vocab": 6}, {"length": 4, "cooccurrence": 0.25, "hardness": 0.5,
                                            "mapping": "permutation"},
                {"length": 4, "vocab": 6, "hardness": 1.0}]
    return [make_spec("copy-v1", "seq2seq", tp, {"width": 8, "heads": 2},
                      {"optimizer": optimizer, "lr": lr, "steps": 12, "eval_every": 4,
                       "batch_size": 8, "eval_size": 8}, seed=seed)
            for seed, tp, lr in zip([0, 5, 2], variants, lrs)]


def _topic_specs(optimizer: str, classifier: str, lrs: list[float], **model) -> list:
    return [make_spec("topic-v1", "kq-attention",
                      {"vocab": 30, "samples": 60, "distractors": 5, "cooccurrence": rho},
                      {"classifier": classifier, **model},
                      {"optimizer": optimizer, "lr": lr, "steps": 12, "eval_every": 4},
                      seed=seed)
            for seed, rho, lr in zip([0, 3, 1], [1.0, 0.7, 0.3], lrs)]


EQUIVALENCE = {
    "copy-seq2seq-adam": lambda: _copy_specs("adam", [1e-3, 1e-2, 3e-3]),
    "copy-seq2seq-sgd": lambda: _copy_specs("sgd", [0.1, 1.0, 0.5]),
    "topic-fc-sgd": lambda: _topic_specs("sgd", "fc", [0.1, 1.0, 3.0]),
    "topic-fc-adam": lambda: _topic_specs("adam", "fc", [1e-2, 3e-2, 0.1]),
    "topic-tl-sgd": lambda: _topic_specs("sgd", "tl", [0.1, 0.5, 1.0]),
    "topic-tc-adam-minibatch": lambda: [
        make_spec(s.task, s.model, s.task_params, s.model_params, {**s.train, "batch_size": 16},
                  s.seed) for s in _topic_specs("adam", "tc", [1e-2, 3e-2, 0.1])],
}


@pytest.mark.parametrize("case", list(EQUIVALENCE))
def test_pack_gives_the_trajectories_of_its_models_trained_alone(case):
    specs = EQUIVALENCE[case]()
    assert len({s.pack_key() for s in specs}) == 1
    packed = train_pack(specs, dtype=F64)
    for spec, result in zip(specs, packed):
        alone = train(spec, dtype=F64)
        assert result.spec == spec and result.status == alone.status == "ok"
        assert_same_trajectory(result.trajectory, alone.trajectory)
        assert_same_outcomes(result.outcomes, alone.outcomes)
    # the models really differ: the pack is not K copies of one training
    assert packed[0].trajectory["loss"] != packed[1].trajectory["loss"]


@pytest.mark.parametrize("family", ["copy", "topic"])
def test_pack_parameters_equal_solo_parameters_after_training(family):
    # Compares the weights themselves at 1e-12, independent of metric precision.
    specs = _copy_specs("adam", [1e-3, 1e-2, 3e-3]) if family == "copy" else \
        _topic_specs("adam", "tl", [1e-2, 3e-2, 0.1])

    def run(group):
        experiment = make_experiment(group, F64, "cpu")
        lr = torch.tensor([s.train["lr"] for s in group], dtype=F64)
        opt = PackedOptimizer(list(experiment.model.parameters()), lr, "adam")
        alive = torch.ones(len(group), dtype=torch.bool)
        for _ in range(6):
            opt.zero_grad()
            experiment.train_loss().sum().backward()
            opt.step(alive)
        return dict(experiment.model.named_parameters())

    packed = run(specs)
    for k, spec in enumerate(specs):
        for name, value in run([spec]).items():
            # a model with a smaller vocabulary holds its own in the leading rows and columns;
            # the pack's padding past them stays exactly zero
            own = tuple(slice(0, n) for n in value[0].shape)
            torch.testing.assert_close(packed[name][k][own], value[0], rtol=1e-12, atol=1e-12,
                                       msg=lambda m, n=name: f"{n}: {m}")
            padding = packed[name][k].clone()
            padding[own] = 0
            assert not padding.any(), name


def test_pack_with_different_query_std_equals_its_models_trained_alone():
    # query_std (and embedding_std) change the initialisation; a pack must honour each spec's.
    specs = [make_spec("topic-v1", "kq-attention", {"vocab": 30, "samples": 60, "distractors": 5},
                       {"query_std": q, "embedding_std": e}, {"steps": 8, "eval_every": 4},
                       seed=s) for s, q, e in [(0, 0.3, None), (1, 1.0, 0.01)]]
    try:
        packed = train_pack(specs, dtype=F64)
    except SweeperError:  # refusing is fine too, if the pack keys say they differ in shape
        assert specs[0].pack_key() != specs[1].pack_key()
        return
    for spec, result in zip(specs, packed):
        assert_same_trajectory(result.trajectory, train(spec, dtype=F64).trajectory)


def test_pack_of_specs_with_different_shapes_is_refused():
    a = make_spec("copy-v1", "seq2seq", {"length": 4})
    b = make_spec("copy-v1", "seq2seq", {"length": 5})
    with pytest.raises(SweeperError, match="one shape"):
        train_pack([a, b])


# -- divergence --------------------------------------------------------------------------------
def _diverging(seed: int = 1, lr: float = 1e4):
    # tl's two linear layers grow each other multiplicatively under SGD at this lr: inf, then NaN
    return make_spec("topic-v1", "kq-attention", {"vocab": 30, "samples": 60, "distractors": 5},
                     {"classifier": "tl"}, {"optimizer": "sgd", "lr": lr, "steps": 20,
                                            "eval_every": 2}, seed=seed)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_non_finite_loss_ends_the_trial_as_diverged_recorded_not_raised(dtype):
    result = train(_diverging(), dtype=dtype)
    assert result.status == "diverged"
    assert isinstance(result.diverged_step, int) and 0 < result.diverged_step < 20
    assert str(result.diverged_step) in result.error
    steps = result.trajectory["step"]
    assert steps[0] == 0 and steps[-1] <= result.diverged_step
    assert all(len(v) == len(steps) for v in result.trajectory.values())
    assert result.outcomes["learned"] in (True, False)


def test_healthy_model_in_a_pack_with_a_diverging_one_keeps_its_solo_trajectory():
    healthy = _diverging(seed=0, lr=0.1)
    specs = [healthy, _diverging(seed=1)]
    packed = train_pack(specs, dtype=F64)
    alone = [train(s, dtype=F64) for s in specs]
    assert packed[0].status == alone[0].status == "ok"
    assert packed[1].status == alone[1].status == "diverged"
    assert packed[1].diverged_step == alone[1].diverged_step
    assert packed[0].trajectory["step"][-1] == 20
    assert_same_trajectory(packed[0].trajectory, alone[0].trajectory)
    assert_same_trajectory(packed[1].trajectory, alone[1].trajectory)


# -- trajectory structure ----------------------------------------------------------------------
def test_copy_trajectory_has_every_metric_at_every_eval_step_and_the_last():
    spec = make_spec("copy-v1", "seq2seq", {"length": 4}, {"width": 8, "heads": 3},
                     {"steps": 10, "eval_every": 4, "batch_size": 8, "eval_size": 8})
    calls = []
    result = train(spec, report=lambda step, rows: calls.append((step, rows)))
    traj = result.trajectory
    assert traj["step"] == [0, 4, 8, 10]
    assert set(traj) == {"step"} | {m.name for m in families()["copy"].metrics}
    for m in families()["copy"].metrics:
        assert len(traj[m.name]) == 4
        if m.per_item:
            assert all(len(v) == 3 for v in traj[m.name]), m.name
        else:
            assert all(isinstance(v, float) and math.isfinite(v) for v in traj[m.name]), m.name
    assert [s for s, _ in calls] == [0, 4, 8, 10] and all(len(rows) == 1 for _, rows in calls)
    assert result.outcomes == derive_outcomes("copy", traj)
    assert result.status == "ok" and result.diverged_step is None and result.error is None
    assert result.trial_id == spec.trial_id and result.wall_time_s > 0


PROBES = ("ktiw_acc", "uniform_acc", "loss_block", "accuracy_block", "attn_acc_block",
          "loss_open", "accuracy_open", "attn_acc_open")


def _copy_spec(**train):
    return make_spec("copy-v1", "seq2seq", {"length": 5, "cooccurrence": 0.4, "hardness": 0.5},
                     {"width": 8, "heads": 2},
                     {"steps": 12, "eval_every": 2, "batch_size": 8, "eval_size": 8, **train})


def test_probes_run_every_probe_every_steps_and_leave_the_other_metrics_unchanged():
    every = train(_copy_spec()).trajectory
    sparse = train(_copy_spec(probe_every=6)).trajectory
    assert sparse["step"] == every["step"] == [0, 2, 4, 6, 8, 10, 12]
    for name in every:
        if name in PROBES:  # measured at 0, 6, 12 only, with the very same values there
            for step, x, y in zip(every["step"], sparse[name], every[name]):
                assert (x == y) if step % 6 == 0 else math.isnan(x), (name, step)
        else:  # the evaluation stream is drawn the same way: identical numbers
            assert sparse[name] == every[name], name


def test_probe_size_probes_the_first_sequences_of_the_evaluation_batch():
    full = train(_copy_spec()).trajectory
    small = train(_copy_spec(probe_size=3)).trajectory
    for name in full:
        if name not in PROBES:
            assert small[name] == full[name], name
    assert small["ktiw_acc"] != full["ktiw_acc"]  # 3 x 6 steps, not 8 x 6


def test_probe_settings_change_the_trial_id_only_when_set():
    plain = _copy_spec()
    assert "probe_every" not in plain.config()["train"]  # ids of stores made before hold
    assert _copy_spec(probe_every=None).trial_id == plain.trial_id
    assert len({plain.trial_id, _copy_spec(probe_every=6).trial_id,
                _copy_spec(probe_size=4).trial_id}) == 3


@pytest.mark.parametrize("train_params,message", [
    ({"probe_every": 5}, "train.probe_every: got 5; allowed: a multiple of train.eval_every (2)"),
    ({"probe_size": 9}, "train.probe_size: got 9; allowed: at most train.eval_size (8)"),
])
def test_probe_settings_out_of_step_with_the_evaluation_are_refused(train_params, message):
    with pytest.raises(SweeperError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _copy_spec(**train_params)


def test_topic_trajectory_has_per_word_lists_and_outcomes_with_the_class_count():
    spec = make_spec("topic-v1", "kq-attention", {"vocab": 30, "samples": 60, "classes": 3,
                                                  "topic_words": 2}, {},
                     {"steps": 6, "eval_every": 3})
    result = train(spec)
    traj = result.trajectory
    assert traj["step"] == [0, 3, 6]
    assert set(traj) == {"step"} | {m.name for m in families()["topic"].metrics}
    assert all(len(v) == 6 for v in traj["topic_score"])  # C * T topic words
    assert traj["loss"][0] == pytest.approx(math.log(3), abs=1e-3)  # tiny init: uniform output
    assert result.outcomes == derive_outcomes("topic", traj, classes=3)


def test_training_is_deterministic_given_the_seed():
    spec = make_spec("copy-v1", "seq2seq", {"length": 4}, {"width": 8},
                     {"steps": 6, "eval_every": 3, "batch_size": 8, "eval_size": 8}, seed=4)
    assert train(spec).trajectory == train(spec).trajectory
    other = make_spec("copy-v1", "seq2seq", {"length": 4}, {"width": 8},
                      {"steps": 6, "eval_every": 3, "batch_size": 8, "eval_size": 8}, seed=5)
    assert train(other).trajectory["loss"] != train(spec).trajectory["loss"]

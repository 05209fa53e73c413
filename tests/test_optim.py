"""PackedOptimizer against torch.optim, step by step, in float64."""

from __future__ import annotations

import pytest
import torch

from sweeper.optim import PackedOptimizer

F64 = torch.float64
SHAPES = [(3, 4), (5,), (2, 3, 2)]  # per-model parameter shapes


def _params(K: int, seed: int = 0) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(K, *s, dtype=F64, generator=gen)) for s in SHAPES]


def _grads(K: int, steps: int, seed: int = 1) -> list[list[torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randn(K, *s, dtype=F64, generator=gen) for s in SHAPES] for _ in range(steps)]


def _run_packed(name: str, lr: list[float], steps: int, alive=None):
    K = len(lr)
    params = _params(K)
    opt = PackedOptimizer(params, torch.tensor(lr, dtype=F64), name)
    alive = torch.ones(K, dtype=torch.bool) if alive is None else alive
    history = []
    for grads in _grads(K, steps):
        opt.zero_grad()
        for p, g in zip(params, grads):
            p.grad = g.clone()
        opt.step(alive)
        history.append([p.detach().clone() for p in params])
    return history


def _run_torch(cls, k: int, K: int, lr: float, steps: int):
    """Model k's slice trained alone by torch.optim `cls` on the same gradients."""
    params = [torch.nn.Parameter(p.detach()[k].clone()) for p in _params(K)]
    opt = cls(params, lr=lr)
    history = []
    for grads in _grads(K, steps):
        opt.zero_grad()
        for p, g in zip(params, grads):
            p.grad = g[k].clone()
        opt.step()
        history.append([p.detach().clone() for p in params])
    return history


@pytest.mark.parametrize("name,cls,lr", [("adam", torch.optim.Adam, 1e-2),
                                         ("sgd", torch.optim.SGD, 0.1)])
def test_single_model_follows_torch_optim_step_by_step(name, cls, lr):
    packed = _run_packed(name, [lr], steps=25)
    reference = _run_torch(cls, 0, 1, lr, steps=25)
    for step, (ours, theirs) in enumerate(zip(packed, reference)):
        for p, q in zip(ours, theirs):
            torch.testing.assert_close(p[0], q, rtol=1e-13, atol=1e-13,
                                       msg=lambda m, s=step: f"step {s}: {m}")


@pytest.mark.parametrize("name,cls", [("adam", torch.optim.Adam), ("sgd", torch.optim.SGD)])
def test_per_model_learning_rates_each_follow_torch_optim(name, cls):
    lrs = [1e-3, 3e-2, 0.5]
    packed = _run_packed(name, lrs, steps=10)
    for k, lr in enumerate(lrs):
        reference = _run_torch(cls, k, len(lrs), lr, steps=10)
        for ours, theirs in zip(packed, reference):
            for p, q in zip(ours, theirs):
                torch.testing.assert_close(p[k], q, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_a_model_masked_as_not_alive_does_not_change(name):
    K = 3
    start = [p.detach().clone() for p in _params(K)]
    alive = torch.tensor([True, False, True])
    history = _run_packed(name, [0.1] * K, steps=5, alive=alive)
    for p0, p in zip(start, history[-1]):
        assert torch.equal(p[1], p0[1])
        assert not torch.equal(p[0], p0[0]) and not torch.equal(p[2], p0[2])
    # the live models move exactly as they do in a pack where everyone is alive
    everyone = _run_packed(name, [0.1] * K, steps=5)
    for p, q in zip(history[-1], everyone[-1]):
        assert torch.equal(p[[0, 2]], q[[0, 2]])


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_non_finite_gradient_of_a_dead_model_does_not_leak(name):
    params = _params(2)
    start = [p.detach().clone() for p in params]
    opt = PackedOptimizer(params, torch.tensor([0.1, 0.1], dtype=F64), name)
    for _ in range(3):
        for p in params:
            g = torch.ones_like(p)
            g[1] = float("nan")
            p.grad = g
        opt.step(torch.tensor([True, False]))
    for p, p0 in zip(params, start):
        assert torch.equal(p[1], p0[1])
        assert torch.isfinite(p).all()
    if name == "adam":
        assert all(torch.isfinite(m).all() and torch.isfinite(v).all()
                   for m, v in zip(opt.m, opt.v))


def test_frozen_parameters_and_missing_gradients_are_left_alone():
    trained = torch.nn.Parameter(torch.ones(1, 3, dtype=F64))
    frozen = torch.nn.Parameter(torch.ones(1, 3, dtype=F64), requires_grad=False)
    unused = torch.nn.Parameter(torch.ones(1, 2, dtype=F64))
    opt = PackedOptimizer([trained, frozen, unused], torch.tensor([0.5], dtype=F64), "sgd")
    assert all(p is not frozen for p in opt.params)
    trained.grad = torch.ones_like(trained)
    opt.step(torch.tensor([True]))
    assert torch.equal(trained.detach(), torch.full((1, 3), 0.5, dtype=F64))
    assert torch.equal(frozen, torch.ones(1, 3, dtype=F64))
    assert torch.equal(unused.detach(), torch.ones(1, 2, dtype=F64))
    opt.zero_grad()
    assert trained.grad is None

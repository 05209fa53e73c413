"""The JAX anchor: sweeper's copy seq2seq written in JAX (`lax.scan` + `vmap` over K, optax Adam).

    python benchmarks/jax_anchor.py --ks 1 16 --heads 1 4    # JAX/fast per (K, H), paired

What a competent JAX user would write for the same experiment: one model as a pure function, the
LSTM as `lax.scan` over positions, `vmap` over the K models of a pack, `optax.adam`, the whole
step (forward, backward, update) one `jit`. It starts from sweeper's own parameters (the same
init, copied out of `Seq2Seq`) and trains on the same batches (drawn from sweeper's sampler
before timing), so the first losses must agree with sweeper's: `anchor` checks that and stops on
a disagreement.

Measured: training steps only (no evaluation on either side: the anchor has none; sweeper's step
draws its batch, JAX's is drawn beforehand), CPU seconds of the whole process pinned to one core
(XLA starts worker threads whatever its flags say; pinned, CPU time is wall time and neither side
gets a second core), bursts interleaved (sweeper, JAX, sweeper, ...), median. JAX/fast is JAX's
trainings per CPU second over sweeper's fast path's: below 1, sweeper is faster.
`benchmarks/fast_paths.py` calls this when `jax` and `optax` are installed
(`pip install -e ".[jax]"`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch


def available() -> bool:
    try:
        import jax  # noqa: F401
        import optax  # noqa: F401
    except ImportError:
        return False
    return True


def _model_fn():
    """loss(params, src, dec_in, tgt) of ONE model, the formulas of sweeper.families.copy.model:

        h_l = LSTM_enc(E src)_l,  s_t = LSTM_dec(E dec_in, from the encoder's final state)_t
        a^h_tl = softmax_l((W_q^h s_t + b_q^h) . h_l)
        c_t = mean_h (W_v^h sum_l a^h_tl h_l + b_v^h)
        logits_t = W_o tanh(W_c [s_t; c_t] + b_c) + b_o,  loss = mean_{b,t} NLL(tgt | logits)
    """
    import jax
    import jax.numpy as jnp

    def lstm(x_proj, w_hh, h0, c0):  # x_proj [S, B, 4d] (x W_ih + b_ih + b_hh), time-major
        def cell(carry, x):
            h, c = carry
            i, f, g, o = jnp.split(x + h @ w_hh, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        (h, c), hs = jax.lax.scan(cell, (h0, c0), x_proj)
        return hs, (h, c)  # [S, B, d]

    def side(p, name, tokens, state):
        # (E W_ih)[tokens] = E[tokens] W_ih: project the V-row table, then look rows up
        table = p["embed"] @ p[f"{name}_w_ih"] + p[f"{name}_b_ih"] + p[f"{name}_b_hh"]
        return lstm(table[tokens.T], p[f"{name}_w_hh"], *state)  # inputs [S, B, 4d]

    def loss(p, src, dec_in, tgt):  # src, dec_in, tgt [B, S] int
        B, d = src.shape[0], p["embed"].shape[1]
        zeros = jnp.zeros((B, d), p["embed"].dtype)
        enc, state = side(p, "enc", src, (zeros, zeros))  # [S, B, d]
        dec, _ = side(p, "dec", dec_in, state)  # [T, B, d]
        enc, dec = enc.transpose(1, 0, 2), dec.transpose(1, 0, 2)  # [B, S, d], [B, T, d]
        q = jnp.einsum("btd,hde->hbte", dec, p["w_q"]) + p["b_q"][:, None, None]  # [H, B, T, d]
        attn = jax.nn.softmax(jnp.einsum("hbte,bse->hbts", q, enc), axis=-1)
        mixed = jnp.einsum("hbts,bsd->hbtd", attn, enc)
        ctx = (jnp.einsum("hbtd,hde->hbte", mixed, p["w_v"]) + p["b_v"][:, None, None]).mean(0)
        hidden = jnp.tanh(jnp.concatenate([dec, ctx], -1) @ p["w_c"] + p["b_c"])
        logits = hidden @ p["w_o"] + p["b_o"]  # [B, T, V]
        nll = jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, tgt[..., None], -1)[..., 0]
        return nll.mean()

    return loss


class Anchor:
    """K models in JAX from a sweeper experiment's parameters; `step` trains them one step."""

    def __init__(self, experiment, lr: float):
        import jax
        import jax.numpy as jnp
        import optax

        model = experiment.model
        if model.cfg.cell != "lstm" or not model.cfg.shared_embedding \
                or not model.cfg.projection_bias or model.logit_mask is not None:
            raise SystemExit("the JAX anchor covers the calibrated model only (LSTM, shared "
                             "embedding, projection biases, one vocabulary per pack)")
        self.params = {n: jnp.asarray(p.detach().numpy()) for n, p in model.named_parameters()}
        loss_one = _model_fn()
        losses = jax.vmap(loss_one)  # over K: params [K, ...], batches [K, B, ...]
        self.tx = optax.adam(lr)
        self.opt_state = self.tx.init(self.params)

        def step(params, opt_state, src, dec_in, tgt):
            def total(p):
                per_model = losses(p, src, dec_in, tgt)
                return per_model.sum(), per_model  # each model's gradient is its own
            (_, per_model), grads = jax.value_and_grad(total, has_aux=True)(params)
            updates, opt_state = self.tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, per_model

        self._step = jax.jit(step, donate_argnums=(0, 1))
        self._losses = jax.jit(losses)

    def losses(self, batch) -> np.ndarray:
        return np.asarray(self._losses(self.params, *_arrays(batch)))

    def step(self, batch) -> None:
        self.params, self.opt_state, per_model = self._step(self.params, self.opt_state,
                                                            *batch)
        per_model.block_until_ready()


def _arrays(batch) -> tuple:
    import jax.numpy as jnp

    return tuple(jnp.asarray(t.numpy().astype(np.int32)) for t in (batch.src, batch.dec_in,
                                                                    batch.tgt))


def _sweeper_step(experiment, optimizer, alive) -> None:
    """One training step of sweeper's trainer (sweeper.train.train_pack, without evaluation)."""
    optimizer.zero_grad()
    losses = experiment.train_loss()
    losses.sum().backward()
    optimizer.step(alive)


def anchor(specs, steps: int = 20, repeat: int = 3) -> dict:
    """CPU seconds per model-step of sweeper's fast path and of JAX on the same K specs, paired.

    Checks first that JAX's losses equal sweeper's on one batch (same parameters) and that
    both trainers move the same way over three steps on the same batches.
    """
    from sweeper.optim import PackedOptimizer
    from sweeper.train import make_experiment

    K = len(specs)
    lr = specs[0].train["lr"]
    experiment = make_experiment(specs, torch.float32, "cpu")
    jax_model = Anchor(experiment, lr)
    optimizer = PackedOptimizer(list(experiment.model.parameters()),
                                torch.full((K,), lr), specs[0].train["optimizer"])
    alive = torch.ones(K, dtype=torch.bool)
    _check_agreement(experiment, optimizer, alive, jax_model)
    batches = [_arrays(experiment.sampler.sample(experiment.batch_size)) for _ in range(steps)]
    jax_model.step(batches[0])  # compile outside the timing
    times: dict[str, list[float]] = {"fast": [], "jax": []}
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(steps):
            _sweeper_step(experiment, optimizer, alive)
        times["fast"].append(time.process_time() - start)
        start = time.process_time()
        for batch in batches:
            jax_model.step(batch)
        times["jax"].append(time.process_time() - start)
    per = {k: statistics.median(v) / steps / K for k, v in times.items()}  # CPU s / model-step
    per["jax/fast"] = per["fast"] / per["jax"]  # JAX's throughput over sweeper's
    return per


def _check_agreement(experiment, optimizer, alive, jax_model: Anchor) -> None:
    for step in range(3):
        batch = experiment.sampler.sample(experiment.batch_size)
        with torch.no_grad():
            out = experiment.model(batch.src, batch.dec_in)
            from sweeper import metrics as M
            ours = M.token_nll(out.logits, batch.tgt).flatten(1).mean(dim=1).numpy()
        theirs = jax_model.losses(batch)
        if not np.allclose(ours, theirs, rtol=2e-4, atol=2e-5):
            raise SystemExit(f"JAX anchor disagrees with sweeper at step {step}: "
                             f"{ours[:4]} vs {theirs[:4]}")
        optimizer.zero_grad()
        out = experiment.model(batch.src, batch.dec_in)
        M.token_nll(out.logits, batch.tgt).flatten(1).mean(dim=1).sum().backward()
        optimizer.step(alive)
        jax_model.step(_arrays(batch))


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from throughput import _setup, calibrated_workload, pin_to_one_core

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if not available():
        raise SystemExit("jax and optax are not installed: pip install -e '.[jax]'")
    pin_to_one_core()
    _setup()
    print(f"{'H':>2} {'K':>3} {'fast ms/step':>12} {'JAX ms/step':>12} {'JAX/fast':>9}")
    for heads in args.heads:
        for K in args.ks:
            row = anchor(calibrated_workload(heads, args.steps).specs(K, args.steps), args.steps,
                         args.repeat)
            print(f"{heads:>2} {K:>3} {row['fast'] * 1e3:>12.3f} {row['jax'] * 1e3:>12.3f} "
                  f"{row['jax/fast']:>9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

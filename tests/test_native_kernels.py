"""The fused native kernels (sweeper/layers/native) against the reference paths.

The recurrences (LSTM, GRU) compute the reference's formulas; in float64 they agree to rounding,
forward and gradients, alone and in whole packed models at several K, H, L and d. Where no
compiler exists the package falls back to the reference path with a one-line notice, and trains
all the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from native_helpers import require_native

from sweeper.families.copy.config import Seq2SeqConfig
from sweeper.families.copy.model import Seq2Seq
from sweeper.layers import native
from sweeper.layers import recurrence as R

F64 = torch.float64


def _model_grads(cfg: dict, K: int, L: int, reference: bool, dtype=F64, seed: int = 0,
                 B: int = 5):
    """Logits and every parameter's gradient of a pack of K seq2seq models on one batch, on
    the native kernels or (SWEEPER_NATIVE=0) the reference path."""
    V = L + 4
    model = Seq2Seq(Seq2SeqConfig(**cfg), symbols=V, seeds=list(range(seed, seed + K)),
                    dtype=dtype)
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, V, (K, B, L + 1), generator=gen)
    dec_in = torch.randint(0, V, (K, B, L + 1), generator=gen)
    previous = os.environ.get("SWEEPER_NATIVE")
    os.environ["SWEEPER_NATIVE"] = "0" if reference else "1"
    try:
        out = model(src, dec_in)
        loss = (out.logits.log_softmax(-1)[..., 0]).mean() + out.attn.square().mean()
        names = [n for n, _ in model.named_parameters()]
        grads = torch.autograd.grad(loss, list(model.parameters()))
    finally:
        if previous is None:
            del os.environ["SWEEPER_NATIVE"]
        else:
            os.environ["SWEEPER_NATIVE"] = previous
    return out.logits.detach(), dict(zip(names, grads))


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("K,H,L,d,B", [(1, 1, 4, 8, 5), (3, 2, 7, 16, 5), (4, 4, 16, 32, 5),
                                       (2, 8, 5, 12, 5), (2, 1, 6, 8, 70)])
def test_fused_equals_reference_in_float64_forward_and_gradients(cell, K, H, L, d, B):
    """B = 70: three tiles of sequences a model, the last one partial."""
    require_native()
    cfg = {"width": d, "heads": H, "cell": cell}
    fused_logits, fused = _model_grads(cfg, K, L, reference=False, B=B)
    ref_logits, ref = _model_grads(cfg, K, L, reference=True, B=B)
    torch.testing.assert_close(fused_logits, ref_logits, rtol=1e-12, atol=1e-12)
    assert fused.keys() == ref.keys()
    for name in ref:
        torch.testing.assert_close(fused[name], ref[name], rtol=1e-10, atol=1e-12, msg=name)


def test_fused_float32_stays_within_float32_rounding_of_the_reference():
    require_native()
    cfg = {"width": 32, "heads": 2}
    fused_logits, fused = _model_grads(cfg, 4, 16, reference=False, dtype=torch.float32)
    ref_logits, ref = _model_grads(cfg, 4, 16, reference=True, dtype=torch.float32)
    torch.testing.assert_close(fused_logits, ref_logits, rtol=1e-5, atol=1e-5)
    for name in ref:
        scale = ref[name].abs().max().item() + 1e-12
        assert (fused[name] - ref[name]).abs().max().item() / scale < 1e-4, name


def test_the_native_module_is_named_for_the_instruction_set_it_was_built_for():
    isa, flags = native.instruction_set()
    assert native.build_name().startswith(f"sweeper_kernels_{isa}_")
    assert (flags == []) == (isa == "generic")


def test_two_checkouts_of_the_same_sources_build_apart(tmp_path, monkeypatch):
    """torch's build file names the sources by path: two checkouts sharing one build name
    rebuilt each other's module on every load (minutes each on 2 cores)."""
    import shutil

    names = []
    for checkout in ("a", "b", "a"):
        folder = tmp_path / checkout
        folder.mkdir(exist_ok=True)
        for path in native.SOURCES + native.HEADERS:
            shutil.copy(path, folder / path.name)
        monkeypatch.setattr(native, "SOURCES", [folder / p.name for p in native.SOURCES])
        monkeypatch.setattr(native, "HEADERS", [folder / p.name for p in native.HEADERS])
        names.append(native.build_name())
    assert names[0] == names[2] != names[1]


def test_without_a_compiler_training_falls_back_to_the_reference_path_in_one_line(tmp_path):
    script = textwrap.dedent("""
        from sweeper.families import family_of
        from sweeper.layers import native
        from sweeper.spec import make_spec
        from sweeper.train import train
        small = family_of("copy-v1").small
        spec = make_spec("copy-v1", "seq2seq", small["task"], small["model"], small["train"])
        result = train(spec)
        assert native.ops() is None
        print("trained", result.status, len(result.trajectory["step"]))
    """)
    env = {**os.environ, "CXX": "/bin/false", "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"),
           "SWEEPER_NATIVE": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained ok" in proc.stdout
    notices = [line for line in proc.stderr.splitlines() if line.startswith("sweeper:")]
    assert len(notices) in (1, 2), proc.stderr  # "building ..." then "unavailable ..."
    assert "native kernels unavailable" in notices[-1]
    assert "using the reference path" in notices[-1]
    assert "Traceback" not in proc.stderr


def test_sweeper_native_0_selects_the_reference_path(monkeypatch):
    monkeypatch.setenv("SWEEPER_NATIVE", "0")
    assert native.ops() is None
    assert R._loops(reference=False)[0] is R._lstm_forward


def _recurrence_inputs(cell: str, K: int, B: int, S: int, d: int, V: int, seed: int):
    """A recurrence's float64 inputs (table, w_hh, b_hh, h0, rows), K models reading V rows
    each of the table, all but rows requiring gradients."""
    G = (4 if cell == "lstm" else 3) * d
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(K * V, G, dtype=F64, generator=gen).requires_grad_()
    w = (torch.randn(K, d, G, dtype=F64, generator=gen) / 4).requires_grad_()
    b = torch.randn(K, G, dtype=F64, generator=gen).requires_grad_()
    h0 = torch.randn(K, B, d, dtype=F64, generator=gen).requires_grad_()
    rows = torch.randint(0, V, (S, K, B), generator=gen) + torch.arange(K)[:, None] * V
    return table, w, b, h0, rows


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_fused_recurrences_give_the_same_bits_on_one_thread_and_on_two(cell):
    """The models of a pack are spread over torch's threads, each model on one thread, so the
    result cannot depend on how many there are."""
    require_native()
    table, w, b, h0, rows = _recurrence_inputs(cell, K=5, B=37, S=9, d=12, V=7, seed=0)
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            hs = (R.lstm_rows(table, rows, w, h0, h0 * 0.5)[0] if cell == "lstm"
                  else R.gru_rows(table, rows, w, b, h0))
            weights = torch.arange(hs.numel(), dtype=F64).view_as(hs).sin()
            results.append((hs, *torch.autograd.grad((hs * weights).sum(), [table, w, h0])))
    finally:
        torch.set_num_threads(threads)
    for one, two in zip(*results):
        assert torch.equal(one, two)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("layout", ["time_major", "batch_major", "batch_then_model"])
def test_fused_backward_reads_the_states_gradient_in_any_layout_as_the_reference(cell, layout):
    """The gradient of the states reaches the recurrence in its consumer's layout: time-major,
    a view of a batch-major [K, B, S, d] (the decoder's states as the attention and readout
    read them: read in place), or one whose K and B do not merge (copied first)."""
    require_native()
    K, B, S, d = 3, 5, 6, 8
    table, w, b, h0, rows = _recurrence_inputs(cell, K, B, S, d, V=7, seed=1)
    gen = torch.Generator().manual_seed(2)
    dense = {"time_major": (S, K, B, d), "batch_major": (K, B, S, d),
             "batch_then_model": (B, K, S, d)}[layout]
    order = {"time_major": (0, 1, 2, 3), "batch_major": (2, 0, 1, 3),
             "batch_then_model": (2, 1, 0, 3)}[layout]
    grad = torch.randn(dense, dtype=F64, generator=gen).permute(*order)  # [S, K, B, d]
    assert grad.shape == (S, K, B, d) and grad.is_contiguous() == (layout == "time_major")
    results = []
    for reference in (False, True):
        hs = (R.lstm_rows(table, rows, w, h0, h0 * 0.5, reference=reference)[0]
              if cell == "lstm" else R.gru_rows(table, rows, w, b, h0, reference=reference))
        inputs = [table, w, h0] + ([b] if cell == "gru" else [])
        results.append(torch.autograd.grad(hs, inputs, grad_outputs=grad))
    for fused, ref in zip(*results):
        torch.testing.assert_close(fused, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_fused_states_come_back_batch_major_with_the_reference_values(cell):
    """The native loops write the states where the attention and the readout read them: [S, K,
    B, d] as a view of a batch-major [K, B, S, d], so the model's [K, B, S, d] states are
    contiguous (its products copy nothing); the values are the reference's, time-major."""
    require_native()
    K, B, S, d = 3, 5, 6, 8
    table, w, b, h0, rows = _recurrence_inputs(cell, K, B, S, d, V=7, seed=3)
    states = []
    for reference in (False, True):
        states.append(R.lstm_rows(table, rows, w, h0, h0 * 0.5, reference=reference)[0]
                      if cell == "lstm" else R.gru_rows(table, rows, w, b, h0,
                                                        reference=reference))
    fused, ref = states
    assert fused.permute(1, 2, 0, 3).is_contiguous() and ref.is_contiguous()
    torch.testing.assert_close(fused, ref, rtol=1e-12, atol=1e-12)


def test_a_states_buffer_in_no_row_layout_is_refused_in_one_error():
    """A buffer whose rows (t, k B + b) are not evenly spaced, or overlap, or that has another
    shape would be written out of place: the kernel refuses it instead."""
    require_native()
    K, B, S, d = 2, 3, 4, 8
    table, w, _, h0, rows = (x.detach() for x in _recurrence_inputs("lstm", K, B, S, d, V=7,
                                                                    seed=4))
    acts, c2s, tcs = (torch.empty(S, K, B, n, dtype=F64) for n in (4 * d, d, d))
    scattered = torch.empty(B, K, S, d, dtype=F64).permute(2, 1, 0, 3)  # K, B do not merge
    one_step = torch.empty(K, B, d, dtype=F64).expand(S, K, B, d)  # every step on one row
    for buffer in (scattered, one_step, torch.empty(S, K, B, d + 1, dtype=F64)):
        with pytest.raises(RuntimeError, match="the states' buffer must be"):
            native.ops().lstm_forward(table, rows, w, h0, h0, acts, c2s, tcs, buffer)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_the_states_gradient_reaches_the_native_recurrence_in_the_states_layout(cell,
                                                                               monkeypatch):
    """In a whole model's training loss, both sides' gradients arrive batch-major, as their
    states were written, so the recurrence reads them in place: the encoder's too, whose final
    state also feeds the decoder (a gradient summed time-major would cost a transposing pass)."""
    require_native()
    layouts = []
    run = R.lstm_rows if cell == "lstm" else R.gru_rows

    def recording(*args, **kwargs):
        out = run(*args, **kwargs)
        states = out[0] if cell == "lstm" else out
        states.register_hook(lambda g: layouts.append(g.permute(1, 2, 0, 3).is_contiguous()))
        return out

    monkeypatch.setattr(R, "lstm_rows" if cell == "lstm" else "gru_rows", recording)
    monkeypatch.setenv("SWEEPER_NATIVE", "1")
    K, B, L, V = 2, 3, 5, 9
    model = Seq2Seq(Seq2SeqConfig(cell=cell, width=8, heads=2), symbols=V, seeds=[0, 1],
                    dtype=F64)
    gen = torch.Generator().manual_seed(0)
    src, dec_in, tgt = (torch.randint(0, V, (K, B, L + 1), generator=gen) for _ in range(3))
    model.token_nll(src, dec_in, tgt).sum().backward()
    assert layouts == [True, True]  # decoder, then encoder


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("S", [1, 6])
def test_an_lstm_without_gradients_gives_the_same_bits_without_saving_its_activations(
        dtype, S, monkeypatch):
    """Under no_grad (an evaluation) the native LSTM keeps the activations only the backward
    reads in a tile's scratch (`lstm_states`): the states and the last cell state are bit for
    bit those of the forward that saves them, in float32 as in float64."""
    require_native()
    taken, states_only = [], R._lstm_states

    def spy(*args):
        taken.append(1)
        return states_only(*args)

    monkeypatch.setattr(R, "_lstm_states", spy)
    table, w, _, h0, rows = (x.detach().to(dtype) if x.is_floating_point() else x
                             for x in _recurrence_inputs("lstm", 3, 37, S, 8, V=7, seed=5))
    c0 = h0 * 0.5
    with torch.no_grad():
        hs_free, c_free = R.lstm_rows(table, rows, w, h0, c0)
    R.lstm_rows(table, rows, w, h0, c0)  # nothing requires a gradient: no saving either
    saved = R.lstm_rows(table, rows, w, h0.clone().requires_grad_(), c0)
    assert taken == [1, 1]  # not where a gradient is wanted (of h0 alone, here)
    assert torch.equal(hs_free, saved[0].detach()) and torch.equal(c_free, saved[1].detach())
    assert hs_free.permute(1, 2, 0, 3).is_contiguous()


def _probe_case(dtype, K=3, H=2, L=7, d=12, B=6, seed=0):
    """A pack mixing vocabularies (the padding mask), its output on a batch, and targets."""
    symbols = [L + 4 + k % 3 for k in range(K)]
    model = Seq2Seq(Seq2SeqConfig(width=d, heads=H), symbols=symbols,
                    seeds=list(range(seed, seed + K)), dtype=dtype)
    gen = torch.Generator().manual_seed(seed)
    src = torch.stack([torch.randint(0, v, (B, L + 1), generator=gen) for v in symbols])
    dec_in = torch.stack([torch.randint(0, v, (B, L + 1), generator=gen) for v in symbols])
    target = torch.stack([torch.randint(0, v, (B, L + 1), generator=gen) for v in symbols])
    with torch.no_grad():
        out = model(src, dec_in)
    return model, out, target


def test_native_ktiw_probe_gives_the_reference_hits_in_float64():
    from sweeper import metrics as M

    require_native()
    # T S = 16, 64, 100, 169 (t, l) columns: a part block, one whole block, blocks that split a
    # step's positions between them
    for seed, L in [(4, 3), (0, 7), (1, 9), (2, 7), (3, 12)]:
        model, out, target = _probe_case(F64, L=L, seed=seed)
        with torch.no_grad():
            reference = M.ktiw_probe_hits(model.one_hot_logits(out), target)
            fast = native.ops().ktiw_hits(*model.one_hot_readout_parts(out), target)
        assert reference.any() and not reference.all()
        assert torch.equal(fast, reference)


def test_native_ktiw_probe_in_float32_agrees_with_the_reference_but_for_near_ties():
    from sweeper import metrics as M

    require_native()
    model, out, target = _probe_case(torch.float32, K=4, H=1, L=16, d=32, B=64)
    with torch.no_grad():
        reference = M.ktiw_probe_hits(model.one_hot_logits(out), target)
        fast = native.ops().ktiw_hits(*model.one_hot_readout_parts(out), target)
    assert (fast != reference).float().mean().item() < 0.01


def test_native_ktiw_probe_follows_torch_on_ties_and_refuses_targets_out_of_range():
    """Equal log-odds at every position: torch.argmax takes the first, so only t = 0 hits."""
    require_native()
    K, B, T, S, d, V = 1, 2, 3, 4, 2, 5
    p, q = torch.zeros(K, B, T, d, dtype=F64), torch.zeros(K, B, S, d, dtype=F64)
    w, b = torch.zeros(K, d, V, dtype=F64), torch.zeros(K, V, dtype=F64)
    target = torch.zeros(K, B, T, dtype=torch.long)
    hits = native.ops().ktiw_hits(p, q, w, b, target)
    assert hits.tolist() == [[[True, False, False]] * B]
    with pytest.raises(RuntimeError, match=r"\[0, V\)"):
        native.ops().ktiw_hits(p, q, w, b, target + V)


@pytest.mark.parametrize("N,R,S,d", [(3, 17, 17, 32), (5, 68, 17, 32), (2, 7, 5, 12),
                                     (4, 3, 9, 8)])
@pytest.mark.parametrize("forward_in_torch", [False, True])
@pytest.mark.parametrize("time_major", [True, False])
def test_native_attention_equals_the_reference_in_float64_in_the_encoders_layouts(
        N, R, S, d, forward_in_torch, time_major, monkeypatch):
    """Scores, softmax and mixture in one pass: values and the gradients of query and keys
    (through both outputs) as torch's three ops give them; keys as the encoder's states come
    (a time-major view from the reference recurrence, batch-major from the native one), their
    gradient in that same layout. Both forwards: the native one and torch's (what AVX-512
    machines run before the native backward)."""
    from sweeper.layers import attention as A
    from sweeper.layers.attention import attention

    require_native()
    monkeypatch.setattr(A, "_forward_in_torch", lambda: forward_in_torch)
    gen = torch.Generator().manual_seed(N * R + S)
    query = torch.randn(N, R, d, dtype=F64, generator=gen) * 0.7
    keys_tm = torch.randn(S, N, d, dtype=F64, generator=gen)
    w_attn = torch.randn(N, R, S, dtype=F64, generator=gen)
    w_mixed = torch.randn(N, R, d, dtype=F64, generator=gen)
    results = []
    for reference in (False, True):
        q = query.clone().requires_grad_()
        k_tm = (keys_tm if time_major else keys_tm.transpose(0, 1)).clone(
            memory_format=torch.contiguous_format).requires_grad_()
        attn, mixed = attention(q, k_tm.transpose(0, 1) if time_major else k_tm,
                                reference=reference)
        ((attn * w_attn).sum() + (mixed * w_mixed).sum()).backward()
        results.append((attn.detach(), mixed.detach(), q.grad, k_tm.grad))
    for fast, ref, name in zip(results[0], results[1], ("attn", "mixed", "d_query", "d_keys")):
        torch.testing.assert_close(fast, ref, rtol=1e-12, atol=1e-12, msg=name)
    assert results[0][3].is_contiguous()  # the gradient in the keys' own layout, no copy


def test_native_attention_refuses_mismatched_shapes_in_one_error():
    ops = require_native()
    with pytest.raises(RuntimeError, match="do not match"):
        ops.attention_forward(torch.zeros(2, 3, 4), torch.zeros(2, 5, 6))


def _readout_case(K: int, M: int, d: int, V: int):
    """A readout's inputs in float64 (pre, W, b, targets below the last class) with the last
    model's last class masked (-inf bias, as in a mixed-vocabulary pack), and the generator."""
    gen = torch.Generator().manual_seed(K * M + V)
    pre = torch.randn(K, M, d, dtype=F64, generator=gen) * 2
    w = torch.randn(K, d, V, dtype=F64, generator=gen)
    b = torch.randn(K, V, dtype=F64, generator=gen)
    b[-1, -1] = -torch.inf
    return pre, w, b, torch.randint(0, V - 1, (K, M), generator=gen), gen


@pytest.mark.parametrize("K,M,d,V", [(1, 40, 32, 22), (3, 70, 8, 5), (2, 33, 12, 9)])
def test_native_readout_loss_equals_the_reference_in_float64_with_masked_classes(K, M, d, V):
    """The sigmoid readout and its token NLL in one pass: values and the gradients of pre, W
    and b as the logits' three torch ops give them; the last model's last class masked (-inf
    bias: a mixed-vocabulary pack) gets probability 0 and no gradient on both paths."""
    from sweeper.layers.readout import sigmoid_readout_nll

    require_native()
    pre, w, b, target, gen = _readout_case(K, M, d, V)
    weight = torch.rand(K, M, dtype=F64, generator=gen)
    results = []
    for reference in (False, True):
        leaves = [t.clone().requires_grad_() for t in (pre, w, b)]
        nll = sigmoid_readout_nll(*leaves, target, reference=reference)
        (nll * weight).sum().backward()
        results.append((nll.detach(), *(t.grad for t in leaves)))
    for fast, ref, name in zip(results[0], results[1], ("nll", "d_pre", "d_w", "d_b")):
        torch.testing.assert_close(fast, ref, rtol=1e-12, atol=1e-12, msg=name)
    assert results[0][3][-1, -1] == 0


@pytest.mark.parametrize("K,M,d,V", [(1, 40, 32, 22), (3, 70, 8, 5), (2, 33, 12, 9)])
def test_an_evaluations_readout_gives_the_reference_loss_and_argmax_hits_in_float64(K, M, d, V):
    """`sigmoid_readout_scores` (the loss and argmax == target without the logits) against
    metrics.token_nll and token_hits of the logits, with a masked class (-inf bias) and a
    quarter of the rows' targets set to their own argmax, so that hits and misses both occur."""
    from sweeper import metrics
    from sweeper.layers.packed import linear
    from sweeper.layers.readout import sigmoid_readout_scores

    require_native()
    pre, w, b, target, gen = _readout_case(K, M, d, V)
    logits = linear(torch.sigmoid(pre), w, b)
    chosen = torch.rand(K, M, generator=gen) < 0.25
    target = torch.where(chosen, logits.argmax(-1), target)
    nll, hits = sigmoid_readout_scores(pre, w, b, target)
    ref_nll, ref_hits = sigmoid_readout_scores(pre, w, b, target, reference=True)
    torch.testing.assert_close(nll, metrics.token_nll(logits, target), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ref_nll, nll, rtol=1e-12, atol=1e-12)
    assert torch.equal(hits, metrics.token_hits(logits, target)) and torch.equal(hits, ref_hits)
    assert 0 < int(hits.sum()) < hits.numel()


def test_an_evaluations_readout_follows_torchs_argmax_on_ties_and_nan():
    """Ties go to the first largest logit and a NaN logit counts as the largest, as in
    torch.argmax: classes 1 and 3 tie above the others at every row (identical columns of W),
    and the second model's class 3 has a NaN bias."""
    from sweeper import metrics
    from sweeper.layers.packed import linear
    from sweeper.layers.readout import sigmoid_readout_scores

    require_native()
    K, M, d, V = 2, 4, 3, 5
    w = torch.zeros(K, d, V, dtype=F64)
    w[..., 1] = w[..., 3] = 1.0
    b = torch.zeros(K, V, dtype=F64)
    b[1, 3] = torch.nan
    pre = torch.randn(K, M, d, dtype=F64)
    target = torch.tensor([[1, 3, 0, 1], [1, 3, 0, 3]])
    logits = linear(torch.sigmoid(pre), w, b)
    _, hits = sigmoid_readout_scores(pre, w, b, target)
    assert torch.equal(hits, metrics.token_hits(logits, target))
    assert hits.tolist() == [[True, False, False, True], [False, True, False, True]]


@pytest.mark.parametrize("heads", [1, 3])
def test_an_evaluation_gives_the_reference_paths_metrics_in_float64(heads, monkeypatch):
    """`CopyExperiment.evaluate` on the kernels (the readouts scored without logits, the context
    folded into W_c, the KTIW kernel) against the reference path: every metric, with the probes,
    of a pack of three models after a few training steps."""
    from sweeper.families.copy.experiment import CopyExperiment
    from sweeper.spec import make_spec

    require_native()
    specs = [make_spec("copy-v1", "seq2seq", {"length": 6, "vocab": 9, "cooccurrence": c,
                                              "hardness": 0.5},
                       {"width": 16, "heads": heads}, {"eval_size": 24, "batch_size": 16},
                       seed=seed) for c, seed in ((0.0, 1), (0.3, 2), (0.6, 3))]
    metrics = []
    for native_path in ("1", "0"):
        monkeypatch.setenv("SWEEPER_NATIVE", native_path)
        experiment = CopyExperiment(specs, F64, "cpu")
        optimizer = torch.optim.Adam(experiment.model.parameters(), lr=0.01)
        for _ in range(3):
            optimizer.zero_grad()
            experiment.train_loss().sum().backward()
            optimizer.step()
        metrics.append(experiment.evaluate())
    fast, reference = metrics
    assert fast.keys() == reference.keys()
    for name in fast:
        torch.testing.assert_close(fast[name], reference[name], rtol=1e-12, atol=1e-12,
                                   equal_nan=True, msg=name)


def test_argmax_hits_follow_torchs_argmax_on_ties_nan_and_strided_rows():
    """`metrics.argmax_is` on the kernels against torch's argmax: random rows, rows of ties
    (the first wins), NaN (the first NaN wins), -inf, and a slice of the rows (the content
    steps' view an evaluation passes) read in place."""
    from sweeper import metrics

    require_native()
    gen = torch.Generator().manual_seed(5)
    attn = torch.rand(3, 2, 7, 6, 5, generator=gen)
    attn[0, 0, 0] = 0.5  # every row of this block ties
    attn[0, 1, 0, 2, 3] = attn[0, 1, 0, 3, 1] = attn[0, 1, 0, 3, 4] = torch.nan
    attn[1, 0, 1, 4] = -torch.inf
    attn[1, 1, 2, 1, 2] = 2.0  # a tie with a larger value further right
    attn[1, 1, 2, 1, 4] = 2.0
    for x in (attn, attn[..., :-1, :], attn.to(F64)):
        index = torch.arange(x.shape[-2]) % x.shape[-1]
        expected = x.argmax(dim=-1) == index
        assert metrics.native.loaded() is not None
        assert torch.equal(metrics.argmax_is(x, index), expected)
        assert int(expected.sum()) > 0
    fractional = torch.full((attn.shape[-2],), 1.5)  # compared as floats, as torch does
    assert not metrics.argmax_is(attn, fractional).any()


def test_native_readout_loss_refuses_targets_out_of_range():
    ops = require_native()
    K, M, d, V = 1, 4, 3, 5
    with pytest.raises(RuntimeError, match=r"\[0, V\)"):
        ops.readout_nll_forward(torch.zeros(K, M, d), torch.zeros(K, d, V), torch.zeros(K, V),
                                torch.full((K, M), V))


@pytest.mark.parametrize("cell,heads,bias", [("lstm", 2, True), ("gru", 2, True),
                                             ("lstm", 1, True), ("lstm", 3, False)])
def test_the_training_loss_without_logits_equals_the_logits_loss_in_float64(cell, heads, bias):
    """Seq2Seq.token_nll (the fused readout and loss, the context folded into W_c) against
    metrics.token_nll of the logits on the reference path: a mixed-vocabulary pack of three
    models, values and gradients."""
    from sweeper import metrics as M

    require_native()
    L, B = 6, 9
    symbols = [L + 4, L + 2, L + 4]
    model = Seq2Seq(Seq2SeqConfig(width=12, heads=heads, cell=cell, projection_bias=bias),
                    symbols=symbols, seeds=[3, 4, 5], dtype=F64)
    gen = torch.Generator().manual_seed(1)
    src, dec_in, tgt = (torch.stack([torch.randint(0, v, (B, L + 1), generator=gen)
                                     for v in symbols]) for _ in range(3))
    fast = model.token_nll(src, dec_in, tgt)
    fast_grads = torch.autograd.grad(fast.sum(), list(model.parameters()))
    os.environ["SWEEPER_NATIVE"] = "0"
    try:
        ref = M.token_nll(model(src, dec_in).logits, tgt)
        ref_grads = torch.autograd.grad(ref.sum(), list(model.parameters()))
    finally:
        del os.environ["SWEEPER_NATIVE"]
    torch.testing.assert_close(fast, ref, rtol=1e-12, atol=1e-12)
    for (name, _), a, b in zip(model.named_parameters(), fast_grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=name)


def test_native_readout_loss_in_float32_is_infinite_where_a_logit_is():
    """A diverged model's loss must stay non-finite: float32's fast exp overflows to +inf as
    torch's does, so a +inf logit gives an infinite loss and non-finite gradients, not finite
    numbers near the float maximum."""
    from sweeper.layers.readout import sigmoid_readout_nll

    require_native()
    K, M, d, V = 1, 2, 4, 5
    w, b = torch.ones(K, d, V), torch.zeros(K, V)
    b[0, 3] = torch.inf
    results = []
    for reference in (False, True):
        pre = torch.zeros(K, M, d, requires_grad=True)
        nll = sigmoid_readout_nll(pre, w, b, torch.zeros(K, M, dtype=torch.long),
                                  reference=reference)
        nll.sum().backward()
        results.append((nll.detach(), pre.grad))
    assert torch.isinf(results[0][0]).all() and torch.isinf(results[1][0]).all()
    assert not torch.isfinite(results[0][1]).any() and not torch.isfinite(results[1][1]).any()


def test_native_attention_sums_the_gradient_of_keys_shared_by_sequences():
    """Expanded keys (one [S, d] block seen by every sequence) get their gradients summed, not
    overwritten by whichever sequence wrote last."""
    from sweeper.layers.attention import attention

    require_native()
    gen = torch.Generator().manual_seed(5)
    query = torch.randn(4, 3, 8, dtype=F64, generator=gen)
    block = torch.randn(1, 5, 8, dtype=F64, generator=gen)
    grads = []
    for reference in (False, True):
        k = block.clone().requires_grad_()
        _, mixed = attention(query, k.expand(4, 5, 8), reference=reference)
        (mixed * torch.arange(8, dtype=F64)).sum().backward()
        grads.append(k.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_a_graph_built_on_the_native_kernels_runs_backward_on_them_whatever_the_environment(
        monkeypatch):
    from sweeper.layers.attention import attention
    from sweeper.layers.readout import sigmoid_readout_nll

    require_native()
    query = torch.randn(2, 3, 4, requires_grad=True)
    pre = torch.randn(1, 3, 4, requires_grad=True)
    _, mixed = attention(query, torch.randn(2, 5, 4))
    nll = sigmoid_readout_nll(pre, torch.randn(1, 4, 6), torch.zeros(1, 6),
                              torch.zeros(1, 3, dtype=torch.long))
    monkeypatch.setenv("SWEEPER_NATIVE", "0")
    (mixed.sum() + nll.sum()).backward()
    assert query.grad is not None and pre.grad is not None


def test_the_kernel_benchmark_prints_every_kernel_against_its_reference():
    require_native()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "kernels.py"),
                           "--ks", "1", "--heads", "1", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:]]
    assert [(r[0], r[3]) for r in rows] == [(k, p) for k in ("lstm", "attention", "readout")
                                            for p in ("fwd", "fwd+bwd")]
    assert all(float(r[4]) > 0 and float(r[5]) > 0 and r[6].endswith("x") for r in rows)


def test_a_lock_left_by_a_killed_build_does_not_hold_up_the_next_process():
    """torch's build lock is a plain file: a build killed mid-way leaves it, and every later
    process would wait on it (for ever, or until it counted as stale). Under the module's own
    flock, which dies with its holder, such a file is known to be left over and removed."""
    require_native()
    from torch.utils import cpp_extension

    build_dir = Path(cpp_extension._get_build_directory(native.build_name(), verbose=False))
    (build_dir / "lock").touch()  # as a build killed a moment ago leaves it
    loaded = subprocess.run(
        [sys.executable, "-c", "from sweeper.layers import native; "
         "print(native.ops() is not None)"],
        capture_output=True, text=True, timeout=120)
    assert loaded.stdout.strip() == "True", loaded.stderr
    assert not (build_dir / "lock").exists()

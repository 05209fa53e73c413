"""Metrics on hand-built cases, through the tensor functions and through the copy experiment;
outcomes derived from hand-built trajectories."""

from __future__ import annotations

import math

import pytest
import torch
from sweep_helpers import derive_outcomes

from sweeper import metrics as M
from sweeper.families import families
from sweeper.families.copy.experiment import CopyExperiment
from sweeper.families.copy.model import Seq2Seq
from sweeper.spec import make_spec

F64 = torch.float64


# -- token metrics -----------------------------------------------------------------------------
def test_token_hits_and_nll_on_hand_values():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 3.0]]], dtype=F64)  # [1, T=2, V=3]
    target = torch.tensor([[0, 1]])
    assert M.token_hits(logits, target).tolist() == [[True, False]]
    expected = [-2 + math.log(math.exp(2) + 2), -1 + math.log(1 + math.e + math.exp(3))]
    torch.testing.assert_close(M.token_nll(logits, target), torch.tensor([expected], dtype=F64))


def test_log_odds_of_target_matches_a_hand_computation():
    logits = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], dtype=F64)
    target = torch.tensor([2, 1])
    expected = [3 - math.log(math.e + math.exp(2)), -1 - math.log(math.exp(0.5) + 1)]
    torch.testing.assert_close(M.log_odds_of_target(logits, target),
                               torch.tensor(expected, dtype=F64), rtol=1e-12, atol=1e-12)


def test_log_odds_of_target_stays_exact_for_confident_predictions():
    # log p/(1-p) = z_target - logsumexp(other logits) = 40 here; the KTIW probe ranks source
    # positions by this value, so it must not saturate for confident models.
    logits = torch.tensor([0.0, 40.0], dtype=F64)
    assert M.log_odds_of_target(logits, torch.tensor(1)).item() == pytest.approx(40, abs=1e-9)


# -- attention metrics -------------------------------------------------------------------------
def test_aligned_attention_scores_accuracy_one_and_mass_one():
    S = 6
    attn = torch.eye(S, dtype=F64).expand(2, 3, 4, S, S)  # [K, H, B, T, S]
    assert M.aligned_hits(attn).all()
    assert torch.equal(M.aligned_mass(attn), torch.ones(2, 3, 4, S, dtype=F64))
    assert M.mean_keep(M.aligned_hits(attn), keep=2).tolist() == [[1.0] * 3] * 2


def test_uniform_attention_gives_exactly_one_over_l_plus_one_per_position():
    L = 6
    attn = torch.full((2, 4, L + 1, L + 1), 1 / (L + 1), dtype=F64)
    assert torch.equal(M.aligned_mass(attn), torch.full((2, 4, L + 1), 1 / (L + 1), dtype=F64))


def test_misaligned_attention_scores_by_position():
    S = 4
    attn = torch.eye(S)[[0, 2, 2, 3]]  # step 1 looks at position 2
    assert M.aligned_hits(attn).tolist() == [True, False, True, True]
    assert M.aligned_mass(attn).tolist() == [1.0, 0.0, 1.0, 1.0]
    assert M.mean_keep(M.aligned_hits(attn[None])).item() == 0.75


def _shifted(shift: int, T: int, S: int) -> torch.Tensor:
    """[T, S] one-hot attention on source position t + shift (the last position past the end)."""
    return torch.eye(S, dtype=F64)[[min(max(t + shift, 0), S - 1) for t in range(T)]]


def test_perfectly_aligned_attention_peaks_at_offset_zero_with_all_its_mass():
    S = 7
    attn = torch.eye(S, dtype=F64).expand(2, 3, 4, S, S)  # [K, H, B, T, S]
    offset, mass = M.best_head_peak(attn)
    assert offset.tolist() == [0, 0] and mass.tolist() == [1.0, 1.0]


def test_attention_shifted_by_three_peaks_at_offset_three():
    T = S = 9  # 8 content steps; steps 0-5 can look 3 ahead, steps 6-7 hit the end
    attn = _shifted(3, T, S).expand(1, 1, 2, T, S)
    offset, mass = M.best_head_peak(attn)
    assert offset.tolist() == [3]
    assert mass.item() == pytest.approx(6 / 8)
    assert M.head_aligned_mass(attn).item() == 0.0  # what the aligned mass alone says


def test_attention_shifted_backwards_peaks_at_a_negative_offset():
    T = S = 9
    offset, _ = M.best_head_peak(_shifted(-2, T, S).expand(1, 1, 1, T, S))
    assert offset.tolist() == [-2]


def test_uniform_attention_peaks_at_offset_zero_with_uniforms_mass_one_over_s():
    L = 16
    S = L + 1
    attn = torch.full((3, 2, 5, S, S), 1 / S, dtype=F64)
    offset, mass = M.best_head_peak(attn)
    assert offset.tolist() == [0, 0, 0]  # ties go to the aligned position
    assert mass.tolist() == pytest.approx([1 / S] * 3, rel=1e-12)


def test_the_offset_profile_sums_to_one_and_its_offset_zero_is_the_aligned_mass():
    attn = torch.softmax(torch.randn(2, 3, 4, 6, 6, dtype=F64, generator=torch.Generator(
        ).manual_seed(0)), dim=-1)
    profile = M.head_offset_profile(attn)  # [K, H, O]
    zero = M.offsets(M.content_steps(attn)).tolist().index(0)
    torch.testing.assert_close(profile.sum(dim=-1), torch.ones(2, 3, dtype=F64))
    torch.testing.assert_close(profile[..., zero], M.head_aligned_mass(attn))


def test_a_head_fixed_on_one_position_spreads_over_offsets_instead_of_peaking_far():
    T = S = 9  # every step looks at the source's EOS: no offset gets more than one step's mass
    attn = torch.eye(S, dtype=F64)[[S - 1] * T].expand(1, 1, 1, T, S)
    _, mass = M.best_head_peak(attn)
    assert mass.item() == pytest.approx(1 / (T - 1))


def test_the_best_head_is_the_one_with_the_highest_aligned_mass():
    T = S = 9
    heads = torch.stack([_shifted(3, T, S), 0.4 * torch.eye(S, dtype=F64) + 0.6 / S])
    offset, mass = M.best_head_peak(heads.expand(1, 1, 2, T, S).transpose(1, 2))  # [1, 2, 1..]
    assert offset.tolist() == [0]
    assert mass.item() == pytest.approx(0.4 + 0.6 / S)


def test_ktiw_probe_hits_on_hand_built_logits():
    T, V = 4, 7
    target = torch.tensor([[3, 1, 6, 0]])
    logits = torch.zeros(1, T, T, V)  # [1, T, S, V]
    for t in range(T):
        logits[0, t, t, target[0, t]] = 8.0  # attention on l = t makes the target likely
    assert M.ktiw_probe_hits(logits, target).all()
    shifted = logits.roll(1, dims=2)  # the target now comes from position t - 1
    assert not M.ktiw_probe_hits(shifted, target).any()


def test_mean_keep_reduces_trailing_dims_and_counts_bools():
    x = torch.tensor([[[True, False], [True, True]], [[False, False], [False, True]]])
    assert M.mean_keep(x).tolist() == [0.75, 0.25]
    assert M.mean_keep(x, keep=2).tolist() == [[0.5, 1.0], [0.0, 0.5]]


def test_mean_keep_preserves_float64_precision():
    # Trajectories of a float64 training must carry float64 metrics (the packing-equivalence
    # tests compare them at 1e-9 and tighter).
    x = torch.full((1, 3), 1 / 3, dtype=F64)
    assert M.mean_keep(x).dtype == F64
    assert M.mean_keep(x).item() == pytest.approx(1 / 3, abs=1e-15)


# -- Lu's identity -----------------------------------------------------------------------------
def test_lu_identity_on_hand_values():
    score = torch.tensor([1.0, 0.5], dtype=F64)
    embed_sq = torch.tensor([2.0, 0.1], dtype=F64)
    query_sq = torch.tensor(3.0, dtype=F64)
    lhs, rhs, residual = M.lu_identity(score, embed_sq, query_sq, distractors=4)
    expected_rhs = [2 + 0.5 * (math.e - 1), 1 + 0.5 * (math.exp(0.5) - 1)]
    torch.testing.assert_close(lhs, torch.tensor([6.0, 0.3], dtype=F64))
    torch.testing.assert_close(rhs, torch.tensor(expected_rhs, dtype=F64))
    expected_res = [abs(6 - expected_rhs[0]) / 6, abs(0.3 - expected_rhs[1]) / expected_rhs[1]]
    torch.testing.assert_close(residual, torch.tensor(expected_res, dtype=F64))


def test_lu_identity_is_zero_on_its_own_solution_and_floored_near_zero():
    s = torch.tensor([0.0, 0.3, 2.0, 4.0], dtype=F64)
    m, q_sq = 20, 0.9
    v_sq = (2 * s + (2 / m) * torch.expm1(s)) / q_sq
    _, _, residual = M.lu_identity(s, v_sq, torch.tensor(q_sq, dtype=F64), m)
    assert residual.max().item() < 1e-14
    # at initialisation both sides are ~1e-12: the residual is relative to a 1e-3 floor
    _, _, tiny = M.lu_identity(torch.tensor([0.0], dtype=F64), torch.tensor([1e-12], dtype=F64),
                               torch.tensor(1.0, dtype=F64), m)
    assert tiny.item() == pytest.approx(1e-9)


# -- through the copy experiment: hand-built models -------------------------------------------
def _experiment(length=5, heads=1, mapping="identity", width=None, cooccurrence=0.4,
                attention="learned") -> CopyExperiment:
    task = make_spec("copy-v1", "seq2seq", {"length": length, "cooccurrence": cooccurrence,
                                            "mapping": mapping}).make_task()
    spec = make_spec("copy-v1", "seq2seq",
                     {"length": length, "cooccurrence": cooccurrence, "mapping": mapping},
                     {"width": width or task.symbols, "heads": heads, "attention": attention},
                     {"eval_size": 32}, seed=3)
    return CopyExperiment([spec], F64, "cpu")


def _make_translator(model: Seq2Seq, mapping: torch.Tensor) -> None:
    """Hand-set weights so that with attention one-hot on l the model outputs mapping[src_l].

    d = V. Embeddings are one-hot codes; the encoder LSTM forgets its past (forget gate ~0) and
    stores tanh(3 e_token); W_v = I passes h_l to the readout, whose decoder half is zero, and
    W_o maps the code of token j to a large logit for mapping[j].
    """
    d, V = model.cfg.width, model.symbols
    assert d == V
    eye = torch.eye(d, dtype=F64)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed[0] = eye
        for side in ("enc", "dec"):
            w_ih, b_ih = getattr(model, f"{side}_w_ih"), getattr(model, f"{side}_b_ih")
            w_ih[0, :, 2 * d:3 * d] = 3 * eye  # g = tanh(3 x)
            b_ih[0, :d] = 10.0  # input gate open
            b_ih[0, d:2 * d] = -10.0  # forget gate shut
            b_ih[0, 3 * d:] = 10.0  # output gate open
        model.w_v[0] = eye
        model.w_c[0, d:] = 5 * eye  # hidden = tanh(5 c), the decoder state is ignored
        model.w_o[0] = 10 * torch.eye(V, dtype=F64)[mapping]  # code of j -> mapping[j]


@pytest.mark.parametrize("mapping", ["identity", "permutation"])
def test_ktiw_probe_picks_the_aligned_position_for_a_model_built_to_translate(mapping):
    experiment = _experiment(mapping=mapping)
    model = experiment.model
    _make_translator(model, experiment.sampler.mapping[0])
    batch = experiment.sampler.sample(16, eval=True)
    out = model(batch.src, batch.dec_in)
    probe = model.one_hot_logits(out)  # [1, B, T, S, V]
    assert (probe.argmax(dim=-1) == experiment.sampler.mapping[0][batch.src][:, :, None, :]).all()
    assert M.ktiw_probe_hits(probe, batch.tgt).all()
    metrics = experiment.evaluate()
    assert metrics["ktiw_acc"].tolist() == [1.0]


def _force_aligned_attention(experiment: CopyExperiment) -> None:
    """Every head attends one-hot on the aligned position: `_mix` (the per-head attention and
    mixtures), which the learned readouts of evaluation and training both go through."""
    model = experiment.model

    def mix(dec, enc):
        K, B, T, _ = dec.shape
        H = model.cfg.heads
        attn = torch.eye(T, enc.shape[2], dtype=dec.dtype).expand(K, H, B, -1, -1)
        return attn, enc[:, :, :T].repeat(1, 1, 1, H)  # [K, B, T, H d]: each head's mixture

    model._mix = mix


def test_model_with_attention_forced_on_the_aligned_position_scores_one():
    experiment = _experiment(heads=3, width=8)
    _force_aligned_attention(experiment)
    m = experiment.evaluate()
    for name in ("attn_acc", "attn_mass", "attn_acc_block", "attn_acc_open"):
        assert m[name].tolist() == [1.0], name
    assert m["attn_acc_head"].tolist() == [[1.0] * 3]
    assert m["attn_mass_head"].tolist() == [[1.0] * 3]


def test_a_perfect_translator_with_aligned_attention_copies_perfectly():
    experiment = _experiment(mapping="permutation")
    _make_translator(experiment.model, experiment.sampler.mapping[0])
    _force_aligned_attention(experiment)
    m = experiment.evaluate()
    assert m["accuracy"].tolist() == [1.0]
    assert m["accuracy_block"].tolist() == [1.0] and m["accuracy_open"].tolist() == [1.0]
    assert m["loss"].item() < 1e-3
    assert m["uniform_acc"].item() < 0.5  # without attention it cannot tell positions apart


def test_model_with_attention_forced_on_the_aligned_position_peaks_at_offset_zero():
    L = 5
    experiment = _experiment(length=L, heads=2, width=8)
    _force_aligned_attention(experiment)
    m = experiment.evaluate()
    assert m["attn_offset"].tolist() == [0.0] and m["attn_peak_mass"].tolist() == [1.0]
    assert m["attn_concentration"].tolist() == [L + 1.0]


def test_uniform_attention_model_has_mass_one_over_l_plus_one():
    L = 5
    experiment = _experiment(length=L, heads=2, width=8, attention="uniform")
    m = experiment.evaluate()
    assert m["attn_offset"].tolist() == [0.0]
    assert m["attn_peak_mass"].item() == pytest.approx(1 / (L + 1), rel=1e-6)
    assert m["attn_concentration"].item() == pytest.approx(1.0, rel=1e-6)
    assert m["attn_mass"].item() == pytest.approx(1 / (L + 1), rel=1e-6)
    assert m["attn_mass_head"][0].tolist() == pytest.approx([1 / (L + 1)] * 2, rel=1e-6)
    assert torch.equal(m["uniform_acc"], m["accuracy"])  # forcing uniform changes nothing


def test_copy_evaluation_reports_every_declared_metric_with_its_shape():
    experiment = _experiment(heads=2, width=8)
    m = experiment.evaluate()
    assert set(m) == {metric.name for metric in families()["copy"].metrics}
    for metric in families()["copy"].metrics:
        assert m[metric.name].shape == ((1, 2) if metric.per_item else (1,)), metric.name


# -- outcomes ----------------------------------------------------------------------------------
def _columns(family: str, steps: list[int], **given) -> dict[str, list]:
    columns = {"step": steps}
    for metric in families()[family].metrics:
        columns[metric.name] = given.get(metric.name, [[0.0]] * len(steps) if metric.per_item
                                         else [0.0] * len(steps))
    return columns


def test_outcomes_learned_and_steps_to_learn():
    cols = _columns("copy", [0, 10, 20, 30, 40], accuracy=[0.1, 0.5, 0.96, 0.94, 0.99],
                    loss=[2.0, 1.0, 0.2, 0.3, 0.1])
    out = derive_outcomes("copy", cols)
    assert out["learned"] is True and out["steps_to_learn"] == 20
    assert out["final_accuracy"] == 0.99 and out["best_accuracy"] == 0.99
    assert out["final_loss"] == 0.1 and out["best_loss"] == 0.1
    stricter = derive_outcomes("copy", cols, accuracy_threshold=0.98)
    assert stricter["steps_to_learn"] == 40
    never = derive_outcomes("copy", cols, accuracy_threshold=0.995)
    assert never["learned"] is False and never["steps_to_learn"] is None


def test_outcomes_attention_and_ktiw_onsets():
    cols = _columns("copy", [0, 5, 10, 15], attn_acc=[0.0, 0.2, 0.5, 0.9],
                    ktiw_acc=[0.1, 0.6, 0.7, 0.9])
    out = derive_outcomes("copy", cols)
    assert out["attention_onset"] == 10 and out["ktiw_onset"] == 5
    assert out["plateau_exit"] is None  # a topic-task outcome
    later = derive_outcomes("copy", cols, attention_threshold=0.8, ktiw_threshold=0.95)
    assert later["attention_onset"] == 15 and later["ktiw_onset"] is None


def test_outcomes_best_and_final_skip_nan():
    cols = _columns("copy", [0, 1, 2], accuracy=[0.3, 0.8, math.nan],
                    loss=[1.0, 0.5, math.nan])
    out = derive_outcomes("copy", cols)
    assert out["final_accuracy"] == 0.8 and out["best_accuracy"] == 0.8
    assert out["best_loss"] == 0.5


def test_outcomes_topic_plateau_exit_is_first_step_with_loss_below_half_log_c():
    loss = [math.log(4), 1.35, 0.9, 0.6, 0.1]  # ln(4) / 2 = 0.693
    cols = _columns("topic", [0, 50, 100, 150, 200], loss=loss,
                    accuracy=[0.25, 0.9, 1.0, 1.0, 1.0], distractor_score_max=[0, .01, .02, .01, 0])
    out = derive_outcomes("topic", cols, classes=4)
    assert out["plateau_exit"] == 150
    assert out["learned"] is True and out["steps_to_learn"] == 100
    assert out["attention_onset"] is None and out["ktiw_onset"] is None
    assert out["best_distractor_score_max"] == 0 and out["final_distractor_score_max"] == 0
    assert derive_outcomes("topic", cols, classes=2)["plateau_exit"] == 200  # ln(2)/2 = 0.35
    assert "final_topic_score" not in out  # per-word lists have no final/best

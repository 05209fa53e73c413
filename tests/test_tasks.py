"""The statistics of the built-in tasks' distributions (copy-v1, topic-v1).

What every family must do (determinism, seeds, packing, storing) is the contract suite's,
`tests/test_families.py`; this file checks that each built-in task draws the distribution its
paper describes.
"""

from __future__ import annotations

import math

import pytest
import torch

from sweeper.families import TASKS
from sweeper.families.copy.data import CopySampler
from sweeper.families.topic.data import generate


def make_task(id: str, **params):
    return TASKS.make(id, **params)


# -- copy-v1 -----------------------------------------------------------------------------------
def _sampler(seed: int = 0, **params) -> CopySampler:
    return CopySampler([make_task("copy-v1", **params)], [seed])


def test_copy_shapes_and_special_tokens():
    task = make_task("copy-v1", length=6, cooccurrence=0.5)
    assert (task.content_tokens, task.eos, task.sos, task.symbols, task.seq_len) == (9, 9, 10,
                                                                                     11, 7)
    b = CopySampler([task], [0]).sample(32)
    assert b.src.shape == b.tgt.shape == b.dec_in.shape == (1, 32, 7)
    assert b.is_block.shape == (1, 32)
    assert (b.src[..., -1] == task.eos).all() and (b.tgt[..., -1] == task.eos).all()
    assert (b.src[..., :-1] < task.eos).all()  # no EOS or SOS among the content tokens


@pytest.mark.parametrize("component", [None, "block", "open"])
def test_copy_target_equals_source_under_identity_mapping(component):
    b = _sampler(length=6, hardness=0.5).sample(64, component=component)
    assert torch.equal(b.tgt, b.src)


def test_copy_target_is_the_fixed_permutation_of_the_source():
    task = make_task("copy-v1", length=6, cooccurrence=1.0, hardness=0.5, mapping="permutation")
    sampler = CopySampler([task], [4])
    table = sampler.mapping[0]
    N = task.content_tokens
    assert sorted(table[:N].tolist()) == list(range(N))  # a permutation of the content tokens
    assert table[N:].tolist() == [task.eos, task.sos]  # EOS and SOS map to themselves
    assert not torch.equal(table[:N], torch.arange(N))
    for b in (sampler.sample(64), sampler.sample(64, eval=True, component="block")):
        assert torch.equal(b.tgt, table[b.src])
    assert not torch.equal(CopySampler([task], [5]).mapping[0], table)  # seeded per trial


@pytest.mark.parametrize("mapping", ["identity", "permutation"])
def test_copy_decoder_input_is_sos_then_target_shifted_right(mapping):
    task = make_task("copy-v1", length=5, mapping=mapping)
    b = CopySampler([task], [1]).sample(32)
    assert (b.dec_in[..., 0] == task.sos).all()
    assert torch.equal(b.dec_in[..., 1:], b.tgt[..., :-1])


def test_copy_hard_block_is_one_fixed_set_of_l_tokens_permuted():
    L = 7
    sampler = _sampler(length=L, cooccurrence=1.0, hardness=0.3)
    for b in (sampler.sample(200, component="block"),
              sampler.sample(200, eval=True, component="block")):
        content = b.src[0, :, :-1]
        assert b.is_block.all()
        assert torch.equal(content.sort(dim=-1).values, torch.arange(L).expand(200, L))
        assert content.unique(dim=0).shape[0] > 100  # many different orders, not one
    mixture = sampler.sample(400)
    block_rows = mixture.src[0, mixture.is_block[0], :-1]
    assert torch.equal(block_rows.sort(dim=-1).values, torch.arange(L).expand_as(block_rows))


@pytest.mark.parametrize("hardness", [0.0, 0.3, 0.8, 1.0])
def test_copy_share_of_block_sequences_matches_hardness(hardness):
    b = _sampler(length=5, cooccurrence=1.0, hardness=hardness).sample(4000)
    share = b.is_block.float().mean().item()
    if hardness in (0.0, 1.0):
        assert share == hardness
    else:
        assert share == pytest.approx(hardness, abs=4 * math.sqrt(hardness * (1 - hardness)
                                                                  / 4000))


def test_copy_open_component_draws_from_all_n_tokens():
    task = make_task("copy-v1", length=5, cooccurrence=1.0)
    b = CopySampler([task], [0]).sample(500, component="open")
    assert not b.is_block.any()
    assert set(b.src[0, :, :-1].unique().tolist()) == set(range(task.content_tokens))


@pytest.mark.parametrize("component", [None, "block", "open"])
def test_copy_without_repetition_no_token_repeats_within_a_sequence(component):
    L = 8
    b = _sampler(length=L, cooccurrence=0.5, hardness=0.5).sample(500, component=component)
    content = b.src[0, :, :-1]
    assert (content.sort(dim=-1).values.diff(dim=-1) > 0).all()


def test_copy_with_repetition_repeats_tokens():
    b = _sampler(length=8, vocab=10, repeat=True).sample(500)
    content = b.src[0, :, :-1]
    assert ((content.sort(dim=-1).values.diff(dim=-1) == 0).any(dim=-1)).float().mean() > 0.5
    assert int(content.max()) <= 9


def test_copy_with_repetition_and_vocab_below_length_keeps_block_tokens_in_range():
    # vocab < length is allowed with repeat=True, and the trainer always evaluates the "block"
    # component: its tokens must still be content tokens (< N), not EOS, SOS or beyond.
    task = make_task("copy-v1", length=6, vocab=3, repeat=True)
    b = CopySampler([task], [0]).sample(200, component="block")
    assert int(b.src[..., :-1].max()) < task.content_tokens


def test_copy_with_repetition_and_vocab_below_length_still_gives_length_tokens():
    task = make_task("copy-v1", length=6, vocab=3, repeat=True)
    b = CopySampler([task], [0]).sample(50)
    assert b.src.shape == b.tgt.shape == b.dec_in.shape == (1, 50, task.seq_len)


def test_copy_tasks_with_vocabularies_within_a_factor_two_share_a_pack_shape():
    shape = lambda **kw: make_task("copy-v1", length=8, **kw).shape()  # noqa: E731
    assert shape(cooccurrence=0.0) == shape(cooccurrence=0.25) == shape(cooccurrence=0.5)
    assert shape(cooccurrence=0.0) != shape(cooccurrence=1.0)  # N + 2 = 10 and 18
    assert shape(cooccurrence=0.0) != make_task("copy-v1", length=9).shape()


@pytest.mark.parametrize("repeat", [False, True])
def test_copy_sampler_with_mixed_vocabularies_draws_what_each_task_draws_alone(repeat):
    tasks = [make_task("copy-v1", length=5, vocab=n, hardness=0.3, repeat=repeat,
                       mapping="permutation") for n in (10, 14, 12)]
    packed = CopySampler(tasks, [3, 4, 5])
    assert packed.symbols == 16
    for step in range(2):
        both = packed.sample(32, eval=step == 1)
        for k, (task, seed) in enumerate(zip(tasks, [3, 4, 5])):
            alone = CopySampler([task], [seed])
            if step == 1:
                alone.sample(32)  # the eval stream is its own: skipping training draws is fine
            one = alone.sample(32, eval=step == 1)
            for name in ("src", "dec_in", "tgt", "is_block"):
                assert torch.equal(getattr(both, name)[k], getattr(one, name)[0]), (k, name)
            assert int(both.src[k, :, -1].unique()) == task.eos
            assert int(both.dec_in[k, :, 0].unique()) == task.sos


@pytest.mark.parametrize("length,cooccurrence", [(6, 0.5), (5, 1.0), (4, 0.0)])
def test_copy_measured_lift_matches_n_minus_1_over_l_minus_1(length, cooccurrence):
    """P(j in sequence | i in sequence) = (L-1)/(N-1) for every ordered pair i != j, and the lift
    (N-1)/(L-1) is its inverse (1 under the hard distribution, where every pair co-occurs).

    Pooled over j, the estimate is exactly (L-1)/(N-1) for any sampler without repetition, so the
    test checks each pair: a sampler that favoured some tokens would fail it.
    """
    task = make_task("copy-v1", length=length, cooccurrence=cooccurrence)
    N, L, B = task.content_tokens, task.length, 6000
    content = CopySampler([task], [11]).sample(B).src[0, :, :-1]
    present = torch.zeros(B, N, dtype=torch.float64).scatter_(1, content, 1.0)  # [B, N]
    together = present.T @ present  # [N, N]: sequences holding both i and j
    count = present.sum(dim=0)  # [N]: sequences holding i
    p = together / count[:, None]  # P(j | i)
    off = ~torch.eye(N, dtype=torch.bool)
    expected_p = (L - 1) / (N - 1)
    assert task.lift == pytest.approx((N - 1) / (L - 1))
    assert task.derived()["lift"] == task.lift
    # per pair: within 5 standard errors; on average: within 1%
    tolerance = 5 * math.sqrt(expected_p * (1 - expected_p) / (B * L / N)) + 1e-12
    assert (p[off] - expected_p).abs().max().item() <= tolerance
    measured_lift = (1 / p[off]).mean().item()
    assert measured_lift == pytest.approx(task.lift, rel=0.01)


def test_copy_eval_and_train_streams_are_separate():
    a, b = _sampler(seed=2, length=5), _sampler(seed=2, length=5)
    a.sample(16)
    first = a.sample(16)
    b.sample(16)
    b.sample(16, eval=True)
    b.sample(16, eval=True, component="block")
    assert torch.equal(b.sample(16).src, first.src)  # evaluating does not shift training data


def test_copy_sampler_gives_each_packed_task_its_solo_batches():
    tasks = [make_task("copy-v1", length=5, vocab=8, hardness=h, mapping=m)
             for h, m in [(0.0, "identity"), (0.6, "permutation"), (1.0, "identity")]]
    seeds = [3, 9, 4]
    pack = CopySampler(tasks, seeds)
    solos = [CopySampler([t], [s]) for t, s in zip(tasks, seeds)]
    for step in range(3):
        eval_ = step == 2
        packed = pack.sample(16, eval=eval_)
        for k, solo in enumerate(solos):
            alone = solo.sample(16, eval=eval_)
            for field in ("src", "tgt", "dec_in", "is_block"):
                assert torch.equal(getattr(packed, field)[k], getattr(alone, field)[0]), field


def test_copy_sampler_refuses_tasks_of_different_shapes():
    with pytest.raises(ValueError, match="one shape"):
        CopySampler([make_task("copy-v1", length=5), make_task("copy-v1", length=6)], [0, 1])


def test_copy_vocab_overrides_cooccurrence_and_derives_it():
    task = make_task("copy-v1", length=10, cooccurrence=3.0, vocab=15)
    assert task.content_tokens == 15 and task.cooccurrence == 0.5
    assert make_task("copy-v1", length=40, cooccurrence=0.0).content_tokens == 40
    assert make_task("copy-v1", length=40, cooccurrence=0.5).content_tokens == 60


# -- topic-v1 ----------------------------------------------------------------------------------
def _topic(seed: int = 0, **params):
    task = make_task("topic-v1", **params)
    return task, generate(task, seed)


def test_topic_shapes_and_word_ranges():
    task, data = _topic(classes=4, topic_words=2, distractors=20, vocab=5000, samples=5000)
    assert data.words.shape == (5000, 21) and data.labels.shape == (5000,)
    assert task.n_topic == 8 and task.words == 5008
    topic, distractors = data.words[:, 0], data.words[:, 1:]
    assert int(topic.min()) >= 0 and int(topic.max()) < task.n_topic
    assert int(distractors.min()) >= task.n_topic and int(distractors.max()) < task.words


def test_topic_split_sizes_for_5000_samples():
    task = make_task("topic-v1", samples=5000)
    train, val, test = task.split
    assert (val, test) == (50, 950)
    assert train + val + test == 5000


def test_topic_labels_are_uniform():
    task, data = _topic(classes=4, samples=8000, vocab=100)
    counts = torch.bincount(data.labels, minlength=4).double()
    expected = 8000 / 4
    assert (counts - expected).abs().max().item() < 5 * math.sqrt(expected * 0.75)


@pytest.mark.parametrize("rho", [1.0, 0.7, 0.25, 0.0])
def test_topic_word_is_of_the_sentences_class_with_frequency_rho(rho):
    n, C, T = 6000, 4, 3
    task, data = _topic(seed=1, classes=C, topic_words=T, vocab=50, samples=n, cooccurrence=rho)
    topic_class = data.words[:, 0] // T
    own = (topic_class == data.labels).double().mean().item()
    if rho in (0.0, 1.0):
        assert own == rho
    else:
        assert own == pytest.approx(rho, abs=5 * math.sqrt(rho * (1 - rho) / n))
    # a borrowed topic word comes from each other class about equally often
    borrowed = (topic_class - data.labels)[topic_class != data.labels] % C
    if borrowed.numel():
        shares = torch.bincount(borrowed, minlength=C)[1:].double() / borrowed.numel()
        assert (shares - 1 / (C - 1)).abs().max().item() < 0.05
    # every topic word of a class is used
    assert set(data.words[:, 0].unique().tolist()) == set(range(C * T))


def test_topic_distractors_are_uniform_over_the_non_topic_words():
    task, data = _topic(vocab=20, samples=2000, distractors=10)
    counts = torch.bincount(data.words[:, 1:].flatten() - task.n_topic, minlength=20).double()
    expected = 2000 * 10 / 20
    assert counts.shape == (20,)
    assert (counts - expected).abs().max().item() < 5 * math.sqrt(expected)


def test_topic_data_set_is_fixed_per_seed():
    task = make_task("topic-v1", vocab=30, samples=100)
    a, b, c = generate(task, 5), generate(task, 5), generate(task, 6)
    assert torch.equal(a.words, b.words) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.words, c.words)


def test_topic_single_class_is_allowed_with_rho_one():
    task, data = _topic(classes=1, vocab=10, samples=50)
    assert (data.labels == 0).all() and (data.words[:, 0] < task.topic_words).all()


@pytest.mark.parametrize("task", [
    {"length": 6, "cooccurrence": 1.0, "hardness": 0.6},
    {"length": 6, "cooccurrence": 0.5, "hardness": 0.3, "mapping": "permutation"},
    {"length": 5, "vocab": 4, "repeat": True, "hardness": 0.5},
], ids=lambda t: ",".join(f"{k}={v}" for k, v in t.items()))
def test_target_frequencies_are_the_targets_the_sampler_draws(task):
    # the output bias starts at their log: they must be what the data asks for
    copy_task = make_task("copy-v1", **task)
    sampler = CopySampler([copy_task], [3])
    expected = sampler.target_frequencies()[0]
    assert expected.sum().item() == pytest.approx(1.0)
    counts = torch.zeros_like(expected)
    n = 0
    for _ in range(40):
        batch = sampler.sample(500)
        counts += torch.bincount(batch.tgt.flatten(), minlength=len(expected)).double()
        n += batch.tgt.numel()
    measured = counts / n
    assert measured[copy_task.sos].item() == 0.0  # SOS is never a target
    torch.testing.assert_close(measured, expected, rtol=0, atol=0.01)

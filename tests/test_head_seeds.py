"""seq2seq's head initialisation as parameters (issue 25, item 1): `model.base_seed` and
`model.head_seeds`. A head is its seed (the same tensors at any H and any position), the base is
its seed (the same at any H), and both null is today's init with today's trial ids."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sweeper.errors import SweeperInputError
from sweeper.families.copy.config import Seq2SeqConfig
from sweeper.families.copy.experiment import CopyExperiment
from sweeper.families.copy.model import Seq2Seq
from sweeper.layers import init as I
from sweeper.overrides import sweep_from
from sweeper.plan import make_plan
from sweeper.seeding import generator
from sweeper.spec import make_spec, spec_from_config
from sweeper.train import train_pack

F64 = torch.float64
HEAD = ("w_q", "w_v", "b_q", "b_v")
BASE = ("embed", "dec_embed", "enc_w_ih", "enc_w_hh", "enc_b_ih", "enc_b_hh", "dec_w_ih",
        "dec_w_hh", "dec_b_ih", "dec_b_hh", "w_c", "b_c", "w_o", "b_o")
REPO = Path(__file__).resolve().parents[1]


def _params(seed: int = 0, **cfg) -> dict[str, torch.Tensor]:
    """One model's parameters, [...] without the model dim."""
    model = Seq2Seq(Seq2SeqConfig(**{"width": 6, **cfg}), symbols=9, seeds=[seed], dtype=F64)
    return {name: p.detach()[0] for name, p in model.named_parameters()}


def _old_init(seed: int, V: int, d: int, H: int, shared: bool, bias: bool) -> dict:
    """The init before issue 25, written out: one stream per trial seed, every parameter in
    order, the heads between the RNNs and the readout."""
    gen, rnn, G = generator(seed, "init"), 1 / math.sqrt(d), 4
    p = {"embed": I.normal((V, d), 1.0, gen)}
    if not shared:
        p["dec_embed"] = I.normal((V, d), 1.0, gen)
    for side in ("enc", "dec"):
        for name, shape in (("w_ih", (d, G * d)), ("w_hh", (d, G * d)), ("b_ih", (G * d,)),
                            ("b_hh", (G * d,))):
            p[f"{side}_{name}"] = I.uniform(shape, rnn, gen)
    p["w_q"], p["w_v"] = I.uniform((H, d, d), rnn, gen), I.uniform((H, d, d), rnn, gen)
    if bias:
        p["b_q"], p["b_v"] = I.uniform((H, d), rnn, gen), I.uniform((H, d), rnn, gen)
    p["w_c"], p["b_c"] = I.linear(2 * d, d, gen)
    p["w_o"], p["b_o"] = I.linear(d, V, gen)
    return p


# -- a head is its seed, the base is its seed --------------------------------------------------
@pytest.mark.parametrize("heads", [2, 3, 5])
def test_a_heads_tensors_are_the_same_alone_and_at_any_position_of_any_head_count(heads):
    alone = _params(head_seeds=[41], base_seed=0)
    for position in range(heads):
        seeds = [100 + h for h in range(heads)]
        seeds[position] = 41
        many = _params(heads=heads, head_seeds=seeds, base_seed=0)
        for name in HEAD:
            assert torch.equal(many[name][position], alone[name][0]), (name, position)


def test_a_heads_tensors_do_not_depend_on_the_base_or_the_trial_seed():
    a = _params(seed=0, head_seeds=[5], base_seed=1)
    b = _params(seed=9, head_seeds=[5])
    for name in HEAD:
        assert torch.equal(a[name], b[name]), name


def test_base_parameters_are_equal_across_head_counts_for_one_base_seed():
    one = _params(base_seed=12, head_seeds=[0])
    for heads in (2, 4):
        many = _params(heads=heads, base_seed=12, head_seeds=list(range(heads)))
        for name in BASE:
            if name in one:
                assert torch.equal(many[name], one[name]), (name, heads)


def test_base_seed_null_takes_the_base_from_the_trial_seed_and_the_data_stay_the_trial_seeds():
    by_trial = _params(seed=12, head_seeds=[3])
    by_base = _params(seed=0, base_seed=12, head_seeds=[3])
    assert all(torch.equal(by_trial[n], by_base[n]) for n in BASE if n in by_trial)
    other = _params(seed=0, base_seed=13, head_seeds=[3])
    assert not torch.equal(other["embed"], by_base["embed"])


def test_head_seeds_null_with_a_base_seed_draws_head_h_from_the_trial_seed_at_any_head_count():
    one, four = _params(seed=2, base_seed=0), _params(seed=2, base_seed=0, heads=4)
    for name in HEAD:
        assert torch.equal(four[name][0], one[name][0]), name
    assert not torch.equal(four["w_q"][0], four["w_q"][1])
    other = _params(seed=3, base_seed=0)
    assert not torch.equal(other["w_q"], one["w_q"])  # heads vary with the trial seed


def test_without_projection_biases_the_head_weights_are_unchanged():
    with_bias, without = _params(head_seeds=[4]), _params(head_seeds=[4], projection_bias=False)
    assert "b_q" not in without
    for name in ("w_q", "w_v"):
        assert torch.equal(with_bias[name], without[name])


# -- nulls: today's init and today's ids --------------------------------------------------------
@pytest.mark.parametrize("cfg", [{"heads": 1}, {"heads": 3, "shared_embedding": False},
                                 {"heads": 2, "projection_bias": False}])
def test_nulls_give_the_init_of_before_bit_for_bit(cfg):
    new = _params(seed=5, **cfg)
    old = _old_init(5, 9, 6, cfg["heads"], cfg.get("shared_embedding", True),
                    cfg.get("projection_bias", True))
    assert list(new) == list(old)  # the parameters' order too (a pack stacks by it)
    for name in old:
        assert torch.equal(new[name], old[name].to(F64)), name


def test_nulls_keep_the_trial_ids_computed_before_issue_25():
    # computed on main before base_seed and head_seeds existed
    assert make_spec("copy-v1", "seq2seq").trial_id == "db0b61a9df62b51e"
    spec = make_spec("copy-v1", "seq2seq", {"length": 8}, {"heads": 4, "width": 16}, seed=3)
    assert spec.trial_id == "586cc8d956e241dd"
    explicit = make_spec("copy-v1", "seq2seq", {"length": 8},
                         {"heads": 4, "width": 16, "base_seed": None, "head_seeds": None}, seed=3)
    assert explicit.trial_id == spec.trial_id
    assert "head_seeds" not in spec.config()["model"]


def test_set_seeds_enter_the_id_and_survive_the_config_round_trip():
    base = make_spec("copy-v1", "seq2seq", model_params={"heads": 2})
    ids = {base.trial_id}
    for params in ({"base_seed": 0}, {"head_seeds": [0, 1]}, {"head_seeds": [1, 0]},
                   {"base_seed": 0, "head_seeds": [0, 1]}):
        spec = make_spec("copy-v1", "seq2seq", model_params={"heads": 2, **params})
        assert spec.trial_id not in ids
        ids.add(spec.trial_id)
        assert spec_from_config(spec.config()).trial_id == spec.trial_id


def test_seeds_are_values_not_shapes_so_they_pack_together():
    a = make_spec("copy-v1", "seq2seq", model_params={"heads": 2, "head_seeds": [0, 1]})
    b = make_spec("copy-v1", "seq2seq", model_params={"heads": 2, "head_seeds": [7, 3],
                                                      "base_seed": 4})
    c = make_spec("copy-v1", "seq2seq", model_params={"heads": 2})
    assert a.pack_key() == b.pack_key() == c.pack_key()
    assert b.flat()["model.head_seeds"] == "[7,3]" and c.flat()["model.head_seeds"] is None


# -- packing -----------------------------------------------------------------------------------
def _small(seed: int, **model) -> object:
    return make_spec("copy-v1", "seq2seq", {"length": 5}, {"width": 8, "heads": 2, **model},
                     {"batch_size": 8, "steps": 4, "eval_every": 2, "eval_size": 8}, seed)


def test_a_pack_with_different_head_seeds_gives_each_model_its_params_and_losses_alone():
    specs = [_small(0, head_seeds=[3, 4], base_seed=1), _small(1, head_seeds=[4, 9]),
             _small(2), _small(0, base_seed=1)]
    pack = CopyExperiment(specs, F64, "cpu").model
    for k, spec in enumerate(specs):
        alone = CopyExperiment([spec], F64, "cpu").model
        for (name, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            assert torch.equal(p[k], q[0]), (name, k)
    packed = train_pack(specs, dtype=F64)
    for spec, result in zip(specs, packed):
        alone = train_pack([spec], dtype=F64)[0]
        assert result.trajectory["loss"] == pytest.approx(alone.trajectory["loss"], rel=1e-9)


# -- sweep files and errors --------------------------------------------------------------------
SWEEP = """
name: head_init
task: copy-v1
model: seq2seq
fixed:
  task: {length: 5}
  model: {width: 8, heads: 2, base_seed: 7}
axes:
  model:
    head_seeds: {grid: [[0, 1], [1, 0], [2, 5]]}
seeds: 2
budget: {steps: 4}
"""


def test_head_seeds_as_a_grid_axis_and_as_a_fixed_value():
    plan = make_plan(sweep_from(SWEEP), set())
    assert sorted({tuple(s.model_params["head_seeds"]) for s in plan.specs}) == [
        (0, 1), (1, 0), (2, 5)]
    assert {s.model_params["base_seed"] for s in plan.specs} == {7}
    fixed = make_plan(sweep_from(SWEEP, sets=["model.head_seeds=[3,8]"]), set())
    assert [s.model_params["head_seeds"] for s in fixed.specs] == [[3, 8], [3, 8]]
    axis = make_plan(sweep_from(SWEEP, sets=["model.head_seeds=[3,8],[8,3]"]), set())
    assert len(axis.specs) == 4
    with pytest.raises(SweeperInputError, match=r"head_seeds.choice: .*an axis of lists is a grid"):
        sweep_from(SWEEP.replace("{grid: [[0, 1]", "{choice: [[0, 1]"))


@pytest.mark.parametrize(("params", "message"), [
    ({"heads": 2, "head_seeds": [1]}, "got 1 seeds [1] for model.heads = 2"),
    ({"heads": 2, "head_seeds": [1, 1]}, "(1 twice)"),
    ({"head_seeds": [-1]}, "model.head_seeds: got [-1]"),
    ({"head_seeds": [1.5]}, "model.head_seeds: got [1.5]"),
    ({"head_seeds": []}, "model.head_seeds: got []"),
    ({"head_seeds": 3}, "model.head_seeds: got 3"),
    ({"base_seed": -2}, "model.base_seed: got -2"),
    ({"base_seed": "a"}, "model.base_seed: got 'a'"),
])
def test_bad_values_give_one_line(params, message):
    with pytest.raises(SweeperInputError) as err:
        make_spec("copy-v1", "seq2seq", model_params=params)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_cli_plans_a_sweep_file_with_head_seeds_and_refuses_bad_ones_in_one_line(tmp_path):
    path = tmp_path / "head_init.yaml"
    path.write_text(SWEEP)
    run = [sys.executable, "-c", "import sys; from sweeper.cli import main; "
           "sys.exit(main(sys.argv[1:]))", "plan", str(path), "--results", str(tmp_path / "r")]
    good = subprocess.run(run, capture_output=True, text=True, cwd=REPO)
    assert good.returncode == 0, good.stderr
    assert "[2,5]" in good.stdout
    bad = subprocess.run(run + ["--set", "model.head_seeds=[0,1],[3]"], capture_output=True,
                         text=True, cwd=REPO)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "for model.heads = 2" in bad.stderr


# -- summed heads: the mechanism arm of the head experiment -----------------------------------
def test_summed_heads_are_averaged_heads_with_each_context_at_full_weight():
    """`head_merge: sum` is the averaged model with W_v and b_v multiplied by H (so each head's
    context enters at weight 1 instead of 1/H); with one head the two are the same model, and
    `sum` is a new trial id while null keeps the old one."""
    cfg = {"width": 6, "heads": 3, "base_seed": 0, "head_seeds": [4, 1, 7]}
    mean = Seq2Seq(Seq2SeqConfig(**cfg), symbols=9, seeds=[0], dtype=F64)
    summed = Seq2Seq(Seq2SeqConfig(**cfg, head_merge="sum"), symbols=9, seeds=[0], dtype=F64)
    with torch.no_grad():
        for name in ("w_v", "b_v"):
            getattr(mean, name).mul_(3)
    src = torch.randint(0, 8, (1, 5, 4))
    dec_in = torch.randint(0, 8, (1, 5, 4))
    a, b = mean(src, dec_in), summed(src, dec_in)
    assert torch.allclose(a.logits, b.logits, atol=1e-12) and torch.equal(a.attn, b.attn)
    one = {"width": 6, "heads": 1, "base_seed": 0, "head_seeds": [4]}
    x = Seq2Seq(Seq2SeqConfig(**one), symbols=9, seeds=[0], dtype=F64)(src, dec_in)
    y = Seq2Seq(Seq2SeqConfig(**one, head_merge="sum"), symbols=9, seeds=[0], dtype=F64)(
        src, dec_in)
    assert torch.equal(x.logits, y.logits)
    ids = {make_spec("copy-v1", "seq2seq", {"length": 4}, {**cfg, "head_merge": m}, {},
                     seed=0).trial_id for m in (None, "mean", "sum")}
    assert len(ids) == 2  # null and mean are one model, one id (the old one); sum another
    old = make_spec("copy-v1", "seq2seq", {"length": 4}, cfg, {}, seed=0).trial_id
    assert old == make_spec("copy-v1", "seq2seq", {"length": 4}, {**cfg, "head_merge": None},
                            {}, seed=0).trial_id

"""The head-initialisation experiment (analysis/heads.py, `sweeper heads`): stage 1's
classification, stage 2's sweep file, and the table that sets stage 2 beside the lottery."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.errors import AnalysisInputError
from analysis.heads import (
    CONDITIONS,
    HeadClasses,
    head_classes,
    head_init_table,
    stage2_sets,
    stage2_sweep,
)
from sweeper.results.cells import wilson_interval
from sweeper.results.errors import ResultsInputError

ROOT = Path(__file__).resolve().parents[1]
STAGE1 = ROOT / "search_spaces" / "snell_head_init_stage1.yaml"


def stage1_trials(learned: dict[int, list[bool]], base_seed: int | None = 0) -> pd.DataFrame:
    """One-head trials: head seed -> whether attention learned on data seeds 0, 1, ..."""
    rows = [{"trial_id": f"h{h}s{s}", "status": "ok", "model.heads": 1,
             "model.head_seeds": json.dumps([h]), "model.base_seed": base_seed, "seed": s,
             "attention_learned": ok}
            for h, runs in learned.items() for s, ok in enumerate(runs)]
    return pd.DataFrame(rows)


# heads 0-2 good, 3-5 bad, 6 mixed on seeds 0-2; seed 3 held out: good 2/3, bad 1/3, mixed 1/1
LEARNED = {0: [True, True, True, True], 1: [True, True, True, False],
           2: [True, True, True, True], 3: [False, False, False, False],
           4: [False, False, False, True], 5: [False, False, False, False],
           6: [True, False, True, True]}


def test_heads_are_good_in_every_classifying_seed_bad_in_none_and_rated_on_held_out_seeds():
    classes = head_classes(stage1_trials(LEARNED))
    assert classes.classify_seeds == (0, 1, 2) and classes.holdout_seeds == (3,)
    assert classes.seeds_of("good") == [0, 1, 2] and classes.seeds_of("bad") == [3, 4, 5]
    assert classes.seeds_of("mixed") == [6] and classes.class_of(99) == "unseen"
    rates = classes.rates.set_index("class")
    assert (rates["source"] == "holdout").all()
    assert (rates.loc["good", "trials"], rates.loc["good", "learned"]) == (3, 2)
    assert (rates.loc["bad", "trials"], rates.loc["bad", "learned"]) == (3, 1)
    assert (rates.loc["all", "trials"], rates.loc["all", "learned"]) == (7, 4)
    low, high = wilson_interval(1, 3)
    assert classes.rate("bad") == pytest.approx((1 / 3, float(low), float(high)))
    assert classes.rate("unseen") == classes.rate("all")


def test_without_held_out_seeds_the_rates_are_in_sample_and_bad_is_zero_by_construction():
    classes = head_classes(stage1_trials(LEARNED), holdout=0)
    assert classes.holdout_seeds == () and classes.seeds_of("good") == [0, 2]
    assert classes.rates.set_index("class").loc["bad", "rate"] == 0.0
    three_seeds = {h: runs[:3] for h, runs in LEARNED.items()}
    assert head_classes(stage1_trials(three_seeds)).holdout_seeds == ()  # default: 0 below 4


@pytest.mark.parametrize("change, message", [
    (lambda t: t.assign(**{"model.heads": 2}), "model.heads: got \\[2\\]"),
    (lambda t: t.assign(**{"model.base_seed": t["seed"]}), "base networks"),
    (lambda t: t.assign(**{"model.head_seeds": None}), "head_seeds"),
])
def test_stage1_that_is_not_one_head_on_one_base_is_refused_in_one_line(change, message):
    with pytest.raises(AnalysisInputError, match=message):
        head_classes(change(stage1_trials(LEARNED)))


def classes_with(good: list[int], bad: list[int], top: int = 40) -> HeadClasses:
    learned = {h: [h in good] * 4 for h in range(top)}
    learned.update({h: [True, False, True, False] for h in range(top) if h not in good + bad})
    return head_classes(stage1_trials(learned))


def test_stage2_sets_are_all_bad_one_good_cycling_its_position_and_heads_never_trained():
    classes = classes_with(good=[1, 2], bad=list(range(10, 30)))
    sets = stage2_sets(classes, heads=8, sets=10, seed=3)
    assert set(sets) == set(CONDITIONS) and all(len(v) == 10 for v in sets.values())
    bad, good = set(classes.seeds_of("bad")), set(classes.seeds_of("good"))
    for i, (all_bad, one_good, unseen) in enumerate(zip(*(sets[c] for c in CONDITIONS))):
        assert len(set(all_bad)) == 8 and set(all_bad) <= bad
        assert len(set(one_good)) == 8 and one_good[i % 8] in good
        assert set(one_good[:i % 8] + one_good[i % 8 + 1:]) <= bad
        assert min(unseen) >= 40 and len(set(unseen)) == 8
    assert stage2_sets(classes, heads=8, sets=10, seed=3) == sets  # reproducible
    with pytest.raises(AnalysisInputError, match="20 bad heads; allowed: at least --heads 21"):
        stage2_sets(classes, heads=21)


def test_stage2_sweep_keeps_stage1s_scale_and_base_and_plans_as_a_real_sweep(tmp_path, capsys):
    from sweeper.cli import main

    classes = classes_with(good=[1, 2], bad=list(range(10, 30)))
    stage1 = yaml.safe_load(STAGE1.read_text())
    sweep = stage2_sweep(stage1, classes, heads=8, sets=2, data_seeds=(1000, 1001))
    assert sweep["name"] == "snell_head_init_stage2" and sweep["seeds"] == [1000, 1001]
    assert sweep["fixed"]["model"] == {**stage1["fixed"]["model"], "heads": 8, "base_seed": 0}
    assert sweep["fixed"]["task"] == stage1["fixed"]["task"]
    assert sweep["budget"] == stage1["budget"] and len(sweep["axes"]["model"]["head_seeds"]
                                                      ["grid"]) == 6
    path = tmp_path / "stage2.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    assert main(["plan", str(path), "--no-estimate", "--results", str(tmp_path)]) == 0
    assert "12 trials" in capsys.readouterr().out


def stage2_frames(rows: list[tuple[list[int], bool, list[float]]]):
    """Stage 2 trials and trajectories: (head seeds, learned, each head's final attn_acc)."""
    trials, traj = [], []
    for i, (seeds, learned, accs) in enumerate(rows):
        trials.append({"trial_id": f"t{i}", "status": "ok", "model.heads": len(seeds),
                       "model.head_seeds": json.dumps(seeds), "seed": 1000 + i % 4,
                       "attention_learned": learned})
        traj += [{"trial_id": f"t{i}", "step": 0, "attn_acc_head": [0.0] * len(seeds)},
                 {"trial_id": f"t{i}", "step": 10, "attn_acc_head": accs}]
    return pd.DataFrame(trials), pd.DataFrame(traj)


def test_the_table_sets_each_composition_beside_the_lottery_and_finds_the_aligned_head():
    classes = head_classes(stage1_trials(LEARNED))  # good 2/3, bad 1/3, any 4/7 held out
    # two-head sets: '2 bad' (3, 5), '1 bad + 1 good' (0, 4), '2 unseen' (90, 91)
    rows = ([([3, 5], False, [0.1, 0.2])] * 9 + [([3, 5], True, [0.95, 0.1])]
            + [([0, 4], True, [0.97, 0.2])] * 9 + [([0, 4], True, [0.1, 0.93])]
            + [([90, 91], True, [0.91, 0.95])] * 4)
    trials, traj = stage2_frames(rows)
    table = head_init_table(trials, traj, classes).set_index("condition")
    assert list(table.index) == ["2 bad", "2 unseen", "1 bad + 1 good"]
    two_bad, one_good, unseen = (table.loc[c] for c in ("2 bad", "1 bad + 1 good", "2 unseen"))
    assert (two_bad["n"], two_bad["learned"]) == (10, 1)
    assert two_bad["lottery"] == pytest.approx(1 - (2 / 3) ** 2)
    low, high = wilson_interval(1, 3)
    assert two_bad["lottery_high"] == pytest.approx(1 - (1 - float(high)) ** 2)
    assert two_bad["heads_aligned"] == "0:9 1:1" and two_bad["bad_aligned"] == 1
    assert pd.isna(two_bad["good_aligned"])
    assert one_good["lottery"] == pytest.approx(1 - (1 / 3) * (2 / 3))
    assert one_good["lottery_aligned"] == pytest.approx(2 / 3 + 1 / 3)
    assert two_bad["lottery_aligned"] == pytest.approx(2 / 3) and two_bad["mean_aligned"] == 0.1
    assert (one_good["good_aligned"], one_good["bad_aligned"]) == (9, 1)
    assert unseen["lottery"] == pytest.approx(1 - (3 / 7) ** 2) and unseen["mean_aligned"] == 2
    assert set(table["verdict"]) <= {"as lottery", "beyond lottery", "below lottery"}


def test_a_condition_far_above_its_lottery_is_called_beyond_it():
    learned = {h: [h < 2] * 4 for h in range(12)}  # good 0, 1; bad 2-11 (held out: 0 of 10)
    classes = head_classes(stage1_trials(learned))
    rows = [([2, 3, 4, 5], True, [0.95, 0, 0, 0])] * 30
    table = head_init_table(*stage2_frames(rows), classes)
    assert table["verdict"].tolist() == ["beyond lottery"]
    assert table["lottery"].iloc[0] == 0.0 and table["low"].iloc[0] > table["lottery_high"].iloc[0]


def test_cli_heads_classifies_writes_stage2_and_reads_it_back_on_a_real_store(tmp_path, capsys):
    """A real (tiny) stage 1 trained by sweeper, classified at a threshold that makes the best
    head good, its stage 2 written, trained, and read back as the table."""
    import sweeper
    from analysis.cli import main
    from analysis.load import load

    stage1 = {"name": "tiny_stage1", "task": "copy-v1", "model": "seq2seq",
              "fixed": {"task": {"length": 5, "cooccurrence": 0.0},
                        "model": {"width": 8, "heads": 1, "base_seed": 0},
                        "train": {"batch_size": 8, "eval_size": 8, "eval_every": 3}},
              "axes": {"model": {"head_seeds": {"grid": [[h] for h in range(8)]}}},
              "seeds": 4, "budget": {"steps": 6}}
    sweeper.run(stage1, results=str(tmp_path), executor="local", stream=io.StringIO())
    traj = load(tmp_path, "tiny_stage1").read_trajectories(columns=["attn_acc"])
    best = traj.groupby("trial_id")["attn_acc"].max()
    trials = load(tmp_path, "tiny_stage1").trials.set_index("trial_id")
    per_head = best.groupby(trials.loc[best.index, "model.head_seeds"]).min()
    level = float(per_head.max())  # the head whose worst seed is best: good at this level
    folder = str(tmp_path / "tiny_stage1")
    argv = ["heads", folder, "--holdout", "0", "--attention-learned-threshold", str(level)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 head seeds on base network 0" in out and "good (learned in every one): " in out
    bad = out.split("bad (learned in none): ")[1].split("\n")[0]
    n_bad = 0 if bad == "none" else int(bad.split(" heads")[0])
    if n_bad == 0:  # the data decides: then stage 2 is refused in one line
        assert main([*argv, "--stage2", str(tmp_path / "s2.yaml")]) == 2
        assert "bad heads" in capsys.readouterr().err
        return
    stage2 = tmp_path / "s2.yaml"
    assert main([*argv, "--stage2", str(stage2), "--heads", str(min(n_bad, 2)), "--sets", "1",
                 "--data-seeds", "7,8"]) == 0
    assert f"wrote {stage2}" in capsys.readouterr().out
    sweeper.run(str(stage2), results=str(tmp_path), executor="local", stream=io.StringIO())
    table = tmp_path / "table.csv"
    assert main(["heads", str(tmp_path / "tiny_stage2"), "--classes", folder, "--holdout", "0",
                 "--attention-learned-threshold", str(level), "--cells", str(table)]) == 0
    frame = pd.read_csv(table)
    assert frame["n"].sum() == 6 and len(frame) == 3
    assert np.all(frame["lottery_low"] <= frame["lottery_high"])


def test_cli_heads_refuses_stage2_options_without_stage2_and_a_sweep_without_head_seeds(
        tmp_path, capsys):
    from analysis.cli import main

    try:
        from analysis_fixtures import small_copy_sweep
    except ImportError:  # tests/ imported as a package
        from tests.analysis_fixtures import small_copy_sweep
    small_copy_sweep(tmp_path, cooccurrence=(0.0,), hardness=(0.0,), heads=(1,), seeds=2)
    assert main(["heads", str(tmp_path / "copy"), "--heads", "4"]) == 2
    assert "give them with --stage2" in capsys.readouterr().err
    assert main(["heads", str(tmp_path / "copy")]) == 2
    assert "model.head_seeds" in capsys.readouterr().err


def test_stage2_refuses_too_many_sets_one_head_and_stage1s_own_or_repeated_data_seeds():
    classes = classes_with(good=[1], bad=[10, 11, 12])
    stage1 = yaml.safe_load(STAGE1.read_text())
    with pytest.raises(AnalysisInputError, match="--sets: got 2; allowed: at most 1"):
        stage2_sets(classes, heads=3, sets=2)
    with pytest.raises(AnalysisInputError, match="--heads: got 1; allowed: 2 or more"):
        stage2_sets(classes, heads=1, sets=1)
    assert len({tuple(s) for s in stage2_sets(classes, heads=2, sets=3)["bad"]}) == 3
    for seeds, message in (((1000, 1000), "distinct"), ((3, 1001), "stage 1's own"),
                           ((2**63, 1), "--data-seeds")):
        with pytest.raises(AnalysisInputError, match=message):
            stage2_sweep(stage1, classes, heads=2, sets=1, data_seeds=seeds)
    with pytest.raises(ResultsInputError, match="--name"):
        stage2_sweep(stage1, classes, heads=2, sets=1, name="bad name/..")


def test_cli_heads_refuses_stage2_with_classes_and_an_empty_folder_in_one_line(tmp_path, capsys):
    from analysis.cli import main

    (tmp_path / "empty").mkdir()
    assert main(["heads", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err
    assert main(["heads", str(tmp_path / "empty"), "--classes", str(tmp_path / "empty"),
                 "--stage2", str(tmp_path / "s2.yaml")]) == 2
    assert "give one" in capsys.readouterr().err and not (tmp_path / "s2.yaml").exists()
    assert main(["heads", str(tmp_path / "empty"), "--cells", str(tmp_path / "x.txt")]) == 2
    assert "--cells" in capsys.readouterr().err

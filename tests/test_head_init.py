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
    class_rates,
    comparisons,
    condition_of,
    good_head_steps,
    head_classes,
    paired_table,
    paired_trials,
    stage2_sets,
    stage2_sweeps,
)
from sweeper.results.errors import ResultsInputError

ROOT = Path(__file__).resolve().parents[1]
STAGE1 = ROOT / "search_spaces" / "snell_heads_stage1.yaml"


def one_head_trials(learned: dict[int, list[bool]], base_seed: int = 1, first_seed: int = 0,
                    step: float = 100.0) -> pd.DataFrame:
    """One-head trials on one base: head seed -> whether attention learned on data seeds
    first_seed, first_seed + 1, ... (at `step` where it did)."""
    rows = [{"trial_id": f"b{base_seed}h{h}s{first_seed + s}", "status": "ok", "model.heads": 1,
             "model.head_seeds": json.dumps([h]), "model.base_seed": base_seed,
             "seed": first_seed + s, "attention_learned": ok, "train.steps": 400,
             "attention_steps": step if ok else np.nan}
            for h, runs in learned.items() for s, ok in enumerate(runs)]
    return pd.DataFrame(rows)


# base 1 on seeds 0-2: heads 0-2 good, 3-5 bad, 6 mixed; base 2: head 0 bad, the rest good
LEARNED = {0: [True] * 3, 1: [True] * 3, 2: [True] * 3, 3: [False] * 3, 4: [False] * 3,
           5: [False] * 3, 6: [True, False, True]}


def test_heads_are_classified_on_each_base_good_in_every_seed_bad_in_none():
    other = {h: [h != 0] * 3 for h in range(7)}
    classes = head_classes(pd.concat([one_head_trials(LEARNED), one_head_trials(other, 2)]))
    assert classes.bases == [1, 2] and classes.classify_seeds == (0, 1, 2)
    assert classes.seeds_of(1, "good") == [0, 1, 2] and classes.seeds_of(1, "bad") == [3, 4, 5]
    assert classes.seeds_of(1, "mixed") == [6] and classes.seeds_of(2, "bad") == [0]
    assert classes.class_of(2, 3) == "good" and classes.class_of(1, 3) == "bad"
    with pytest.raises(AnalysisInputError, match="head seed 99 on base 1"):
        classes.class_of(1, 99)
    rates = classes.rates.set_index(["base_seed", "class"])
    assert rates.loc[(1, "bad"), "rate"] == 0.0 and rates.loc[(1, "good"), "rate"] == 1.0
    assert rates.loc[(1, "all"), "trials"] == 21


@pytest.mark.parametrize("change, message", [
    (lambda t: t.assign(**{"model.heads": 2}), "model.heads: got \\[2\\]"),
    (lambda t: t.assign(**{"model.base_seed": None}), "model.base_seed"),
    (lambda t: t.assign(**{"model.head_seeds": None}), "head_seeds"),
])
def test_stage1_that_is_not_one_head_on_a_fixed_base_is_refused_in_one_line(change, message):
    with pytest.raises(AnalysisInputError, match=message):
        head_classes(change(one_head_trials(LEARNED)))


def classes_with(good: list[int], bad: list[int], top: int = 40, bases=(1,)) -> HeadClasses:
    learned = {h: [h in good] * 3 for h in range(top)}
    learned.update({h: [True, False, True] for h in range(top) if h not in good + bad})
    return head_classes(pd.concat([one_head_trials(learned, b) for b in bases]))


def test_stage2_sets_are_all_bad_one_good_cycling_and_random_of_neither_kind():
    classes = classes_with(good=[1, 2], bad=list(range(10, 30)), bases=(1, 2))
    sets = stage2_sets(classes, 1, heads=8, sets=10, seed=3)
    assert set(sets) == set(CONDITIONS) and all(len(v) == 10 for v in sets.values())
    bad, good = set(classes.seeds_of(1, "bad")), set(classes.seeds_of(1, "good"))
    for i, (all_bad, one_good, random) in enumerate(zip(*(sets[c] for c in CONDITIONS))):
        assert len(set(all_bad)) == 8 and set(all_bad) <= bad
        assert len(set(one_good)) == 8 and one_good[i % 8] in good
        assert set(one_good[:i % 8] + one_good[i % 8 + 1:]) <= bad
        kinds = [classes.class_of(1, s) for s in random]
        assert len(set(random)) == 8 and condition_of(kinds) == "random"
    assert stage2_sets(classes, 1, heads=8, sets=10, seed=3) == sets  # reproducible
    assert stage2_sets(classes, 2, heads=8, sets=10, seed=3) != sets  # its own draw a base
    with pytest.raises(AnalysisInputError, match="20 bad heads on base 1; allowed: at least"):
        stage2_sets(classes, 1, heads=21)


def test_stage2_writes_a_sweep_per_base_and_the_alone_sweep_pairing_every_head(tmp_path,
                                                                               capsys):
    from sweeper.cli import main

    classes = classes_with(good=[1, 2], bad=list(range(10, 30)), bases=(1, 2))
    stage1 = yaml.safe_load(STAGE1.read_text())
    sweeps = stage2_sweeps(stage1, classes, heads=8, sets=2, data_seeds=(3000, 3001))
    assert list(sweeps) == ["snell_heads_stage2_base1", "snell_heads_stage2_base2",
                            "snell_heads_alone"]
    base1, alone = sweeps["snell_heads_stage2_base1"], sweeps["snell_heads_alone"]
    assert base1["fixed"]["model"] == {**stage1["fixed"]["model"], "heads": 8, "base_seed": 1}
    assert base1["fixed"]["task"] == stage1["fixed"]["task"] and base1["seeds"] == [3000, 3001]
    assert len(base1["axes"]["model"]["head_seeds"]["grid"]) == 6
    assert alone["fixed"]["model"]["heads"] == 1 and "base_seed" not in alone["fixed"]["model"]
    assert alone["axes"]["model"]["base_seed"] == {"grid": [1, 2]}
    assert alone["axes"]["model"]["head_seeds"]["grid"] == [[h] for h in range(40)]
    for name, sweep in sweeps.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(sweep, sort_keys=False))
        assert main(["plan", str(path), "--no-estimate", "--results", str(tmp_path)]) == 0
    assert "160 trials" in capsys.readouterr().out  # 40 heads x 2 bases x 2 seeds alone


def test_stage2_refuses_too_many_sets_one_head_and_stage1s_own_or_repeated_data_seeds():
    classes = classes_with(good=[1], bad=[10, 11, 12])
    stage1 = yaml.safe_load(STAGE1.read_text())
    with pytest.raises(AnalysisInputError, match="--sets: got 2; allowed: at most 1"):
        stage2_sets(classes, 1, heads=3, sets=2)
    with pytest.raises(AnalysisInputError, match="--heads: got 1; allowed: 2 or more"):
        stage2_sets(classes, 1, heads=1, sets=1)
    assert len({tuple(s) for s in stage2_sets(classes, 1, heads=2, sets=3)["bad"]}) == 3
    for seeds, message in (((3000, 3000), "distinct"), ((2, 3001), "stage 1's own"),
                           ((2**63, 1), "--data-seeds")):
        with pytest.raises(AnalysisInputError, match=message):
            stage2_sweeps(stage1, classes, heads=2, sets=1, data_seeds=seeds)
    with pytest.raises(ResultsInputError, match="--name"):
        stage2_sweeps(stage1, classes, heads=2, sets=1, prefix="bad name/..")


def test_the_shipped_alone_sweep_is_what_stage2_writes_from_the_shipped_stage1():
    stage1 = yaml.safe_load(STAGE1.read_text())
    shipped = yaml.safe_load((ROOT / "search_spaces" / "snell_heads_alone.yaml").read_text())
    classes = classes_with(good=list(range(8)), bad=list(range(8, 20)), top=48, bases=(1, 2, 3))
    written = stage2_sweeps(stage1, classes)["snell_heads_alone"]
    assert written == shipped


def paired_frames(rows, heads_alone):
    """Stage-2 trials and trajectories from (head seeds, seed, learned, each head's final
    attention accuracy), and the alone trials from {(head, seed): learned} on base 1."""
    trials, traj = [], []
    for i, (seeds, seed, learned, accs) in enumerate(rows):
        trials.append({"trial_id": f"t{i}", "status": "ok", "model.heads": len(seeds),
                       "model.head_seeds": json.dumps(seeds), "model.base_seed": 1,
                       "seed": seed, "attention_learned": learned, "train.steps": 400,
                       "attention_steps": 200.0 if learned else np.nan})
        traj += [{"trial_id": f"t{i}", "step": 0, "attn_acc_head": [0.0] * len(seeds)},
                 {"trial_id": f"t{i}", "step": 300, "attn_acc_head": accs}]
    alone = pd.concat([one_head_trials({h: [ok]}, 1, seed) for (h, seed), ok in
                       heads_alone.items()], ignore_index=True)
    return pd.DataFrame(trials), pd.DataFrame(traj), alone


def test_the_paired_table_counts_models_that_learn_where_no_head_learned_alone():
    """Hand-built: bad heads 3, 4, 5 fail alone on every seed; good 0 learns alone. Twelve
    '2 bad' trials learn although neither head learned alone on that seed (beyond a lottery
    of tickets fixed by init and data); the '1 bad + 1 good' trials learn as the good head
    does alone."""
    classes = head_classes(one_head_trials(LEARNED))
    seeds = range(100, 112)
    alone = {(h, s): h in (0, 1, 2) for h in (0, 3, 4, 5) for s in seeds}
    alone[(5, 111)] = True  # one bad head learns alone once: a concordant pair
    rows = ([([3, 4], s, True, [0.95, 0.2]) for s in seeds]
            + [([0, 5], s, True, [0.97, 0.1]) for s in seeds])
    trials, traj, alone_trials = paired_frames(rows, alone)
    per_trial = paired_trials(trials, traj, alone_trials, classes)
    assert per_trial["condition"].tolist() == ["bad"] * 12 + ["one_good"] * 12
    assert per_trial["any_alone"].sum() == 12
    rates = class_rates(alone_trials, classes, list(seeds))
    table = paired_table(per_trial, rates).set_index("condition")
    bad, one_good = table.loc["bad"], table.loc["one_good"]
    assert (bad["n"], bad["learned"], bad["model_only"], bad["neither"]) == (12, 12, 12, 0)
    assert bad["learned_if_none_alone"] == 1.0 and bad["verdict"] == "beyond lottery"
    assert bad["p_value"] == pytest.approx(2 * 0.5**12)
    assert (bad["failed_alone"], bad["aligned_of_failed"]) == (24, 12)
    assert bad["independent"] == pytest.approx(1 - (35 / 36) ** 2)  # bad alone: 1 of 36
    assert (one_good["both"], one_good["model_only"], one_good["heads_only"]) == (12, 0, 0)
    assert one_good["verdict"].startswith("cannot tell: needs >= ")  # no discordant pair
    assert one_good["independent"] == pytest.approx(1.0)
    assert (one_good["learned_alone"], one_good["aligned_of_learned"]) == (13, 12)  # head 5


def test_a_stage2_head_without_its_alone_run_is_refused_in_one_line():
    classes = head_classes(one_head_trials(LEARNED))
    trials, traj, alone = paired_frames([([3, 4], 100, True, [0.95, 0.2])],
                                        {(3, 100): False})
    with pytest.raises(AnalysisInputError, match="--alone: head 4 on base 1, data seed 100"):
        paired_trials(trials, traj, alone, classes)


def test_arms_are_paired_on_the_same_sets_and_the_good_heads_speed_by_a_sign_test():
    classes = head_classes(one_head_trials(LEARNED))
    seeds = range(100, 120)
    alone = {(h, s): h == 0 for h in (0, 3, 4) for s in seeds}
    short = [([0, 3], s, s % 2 == 0, [0.95 if s % 2 == 0 else 0.5, 0.1]) for s in seeds]
    trials, traj, alone_trials = paired_frames(short, alone)
    longer, long_traj, _ = paired_frames([(h, s, True, [0.95, 0.1]) for h, s, *_ in short],
                                         alone)
    longer = longer.assign(**{"train.steps": 1200, "trial_id": "L" + longer["trial_id"]})
    long_traj = long_traj.assign(trial_id="L" + long_traj["trial_id"])
    per_trial = paired_trials(pd.concat([trials, longer]), pd.concat([traj, long_traj]),
                              alone_trials, classes)
    tests = comparisons(per_trial).set_index(["what", "first"])
    arm = tests.loc[("one_good: model learned", "1200 steps, mean")]
    assert arm["n"] == 20 and arm["verdict"] == "more learn"  # 10 learn only with 1200 steps
    faster = tests.loc[("one_good: good head aligned earlier", "1200 steps, mean")]
    assert faster["verdict"] == "earlier with 1200 steps, mean"  # 10 reach it only there
    speed = tests.loc[("400 steps, mean: good head aligned earlier alone", "alone")]
    assert speed["verdict"] == "slower in company"  # alone at 100 always; in company 10 or never
    good = good_head_steps(per_trial).set_index("arm").loc["400 steps, mean"]
    assert (good["aligned_alone"], good["aligned_in_company"]) == (20, 10)
    # the alone sweep trained 400 steps: a 1200-step trial is not paired with those runs
    table = paired_table(per_trial, class_rates(alone_trials, classes, list(seeds)))
    longer_row = table.set_index("arm").loc["1200 steps, mean"]
    assert longer_row["learned"] == 20 and pd.isna(longer_row["verdict"])
    assert pd.isna(longer_row["model_only"]) and not (tests.index.get_level_values(0).str
                                                      .startswith("1200").any())


def test_alone_runs_stored_twice_and_a_trial_without_its_trajectory_are_refused():
    classes = head_classes(one_head_trials(LEARNED))
    trials, traj, alone = paired_frames([([3, 4], 100, True, [0.95, 0.2])],
                                        {(3, 100): False, (4, 100): False})
    with pytest.raises(AnalysisInputError, match="stored twice"):
        paired_trials(trials, traj, pd.concat([alone, alone.assign(trial_id="x")]), classes)
    with pytest.raises(AnalysisInputError, match="no trajectory with attn_acc_head"):
        paired_trials(trials, traj.iloc[:0], alone, classes)


def test_cli_heads_classifies_writes_stage2_and_reads_the_paired_table_on_real_stores(
        tmp_path, capsys):
    """A real (tiny) stage 1 on two bases trained by sweeper, classified at a threshold that
    makes some heads good, its stage 2 and alone sweeps written, trained, and read back."""
    import sweeper
    from analysis.cli import main
    from analysis.load import load

    stage1 = {"name": "tiny_stage1", "task": "copy-v1", "model": "seq2seq",
              "fixed": {"task": {"length": 5, "cooccurrence": 0.0},
                        "model": {"width": 8, "heads": 1},
                        "train": {"batch_size": 8, "eval_size": 8, "eval_every": 3}},
              "axes": {"model": {"base_seed": {"grid": [1, 2]},
                                 "head_seeds": {"grid": [[h] for h in range(8)]}}},
              "seeds": 2, "budget": {"steps": 6}}
    sweeper.run(stage1, results=str(tmp_path), executor="local", stream=io.StringIO())
    traj = load(tmp_path, "tiny_stage1").read_trajectories(columns=["attn_acc"])
    best = traj.groupby("trial_id")["attn_acc"].max()
    trials = load(tmp_path, "tiny_stage1").trials.set_index("trial_id")
    key = [trials.loc[best.index, "model.base_seed"], trials.loc[best.index, "model.head_seeds"]]
    worst = best.groupby(key).min().groupby(level=0)
    level = float(worst.max().min())  # each base's best head is good at this level
    folder = str(tmp_path / "tiny_stage1")
    argv = ["heads", folder, "--attention-learned-threshold", str(level)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 head seeds on base networks 1, 2" in out and "base 2: good" in out
    bad = [int(line.split(": bad (learned in none): ")[1].split(" heads")[0])
           for line in out.splitlines() if "bad (learned in none): " in line
           and "none" not in line.split(": bad (learned in none): ")[1]]
    assert len(bad) == 2 and min(bad) >= 2  # training is deterministic: 3 and 4 bad heads
    stage2 = tmp_path / "s2"
    assert main([*argv, "--stage2", str(stage2), "--heads", "2", "--sets", "1",
                 "--data-seeds", "7,8"]) == 0
    assert f"wrote {stage2}" in capsys.readouterr().out
    names = sorted(p.stem for p in stage2.glob("*.yaml"))
    assert names == ["tiny_alone", "tiny_stage2_base1", "tiny_stage2_base2"]
    for name in names:
        sweeper.run(str(stage2 / f"{name}.yaml"), results=str(tmp_path), executor="local",
                    stream=io.StringIO())
    table = tmp_path / "table.csv"
    assert main(["heads", str(tmp_path / "tiny_stage2_base1"), "--with",
                 str(tmp_path / "tiny_stage2_base2"), "--classes", folder, "--alone",
                 str(tmp_path / "tiny_alone"), "--attention-learned-threshold", str(level),
                 "--cells", str(table), "-o", str(tmp_path / "heads.png")]) == 0
    out = capsys.readouterr().out
    assert "paired with tiny_alone" in out and "12 trials" in out
    assert "verdict (trials)" in out and "verdict (head sets)" in out  # the compact table
    assert (tmp_path / "heads.png").read_bytes()[:4] == b"\x89PNG"
    frame = pd.read_csv(table)
    assert frame["n"].sum() == 12 and set(frame["condition"]) <= set(CONDITIONS)
    base = ["heads", str(tmp_path / "tiny_stage2_base1"), "--classes", folder, "--alone",
            str(tmp_path / "tiny_alone"), "--attention-learned-threshold", str(level)]
    assert main([*base, "--by-base", "--with", str(tmp_path / "tiny_stage2_base2"), "--cells",
                 str(table)]) == 0
    assert set(pd.read_csv(table)["base_seed"]) == {1, 2}
    capsys.readouterr()
    for extra, message in ((["--with", str(tmp_path / "tiny_alone")], "one-head trials"),
                           (["--with", str(tmp_path / "tiny_stage2_base1")], "twice")):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "--with" in err
    assert (frame[["both", "model_only", "heads_only", "neither"]].sum(axis=1)
            == frame["n"]).all()


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
    assert main(["heads", str(tmp_path / "copy"), "--classes", str(tmp_path / "copy")]) == 2
    assert "--alone" in capsys.readouterr().err
    assert main(["heads", str(tmp_path / "copy")]) == 2
    assert "model.head_seeds" in capsys.readouterr().err


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

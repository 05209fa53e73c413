"""The paper-comparison tables (analysis.papers) on hand-built trials and trajectories."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis import plots
from analysis.errors import AnalysisInputError
from analysis.papers import final_values, ktiw_table, learning_table, main, markdown, topic_table


def _copy_frames():
    trials = pd.DataFrame({
        "trial_id": ["learns", "stuck", "broken", "easy"],
        "status": ["ok", "ok", "failed", "ok"],
        "task.cooccurrence": [0.0, 0.0, 0.0, 0.5],
        "model.attention": ["learned"] * 4,
    })
    steps = [0, 30, 60, 190, 200]
    curves = {"learns": [0.1, 0.5, 0.96, 1.0, 1.0], "stuck": [0.1, 0.5, 0.6, 0.65, 0.7],
              "easy": [0.1, 0.97, 1.0, 1.0, 1.0]}
    ktiw = {"learns": [0.0, 0.6, 0.9, 1.0, 1.0], "stuck": [0.0, 0.1, 0.3, 0.2, 0.1],
            "easy": [0.0, 0.8, 1.0, 1.0, 0.9]}
    rows = [{"trial_id": t, "step": s, "accuracy": a, "ktiw_acc": k, "uniform_acc": a / 2,
             "attn_acc": a}
            for t in curves for s, a, k in zip(steps, curves[t], ktiw[t])]
    return trials, pd.DataFrame(rows)


def test_learning_table_counts_seeds_steps_and_stuck_accuracy_per_setting():
    trials, traj = _copy_frames()
    table = learning_table(trials, traj, ["task.cooccurrence"]).set_index("task.cooccurrence")
    hard, easy = table.loc[0.0], table.loc[0.5]
    assert (hard["seeds"], hard["learned"], hard["share"]) == (2, 1, 0.5)  # failed not counted
    assert hard["steps_median"] == 60 and hard["in_window"] == 1
    assert hard["stuck_median"] == pytest.approx(0.65)  # at step 190, not the final 0.7
    assert 0 < hard["share_low"] < 0.5 < hard["share_high"] < 1
    assert (easy["learned"], easy["steps_median"], easy["in_window"]) == (1, 30, 0)
    assert math.isnan(easy["stuck_median"])


def test_learning_table_follows_the_threshold():
    trials, traj = _copy_frames()
    from analysis import Thresholds

    table = learning_table(trials, traj, ["task.cooccurrence"], Thresholds(accuracy=0.6))
    hard = table.set_index("task.cooccurrence").loc[0.0]
    assert hard["learned"] == 2 and hard["steps_median"] == pytest.approx((60 + 60) / 2)


def test_ktiw_table_takes_final_and_best_probe_accuracy():
    trials, traj = _copy_frames()
    table = ktiw_table(trials, traj, ["task.cooccurrence"]).set_index("task.cooccurrence")
    assert table.loc[0.0, "ktiw_final"] == pytest.approx((1.0 + 0.1) / 2)
    assert table.loc[0.0, "ktiw_best"] == pytest.approx((1.0 + 0.3) / 2)
    assert table.loc[0.5, "ktiw_best"] == 1.0 and table.loc[0.5, "ktiw_final"] == 0.9
    assert table.loc[0.5, "uniform_final"] == 0.5
    assert list(table["learned"]) == [1, 1]


def test_final_values_respect_the_step_limit():
    _, traj = _copy_frames()
    assert final_values(traj, "accuracy")["stuck"] == 0.7
    assert final_values(traj, "accuracy", at_most=60)["stuck"] == 0.6


def _topic_frames():
    trials = pd.DataFrame({"trial_id": ["a", "b"], "status": ["ok", "ok"],
                           "task.classes": [4, 4], "model.classifier": ["fc", "fc"]})
    rows = []
    for tid, exit_step in (("a", 100), ("b", 300)):
        for s in range(0, 401, 50):
            rows.append({"trial_id": tid, "step": s, "accuracy": 1.0,
                         "loss": 1.38 if s < exit_step else 0.1,
                         "topic_attention": s / 1000, "topic_score": [s / 100, s / 50],
                         "identity_residual": 0.05 if s == 50 else 0.004,
                         "distractor_score_max": 0.01 if tid == "a" else 0.03})
    return trials, pd.DataFrame(rows)


def test_topic_table_finds_plateau_exits_and_the_identity_residual_after_the_transient():
    trials, traj = _topic_frames()
    row = topic_table(trials, traj, ["model.classifier"]).iloc[0]
    assert (row["seeds"], row["exited"], row["exit_first"], row["exit_last"]) == (2, 2, 100, 300)
    assert row["exit_median"] == 200
    assert row["score_final"] == pytest.approx((4 + 8) / 2)
    assert row["attention_final"] == pytest.approx(0.4)
    assert row["residual_max"] == pytest.approx(0.05)
    assert row["residual_late"] == pytest.approx(0.004)
    assert row["distractor_max"] == pytest.approx(0.03)


def test_tables_name_a_missing_column():
    trials, traj = _copy_frames()
    with pytest.raises(AnalysisInputError, match="model.heads"):
        learning_table(trials, traj, ["model.heads"])


def test_markdown_renders_rows_and_blanks_for_nan():
    text = markdown(pd.DataFrame({"c": [0.0, 0.5], "share": [0.61234, float("nan")],
                                  "step": [1050.0, 95.5]}))
    assert text.splitlines() == ["| c | share | step |", "|---|---|---|",
                                 "| 0 | 0.612 | 1,050 |", "| 0.5 |  | 95.5 |"]


def test_paper_figures_draw_from_the_tables():
    trials, traj = _copy_frames()
    table = learning_table(trials, traj, ["task.cooccurrence"])
    assert len(plots.share_figure(table, "task.cooccurrence").axes) == 1
    cells = [{"task.cooccurrence": 0.0}, {"task.cooccurrence": 0.5}]
    fig = plots.seed_lines_figure(trials, traj, cells)
    assert [len(ax.lines) for ax in fig.axes] == [2, 1]  # one line per counted seed
    heat = plots.heatmap_figure(table, "task.cooccurrence", "seeds", "share", "share")
    assert len(heat.axes[0].texts) == 2


def test_papers_command_on_a_real_store(tmp_path, capsys):
    from tests.analysis_fixtures import small_copy_sweep

    small_copy_sweep(tmp_path, name="quick")
    assert main([str(tmp_path), "--figures", str(tmp_path / "fig")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## quick:") and "| task.cooccurrence |" in out
    assert (tmp_path / "fig" / "quick_seeds.png").stat().st_size > 1000


def test_scale_table_measures_the_four_criteria_per_setting():
    # one setting (L 16, d 32): uniform attention on easy data ends at 0.3 and 0.45; of the
    # learned-attention runs, "attends" copies by attending, "state" copies without it, "stuck"
    # does not copy; easy data has two seeds that learn
    trials = pd.DataFrame({
        "trial_id": ["u1", "u2", "attends", "state", "stuck", "e1", "e2"],
        "status": ["ok"] * 7, "task.length": 16, "model.width": 32,
        "wall_time_s": [1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0],
        "task.cooccurrence": [0.5, 0.5, 0.0, 0.0, 0.0, 0.5, 0.5],
        "model.attention": ["uniform"] * 2 + ["learned"] * 5,
    })
    final = {"u1": (0.3, 0.0), "u2": (0.45, 0.0), "attends": (1.0, 0.95), "state": (0.97, 0.1),
             "stuck": (0.6, 0.1), "e1": (1.0, 1.0), "e2": (0.99, 0.92)}
    traj = pd.DataFrame([{"trial_id": t, "step": s, "accuracy": acc * s / 100,
                          "attn_acc": attn * s / 100} for t, (acc, attn) in final.items()
                         for s in (0, 50, 100)])
    from analysis.papers import scale_table

    row = scale_table(trials, traj, paper_seconds=100.0).iloc[0]
    assert (row["task.length"], row["model.width"]) == (16, 32)
    assert row["uniform_easy_max"] == pytest.approx(0.45)  # (a)
    assert row["attention_given_learned"] == pytest.approx(3 / 4)  # (b): not "state"
    assert (row["easy_learned"], row["easy_attention"]) == ("2/2", "2/2")  # (c)
    assert (row["hard_learned"], row["hard_attention"]) == ("2/3", "1/3")
    assert row["cost"] == pytest.approx(0.02)  # (d): median 2 s of 100 s


def _budget_frames():
    """One setting (L 16, d 32, one head) trained 1,000 steps, logged every 100, whose criteria
    hold from 300 to 600 steps: easy data learns at step 300 (c holds from there); a hard-data
    run copies without attending from step 700 (b fails from there); uniform attention on easy
    data passes token accuracy 0.5 after step 800 (a fails from 900)."""
    runs = {  # trial: (attention, cooccurrence, token accuracy, attention accuracy) per step
        "u1": ("uniform", 0.5, lambda s: 0.1 + s / 2000, lambda s: 0.0),
        "u2": ("uniform", 0.5, lambda s: 0.1 + s / 2500, lambda s: 0.0),
        "e1": ("learned", 0.5, lambda s: 1.0 if s >= 300 else 0.5,
               lambda s: 1.0 if s >= 300 else 0.1),
        "e2": ("learned", 0.5, lambda s: 1.0 if s >= 300 else 0.5,
               lambda s: 1.0 if s >= 300 else 0.1),
        "attends": ("learned", 0.0, lambda s: 1.0 if s >= 400 else 0.5,
                    lambda s: 1.0 if s >= 400 else 0.1),
        "state": ("learned", 0.0, lambda s: 1.0 if s >= 700 else 0.5, lambda s: 0.05),
    }
    trials = pd.DataFrame({
        "trial_id": list(runs), "status": "ok", "task.length": 16, "model.width": 32,
        "model.heads": 1, "train.steps": 1000, "wall_time_s": 1.0,
        "model.attention": [r[0] for r in runs.values()],
        "task.cooccurrence": [r[1] for r in runs.values()]})
    traj = pd.DataFrame([{"trial_id": t, "step": s, "accuracy": acc(s), "attn_acc": attn(s)}
                         for t, (_, _, acc, attn) in runs.items() for s in range(0, 1001, 100)])
    return trials, traj


def test_budget_table_judges_each_budget_from_the_trajectories_up_to_it():
    from analysis.papers import budget_table

    table = budget_table(*_budget_frames()).set_index("train.steps")
    assert list(table.index) == list(range(100, 1001, 100))  # every logged step > 0
    assert list(table.loc[[200, 300, 600, 700, 800, 900], "uniform_easy_max"]) == \
        pytest.approx([0.2, 0.25, 0.4, 0.45, 0.5, 0.55])
    assert table.loc[600, "easy_learned"] == "2/2" and table.loc[200, "easy_learned"] == "0/2"
    assert table.loc[600, "attention_given_learned"] == 1
    assert table.loc[700, "attention_given_learned"] == pytest.approx(3 / 4)  # "state" copies
    held = table[["a", "b", "c", "holds"]].astype(bool)
    assert list(held["c"]) == [False, False] + [True] * 8
    assert list(held["b"]) == [True] * 6 + [False] * 4  # no run copies before 300: it holds
    assert list(held["a"]) == [True] * 8 + [False] * 2
    assert list(table.index[held["holds"]]) == [300, 400, 500, 600]


def test_budget_table_takes_a_grid_of_budgets_and_stops_at_the_shortest_trial():
    from analysis.papers import budget_table

    trials, traj = _budget_frames()
    assert list(budget_table(trials, traj, budgets=[200, 700])["train.steps"]) == [200, 700]
    shorter = traj[(traj["trial_id"] != "u2") | (traj["step"] <= 500)]
    trials.loc[trials["trial_id"] == "u2", "train.steps"] = 500
    assert budget_table(trials, shorter)["train.steps"].max() == 500


def test_calibrated_range_is_the_unbroken_run_of_budgets_where_every_setting_holds():
    from analysis.papers import budget_table, calibrated_range

    table = budget_table(*_budget_frames())
    assert calibrated_range(table) == (300, 600)
    assert calibrated_range(table, around=400) == (300, 600)
    assert calibrated_range(table, around=800) is None
    # a second setting failing at 400 splits the run; the longest part, or the one around
    other = table.assign(**{"model.heads": 4, "holds": table["train.steps"] != 400})
    both = pd.concat([table, other])
    assert calibrated_range(both) == (500, 600)
    assert calibrated_range(both, around=300) == (300, 300)
    assert calibrated_range(both.assign(holds=False)) is None


def test_papers_command_prints_the_budget_table_and_the_range_of_a_budget_sweep(tmp_path,
                                                                                capsys):
    from analysis.load import load
    from analysis.papers import budget_table, calibrated_range
    from tests.synthetic_stores import write_copy_sweep

    write_copy_sweep(tmp_path, "snell_budget", cooccurrence=(0.0, 0.5), hardness=(0.0,),
                     heads=(1, 4), attention=("learned", "uniform"), steps=400, eval_every=20,
                     length=16, width=32)
    assert main([str(tmp_path), "--sweep", "snell_budget"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## snell_budget: 32 trials stored")
    assert "| task.length | model.width | model.heads | train.steps | uniform_easy_max |" in out
    assert "| 16 | 32 | 4 | 300 |" in out and "| 16 | 32 | 4 | 320 |" not in out  # every 100
    res = load(str(tmp_path), "snell_budget")
    found = calibrated_range(budget_table(res.trials, res.trajectories))
    assert out.rstrip().splitlines()[-1].startswith(
        f"calibrated range: {found[0]}-{found[1]} steps" if found else "calibrated range: none")


def test_papers_is_a_sweeper_subcommand_that_writes_figures_only_where_asked(tmp_path):
    from sweep_helpers import cli_subprocess

    from tests.analysis_fixtures import small_copy_sweep

    small_copy_sweep(tmp_path, name="quick")
    done = cli_subprocess(["papers", tmp_path])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("## quick:") and not list(tmp_path.rglob("*.png"))
    missing = cli_subprocess(["papers", tmp_path / "nowhere"])
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "results: no folder" in missing.stderr

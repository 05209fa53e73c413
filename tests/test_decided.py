"""Stop what is decided (`budget.stop: decided`): outcomes that know when they are decided
(`DecisionWatch`), packs that shrink (`train_pack`), the same first-passage answers as the full
budget, and a store that says where and why each trial stopped."""

from __future__ import annotations

import math

import pyarrow.compute as pc
import pytest
from sweep_helpers import cli, write_sweep

from sweeper.families import families
from sweeper.families.copy.experiment import CopyExperiment
from sweeper.results import DecisionWatch, OutcomeRule, Store, Thresholds, with_outcomes
from sweeper.search_space import SweepFileError, parse_sweep
from sweeper.spec import make_spec
from sweeper.train import train_pack

FIRST_PASSAGE = ("learned", "steps_to_learn", "attention_learned", "attention_steps",
                 "attention_onset", "ktiw_onset")
# small enough to train in seconds, and at c = 0 some seeds decide while others never do
SMALL = {"task": {"length": 6, "cooccurrence": 0.0}, "model": {"width": 16},
         "train": {"steps": 200, "lr": 0.01, "eval_every": 10, "batch_size": 32,
                   "eval_size": 32}}


def _specs(seeds=range(6), **train):
    return [make_spec("copy-v1", "seq2seq", SMALL["task"], SMALL["model"],
                      {**SMALL["train"], **train}, seed) for seed in seeds]


# -- deciding -----------------------------------------------------------------------------
def test_a_watch_decides_a_trial_once_every_first_passage_outcome_is_reached():
    rules = (OutcomeRule("up", "first_step", "a", "accuracy"),
             OutcomeRule("down", "first_below", "loss", "plateau"),
             OutcomeRule("heads", "items_reaching", "h", "accuracy"),  # end-state: not waited
             OutcomeRule("missing", "first_step", "not_logged", "accuracy"))  # never: left out
    watch = DecisionWatch(rules, ["accuracy", "a", "loss", "h"], [{}, {}])
    # the core rule (learned: accuracy >= 0.95) is first-passage too
    assert watch.observe(0, [{"accuracy": 0.2, "a": 0.99, "loss": 0.9},
                             {"accuracy": 0.96, "a": 0.1, "loss": 0.1}]) == [None, None]
    assert watch.observe(10, [{"accuracy": 0.97, "a": 0.0, "loss": float("nan")},
                              {"accuracy": 0.5, "a": None, "loss": 0.9}]) == [None, None]
    # a passage once met stays met; NaN and None never meet a threshold
    assert watch.observe(20, [{"accuracy": 0.1, "a": 0.1, "loss": 0.2},
                              {"accuracy": 0.1, "a": 0.96, "loss": 0.9}]) == [20, 20]
    assert watch.observe(30, [{"accuracy": 0.0, "a": 0.0, "loss": 0.9}] * 2) == [20, 20]


def test_a_plateau_exit_is_decided_against_each_trials_own_level():
    topic = families()["topic"]
    configs = [{"task.classes": 2, "task.cooccurrence": 1.0},
               {"task.classes": 2, "task.cooccurrence": 0.5}]
    watch = DecisionWatch(topic.outcome_rules, [m.name for m in topic.metrics], configs)
    level = 0.5 * math.log(2)  # c = 1: half of ln C
    rows = [{"accuracy": 1.0, "loss": level - 0.01}, {"accuracy": 1.0, "loss": level - 0.01}]
    decided = watch.observe(0, rows)
    # c = 0.5's floor is H(y | topic word) > 0: its level is higher, so it is below it too
    assert decided == [0, 0]
    watch = DecisionWatch(topic.outcome_rules, [m.name for m in topic.metrics], configs)
    assert watch.observe(0, [{"accuracy": 1.0, "loss": level + 0.01}] * 2)[0] is None


def test_a_family_with_no_first_passage_rule_left_is_never_decided():
    watch = DecisionWatch((), ["loss"], [{}])  # learned's metric is not logged
    assert watch.observe(0, [{"loss": 0.0}]) == [None]


# -- training -----------------------------------------------------------------------------
def test_a_decided_pack_stores_the_full_budgets_first_passage_outcomes_trial_by_trial():
    full = train_pack(_specs())
    short = train_pack(_specs(stop="decided", stop_margin=20))
    reasons = [r.stop_reason for r in short]
    assert set(reasons) == {"decided", "budget"}, reasons  # both kinds in the pack
    for a, b in zip(full, short):
        assert {c: a.outcomes[c] for c in FIRST_PASSAGE} == {
            c: b.outcomes[c] for c in FIRST_PASSAGE}, b.spec.seed
        assert (a.stop_reason, a.stopped_at, a.status) == ("budget", 200, "ok")
        n = len(b.trajectory["step"])  # what it trained is what the full run trained
        for name, values in b.trajectory.items():
            assert values == a.trajectory[name][:n], name
        assert b.stopped_at == b.trajectory["step"][-1] and b.status == "ok"
        if b.stop_reason == "decided":
            decided = max(b.outcomes[c] for c in FIRST_PASSAGE if c.endswith(("steps", "onset",
                                                                              "_to_learn")))
            assert b.stopped_at == decided + 20 < 200  # 20 steps past its last passage
            assert b.outcomes["final_accuracy"] == b.trajectory["accuracy"][-1]  # at the stop
    assert sum(r.stopped_at for r in short) < sum(r.stopped_at for r in full)


def test_an_experiment_without_keep_stops_its_decided_models_masked_with_the_same_answers(
        monkeypatch):
    dropped = train_pack(_specs(range(4), stop="decided"))
    monkeypatch.setattr(CopyExperiment, "keep", None)
    masked = train_pack(_specs(range(4), stop="decided"))
    for a, b in zip(dropped, masked):
        assert (a.stop_reason, a.stopped_at) == (b.stop_reason, b.stopped_at)
        assert a.trajectory["step"] == b.trajectory["step"]
        for name in ("loss", "accuracy", "attn_acc"):
            assert a.trajectory[name] == pytest.approx(b.trajectory[name], rel=1e-5, abs=1e-6)


def test_a_success_a_decided_trial_had_not_reached_at_a_higher_threshold_is_unknown():
    import pandas as pd

    short = train_pack(_specs(range(4), stop="decided"))
    decided = [r for r in short if r.stop_reason == "decided"]
    assert decided
    trials = pd.DataFrame({"trial_id": [r.trial_id for r in short],
                           "stop_reason": [r.stop_reason for r in short]})
    rows = [{"trial_id": r.trial_id, "step": s, "accuracy": a, "attn_acc": t}
            for r in short for s, a, t in zip(r.trajectory["step"], r.trajectory["accuracy"],
                                              r.trajectory["attn_acc"])]
    strict = Thresholds(attention_learned=0.999999)
    out = with_outcomes(trials, pd.DataFrame(rows), strict,
                        families()["copy"].outcome_rules).set_index("trial_id")
    seen = set()
    for r in short:
        reached = out.loc[r.trial_id, "attention_steps"]
        value = out.loc[r.trial_id, "attention_learned"]
        if r.stop_reason == "decided" and pd.isna(reached):
            assert pd.isna(value)  # might have reached it later: not counted
            seen.add("unknown")
        elif pd.isna(reached):
            assert value is False or value == False  # noqa: E712 - trained the whole budget
            seen.add("failed")
    assert seen == {"unknown", "failed"}  # both cases met, not passed over


# -- the sweep file and the store -------------------------------------------------------------
def _sweep_text(name: str, extra: str = "") -> str:
    return "\n".join([
        f"name: {name}", "task: copy-v1", "model: seq2seq",
        "fixed: {task: {length: 6, cooccurrence: 0.0}, model: {width: 16}, "
        "train: {lr: 0.01, eval_every: 10, batch_size: 32, eval_size: 32}}",
        "seeds: 4", "budget: {steps: 200, stop: decided, margin: 10}", extra])


@pytest.mark.parametrize(("extra", "message"), [
    ("scheduler: {type: asha, metric: accuracy}", "scheduler: early stopping"),
])
def test_a_sweep_file_that_stops_two_ways_is_refused_in_one_line(extra, message):
    with pytest.raises(SweepFileError, match=message):
        parse_sweep(_sweep_text("two_ways", extra))


def test_budget_margin_without_stop_is_refused_naming_the_field():
    text = _sweep_text("margin_only").replace("stop: decided, ", "")
    with pytest.raises(SweepFileError, match="budget.margin: got 10; allowed: only with"):
        parse_sweep(text)


def test_a_decided_sweep_stores_where_and_why_and_a_rerun_trains_nothing(tmp_path):
    sweep = write_sweep(tmp_path / "decided.yaml", _sweep_text("decided"))
    results = tmp_path / "results"
    rc, out, err = cli(["run", sweep, "--results", results, "--executor", "local",
                        "--no-estimate"])
    assert rc == 0, err
    trials = Store.open(str(results)).read("decided", "trials")
    reasons = trials.column("stop_reason").to_pylist()
    assert set(reasons) <= {"decided", "budget"} and "decided" in reasons
    assert f"({reasons.count('decided')} stopped once decided: first-passage outcomes" in out
    assert trials.column("status").to_pylist() == ["ok"] * 4
    decided = trials.filter(pc.equal(trials["stop_reason"], "decided"))
    assert all(s < 200 for s in decided.column("stopped_at").to_pylist())
    assert trials.column("train.stop").to_pylist() == ["decided"] * 4
    rc, out, err = cli(["run", sweep, "--results", results, "--executor", "local",
                        "--no-estimate"])
    assert rc == 0, err
    assert Store.open(str(results)).read("decided", "trials").num_rows == 4  # none retrained


def test_an_interrupted_decided_sweep_resumes_without_training_a_stopped_trial_again(tmp_path):
    import signal
    import subprocess
    import sys

    from sweep_helpers import REPO, running_packs, subprocess_env, wait_for

    sweep = write_sweep(tmp_path / "decided.yaml", _sweep_text("decided", "pack_size: 2"))
    results = tmp_path / "results"
    driver = subprocess.Popen([sys.executable, "-m", "sweeper.cli", "run", str(sweep),
                               "--results", str(results), "--executor", "local",
                               "--no-estimate"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env=subprocess_env())
    wait_for(lambda: running_packs(results, "decided"), what="a running pack")
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 130, err
    first = Store.open(str(results)).read("decided", "trials").to_pandas()
    assert len(first) == 2  # the running pack finished and was stored, nothing else began
    rc, out, err = cli(["run", sweep, "--results", results, "--executor", "local",
                        "--no-estimate"])
    assert rc == 0, err
    after = Store.open(str(results)).read("decided", "trials").to_pandas()
    assert len(after) == 4 and after["trial_id"].is_unique
    kept = after.set_index("trial_id").loc[first["trial_id"]]
    # the first pack's rows as stored before the interrupt: not trained again
    assert list(kept["pack_id"]) == list(first["pack_id"])
    assert list(kept["stopped_at"]) == list(first["stopped_at"])


def test_plan_says_its_estimate_of_a_decided_sweep_is_an_upper_bound():
    from sweeper import estimate as est
    from sweeper.plan import make_plan

    how = est.Parallelism("local", 1, 1, start_s=1.0, per_pack_s=0.1, how="one process")
    cost = est.StepCost(0.01, 0.02)
    lines = {}
    for name, extra in (("full", ""), ("decided", "")):
        text = _sweep_text(name, extra)
        if name == "full":
            text = text.replace(", stop: decided, margin: 10", "")
        plan = make_plan(parse_sweep(text), set())
        lines[name] = est.estimate_run(plan, None, how, cost=cost).line()
    assert lines["decided"].startswith("estimate: up to ")
    assert "charged the full step budget, which trials stop before once decided" in \
        lines["decided"]
    assert not lines["full"].startswith("estimate: up to ")


def test_a_store_made_before_the_rule_refuses_it_under_the_same_name(tmp_path):
    """An older sweeper's manifest has no train.stop: it was null there, so a sweep file that
    sets it is another configuration (else each seed would be stored twice, once each way)."""
    import json

    results = tmp_path / "results"
    full = write_sweep(tmp_path / "full.yaml", _sweep_text("rule").replace(
        ", stop: decided, margin: 10", ""))
    rc, out, err = cli(["run", full, "--results", results, "--executor", "local",
                        "--no-estimate", "--set", "seeds=1"])
    assert rc == 0, err
    manifest_path = results / "rule" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for key in ("train.stop", "train.stop_margin"):  # as a sweeper before the rule wrote it
        manifest["identity"].pop(key, None)
    manifest["versions"] = []
    manifest_path.write_text(json.dumps(manifest))
    decided = write_sweep(tmp_path / "decided.yaml", _sweep_text("rule"))
    rc, out, err = cli(["run", decided, "--results", results, "--executor", "local",
                        "--no-estimate", "--set", "seeds=1"])
    assert rc == 2
    assert "train.stop: None -> 'decided'" in err and "--extend" in err

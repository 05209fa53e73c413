"""Every sweep file in search_spaces/ validates, and a scaled-down copy of each runs end to end.

The scaled-down copy keeps the file's task, model, axes and search but takes the first two
values of each axis, two seeds, tiny widths and a few steps, so the whole file's machinery
(expansion, packing, training, store) is exercised in seconds.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest
import yaml

from sweeper.cli import main
from sweeper.plan import expand
from sweeper.search_space import load_sweep, parse_sweep

FILES = sorted(Path(__file__).parent.parent.joinpath("search_spaces").glob("*.yaml"))
SMALL = {"copy-v1": {"task": {"length": 4}, "model": {"width": 8}},
         "topic-v1": {"task": {"vocab": 40, "samples": 120}, "model": {}}}


def test_there_are_shipped_sweeps():
    names = {f.stem for f in FILES}
    assert {"quick", "snell_copy", "snell_multihead", "snell_phase", "lu_topic",
            "lu_phase", "snell_uniform"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_shipped_sweep_validates_and_says_which_claim_it_tests(path):
    sweep = load_sweep(str(path))
    assert sweep.name == path.stem
    assert path.read_text().lstrip().startswith("#"), "say which claim the file tests"
    if sweep.search.type != "optuna":
        assert len(expand(sweep)) > 0


def _lists_head_seeds(raw: dict) -> bool:
    model_axes = ((raw.get("axes") or {}).get("model") or {})
    return "head_seeds" in model_axes or "head_seeds" in ((raw.get("fixed") or {}).get("model")
                                                          or {})


def scaled_down(text: str) -> str:
    raw = yaml.safe_load(text)
    small = SMALL[raw["task"]]
    fixed = raw.setdefault("fixed", {})
    heads = (fixed.get("model") or {}).get("heads")
    for group in ("task", "model"):
        fixed[group] = {**fixed.get(group, {}), **small[group]}
    if _lists_head_seeds(raw):  # a head is its seed: as many heads as the file lists
        fixed["model"]["heads"] = heads
        if group == "task" and "length" in fixed[group]:
            fixed[group].pop("vocab", None)
    train = fixed.setdefault("train", {})
    train.update(eval_every=5, eval_size=16)
    if raw["task"] == "copy-v1":
        train["batch_size"] = 16
    for group, params in (raw.get("axes") or {}).items():
        for name in list(params):
            if name in fixed.get(group, {}):
                del params[name]
                continue
            axis = params[name]
            for kind in ("grid", "choice"):
                if kind in axis:  # the ends: values next to each other may be one task here
                    ends = [axis[kind][0], axis[kind][-1]]
                    axis[kind] = ends[:1] if ends[0] == ends[1] else ends  # lists: no hash
    raw["seeds"] = 2
    raw["budget"] = {"steps": 10}
    (raw.get("axes") or {}).get("train", {}).pop("steps", None)  # the budget replaces it
    raw.pop("results", None)
    return yaml.safe_dump(raw)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_scaled_down_shipped_sweep_runs_end_to_end(path, tmp_path):
    text = scaled_down(path.read_text())
    sweep = parse_sweep(text)
    small = tmp_path / path.name
    small.write_text(text)
    assert main(["run", str(small), "--results", str(tmp_path / "r"),
                 "--executor", "local"]) == 0
    trials = ds.dataset(str(tmp_path / "r" / sweep.name / "trials")).to_table().to_pandas()
    candidates = expand(sweep)
    if sweep.search.type == "boundary":  # what it samples of its grid, within its budget
        assert 0 < len(trials) <= min(sweep.search.trials, len(candidates))
        assert set(trials["trial_id"]) <= {s.trial_id for s in candidates}
    else:
        assert len(trials) == len(candidates)
    assert set(trials["status"]) <= {"ok", "diverged"}

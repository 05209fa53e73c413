"""Analysis on a real small sweep: trained by sweeper (in-process executor), stored as Parquet,
then queried, drawn and reported through the `sweeper` CLI."""

from __future__ import annotations

import json
import re

import pytest
from PIL import Image

from analysis import load, phase_from_results
from sweeper.cli import main

COPY = """
name: real-copy
task: copy-v1
model: seq2seq
fixed: {task: {length: 4}, model: {width: 8}, train: {eval_every: 10, batch_size: 16,
        eval_size: 16, lr: 0.01}}
axes:
  task: {cooccurrence: {grid: [0.0, 0.5]}, hardness: {grid: [0.0, 1.0]}}
  model: {heads: {grid: [1, 2]}}
seeds: 3
budget: {steps: 30}
"""
TOPIC = """
name: real-topic
task: topic-v1
model: kq-attention
fixed: {task: {vocab: 50, samples: 200, distractors: 5}, train: {eval_every: 20}}
axes: {model: {classifier: {grid: [fc, tc]}}, task: {cooccurrence: {grid: [0.5, 1.0]}}}
seeds: 2
budget: {steps: 60}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    for name, text in (("copy", COPY), ("topic", TOPIC)):
        path = root / f"{name}.yaml"
        path.write_text(text)
        assert main(["run", str(path), "--results", str(root / "results"),
                     "--executor", "local"]) == 0
    return root / "results"


def test_real_sweep_loads_with_every_trial_and_step(results):
    data = load(results, "real-copy")
    assert len(data.trials) == 24 and data.trials["trial_id"].is_unique
    assert len(data.trajectories) == 24 * 4  # steps 0, 10, 20, 30
    one = data.trials["trial_id"].iloc[0]
    assert set(load(results, "real-copy", trial_ids=[one]).trajectories["trial_id"]) == {one}


def test_query_where_and_sql_on_a_real_sweep(results, capsys):
    assert main(["query", str(results / "real-copy"), "--where", "model.heads == 1",
                 "--columns", "seed", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 12
    assert main(["query", str(results / "real-copy"), "--format", "csv", "--sql",
                 "SELECT count(*) AS n FROM trials JOIN trajectories USING (trial_id)"]) == 0
    assert capsys.readouterr().out.split()[-1] == "96"
    assert main(["query", str(results / "real-copy"), "--where", "model.haeds == 1"]) == 2
    err = capsys.readouterr().err
    assert "model.heads" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_phase_command_draws_a_real_sweep(results, tmp_path, suffix):
    out = tmp_path / f"phase.{suffix}"
    assert main(["phase", str(results / "real-copy"), "--x", "task.cooccurrence", "--y",
                 "task.hardness", "--facet", "model.heads", "-o", str(out)]) == 0
    assert out.stat().st_size > 1000
    if suffix == "png":
        with Image.open(out) as image:
            assert image.size[0] > 300 and image.size[1] > 200
    else:
        assert "<svg" in out.read_text()[:1000]


def test_report_of_a_real_sweep_holds_the_phase_numbers(results, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(results / "real-copy"), "-o", str(out)]) == 0
    html = out.read_text()
    for section in ("manifest", "counts", "phase", "cells"):
        assert f"id='{section}'" in html
    assert len(re.findall(r"<img[^>]+src=.data:image/png;base64,", html)) >= 3
    assert "http://" not in html and "https://" not in html  # readable offline
    phase = phase_from_results(load(results, "real-copy"), "task.cooccurrence",
                               "task.hardness", "model.heads")
    assert int(phase.cells["n"].sum()) == 24
    for n in phase.cells["n"]:
        assert f">{int(n)}<" in html


def test_report_of_a_real_topic_sweep_renders(results, tmp_path):
    out = tmp_path / "topic.html"
    assert main(["report", str(results / "real-topic"), "-o", str(out)]) == 0
    html = out.read_text()
    assert "id='manifest'" in html and html.count("data:image/png;base64,") >= 2

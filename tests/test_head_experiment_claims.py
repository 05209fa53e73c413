"""docs/results.md's paired head experiment, recomputed from the stores it was measured on
(docs/data/snell_heads, a results root): the numbers the section quotes are what `sweeper heads`
computes from them, so the text cannot drift from the data."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data" / "snell_heads"
STAGE2 = [f"snell_heads_stage2_base{b}{arm}" for arm in ("", "_sum", "_long") for b in (1, 2, 3)]
ALONE = ["snell_heads_alone", "snell_heads_alone_long_a", "snell_heads_alone_long_b"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    from analysis.cli import main

    out = tmp_path_factory.mktemp("heads")
    argv = ["heads", STAGE2[0], "--classes", "snell_heads_stage1", "--results", str(DATA)]
    for name in STAGE2[1:]:
        argv += ["--with", name]
    for name in ALONE:
        argv += ["--alone", name]
    assert main([*argv, "--cells", str(out / "all.csv")]) == 0
    assert main([*argv, "--cells", str(out / "base.csv"), "--by-base"]) == 0
    return (pd.read_csv(out / "all.csv").set_index(["arm", "condition"]),
            pd.read_csv(out / "base.csv").set_index(["arm", "base_seed", "condition"]))


def test_eight_bad_heads_learn_beyond_their_heads_alone(tables):
    pooled, by_base = tables
    bad = pooled.loc[("400 steps, mean", "bad")]
    assert (bad["n"], bad["learned"], bad["model_only"], bad["heads_only"]) == (72, 45, 22, 2)
    assert bad["model_only"] + bad["neither"] == 47 and bad["verdict"] == "beyond lottery"
    assert bad["p_value"] == pytest.approx(3.6e-5, rel=0.05)
    assert by_base.loc[("400 steps, mean", 2, "bad"), "verdict"] == "beyond lottery"
    longer = pooled.loc[("1200 steps, mean", "bad")]
    assert (longer["learned"], longer["model_only"], longer["heads_only"]) == (35, 15, 1)


def test_one_good_among_bad_learns_as_its_good_head_and_sums_help(tables):
    pooled, _ = tables
    good = pooled.loc[("400 steps, mean", "one_good")]
    assert (good["learned"], good["any_alone"], good["heads_only"]) == (68, 72, 4)
    summed = pooled.loc[("400 steps, sum", "bad")]
    assert (summed["learned"], summed["model_only"]) == (56, 31)

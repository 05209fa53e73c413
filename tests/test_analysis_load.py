"""Loading the store: pushdown, projection, several sweeps, the where language, errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_stores import compact_sweep

import analysis
from analysis import AnalysisInputError, load
from analysis import where as where_lang
from analysis.load import pack_of_file
from sweeper.results import ResultsInputError

try:
    from analysis_fixtures import counting_filesystem, small_copy_sweep, store  # noqa: F401
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import counting_filesystem, small_copy_sweep, store  # noqa: F401


def test_load_returns_trials_trajectories_and_manifest(store):
    res = analysis.load(store, sweep="copy")
    assert len(res.trials) == 144 and res.trials["trial_id"].is_unique
    assert set(res.trials["status"]) == {"ok", "failed", "diverged"}
    assert res.manifest["sweep"] == "copy" and res.manifest["trials_expanded"] == 144
    tr = res.trajectories
    assert {"sweep", "trial_id", "step", "accuracy", "attn_acc", "ktiw_acc"} <= set(tr.columns)
    failed = res.trials.loc[res.trials["status"] == "failed", "trial_id"]
    assert not tr["trial_id"].isin(failed).any()  # a failed trial logged nothing
    assert str(res.trials["steps_to_learn"].dtype) == "Int64"  # nullable, not float


def test_where_and_columns_are_pushed_down(store):
    res = load(store, "copy", where="model.heads == 1 and task.hardness > 0.5",
               columns=["seed", "learned", "accuracy"])
    assert list(res.trials.columns) == ["sweep", "trial_id", "seed", "learned"]
    full = load(store, "copy").trials
    expected = full[(full["model.heads"] == 1) & (full["task.hardness"] > 0.5)]
    assert sorted(res.trials["trial_id"]) == sorted(expected["trial_id"])
    assert list(res.trajectories.columns) == ["sweep", "trial_id", "step", "accuracy"]
    assert set(res.trajectories["trial_id"]) <= set(expected["trial_id"])


def test_where_on_trajectory_columns_selects_rows(store):
    res = load(store, "copy", where="model.heads == 4 and step >= 100 and accuracy > 0.9")
    assert res.filters_trajectories
    assert (res.trials["model.heads"] == 4).all()
    tr = res.trajectories
    assert len(tr) and (tr["step"] >= 100).all() and (tr["accuracy"] > 0.9).all()


def test_several_sweeps_load_into_one_frame(store):
    res = load(store, sweep=["copy", "topic"], columns=["task.id", "accuracy"])
    assert res.trials.groupby("sweep")["task.id"].unique().map(list).to_dict() == {
        "copy": ["copy-v1"], "topic": ["topic-v1"]}
    assert set(res.trajectories["sweep"]) == {"copy", "topic"}
    assert set(res.manifests) == {"copy", "topic"}
    with pytest.raises(AnalysisInputError, match="manifests"):
        _ = res.manifest
    both = load(store, ["copy", "topic"], where="model.classifier == 'tc'")
    assert set(both.trials["sweep"]) == {"topic"}  # copy has no classifier: null, no match


def test_sweep_folder_and_uri_forms(store):
    assert len(load(store / "copy").trials) == 144  # the sweep folder itself
    assert len(load(f"file://{store}", "topic").trials) == 144  # a pyarrow.fs URI
    from sweeper.results.location import SweepLocation, locate_sweep

    assert locate_sweep("s3://bucket/results/quick/") == SweepLocation("s3://bucket/results",
                                                                       "quick")
    assert locate_sweep("s3://b/r/quick?endpoint_override=http://h:9000&scheme=http") == (
        SweepLocation("s3://b/r?endpoint_override=http://h:9000&scheme=http", "quick"))
    assert locate_sweep(store / "copy") == SweepLocation(str(store), "copy")


# ---------------------------------------------------------------- pushdown

def test_one_trial_reads_only_its_own_trajectory_file(store):
    full = load(store, "copy")
    trial = full.trials[full.trials["status"] == "ok"].iloc[7]
    fs, counter = counting_filesystem()
    res = load(str(store), "copy", trial_ids=[trial["trial_id"]], filesystem=fs)
    assert not [p for p in counter.opened if "/trajectories/" in p]  # trials only so far
    counter.reset()
    rows = res.trajectories
    own = store / "copy" / "trajectories" / f"part-{trial['pack_id']}.parquet"
    assert set(counter.opened) == {str(own)}
    others = sorted((store / "copy" / "trajectories").glob("*.parquet"))
    assert len(others) > 10
    expected = full.trajectories[full.trajectories["trial_id"] == trial["trial_id"]]
    pd.testing.assert_frame_equal(rows.reset_index(drop=True), expected.reset_index(drop=True))


def test_a_where_reads_only_the_files_of_matching_packs(store):
    fs, counter = counting_filesystem()
    res = load(str(store), "copy", where="model.heads == 2 and task.cooccurrence == 0.5",
               filesystem=fs)
    counter.reset()
    assert len(res.trajectories)
    packs = set(res.trials.merge(load(store, "copy").trials[["trial_id", "pack_id"]])["pack_id"])
    opened = {Path(p).name for p in counter.opened}
    assert opened == {f"part-{p}.parquet" for p in packs}
    assert len(opened) < len(list((store / "copy" / "trajectories").glob("*.parquet"))) / 4


def test_compacted_file_reads_only_the_row_group_of_the_trial(store, tmp_path):
    shutil.copytree(store / "copy", tmp_path / "copy")
    compact_sweep(tmp_path / "copy", row_groups=16)
    [path] = (tmp_path / "copy" / "trajectories").iterdir()
    assert path.name.startswith("part-compact-")
    assert pq.ParquetFile(path).metadata.num_row_groups == 16
    trial_id = load(tmp_path, "copy").trials["trial_id"].iloc[50]
    # the statistics exclude all row groups but one
    fragment = next(ds.dataset(path).get_fragments())
    expr = ds.field("trial_id") == trial_id
    assert len(fragment.split_by_row_group(expr)) == 1
    fs, counter = counting_filesystem()
    rows = load(str(tmp_path), "copy", trial_ids=[trial_id], filesystem=fs).trajectories
    assert set(rows["trial_id"]) == {trial_id} and len(rows) == 21
    assert counter.bytes_read[str(path)] < 0.25 * path.stat().st_size


def test_read_trajectories_of_chosen_trials_and_columns(store):
    res = load(store, "copy")
    ids = res.trials["trial_id"].iloc[:3].tolist()
    rows = res.read_trajectories(trial_ids=ids, columns=["accuracy"], where="step <= 20")
    assert list(rows.columns) == ["sweep", "trial_id", "step", "accuracy"]
    assert set(rows["trial_id"]) <= set(ids) and rows["step"].max() <= 20
    with pytest.raises(AnalysisInputError, match="did you mean 'accuracy'"):
        res.read_trajectories(columns=["acuracy"])


# ---------------------------------------------------------------- store details

def test_temporary_and_hidden_files_are_never_read(store, tmp_path):
    shutil.copytree(store / "copy", tmp_path / "copy")
    trials = tmp_path / "copy" / "trials"
    (trials / ".tmp-part-half-1.parquet").write_bytes(b"PAR1 half a file")
    (trials / "part-x-1.parquet.tmp").write_bytes(b"PAR1 half a file")
    assert len(load(tmp_path, "copy").trials) == 144


def test_a_trial_stored_twice_is_counted_once(store, tmp_path):
    shutil.copytree(store / "copy", tmp_path / "copy")
    first = sorted((tmp_path / "copy" / "trials").glob("*.parquet"))[0]
    shutil.copy(first, first.with_name(first.stem + "-dup-2.parquet"))
    with pytest.warns(UserWarning, match="more than once"):
        assert len(load(tmp_path, "copy").trials) == 144


def test_an_empty_sweep_loads_as_empty_frames(tmp_path):
    (tmp_path / "empty" / "trials").mkdir(parents=True)
    (tmp_path / "empty" / "manifest.json").write_text(json.dumps({"sweep": "empty"}))
    res = load(tmp_path, "empty")
    assert res.trials.empty and res.trajectories.empty
    assert res.manifest == {"sweep": "empty"}


def test_pack_of_file_names():
    assert pack_of_file("/r/s/trials/part-117016a2b34b72f3.parquet") == "117016a2b34b72f3"
    assert pack_of_file("part-a-b-12.parquet") == "a-b-12"
    assert pack_of_file("part-compact-1cccdf7982de.parquet") is None
    assert pack_of_file("part-compact-0.parquet") is None
    assert pack_of_file("other.parquet") is None


def test_analysis_and_the_results_contract_import_neither_torch_nor_ray_nor_the_rest_of_sweeper():
    """analysis reads through the results contract; for words and outcomes it reads the
    families' declarations (torch-free), and the rule for numbers; nothing else of sweeper."""
    code = ("import sys, sweeper.results, analysis, analysis.cli, analysis.report, "
            "analysis.plots, analysis.plots as p; "
            "p.axis_label('task.hardness'); "
            "ok = ('sweeper.results', 'sweeper.families', 'sweeper.registry', 'sweeper.errors', "
            "'sweeper.numbers'); "
            "bad = {m for m in sys.modules if m.split('.')[0] in ('torch', 'ray') or "
            "m.startswith('sweeper.') and not m.startswith(ok) or "
            "m.startswith('sweeper.') and "
            "m.rsplit('.', 1)[-1] in ('model', 'data', 'experiment')}; "
            "print(sorted(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"where": "model.head == 1"}, "unknown column 'model.head' in where .did you mean "
                                   "'model.heads'.*available columns: .*task.hardness"),
    ({"columns": ["seed", "acuracy"]}, "unknown column 'acuracy' in columns"),
    ({"where": "model.heads == 'one'"}, "cannot compare model.heads"),
    ({"where": "model.heads =="}, "malformed where"),
    ({"where": "accuracy > 0.5 or model.heads == 1"}, "mixes trials columns"),
    ({"sweep": "nope"}, "no sweep 'nope'.*available sweeps: copy, topic"),
    ({"sweep": "../copy"}, "sweep: got '../copy'; allowed: 1-128 characters"),
])
def test_bad_input_gets_one_line_errors(store, kwargs, message):
    kwargs.setdefault("sweep", "copy")  # a bad name: the results package's one rule and error
    with pytest.raises(ResultsInputError, match=message) as info:
        load(store, **kwargs)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_results_root_with_several_sweeps_needs_a_name(store):
    with pytest.raises(AnalysisInputError, match="holds 2 sweeps: copy, topic"):
        load(store)


# ---------------------------------------------------------------- the where language

TABLE = pa.table({
    "model.heads": pa.array([1, 2, 4, 1, None], pa.int64()),
    "task.hardness": [0.0, 0.5, 1.0, 0.75, 0.25],
    "task.id": ["copy-v1", "copy-v1", "topic-v1", "copy-v1", "copy-v1"],
    "learned": [True, False, True, None, False],
})
TYPES = {f.name: f.type for f in TABLE.schema}


def rows(text: str) -> list[int]:
    expr = where_lang.to_expression(where_lang.parse(text), TYPES)
    indexed = TABLE.append_column("i", pa.array(range(TABLE.num_rows)))
    return indexed.filter(expr)["i"].to_pylist()


@pytest.mark.parametrize(("text", "expected"), [
    ("model.heads == 1", [0, 3]),
    ("model.heads = 1 and task.hardness > 0.5", [3]),
    ("0.5 <= task.hardness", [1, 2, 3]),
    ("model.heads in (2, 4) or task.id == 'topic-v1'", [1, 2]),
    ("model.heads not in (1)", [1, 2]),
    ("learned", [0, 2]),
    ("not learned", [1, 4]),
    ("model.heads is null", [4]),
    ("model.heads is not null and not (task.hardness < 0.5)", [1, 2, 3]),
    ('task.id != "copy-v1"', [2]),
    ("`model.heads` >= 2 AND learned = true", [2]),
    ("task.hardness > 1e-1 and task.hardness < .6", [1, 4]),
])
def test_where_language(text, expected):
    assert rows(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty where"), ("model.heads ==", "expected a column name or a value"),
    ("(model.heads == 1", "expected '\\)'"), ("model.heads == null", "is null"),
    ("model.heads == 1; drop", "unexpected character ';'"), ("1 == 1", "needs a column"),
    ("task.hardness", "not boolean"), ("learned < true", "cannot compare"),
    ("__import__('os').system('x')", "expected"),
])
def test_malformed_where_strings(text, message):
    with pytest.raises(AnalysisInputError, match=message) as info:
        where_lang.to_expression(where_lang.parse(text), TYPES)
    assert "\n" not in str(info.value)


_OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_comparison = st.tuples(st.sampled_from(list(_OPS)), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(_comparison, min_size=1, max_size=4), st.lists(st.sampled_from(["and", "or"]),
                                                               min_size=3, max_size=3))
def test_where_agrees_with_python_on_comparisons(comparisons, joins):
    parts = [f"task.hardness {op} {value}" for op, value in comparisons]
    text = parts[0]
    for join, part in zip(joins, parts[1:], strict=False):
        text = f"{text} {join} {part}"
    node = where_lang.parse(text)

    def check(h: float) -> bool:  # and binds tighter than or, as in the grammar
        terms, result = [], _OPS[comparisons[0][0]](h, comparisons[0][1])
        for join, (op, value) in zip(joins, comparisons[1:], strict=False):
            if join == "and":
                result = result and _OPS[op](h, value)
            else:
                terms.append(result)
                result = _OPS[op](h, value)
        return any([*terms, result])

    expr = where_lang.to_expression(node, TYPES)
    indexed = TABLE.append_column("i", pa.array(range(TABLE.num_rows)))
    got = indexed.filter(expr)["i"].to_pylist()
    hardness = TABLE["task.hardness"].to_pylist()
    assert got == [i for i, h in enumerate(hardness) if check(h)]


def test_conjuncts_split_by_table():
    node = where_lang.parse("model.heads == 1 and (step > 3 and accuracy >= 0.5)")
    assert [sorted(where_lang.names(t)) for t in where_lang.conjuncts(node)] == [
        ["model.heads"], ["step"], ["accuracy"]]


def test_warnings_are_not_raised_by_a_plain_load(store):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load(store, "topic").trajectories)

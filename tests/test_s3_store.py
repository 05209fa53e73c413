"""The store against a real S3 API on loopback: moto's server, started by this module on a free
port of 127.0.0.1 and stopped at its end. Writes, reads, compaction, recovery and a whole
`sweeper run --results s3://...`."""

from __future__ import annotations

import json
import uuid

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from sweep_helpers import TINY_STEPS, S3Server, cli, fake_results, sweep_text, variant, write_sweep

import sweeper.runner  # noqa: F401 (binds sys.stderr as a default; see test_sweep_cli)
from sweeper.plan import expand
from sweeper.results import TABLE_SCHEMA_VERSION as SCHEMA_VERSION
from sweeper.results import Store, pack_id, trajectories_table
from sweeper.search_space import parse_sweep

pytest.importorskip("moto")
pytest.importorskip("boto3")

BUCKET = "sweeps"
SWEEP = "tiny"


@pytest.fixture(scope="module")
def s3():
    with S3Server() as server:
        server.client().create_bucket(Bucket=BUCKET)
        yield server


@pytest.fixture(autouse=True)
def aws_env(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"
                       }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def prefix():
    return f"run-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(s3, prefix):
    return Store.open(s3.uri(BUCKET, prefix))


@pytest.fixture(scope="module")
def specs():
    return expand(parse_sweep(sweep_text(variant(**{"axes.model.heads": {"grid": [1, 2]}}))))


def _keys(s3: S3Server, prefix: str, markers: bool = False) -> list[str]:
    """The objects under prefix (directory markers, keys ending in '/', left out)."""
    listing = s3.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    keys = sorted(o["Key"][len(prefix) + 1:] for o in listing.get("Contents", []))
    return keys if markers else [k for k in keys if k and not k.endswith("/")]


def _snapshot(store: Store):
    trials = sorted(store.read(SWEEP, "trials").to_pylist(), key=lambda r: r["trial_id"])
    traj = sorted(store.read(SWEEP, "trajectories").to_pylist(),
                  key=lambda r: (r["trial_id"], r["step"]))
    return trials, traj


def test_the_uri_opens_an_s3_filesystem(store, prefix):
    assert isinstance(store.fs, pafs.S3FileSystem)
    assert store.root == f"{BUCKET}/{prefix}"
    assert not store.is_local


def test_write_pack_and_read_on_s3(s3, store, prefix, specs):
    results = fake_results(specs[:4])
    pack = store.write_pack(SWEEP, results)
    assert _keys(s3, prefix) == [f"{SWEEP}/trajectories/part-{pack}.parquet",
                                 f"{SWEEP}/trials/part-{pack}.parquet"]
    trials = store.read(SWEEP, "trials")
    assert sorted(trials.column("trial_id").to_pylist()) == sorted(r.trial_id for r in results)
    assert trials.schema.field("task.cooccurrence").type == "double"
    one = results[2].trial_id
    traj = store.read(SWEEP, "trajectories", filter=ds.field("trial_id") == one)
    assert sorted(traj.column("step").to_pylist()) == list(TINY_STEPS)
    for table in ("trials", "trajectories"):
        for path in store.files(SWEEP, table):
            meta = pq.read_schema(path, filesystem=store.fs).metadata
            assert meta[b"sweeper.schema_version"] == str(SCHEMA_VERSION).encode()
            assert "sweeper" in json.loads(meta[b"sweeper.provenance"])
    assert store.stored_ids(SWEEP) == {r.trial_id for r in results}


def test_each_file_is_a_single_put(s3, store, prefix, specs):
    """DESIGN 4: on object stores a file is written with a single PUT: no multipart upload,
    and no directory-marker objects (an object store has no directories; each marker is one
    more request per file and clutter in every listing)."""
    s3.requests.clear()
    pack = store.write_pack(SWEEP, fake_results(specs[:2]))
    store.write_manifest(SWEEP, {"task": "copy-v1"})
    multipart = [r for r in s3.requests if "uploads" in r[2] or "uploadId=" in r[2]]
    assert multipart == [], f"multipart requests: {multipart}"
    puts = sorted(path for method, path, _ in s3.requests if method == "PUT")
    base = f"/{BUCKET}/{prefix}/{SWEEP}"
    assert puts == [f"{base}/manifest.json", f"{base}/trajectories/part-{pack}.parquet",
                    f"{base}/trials/part-{pack}.parquet"], puts
    assert _keys(s3, prefix, markers=True) == _keys(s3, prefix)


def test_recover_on_s3_removes_orphans_and_finishes_a_compaction(s3, store, prefix, specs):
    for i in range(0, 6, 2):
        store.write_pack(SWEEP, fake_results(specs[i:i + 2]))
    before = _snapshot(store)
    # A crash between a pack's trajectories and its trials file.
    crashed = fake_results(specs[6:8])
    orphan = f"part-{pack_id(r.trial_id for r in crashed)}.parquet"
    store._put_table(store.path(SWEEP, "trajectories", orphan), trajectories_table(crashed))
    # A crash in compact() after the merged pair was written.
    originals = [p.rsplit("/", 1)[1] for p in store.files(SWEEP, "trials")]
    extra = {"replaces": json.dumps(originals)}
    merged = "part-compact-crashed.parquet"
    store._put_table(store.path(SWEEP, "trajectories", merged),
                     store.read(SWEEP, "trajectories"), extra)
    store._put_table(store.path(SWEEP, "trials", merged), store.read(SWEEP, "trials"), extra)
    store.recover(SWEEP)
    assert _keys(s3, prefix) == [f"{SWEEP}/trajectories/{merged}", f"{SWEEP}/trials/{merged}"]
    assert _snapshot(store) == before


def test_compact_on_s3_keeps_every_row_once(s3, store, prefix, specs):
    for spec in specs:
        store.write_pack(SWEEP, fake_results([spec]))
    before = _snapshot(store)
    assert store.compact(SWEEP) == (len(specs), len(specs))
    assert len(_keys(s3, prefix)) == 2
    assert _snapshot(store) == before


def test_sweeper_run_with_s3_results(s3, prefix, tmp_path):
    uri = s3.uri(BUCKET, prefix)
    sweep_file = write_sweep(tmp_path / "tiny.yaml", variant())
    rc, out, err = cli(["run", sweep_file, "--results", uri, "--executor", "local",
                        "--pack-size", "2"])  # two packs: two files to compact below
    assert rc == 0, err
    assert "ran 4 trials" in out and "stored: 4 ok" in out
    keys = _keys(s3, prefix)
    assert f"{SWEEP}/manifest.json" in keys
    assert all(k in (f"{SWEEP}/manifest.json", f"{SWEEP}/progress.json")
               or k.endswith(".parquet") for k in keys), keys
    store = Store.open(uri)
    trials = store.read(SWEEP, "trials")
    assert trials.num_rows == 4
    assert sorted(trials.column("task.cooccurrence").to_pylist()) == [0.0, 0.0, 0.5, 0.5]
    assert store.read(SWEEP, "trajectories").num_rows == 4 * len(TINY_STEPS)
    assert store.read_manifest(SWEEP)["sweep_file"] == sweep_file.read_text()

    rc, out, err = cli(["run", sweep_file, "--results", uri, "--executor", "local"])
    assert rc == 0 and "ran 0 trials" in out, err
    rc, out, err = cli(["status", SWEEP, "--results", uri])
    assert rc == 0 and out.startswith("tiny: 4 done, 0 failed, 0 pending"), err
    rc, out, err = cli(["plan", sweep_file, "--results", uri])
    assert rc == 0 and "nothing to run: all 4 trials are stored" in out, err
    rc, out, err = cli(["compact", SWEEP, "--results", uri])
    assert rc == 0 and "merged into 1 (4 trials)" in out, err
    assert store.read(SWEEP, "trials").num_rows == 4
    assert len([k for k in _keys(s3, prefix) if "/part-" in k]) == 2


def test_optuna_with_s3_results_keeps_its_study_in_memory(s3, prefix, tmp_path):
    """An object store cannot hold the SQLite study: each run builds it from the stored cells
    and runs only what the budget still lacks; nothing but the store's files lands in S3."""
    uri = s3.uri(BUCKET, prefix)
    search = {"type": "optuna", "trials": 1, "objective": "best_accuracy", "seed": 0}
    data = variant(**{"axes": {"task": {"hardness": {"uniform": [0.0, 1.0]}}}, "seeds": 1,
                      "search": search})
    sweep_file = write_sweep(tmp_path / "opt.yaml", data)
    rc, out, err = cli(["run", sweep_file, "--results", uri, "--executor", "local"])
    assert rc == 0 and "ran 1 trial in" in out, err
    rc, out, err = cli(["run", sweep_file, "--results", uri, "--executor", "local"])
    assert rc == 0 and "ran 0 trials" in out, err
    write_sweep(sweep_file, {**data, "search": {**search, "trials": 2}})
    rc, out, err = cli(["run", sweep_file, "--results", uri, "--executor", "local"])
    assert rc == 0 and "ran 1 trial in" in out, err
    keys = _keys(s3, prefix)
    assert all(k in (f"{SWEEP}/manifest.json", f"{SWEEP}/progress.json")
               or k.endswith(".parquet") for k in keys), keys
    trials = Store.open(uri).read(SWEEP, "trials").to_pandas()
    assert len(trials) == 2 and trials["task.hardness"].nunique() == 2
    assert not (tmp_path / SWEEP).exists()


# -- the lease on S3: conditional puts -------------------------------------------------------
def test_an_s3_lease_is_taken_once_and_a_stale_one_is_taken_over(store, monkeypatch):
    from sweeper.results import lease

    first = lease.acquire(store, SWEEP)
    with pytest.raises(lease.LeaseHeld, match="one driver per sweep"):
        lease.acquire(store, SWEEP)
    # a holder that stopped beating (killed): its lease is stale after STALE_AFTER_S
    first._release = None  # forget it without releasing, as a killed driver would
    monkeypatch.setattr(lease, "STALE_AFTER_S", 0.0)
    second = lease.acquire(store, SWEEP)
    assert second.took_over is not None and second.took_over["token"] == first.holder["token"]
    monkeypatch.setattr(lease, "STALE_AFTER_S", 30.0)
    with pytest.raises(lease.LeaseHeld):
        lease.acquire(store, SWEEP)
    second.release()
    with lease.acquire(store, SWEEP) as third:
        assert third.took_over is None


def test_an_s3_lease_that_cannot_be_written_is_one_line(s3, prefix):
    """A refusal that is not another driver's lease (here: no such bucket) is a write that
    failed, as on a full disk: one line, nothing held."""
    from sweeper.results import lease
    from sweeper.results.errors import ResultsWriteError

    store = Store.open(s3.uri("no-such-bucket", prefix))
    with pytest.raises(ResultsWriteError, match=r"could not write s3://no-such-bucket/.*"
                                                 r"lease\.json \(.*NoSuchBucket"):
        lease.acquire(store, SWEEP)


def test_a_store_that_goes_away_mid_run_ends_it_in_one_line_and_the_run_resumes(tmp_path):
    """The S3 server stopped after the first pack is stored: the driver ends with one error
    line (and at most the lease's warning), no traceback; once the server is back, the same
    command stores every trial once."""
    import subprocess
    import sys
    import time

    from sweep_helpers import REPO, SLOW, subprocess_env, wait_for

    prefix = f"gone-{uuid.uuid4().hex[:8]}"
    server = S3Server().__enter__()
    port = server.port
    try:
        server.client().create_bucket(Bucket=BUCKET)
    except server.client().exceptions.BucketAlreadyOwnedByYou:
        pass  # moto's buckets live in this process: the module's server made it
    uri = server.uri(BUCKET, prefix)
    sweep_file = write_sweep(tmp_path / "slow.yaml", SLOW)
    env = subprocess_env(SWEEPER_REMOTE_TIMEOUT_S="3", AWS_ACCESS_KEY_ID="testing",
                         AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                         AWS_EC2_METADATA_DISABLED="true")
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(sweep_file), "--results", uri,
            "--executor", "local"]
    driver = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=REPO, env=env)
    try:
        wait_for(lambda: any("/trials/part-" in k for k in _keys(server, prefix)), 120,
                 "the first stored pack")
        server.__exit__(None, None, None)
        started = time.monotonic()
        _, err = driver.communicate(timeout=120)
        assert time.monotonic() - started < 60
    finally:
        if driver.poll() is None:
            driver.kill()
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("[")]
    assert driver.returncode == 1 and "Traceback" not in err, err
    errors = [ln for ln in lines if ": error: " in ln]
    assert len(errors) == 1 and all(ln.startswith(("warning:", "sweeper run: error:"))
                                    for ln in lines[-3:]), err
    with S3Server(port) as again:  # the same objects: moto keeps them in this process
        done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        trials = Store.open(again.uri(BUCKET, prefix)).read("slow", "trials")
        ids = trials.column("trial_id").to_pylist()
        assert len(ids) == 4 and len(set(ids)) == 4

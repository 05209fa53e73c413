"""Shared helpers of the sweep tests: tiny sweep files, fake trial results, CLI runners, a
loopback S3 server (moto) that records the requests it serves."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from sweeper.families import families
from sweeper.results import Thresholds, trial_outcomes
from sweeper.spec import TrialResult, TrialSpec

REPO = Path(__file__).resolve().parents[1]
DELETE = object()  # a `variant` value that removes the key

# The smallest copy sweep that still trains: 2 cells x 2 seeds, 3 logged steps (0, 10, 20).
TINY: dict[str, Any] = {
    "name": "tiny",
    "task": "copy-v1",
    "model": "seq2seq",
    "fixed": {"task": {"length": 4}, "model": {"width": 8},
              "train": {"batch_size": 8, "eval_every": 10, "eval_size": 8}},
    "axes": {"task": {"cooccurrence": {"grid": [0.0, 0.5]}}},
    "seeds": 2,
    "budget": {"steps": 20},
    "resources": {"cpu": 1},
    "retries": 1,
}
TINY_STEPS = (0, 10, 20)
# 4 packs of one trial, each long enough (a few seconds) to act while a driver runs
SLOW: dict[str, Any] = {**TINY, "name": "slow", "pack_size": 1, "budget": {"steps": 600},
                        "fixed": {**TINY["fixed"],
                                  "train": {**TINY["fixed"]["train"], "eval_every": 100}}}


def variant(base: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    """A copy of `base` (TINY) with dotted keys set: `variant(**{"axes.task.hardness": {...}})`.

    A value of DELETE removes the key.
    """
    out = copy.deepcopy(TINY if base is None else base)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return out


def sweep_text(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def write_sweep(path: Path, data: dict[str, Any] | str) -> Path:
    path.write_text(data if isinstance(data, str) else sweep_text(data))
    return path


def run_local(folder: Path, data: dict[str, Any], *argv: str) -> Path:
    """`sweeper run` of `data` (a `variant`) on the local executor, no estimate, into
    `folder/r`: the results root (the run must succeed)."""
    path = write_sweep(folder / f"{data['name']}.yaml", data)
    rc, _, err = cli(["run", path, "--results", folder / "r", "--executor", "local",
                      "--no-estimate", *argv])
    assert rc == 0, err
    return folder / "r"


# -- outcomes ------------------------------------------------------------------------------
def derive_outcomes(family: str, columns: dict, *, classes: int | None = None,
                    cooccurrence: float = 1.0, accuracy_threshold: float = 0.95,
                    attention_threshold: float = 0.5, ktiw_threshold: float = 0.5) -> dict:
    """`sweeper.results.trial_outcomes` of a family's trajectory, thresholds by name."""
    thresholds = Thresholds(accuracy=accuracy_threshold, attention=attention_threshold,
                            ktiw=ktiw_threshold)
    config = {"task.classes": classes, "task.cooccurrence": cooccurrence} if classes else {}
    declared = families()[family]
    return trial_outcomes(columns, declared.metrics, declared.outcome_rules, config, thresholds)


# -- fake results (no training) ------------------------------------------------------------
def fake_result(spec: TrialSpec, steps: Sequence[int] = TINY_STEPS, status: str = "ok",
                error: str | None = None, offset: float = 0.0) -> TrialResult:
    """A TrialResult with a deterministic, plausible trajectory (no training)."""
    heads = spec.model_params.get("heads", 1)
    trajectory: dict[str, list] = {"step": list(steps)}
    for i, metric in enumerate(spec.family.metrics):
        values = [round(0.1 * (i + 1) + 0.01 * k + offset, 6) for k, _ in enumerate(steps)]
        trajectory[metric.name] = ([[v] * heads for v in values] if metric.per_item
                                   else values)
    key = (spec.family.name, heads, spec.task_params.get("classes"), tuple(steps), offset)
    if key not in _FAKE_OUTCOMES:  # one trajectory per key: its outcomes derived once
        _FAKE_OUTCOMES[key] = derive_outcomes(spec.family.name, trajectory, classes=key[2])
    return TrialResult(spec, status, trajectory, dict(_FAKE_OUTCOMES[key]), 0.5, error,
                       host="testhost")


_FAKE_OUTCOMES: dict[tuple, dict] = {}


def fake_results(specs: Iterable[TrialSpec], **kw: Any) -> list[TrialResult]:
    return [fake_result(s, **kw) for s in specs]


# -- running the CLI -----------------------------------------------------------------------
def cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """`sweeper ARGV` in this process; (exit status, stdout, stderr)."""
    from sweeper.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(map(str, argv)))
    return rc, out.getvalue(), err.getvalue()


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def cli_subprocess(argv: Sequence[str], timeout: float = 300, cwd: Path | None = None,
                   **env: str) -> subprocess.CompletedProcess:
    """`python -m sweeper.cli ARGV` in a child process (its own Ray, if it starts one)."""
    return subprocess.run([sys.executable, "-m", "sweeper.cli", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or REPO, env=subprocess_env(**env))


def wait_for(condition, timeout: float = 120.0, what: str = "a condition") -> None:
    """Poll `condition` until it holds (a child process got somewhere), or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# -- disks that fail: a small tmpfs, a read-only bind --------------------------------------
def mounted(*argv: str) -> bool:
    """`mount ARGV` (root only, where the container allows it); whether it was mounted. The
    caller skips without it and unmounts (`unmount`) after."""
    return os.geteuid() == 0 and subprocess.run(["mount", *argv],
                                                capture_output=True).returncode == 0


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(disk: Path) -> None:
    """Leave 0 bytes free on a mounted disk: one file takes what is left."""
    with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:
        while True:
            f.write(bytes(4096))
            f.flush()


# -- looking at a results root -------------------------------------------------------------
def running_packs(results: Path, sweep: str) -> list[str]:
    """The packs a driver's progress file says are training (none before the file is written:
    a driver prepares the native kernels under its lease, before its first pack)."""
    try:
        progress = json.loads((Path(results) / sweep / "progress.json").read_text())
    except (OSError, ValueError):
        return []
    return [p["pack"] for p in progress.get("packs", [])]


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in Path(root).rglob("*") if p.is_file())


def parquet_files(root: Path, sweep: str, table: str) -> list[Path]:
    """A table's part files but those a merge replaced (its inputs stay on disk a while for
    readers that listed them before: `Store.merge_tiers`); damaged files are listed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sweeper.results.reading import replaces

    replaced: set[str] = set()
    for merged in (Path(root) / sweep / "trials").glob("part-compact-*.parquet"):
        try:
            replaced |= set(replaces(pq.read_schema(merged).metadata))
        except (OSError, ValueError, pa.ArrowException):
            continue
    return sorted(p for p in (Path(root) / sweep / table).glob("part-*.parquet")
                  if p.name not in replaced)


def assert_only_store_files(root: Path) -> None:
    """What a store may hold: per sweep its manifest, lease, progress, cell summary and Optuna
    study, and Parquet parts; nothing per trial."""
    per_sweep = ("manifest.json", "lease.json", "progress.json", "cells.parquet", "optuna.db")
    for path in all_files(root):
        rel = path.relative_to(root)
        assert (rel.name in per_sweep and len(rel.parts) == 2) or (
            rel.suffix == ".parquet" and rel.name.startswith("part-")
            and rel.parts[1] in ("trials", "trajectories")), f"unexpected file {rel}"


def assert_all_parquet_readable(root: Path) -> None:
    for path in all_files(root):
        if path.suffix == ".parquet":
            pq.read_table(path)  # raises on a truncated or half-written file


# -- a loopback S3 API ----------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto's S3 on 127.0.0.1 in a thread, recording (method, path, query) of each request.

    moto 5.2 names the root element of its CompleteMultipartUpload answer
    `CompleteMultipartUploadResponse`; AWS (and Arrow, which checks it) use
    `CompleteMultipartUploadResult`. The wrapper renames that one element so that multipart
    uploads work as against real S3; everything else passes through untouched.
    """

    BAD_ROOT = b"CompleteMultipartUploadResponse"
    GOOD_ROOT = b"CompleteMultipartUploadResult"

    def __init__(self, port: int | None = None) -> None:
        """`port`: that one (a server started again where a stopped one was: moto keeps its
        buckets in this process, so the objects are still there)."""
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        self.port = port or free_port()
        self.requests: list[tuple[str, str, str]] = []
        self._app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", self.port, self._wsgi, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def uri(self, bucket: str, prefix: str) -> str:
        return f"s3://{bucket}/{prefix}?endpoint_override={self.endpoint}&scheme=http"

    def _wsgi(self, environ, start_response):
        method, query = environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")
        self.requests.append((method, environ.get("PATH_INFO", ""), query))
        if not (method == "POST" and "uploadId=" in query):
            return self._app(environ, start_response)
        seen: dict[str, Any] = {}

        def capture(status, headers, exc_info=None):
            seen["status"], seen["headers"] = status, headers
            return lambda data: None

        body = b"".join(self._app(environ, capture)).replace(self.BAD_ROOT, self.GOOD_ROOT)
        headers = [(k, v) for k, v in seen["headers"] if k.lower() != "content-length"]
        start_response(seen["status"], headers + [("Content-Length", str(len(body)))])
        return [body]

    def __enter__(self) -> S3Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

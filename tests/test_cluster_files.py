"""Static checks of the cluster definitions in cluster/, and a dry run of the SLURM script.

- every YAML file parses;
- cluster/aws.yaml passes Ray's own `ray up` validation (prepare_config + validate_config, which
  need no cloud credentials) and the JSON schema shipped in the ray package;
- the KubeRay manifests have the right apiVersion/kind and required fields, start their worker
  groups from zero, enable the autoscaler and token authentication, and expose no Service
  publicly;
- cluster/slurm.sbatch passes `bash -n` and shellcheck, and runs end to end on this machine with
  stand-ins for srun, scontrol and sweeper (two real Ray nodes, then nothing left running);
- cluster/README.md covers token authentication, the private ports and shared results.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "cluster"
AWS_YAML = CLUSTER / "aws.yaml"
RAYCLUSTER_YAML = CLUSTER / "kuberay-raycluster.yaml"
RAYJOB_YAML = CLUSTER / "kuberay-rayjob.yaml"
SLURM_SCRIPT = CLUSTER / "slurm.sbatch"
README = CLUSTER / "README.md"
DOCKERFILE = CLUSTER / "Dockerfile"

PUBLIC_SERVICE_TYPES = {"LoadBalancer", "NodePort"}


def _yaml_files() -> list[Path]:
    return sorted(p for p in CLUSTER.iterdir() if p.suffix in {".yaml", ".yml"})


def _load_docs(path: Path) -> list[dict]:
    with path.open() as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    return docs


def _walk(node):
    """Every dict inside a parsed YAML document, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


# --------------------------------------------------------------------------------------------
# every YAML parses


def test_cluster_folder_has_the_expected_files():
    for path in (AWS_YAML, RAYCLUSTER_YAML, RAYJOB_YAML, SLURM_SCRIPT, README, DOCKERFILE):
        assert path.is_file(), f"missing {path.relative_to(REPO)}"


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: p.name)
def test_every_yaml_parses(path):
    docs = _load_docs(path)
    assert docs, f"{path.name} has no YAML document"
    for doc in docs:
        assert isinstance(doc, dict), f"{path.name}: top level is {type(doc).__name__}, not a map"


def test_no_credentials_in_cluster_files():
    patterns = [
        re.compile(r"AKIA[0-9A-Z]{16}"),  # an AWS access key id
        re.compile(r"(?i)aws_secret_access_key\s*[:=]\s*['\"]?[A-Za-z0-9/+]{40}"),
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    ]
    for path in sorted(CLUSTER.iterdir()):
        if not path.is_file():
            continue
        text = path.read_text()
        for pattern in patterns:
            assert not pattern.search(text), f"{path.name} looks like it holds a credential"


# --------------------------------------------------------------------------------------------
# ray up: cluster/aws.yaml


@pytest.fixture(scope="module")
def aws_config() -> dict:
    (doc,) = _load_docs(AWS_YAML)
    return doc


@pytest.fixture(scope="module")
def ray_schema() -> dict:
    import ray.autoscaler

    schema_path = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
    return json.loads(schema_path.read_text())


def _prepare_and_validate(config: dict) -> dict:
    # What `ray up` does before it talks to the cloud (commands._bootstrap_config): fill in the
    # provider's defaults, merge setup commands, check docker, per-type min/max workers, then
    # validate against ray-schema.json plus Ray's own cross-field checks. No credentials needed.
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_aws_config_passes_rays_own_validation(aws_config):
    prepared = _prepare_and_validate(aws_config)
    assert prepared["provider"]["type"] == "aws"
    assert set(prepared["available_node_types"]) == set(aws_config["available_node_types"])


def test_aws_config_matches_the_schema_shipped_with_ray(aws_config, ray_schema):
    jsonschema.validate(aws_config, ray_schema)


@pytest.mark.parametrize(
    "breakage",
    ["no resources", "unknown key", "unknown head type", "min above max"],
)
def test_rays_validator_rejects_broken_variants(aws_config, breakage):
    # The validation above is only worth something if it can fail.
    broken = copy.deepcopy(aws_config)
    if breakage == "no resources":
        del broken["available_node_types"]["ray.worker.cpu"]["resources"]
    elif breakage == "unknown key":
        broken["head_start_commands"] = ["ray start --head"]
    elif breakage == "unknown head type":
        broken["head_node_type"] = "ray.head.missing"
    elif breakage == "min above max":
        broken["available_node_types"]["ray.worker.cpu"]["min_workers"] = 100
    with pytest.raises((jsonschema.ValidationError, ValueError)):
        _prepare_and_validate(broken)


def test_aws_has_head_cpu_and_gpu_types_scaling_from_zero(aws_config):
    types = aws_config["available_node_types"]
    head = aws_config["head_node_type"]
    assert head in types
    workers = {name: spec for name, spec in types.items() if name != head}
    gpu = [name for name, spec in workers.items() if spec["resources"].get("GPU", 0) > 0]
    cpu = [name for name, spec in workers.items() if spec["resources"].get("GPU", 0) == 0]
    assert gpu and cpu, "want at least one CPU and one GPU worker type"
    for name, spec in workers.items():
        assert spec.get("min_workers", 0) == 0, f"{name} must autoscale from zero"
        assert spec.get("max_workers", 0) > 0, f"{name} can never start"
    # Trials stay off the head.
    assert types[head]["resources"].get("CPU") == 0


def test_aws_images_match_the_installed_ray(aws_config):
    images = [aws_config["docker"]["image"]]
    images += [
        spec["docker"]["worker_image"]
        for spec in aws_config["available_node_types"].values()
        if "docker" in spec
    ]
    for image in images:
        assert image.startswith(f"rayproject/ray:{ray.__version__}-"), image


def test_aws_dashboard_on_loopback_and_token_auth(aws_config):
    head_cmds = " ".join(aws_config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_cmds
    everything = json.dumps(aws_config)
    assert "0.0.0.0" not in everything
    assert "--env RAY_AUTH_MODE=token" in aws_config["docker"]["run_options"]
    for cmd in aws_config["head_start_ray_commands"] + aws_config["worker_start_ray_commands"]:
        if "ray start" in cmd:
            assert "RAY_AUTH_MODE=token" in cmd, cmd
    assert aws_config["file_mounts"].get("~/.ray/auth_token") == "~/.ray/auth_token"
    # The launcher's security group must not be widened for Ray ports.
    assert "IpPermissions" not in aws_config["provider"].get("security_group", {})


def test_aws_setup_installs_torch_from_pytorch_index_then_sweeper(aws_config):
    common = aws_config["setup_commands"]
    torch_at = next(i for i, c in enumerate(common) if "torch==" in c)
    sweeper_at = next(i for i, c in enumerate(common) if "sweeper @ git+" in c)
    assert torch_at < sweeper_at
    assert "--index-url https://download.pytorch.org/whl/cpu" in common[torch_at]
    assert "REPLACE_ME" in common[sweeper_at], "the repository URL is a marked placeholder"
    (gpu_type,) = [
        spec
        for spec in aws_config["available_node_types"].values()
        if spec["resources"].get("GPU", 0) > 0
    ]
    gpu_cmds = gpu_type["worker_setup_commands"]
    assert re.search(r"download\.pytorch\.org/whl/cu\d+", gpu_cmds[0])
    assert gpu_cmds[-1] == common[sweeper_at]


# --------------------------------------------------------------------------------------------
# KubeRay manifests


def _ray_containers(cluster_spec: dict):
    groups = [cluster_spec["headGroupSpec"], *cluster_spec["workerGroupSpecs"]]
    for group in groups:
        yield from group["template"]["spec"]["containers"]


def _check_ray_cluster_spec(spec: dict, where: str):
    assert spec.get("rayVersion") == ray.__version__, f"{where}: rayVersion"
    assert spec.get("enableInTreeAutoscaling") is True, f"{where}: autoscaler off"
    assert spec.get("authOptions", {}).get("mode") == "token", f"{where}: token auth off"

    head = spec["headGroupSpec"]
    assert isinstance(head["rayStartParams"], dict)
    assert head.get("serviceType", "ClusterIP") == "ClusterIP", f"{where}: head Service"
    assert not head.get("enableIngress"), f"{where}: ingress for the head"
    assert head["rayStartParams"].get("num-cpus") == "0", f"{where}: trials on the head"

    groups = spec["workerGroupSpecs"]
    names = [g["groupName"] for g in groups]
    assert len(names) == len(set(names)), f"{where}: duplicate worker group names"
    gpu_groups = []
    for group in groups:
        name = f"{where}/{group['groupName']}"
        assert group["minReplicas"] == 0, f"{name}: must start from zero"
        assert group.get("replicas", 0) == 0, f"{name}: must start from zero"
        assert group["maxReplicas"] >= 1, f"{name}: can never start"
        assert isinstance(group["rayStartParams"], dict), name
        (container,) = group["template"]["spec"]["containers"]
        limits = container["resources"]["limits"]
        if "nvidia.com/gpu" in limits:
            gpu_groups.append(group["groupName"])
    assert gpu_groups and len(gpu_groups) < len(groups), f"{where}: want CPU and GPU groups"

    for container in _ray_containers(spec):
        assert container.get("image"), f"{where}: container without image"
        refs = [e.get("secretRef", {}).get("name") for e in container.get("envFrom", [])]
        assert any(refs), f"{where}/{container['name']}: no credentials Secret in envFrom"
        for var in container.get("env", []):
            if var["name"].startswith("AWS_"):
                assert "value" not in var, f"{where}: literal {var['name']} in the manifest"


def test_raycluster_manifest():
    (doc,) = _load_docs(RAYCLUSTER_YAML)
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] == "RayCluster"
    assert doc["metadata"]["name"]
    _check_ray_cluster_spec(doc["spec"], "RayCluster")


def test_rayjob_manifest():
    (doc,) = _load_docs(RAYJOB_YAML)
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] == "RayJob"
    assert doc["metadata"]["name"]
    spec = doc["spec"]
    entrypoint = " ".join(spec["entrypoint"].split())
    assert "sweeper run search_spaces/quick.yaml" in entrypoint
    assert "--address auto" in entrypoint
    assert re.search(r"--results s3://\S+", entrypoint)
    assert spec.get("shutdownAfterJobFinishes") is True
    _check_ray_cluster_spec(spec["rayClusterSpec"], "RayJob")


def test_kuberay_manifests_use_the_same_images_as_each_other():
    (cluster,) = _load_docs(RAYCLUSTER_YAML)
    (job,) = _load_docs(RAYJOB_YAML)
    images_a = {c["image"] for c in _ray_containers(cluster["spec"])}
    images_b = {c["image"] for c in _ray_containers(job["spec"]["rayClusterSpec"])}
    assert images_a == images_b


def test_rayjob_sweep_file_exists():
    (doc,) = _load_docs(RAYJOB_YAML)
    match = re.search(r"sweeper run (\S+)", doc["spec"]["entrypoint"])
    sweep = REPO / match.group(1)
    if not sweep.exists():
        pytest.skip(f"{match.group(1)} is not in the repository yet")
    assert sweep.is_file()


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: p.name)
def test_no_public_service_for_the_dashboard(path):
    for doc in _load_docs(path):
        assert doc.get("kind") not in {"Ingress", "Gateway", "HTTPRoute"}, path.name
        for node in _walk(doc):
            assert node.get("serviceType") not in PUBLIC_SERVICE_TYPES, path.name
            assert not node.get("enableIngress"), path.name
            if node.get("kind") == "Service":
                assert node.get("spec", {}).get("type") not in PUBLIC_SERVICE_TYPES, path.name
            if "headService" in node:
                head_svc = node["headService"].get("spec", {})
                assert head_svc.get("type") not in PUBLIC_SERVICE_TYPES, path.name


def test_dockerfile_installs_the_pinned_stack():
    text = DOCKERFILE.read_text()
    assert f"rayproject/ray:{ray.__version__}-" in text
    torch_at = text.index("--index-url")
    sweeper_at = text.index("pip install --no-cache-dir /home/ray/sweeper")
    assert torch_at < sweeper_at, "torch must come from PyTorch's index before sweeper"
    assert "https://download.pytorch.org/whl/cpu" in text


# --------------------------------------------------------------------------------------------
# SLURM


def test_slurm_script_passes_bash_n():
    result = subprocess.run(["bash", "-n", str(SLURM_SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_slurm_script_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (apt-get install -y shellcheck)")
    result = subprocess.run(
        [shellcheck, "--shell=bash", str(SLURM_SCRIPT)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_slurm_script_never_stops_ray_by_name():
    code = [
        line
        for line in SLURM_SCRIPT.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    joined = "\n".join(code)
    for forbidden in ("ray stop", "pkill", "killall"):
        assert forbidden not in joined, f"slurm.sbatch uses `{forbidden}`"
    assert "--dashboard-host=127.0.0.1" in joined
    assert "RAY_AUTH_MODE=token" in joined


# A dry run of slurm.sbatch on this machine: `srun` runs its command here, `scontrol` expands
# a fixed node list, and `sweeper` is a stand-in that connects to the cluster the script built,
# runs tasks on every node and records what it saw. Two real Ray nodes start.

_FAKE_SRUN = """\
#!/bin/bash
# stand-in for srun: drop srun's options, run the command here as one task
while [[ $# -gt 0 ]]; do
    case "$1" in
        -w|--nodelist|-N|-n|-c) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
exec "$@"
"""

_FAKE_SCONTROL = """\
#!/bin/bash
# stand-in for `scontrol show hostnames A,B`
[[ "$1 $2" == "show hostnames" ]] || exit 1
tr ',' '\\n' <<< "$3"
"""

_FAKE_SWEEPER = """\
#!{python}
import json, os, sys, time
import ray

args = sys.argv[1:]
ray.init(address=args[args.index("--address") + 1], logging_level="ERROR")

@ray.remote(num_cpus=1)
def node_id():
    time.sleep(0.5)
    return ray.get_runtime_context().get_node_id()

seen = {{
    "args": args,
    "alive_nodes": sum(1 for n in ray.nodes() if n["Alive"]),
    "task_nodes": len(set(ray.get([node_id.remote() for _ in range(8)]))),
    "auth_mode": os.environ.get("RAY_AUTH_MODE"),
    "has_token": bool(os.environ.get("RAY_AUTH_TOKEN")),
}}
with open(os.environ["SIM_OUT"], "w") as f:
    json.dump(seen, f)
time.sleep(float(os.environ.get("SIM_SLEEP", "0")))
"""


# No site-packages (-S) and no user or environment paths (-I): the standard library only.
_PYTHON_WITHOUT_RAY = """\
#!/bin/sh
exec "{python}" -I -S "$@"
"""


def _write_executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _ephemeral_ports() -> range:
    """The kernel's range for ports picked at random (Ray's own services pick there)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def _free_port_block(n: int) -> int:
    """A block of n free ports below the ephemeral range, as the script's own default is.

    Inside the ephemeral range, a port free when checked can be taken a moment later by one of
    the many services Ray starts on random ports before its client server (CI saw the head exit
    with "Failed to bind to address ...:<base + 1>").
    """
    ephemeral = _ephemeral_ports()
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(500):
        base = rng.randrange(20000, min(ephemeral.start, 65000) - n)
        if all(_port_is_free(port) for port in range(base, base + n)):
            return base
    raise RuntimeError("no block of free ports")


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def _pids_marked(marker: str) -> list[int]:
    """Processes whose environment carries `marker` (SIM_MARK=...): every process the job
    started inherits it, including Ray's that rename themselves (ray::DashboardAgent ...),
    which a search of command lines misses and leaves running."""
    pids = []
    needle = f"SIM_MARK={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().split(") ", 1)[1].startswith("Z"):
                continue  # a zombie has ended; only its parent's wait is missing
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if needle in environ:
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def slurm_sim(tmp_path):
    if shutil.which("ray") is None:
        pytest.skip("the `ray` command is not on PATH")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "srun": _FAKE_SRUN,
        "scontrol": _FAKE_SCONTROL,
        "sweeper": _FAKE_SWEEPER.format(python=sys.executable),
    }
    for name, text in scripts.items():
        _write_executable(bin_dir / name, text)
    # A `python` first on PATH that cannot import Ray, as a login environment's may be: the
    # script must run the interpreter of its `ray` command instead. A wrapper that execs this
    # interpreter by its full path (a symlink would lose a virtualenv's packages).
    _write_executable(bin_dir / "python", _PYTHON_WITHOUT_RAY.format(python=sys.executable))

    submit_dir = tmp_path / "repo"
    (submit_dir / "search_spaces").mkdir(parents=True)
    (submit_dir / "search_spaces" / "quick.yaml").write_text("name: quick\n")

    # A short, unique temp dir (Ray's socket paths must stay short), and a marker in the
    # environment of every process of this run, so the test ends its own processes, by pid.
    mark = uuid.uuid4().hex[:8]
    ray_tmp = f"/tmp/rsim_{mark}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SLURM_", "SWEEPER_"))}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{os.path.dirname(shutil.which('ray'))}{os.pathsep}"
        + env.get("PATH", ""),
        SLURM_JOB_ID=str(10000 + os.getpid() % 50000),
        SLURM_JOB_NODELIST="simhead,simworker",
        SLURMD_NODENAME="simhead",
        SLURM_CPUS_PER_TASK="1",
        SLURM_SUBMIT_DIR=str(submit_dir),
        SWEEPER_RESULTS="/shared/sweeper-results",
        SWEEPER_RESULTS_SHARED="1",
        SWEEPER_RAY_TMPDIR=ray_tmp,
        # The head on loopback (the worker then finds itself there too, from the head's
        # perspective): the test must not depend on this machine's network (CI's resolves its
        # hostname to 127.0.0.1 and has another address besides).
        SWEEPER_HEAD_IP="127.0.0.1",
        SIM_MARK=mark,
        SWEEPER_RAY_PORT_BASE=str(_free_port_block(3)),
        SWEEPER_JOIN_TIMEOUT="180",
        SWEEPER_EXTRA_ARGS="--pack-size 8",
        SIM_OUT=str(tmp_path / "seen.json"),
    )
    yield env, submit_dir, mark, tmp_path / "seen.json"

    # Whatever the outcome, end this run's processes (found by their marker) by pid.
    for pid in _pids_marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(ray_tmp, ignore_errors=True)


def _wait_gone(marker: str, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    left = _pids_marked(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _pids_marked(marker)
    return left


def _check_seen(seen_path: Path):
    seen = json.loads(seen_path.read_text())
    args = seen["args"]
    assert args[:2] == ["run", "search_spaces/quick.yaml"]
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+:\d+", args[args.index("--address") + 1])
    assert args[args.index("--results") + 1] == "/shared/sweeper-results"
    assert "--results-shared" in args
    assert args[-2:] == ["--pack-size", "8"]
    assert seen["alive_nodes"] == 2
    assert seen["task_nodes"] == 2, "the tasks did not run on both nodes"
    assert seen["auth_mode"] == "token" and seen["has_token"]


@pytest.mark.ray
@pytest.mark.slow
def test_slurm_script_runs_a_two_node_cluster_and_stops_it(slurm_sim):
    env, submit_dir, mark, seen_path = slurm_sim
    result = subprocess.run(
        ["bash", str(SLURM_SCRIPT), "search_spaces/quick.yaml"],
        cwd=submit_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    log = textwrap.indent((result.stdout + result.stderr)[-6000:], "  ")
    assert result.returncode == 0, log
    _check_seen(seen_path)
    assert "2 of 2 Ray node(s) up" in result.stderr, log
    assert not _wait_gone(mark), "Ray processes of the job are still running"


def test_slurm_script_names_a_python_without_ray_in_one_line(slurm_sim):
    env, submit_dir, mark, seen_path = slurm_sim
    without_ray = str(seen_path.parent / "bin" / "python")
    env["SWEEPER_PYTHON"] = without_ray
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(SLURM_SCRIPT), "search_spaces/quick.yaml"],
        cwd=submit_dir, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 60
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    assert without_ray in errors[0] and "cannot import ray" in errors[0]
    assert "No module named 'ray'" in errors[0]
    assert not seen_path.exists() and not _pids_marked(mark)


@pytest.mark.ray
@pytest.mark.slow
def test_slurm_script_stops_everything_on_sigterm(slurm_sim):
    env, submit_dir, mark, seen_path = slurm_sim
    env["SIM_SLEEP"] = "600"  # the stand-in sweep would run for 10 minutes
    log_path = seen_path.with_name("job.log")
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            ["bash", str(SLURM_SCRIPT), "search_spaces/quick.yaml"],
            cwd=submit_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 300
            while not seen_path.exists() and proc.poll() is None:
                assert time.monotonic() < deadline, "the sweep never started"
                time.sleep(1)
            assert proc.poll() is None, log_path.read_text()[-6000:]
            # Token authentication is on: the job API refuses a client without the token.
            no_token = {k: v for k, v in env.items() if not k.startswith("RAY_")}
            no_token["HOME"] = str(seen_path.parent)  # no ~/.ray/auth_token there
            dashboard = f"http://127.0.0.1:{int(env['SWEEPER_RAY_PORT_BASE']) + 2}"
            refused = subprocess.run(
                ["ray", "job", "list", "--address", dashboard],
                env=no_token,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert refused.returncode != 0, refused.stdout
            assert "Authentication" in refused.stdout + refused.stderr
            proc.send_signal(signal.SIGTERM)  # what SLURM sends before the time limit
            rc = proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert rc == 143, log_path.read_text()[-6000:]
    _check_seen(seen_path)
    assert not _wait_gone(mark), "Ray processes of the job are still running"


# --------------------------------------------------------------------------------------------
# README


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text()


def test_readme_explains_token_authentication(readme):
    for needle in ("RAY_AUTH_MODE=token", "ray get-auth-token", "RAY_AUTH_TOKEN", "authOptions"):
        assert needle in readme, needle


def test_readme_lists_the_private_ports(readme):
    for port in ("6379", "8265", "10001", "8076", "52365"):
        assert port in readme, f"README does not mention port {port}"
    assert "Ports that must stay private" in readme


def test_readme_covers_results_and_watching(readme):
    for needle in (
        "--results-shared",
        "s3://",
        "sweeper status",
        "ray job logs",
        "ray dashboard cluster/aws.yaml",
        "kubectl port-forward",
    ):
        assert needle in readme, needle
    for path in (AWS_YAML, RAYCLUSTER_YAML, RAYJOB_YAML, SLURM_SCRIPT, DOCKERFILE):
        assert path.name in readme, f"README does not mention {path.name}"


def test_readme_commands_never_expose_ray(readme):
    # Only the commands a reader copies are checked; prose may name what not to do.
    blocks = re.findall(r"```[a-z]*\n(.*?)```", readme, flags=re.S)
    assert blocks
    for block in blocks:
        for bad in ("LoadBalancer", "NodePort", "dashboard-host=0.0.0.0", "0.0.0.0/0"):
            assert bad not in block, f"README command uses {bad}: {block}"

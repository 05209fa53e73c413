"""Models trained per second: one trial per Ray Tune trial, one after another, and packed.

    python benchmarks/throughput.py                      # full run (~15-25 min on 2 cores)
    python benchmarks/throughput.py --quick              # short run (~5 min)
    python benchmarks/throughput.py --before cb8f041     # also the code of an earlier commit
    python benchmarks/throughput.py --sweep              # also the quick sweep end to end
    python benchmarks/throughput.py --json out.json      # also write the rows as JSON
    python benchmarks/throughput.py --repeat 2           # best of 2 for the in-process modes

Everything runs side by side in one invocation, on one thread per training (torch threads = 1,
denormals flushed), so that ratios are measured under the same machine load. Modes:

  (a) tune        one spec per Ray Tune trial, actor reuse on: `sweeper run FILE --pack-size 1
                  --num-cpus 1` on a generated sweep file (one worker, so that every mode uses
                  one core). "(a) tune e2e" is the wall clock of n trials end to end, Ray
                  start-up included; "(a) tune" is the steady state, the time between trials'
                  completions (read off the store's Parquet parts): what each trial costs in a
                  sweep of thousands. Ratios "x (a)" use the latter.
  (b) sequential  the specs trained one after another in this process: sweeper.train(spec)
  (b) before      the same with the sweeper code of an earlier commit (--before REV), in a
                  subprocess (git archive REV sweeper)
  (b) plain       a plain PyTorch script as the papers' code is written (nn.Embedding, nn.LSTM,
                  torch.optim), one model after another; it evaluates less (loss, accuracy,
                  attention) than sweeper's full metric set, so it is a lower bound on (b)'s cost
  (c) packed      sweeper.train.train_pack on K specs at once, for several K

Each mode trains `steps` steps of the workload (fewer than the papers' budgets; evaluations at
the workload's cadence, plus the one at step 0). Reported: model-steps per second, and models
per second at the full budget extrapolated from it (steps per model / rate: labelled "est.").

FLOPs are counted analytically, for the matmuls of the formulation as implemented (see
`copy_flops` and `topic_flops`), and compared with a single-thread float32 matmul peak measured
at the start of the same run (1024^3 mm, best of several).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch


# -- process settings (the same for every mode, before or after) ------------------------------
def _setup() -> None:
    import ctypes

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    try:  # the allocator setting sweeper's trainer applies (sweeper.train)
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)
        libc.mallopt(-1, (1 << 31) - 1)
        libc.mallopt(-2, 64 << 20)
    except OSError:
        pass


# -- workloads --------------------------------------------------------------------------------
@dataclass
class Workload:
    name: str
    task: str
    model: str
    task_params: dict
    model_params: dict
    train: dict  # without steps
    full_steps: int  # the papers' budget
    steps: int  # measured steps
    quick_steps: int
    packs: tuple[int, ...]
    quick_packs: tuple[int, ...]
    n_seq: int = 2  # specs trained one after another in (b)
    n_tune: int = 10  # specs through Ray Tune in (a)
    note: str = ""
    extra: dict = field(default_factory=dict)

    def specs(self, n: int, steps: int, first_seed: int = 0):
        from sweeper.spec import make_spec

        return [make_spec(self.task, self.model, self.task_params, self.model_params,
                          {**self.train, "steps": steps}, seed=first_seed + s) for s in range(n)]


WORKLOADS = {
    "topic": Workload(
        "topic", "topic-v1", "kq-attention", {}, {"classifier": "fc"},
        {"optimizer": "sgd", "lr": 0.1, "batch_size": None, "eval_every": 50},
        full_steps=5000, steps=200, quick_steps=100, packs=(1, 4, 16, 64),
        quick_packs=(1, 16), n_seq=2, n_tune=10,
        note="paper scale: 4 classes, m = 20, 5000 words, 4000 train sentences, full batch"),
    "copy-small": Workload(
        "copy-small", "copy-v1", "seq2seq", {"length": 10, "cooccurrence": 0.5},
        {"width": 64}, {"batch_size": 64, "eval_every": 10, "eval_size": 128},
        full_steps=200, steps=60, quick_steps=20, packs=(1, 4, 16, 64), quick_packs=(1, 4, 16),
        n_seq=2, n_tune=10, note="d = 64, L = 10, batch 64, eval 128 sequences every 10 steps"),
    "copy-paper": Workload(
        "copy-paper", "copy-v1", "seq2seq", {"length": 40, "cooccurrence": 0.0},
        {"width": 256}, {"batch_size": 128, "eval_every": 10, "eval_size": 128},
        full_steps=200, steps=10, quick_steps=10, packs=(1, 4), quick_packs=(1, 2),
        n_seq=1, n_tune=0, note="d = 256, L = N = 40 (hard), batch 128"),
}


# -- FLOP counts ------------------------------------------------------------------------------
CALIBRATED_BUDGET = 400  # the calibrated scale's steps


def calibrated_workload(heads: int, steps: int) -> Workload:
    """The calibrated copy scale (L = 16, d = 32, batch 128), the workload fast_paths.py and
    jax_anchor.py both time."""
    return Workload(
        f"calibrated-H{heads}", "copy-v1", "seq2seq",
        {"length": 16, "cooccurrence": 0.25, "hardness": 0.5}, {"width": 32, "heads": heads},
        {"batch_size": 128, "lr": 0.003, "eval_every": 10, "eval_size": 128},
        full_steps=CALIBRATED_BUDGET, steps=steps, quick_steps=steps, packs=(), quick_packs=())


def pin_to_one_core() -> int:
    """Pin this process (and the threads it starts later, XLA's included) to one core."""
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return core


def copy_flops(w: Workload, steps: int) -> float:
    """FLOPs (2 x multiply-adds) of the matmuls of one copy model trained `steps` steps.

    With b sequences, S = T = L + 1 positions, width d, G = 4d (LSTM; 3d GRU), H heads and
    V = N + 2 symbols, one forward pass costs, in multiply-adds,
        2 V d G                                   input projection of the two embedding tables
      + 2 b S d G                                 recurrence h W_hh, encoder and decoder
      + b T d (H d) + 2 b T H S d + b T (H d) d   query, scores, mixture, W_v (learned attention)
      + b T (2 d) d + b T d V                     readout W_c, W_o
    A training step is 3 forward passes' worth (backward = 2x forward for every matmul). An
    evaluation is the forward pass on 3 batches of eval_size (mixture, block, open), one more
    attention + readout (uniform attention, states reused) and the KTIW probe:
      b T d d + 2 b S d d + b T S d V.
    Evaluations: steps / eval_every + 1.
    """
    from sweeper.spec import make_spec

    spec = make_spec(w.task, w.model, w.task_params, w.model_params, {**w.train, "steps": 1})
    V = spec.make_task().symbols
    S = T = spec.task_params["length"] + 1
    d, H = spec.model_params["width"], spec.model_params["heads"]
    G = (4 if spec.model_params["cell"] == "lstm" else 3) * d

    def forward(b: int) -> float:
        return (2 * V * d * G + 2 * b * S * d * G + b * T * d * H * d + 2 * b * T * H * S * d
                + b * T * H * d * d + b * T * 2 * d * d + b * T * d * V)

    B, E = spec.train["batch_size"], spec.train["eval_size"]
    readout = E * T * (2 * d * d + d * V)
    probe = E * T * d * d + 2 * E * S * d * d + E * T * S * d * V
    evaluation = 3 * forward(E) + readout + probe
    evals = steps // spec.train["eval_every"] + 1
    return 2 * (steps * 3 * forward(B) + evals * evaluation)


def topic_flops(w: Workload, steps: int) -> float:
    """FLOPs (2 x multiply-adds) of one topic model trained `steps` steps (bag formulation).

    With W words, D = dim, C classes, n sentences of M = m + 1 words, one forward pass costs
        W D                   scores q . k_w
      + W D C                 v_w W (fc and tc: the classifier applied before the bag sum)
      + n M (C + 1)           the bag sums of [e v W, e] (additions, counted as multiply-adds)
    (tl: no projection, n M (D + 1) and n (D D + D C) for its two layers). A training step is
    3 forward passes' worth; an evaluation is one forward pass over all sentences (the training
    loss, validation and test sets). Evaluations: steps / eval_every + 1.
    """
    from sweeper.spec import make_spec

    spec = make_spec(w.task, w.model, w.task_params, w.model_params, {**w.train, "steps": 1})
    task = spec.make_task()
    W, C, M = task.words, task.classes, task.distractors + 1
    D, tl = spec.model_params["dim"], spec.model_params["classifier"] == "tl"
    train_n = task.split[0]

    def forward(n: int) -> float:
        if tl:
            return W * D + n * M * (D + 1) + n * (D * D + D * C)
        return W * D + W * D * C + n * M * (C + 1)

    evals = steps // spec.train["eval_every"] + 1
    return 2 * (steps * 3 * forward(train_n) + evals * forward(task.samples))


def flops(w: Workload, steps: int) -> float:
    return copy_flops(w, steps) if w.task.startswith("copy") else topic_flops(w, steps)


def matmul_peak(repeats: int = 5) -> float:
    """Best single-thread float32 GFLOP/s of a 1024^3 mm."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(4):
            a @ b
        best = min(best, (time.perf_counter() - t) / 4)
    return 2 * 1024 ** 3 / best / 1e9


def recurrence_matmul_peak(w: Workload, repeats: int = 5) -> float:
    """GFLOP/s of the workload's recurrence matmul shape, [B, d] @ [d, 4d], one model."""
    B, d = w.train["batch_size"] or 64, w.model_params.get("width", 64)
    h, wt = torch.randn(1, B, d), torch.randn(1, d, 4 * d)
    n = max(4, int(2e8 / (2 * B * d * 4 * d)))
    torch.bmm(h, wt)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            torch.bmm(h, wt)
        best = min(best, (time.perf_counter() - t) / n)
    return 2 * B * d * 4 * d / best / 1e9


# -- the modes --------------------------------------------------------------------------------
def run_sequential(w: Workload, n: int, steps: int) -> float:
    """(b): n specs trained one after another; wall seconds."""
    from sweeper.train import train

    specs = w.specs(n, steps, first_seed=100)
    start = time.perf_counter()
    for spec in specs:
        train(spec)
    return time.perf_counter() - start


def run_packed(w: Workload, K: int, steps: int) -> float:
    """(c): K specs as one pack; wall seconds."""
    from sweeper.train import train_pack

    specs = w.specs(K, steps, first_seed=100)
    start = time.perf_counter()
    results = train_pack(specs)
    elapsed = time.perf_counter() - start
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    return elapsed


def run_before(w: Workload, rev: str, n: int, steps: int, tmp: str) -> float | None:
    """(b) with the sweeper package of commit `rev`, in a subprocess; wall seconds."""
    root = os.path.join(tmp, f"before-{rev}")
    if not os.path.isdir(root):
        os.makedirs(root)
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        archive = subprocess.run(["git", "-C", repo, "archive", rev, "sweeper"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--inner", w.name,
                          "--inner-n", str(n), "--inner-steps", str(steps)],
                         env=env, capture_output=True, text=True, cwd=tmp)
    if out.returncode != 0:
        print(f"  (before {rev} failed: {out.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def run_tune(w: Workload, n: int, steps: int, tmp: str, pack_size: int | None = 1,
             num_cpus: int | None = 1,
             sweep_file: str | None = None) -> tuple[float, float | None] | None:
    """(a): `sweeper run` on Ray Tune -> (wall seconds end to end, steady-state seconds per
    trial), None if it failed.

    The steady state is read off the store: each finished pack is one Parquet part, so the
    spread of the parts' modification times over n - 1 gaps is what a trial costs once Ray runs
    (robust to the start-up's variance, unlike a difference of two end-to-end runs).
    """
    if sweep_file is None:
        import yaml

        sweep_file = os.path.join(tmp, f"tune-{w.name}.yaml")
        text = {"name": f"bench_{w.name.replace('-', '_')}", "task": w.task, "model": w.model,
                "fixed": {"task": w.task_params, "model": w.model_params, "train": w.train},
                "seeds": n, "budget": {"steps": steps}, "resources": {"cpu": 1}}
        with open(sweep_file, "w") as f:
            yaml.safe_dump(text, f)
    results = tempfile.mkdtemp(prefix="results-", dir=tmp)
    cmd = [sys.executable, "-m", "sweeper.cli", "run", sweep_file, "--results", results]
    if pack_size is not None:
        cmd += ["--pack-size", str(pack_size)]
    if num_cpus is not None:
        cmd += ["--num-cpus", str(num_cpus)]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=repo)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        print(f"  (sweeper run failed: {tail})")
        return None
    parts = [os.path.join(root, f) for root, _, files in os.walk(results) for f in files
             if f.endswith(".parquet") and os.sep + "trials" in root]
    times = sorted(os.path.getmtime(p) for p in parts)
    per_trial = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
    return elapsed, per_trial


# -- the plain PyTorch scripts ----------------------------------------------------------------
def plain_topic(w: Workload, steps: int, seed: int) -> None:
    """Lu et al.'s model written plainly: nn.Embedding, softmax over positions, torch SGD."""
    from torch import nn

    from sweeper.families.topic.data import generate
    from sweeper.spec import make_spec

    spec = make_spec(w.task, w.model, w.task_params, w.model_params, {**w.train, "steps": 1},
                     seed=seed)
    task = spec.make_task()
    torch.manual_seed(seed)
    D, C, W = spec.model_params["dim"], task.classes, task.words
    data = generate(task, seed)
    n_train, n_val, _ = task.split
    words, labels = data.words[:n_train], data.labels[:n_train]
    test_w, test_y = data.words[n_train + n_val:], data.labels[n_train + n_val:]
    embed, keys = nn.Embedding(W, D), nn.Embedding(W, D)
    nn.init.normal_(embed.weight, std=1e-6)
    nn.init.zeros_(keys.weight)
    query = torch.randn(D) * 0.3
    w_cls = torch.randn(D, C)
    opt = torch.optim.SGD(list(embed.parameters()) + list(keys.parameters()), lr=0.1)

    def forward(x):
        attn = torch.softmax(keys(x) @ query, dim=-1)  # [n, M]
        return (attn[..., None] * embed(x)).sum(dim=1) @ w_cls, attn

    for step in range(steps + 1):
        if step % w.train["eval_every"] == 0 or step == steps:
            with torch.no_grad():
                logits, attn = forward(test_w)
                _ = (logits.argmax(-1) == test_y).float().mean(), attn[:, 0].mean()
                _ = nn.functional.cross_entropy(forward(words)[0], labels)
        if step == steps:
            break
        opt.zero_grad()
        nn.functional.cross_entropy(forward(words)[0], labels).backward()
        opt.step()


def plain_copy(w: Workload, steps: int, seed: int) -> None:
    """Snell et al.'s model written plainly: nn.Embedding, nn.LSTM, nn.Linear, torch Adam."""
    from torch import nn

    torch.manual_seed(seed)
    L, d = w.task_params["length"], w.model_params["width"]
    N = L + round(w.task_params["cooccurrence"] * L)
    V, B, E = N + 2, w.train["batch_size"], w.train["eval_size"]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, d)
            self.enc, self.dec = nn.LSTM(d, d, batch_first=True), nn.LSTM(d, d, batch_first=True)
            self.w_q, self.w_v = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.w_c, self.w_o = nn.Linear(2 * d, d), nn.Linear(d, V)

        def forward(self, src, dec_in):
            h, state = self.enc(self.embed(src))
            s, _ = self.dec(self.embed(dec_in), state)
            attn = torch.softmax(self.w_q(s) @ h.transpose(1, 2), dim=-1)
            ctx = self.w_v(attn @ h)
            return self.w_o(torch.tanh(self.w_c(torch.cat([s, ctx], dim=-1)))), attn

    def batch(b):
        src = torch.rand(b, N).argsort(dim=-1)[:, :L]
        src = torch.cat([src, torch.full((b, 1), N)], dim=1)
        dec_in = torch.cat([torch.full((b, 1), N + 1), src[:, :-1]], dim=1)
        return src, dec_in, src

    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=w.train.get("lr", 1e-3))
    for step in range(steps + 1):
        if step % w.train["eval_every"] == 0 or step == steps:
            with torch.no_grad():
                src, dec_in, tgt = batch(E)
                logits, attn = model(src, dec_in)
                _ = nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten())
                _ = (logits.argmax(-1) == tgt).float().mean()
                _ = (attn.argmax(-1) == torch.arange(L + 1)).float().mean()
        if step == steps:
            break
        src, dec_in, tgt = batch(B)
        opt.zero_grad()
        logits, _ = model(src, dec_in)
        nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten()).backward()
        opt.step()


def run_plain(w: Workload, n: int, steps: int) -> float:
    fn = plain_copy if w.task.startswith("copy") else plain_topic
    start = time.perf_counter()
    for s in range(n):
        fn(w, steps, 100 + s)
    return time.perf_counter() - start


# -- reporting --------------------------------------------------------------------------------
@dataclass
class Row:
    workload: str
    mode: str
    K: int
    models: int
    steps: int
    seconds: float
    gflop: float
    full_steps: int
    note: str = ""

    @property
    def model_steps_per_s(self) -> float:
        return self.models * self.steps / self.seconds

    @property
    def models_per_s_full(self) -> float:
        return self.model_steps_per_s / self.full_steps

    @property
    def gflops(self) -> float:
        return self.gflop / self.seconds


def print_table(rows: list[Row], peak: float, shape_peaks: dict[str, float]) -> None:
    header = (f"{'workload':11s} {'mode':14s} {'K':>3s} {'models':>6s} {'steps':>5s} "
              f"{'wall s':>7s} {'model-steps/s':>13s} {'x (b)':>6s} {'x (a)':>6s} "
              f"{'models/s, full budget (est.)':>28s} {'GFLOP/s':>8s} {'% peak':>6s}  note")
    print(header)
    print("-" * len(header))
    for name in dict.fromkeys(r.workload for r in rows):
        group = [r for r in rows if r.workload == name]
        base = next((r for r in group if r.mode == "(b) sequential"), None)
        tune = next((r for r in group if r.mode == "(a) tune"), None)
        for r in group:
            xb = r.model_steps_per_s / base.model_steps_per_s if base else math.nan
            xa = r.model_steps_per_s / tune.model_steps_per_s if tune else math.nan
            print(f"{r.workload:11s} {r.mode:14s} {r.K:3d} {r.models:6d} {r.steps:5d} "
                  f"{r.seconds:7.1f} {r.model_steps_per_s:13.1f} {xb:6.2f} {xa:6.2f} "
                  f"{r.models_per_s_full:28.4f} {r.gflops:8.2f} {100 * r.gflops / peak:6.1f}"
                  f"  {r.note}")
        print()
    print(f"matmul peak (1 thread, float32 1024^3 mm): {peak:.1f} GFLOP/s")
    for name, value in shape_peaks.items():
        print(f"  {name}: recurrence-shaped bmm [B, d] @ [d, 4d]: {value:.1f} GFLOP/s")


def inner(args: argparse.Namespace) -> None:
    """Subprocess entry for --before: (b) with whatever `sweeper` is on PYTHONPATH."""
    _setup()
    w = WORKLOADS[args.inner]
    run_sequential(w, 1, 2)  # warm-up
    print(json.dumps({"seconds": run_sequential(w, args.inner_n, args.inner_steps)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and pack sizes")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, of " + ", ".join(WORKLOADS) + " (empty: none, "
                             "e.g. with --sweep alone)")
    parser.add_argument("--before", metavar="REV", help="also (b) with the code of commit REV")
    parser.add_argument("--no-tune", action="store_true", help="skip (a), Ray Tune")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain scripts")
    parser.add_argument("--sweep", action="store_true",
                        help="also time `sweeper run search_spaces/quick.yaml`, auto pack size "
                             "vs --pack-size 1")
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    parser.add_argument("--steps", type=int, help="override every workload's measured steps")
    parser.add_argument("--repeat", type=int, default=1,
                        help="in-process modes: best of this many runs (default 1)")
    parser.add_argument("--packs", help="override the pack sizes, e.g. 1,4,16")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--inner-n", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--inner-steps", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        inner(args)
        return 0
    _setup()
    tmp = tempfile.mkdtemp(prefix="sweeper-bench-")
    peak = matmul_peak()
    print(f"matmul peak (1 thread): {peak:.1f} GFLOP/s; torch {torch.__version__}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}", flush=True)
    rows: list[Row] = []
    shape_peaks = {}
    for name in filter(None, args.workloads.split(",")):
        w = WORKLOADS[name]
        steps = args.steps or (w.quick_steps if args.quick else w.steps)
        packs = w.quick_packs if args.quick else w.packs
        if args.packs:
            packs = tuple(int(k) for k in args.packs.split(","))
        print(f"{name}: {w.note}; {steps} steps (full budget {w.full_steps})", flush=True)
        if w.task.startswith("copy"):
            shape_peaks[name] = recurrence_matmul_peak(w)
        run_packed(w, 1, 2)  # warm-up: imports, TorchScript specialisation, allocator

        def add(mode, K, models, seconds, note="", name=name, w=w, steps=steps):
            rows.append(Row(name, mode, K, models, steps, seconds,
                            models * flops(w, steps) / 1e9, w.full_steps, note))
            r = rows[-1]
            print(f"  {mode:14s} K={K:<3d} {models} models: {seconds:6.1f} s, "
                  f"{r.model_steps_per_s:8.1f} model-steps/s, {r.gflops:6.2f} GFLOP/s",
                  flush=True)

        def best(fn, *fn_args):  # best of --repeat runs: the machine is shared
            times = [fn(*fn_args) for _ in range(args.repeat)]
            return None if None in times else min(times)

        add("(b) sequential", 1, w.n_seq, best(run_sequential, w, w.n_seq, steps))
        if args.before:
            seconds = best(run_before, w, args.before, w.n_seq, steps, tmp)
            if seconds is not None:
                add("(b) before", 1, w.n_seq, seconds, args.before)
        if not args.no_plain:
            add("(b) plain", 1, w.n_seq, best(run_plain, w, w.n_seq, steps))
        if not args.no_tune and w.n_tune:
            # Two runs separate Ray's start-up from the per-trial cost: a sweep of thousands of
            # trials pays the start-up once, so the steady state is the marginal trial.
            n = 6 if args.quick else w.n_tune
            tune = run_tune(w, n, steps, tmp)
            if tune is not None:
                add("(a) tune e2e", 1, n, tune[0], f"{n} trials, Ray start-up included")
                if tune[1] is not None:
                    add("(a) tune", 1, 1, tune[1], "steady state: time between trials' ends")
        for K in packs:
            add("(c) packed", K, K, best(run_packed, w, K, steps))
    if rows:
        print()
        print_table(rows, peak, shape_peaks)
    sweep = {}
    if args.sweep:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        quick = os.path.join(repo, "search_spaces", "quick.yaml")
        print("\nquick sweep end to end (`sweeper run search_spaces/quick.yaml`, all cpus):")
        for label, size in (("auto pack size", None), ("--pack-size 1", 1)):
            result = run_tune(WORKLOADS["copy-small"], 0, 0, tmp, pack_size=size,
                              num_cpus=None, sweep_file=quick)
            seconds = sweep[label] = result[0] if result else None
            print(f"  {label:15s} {seconds:8.1f} s" if seconds else f"  {label}: failed",
                  flush=True)
        if all(sweep.values()):
            print(f"  speed-up: {sweep['--pack-size 1'] / sweep['auto pack size']:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peak_gflops": peak, "shape_peaks": shape_peaks, "sweep": sweep,
                       "load_average": os.getloadavg(),
                       "rows": [{**r.__dict__, "model_steps_per_s": r.model_steps_per_s,
                                 "models_per_s_full": r.models_per_s_full,
                                 "gflops": r.gflops} for r in rows]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

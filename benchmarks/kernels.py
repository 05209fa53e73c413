"""Each native kernel alone against its reference path, forward and forward+backward.

    python benchmarks/kernels.py                  # K = 1, 16; H = 1, 4 (~1 minute)
    python benchmarks/kernels.py --ks 16 --repeat 31

The pieces of a training step at the calibrated scale (L = 16, d = 32, batch 128, V = 22), each
timed on its fast path (sweeper/layers/native) and on its reference path (torch ops, the code
used where the kernels are not built), interleaved call by call in one process on one thread,
so that both see the same machine load; medians in ms and the ratio reference/fast:

  lstm        sweeper.layers.recurrence.lstm_rows: one side's recurrence, K models
  attention   sweeper.layers.attention.attention: N = K B sequences, R = 17 H query rows
  readout     sweeper.layers.readout.sigmoid_readout_nll: K models, B T rows

benchmarks/fast_paths.py measures whole trainings; this script says which piece moved.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

B, T, D, V = 128, 17, 32, 22


def lstm_case(K: int, H: int) -> Callable[[bool, bool], None]:
    from sweeper.layers import recurrence as R

    gen = torch.Generator().manual_seed(0)
    table = torch.randn(K * V, 4 * D, generator=gen).requires_grad_()
    rows = torch.randint(0, V, (T, K, B), generator=gen) + torch.arange(K)[None, :, None] * V
    w = (torch.randn(K, D, 4 * D, generator=gen) * 0.2).requires_grad_()
    h0 = c0 = torch.zeros(K, B, D)

    def run(reference: bool, backward: bool) -> None:
        hs, _ = R.lstm_rows(table, rows, w, h0, c0, reference=reference)
        if backward:
            hs.sum().backward()
    return run


def attention_case(K: int, H: int) -> Callable[[bool, bool], None]:
    from sweeper.layers.attention import attention

    gen = torch.Generator().manual_seed(0)
    query = torch.randn(K * B, T * H, D, generator=gen).requires_grad_()
    keys_time_major = torch.randn(T, K * B, D, generator=gen).requires_grad_()

    def run(reference: bool, backward: bool) -> None:
        _, mixed = attention(query, keys_time_major.transpose(0, 1), reference=reference)
        if backward:
            mixed.sum().backward()
    return run


def readout_case(K: int, H: int) -> Callable[[bool, bool], None]:
    from sweeper.layers.readout import sigmoid_readout_nll

    gen = torch.Generator().manual_seed(0)
    pre = torch.randn(K, B, T, D, generator=gen).requires_grad_()
    w = torch.randn(K, D, V, generator=gen).requires_grad_()
    b = torch.randn(K, V, generator=gen).requires_grad_()
    target = torch.randint(0, V, (K, B, T), generator=gen)

    def run(reference: bool, backward: bool) -> None:
        nll = sigmoid_readout_nll(pre, w, b, target, reference=reference)
        if backward:
            nll.sum().backward()
    return run


CASES = {"lstm": lstm_case, "attention": attention_case, "readout": readout_case}


def measure(run: Callable[[bool, bool], None], backward: bool, repeat: int) -> dict[str, float]:
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeat):
        for reference in (False, True):
            start = time.perf_counter()
            run(reference, backward)
            times[reference].append(time.perf_counter() - start)
    return {"fast": statistics.median(times[False]) * 1e3,
            "reference": statistics.median(times[True]) * 1e3}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    from sweeper.layers import native

    if native.ops() is None:
        print("the native kernels are not built here: nothing to compare", file=sys.stderr)
        return 1
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from machine import cpu_name

    print(f"# {cpu_name()}, native kernels: {native.instruction_set()[0]}, torch "
          f"{torch.__version__}, 1 thread, median of {args.repeat}, interleaved")
    print(f"{'kernel':<10} {'K':>3} {'H':>2} {'pass':<9} {'fast ms':>9} {'ref ms':>9} "
          f"{'ref/fast':>9}")
    for name, case in CASES.items():
        for K in args.ks:
            for H in (args.heads if name == "attention" else [1]):
                run = case(K, H)
                run(False, True), run(True, True)  # warm-up (TorchScript profiles first)
                for backward in (False, True):
                    row = measure(run, backward, args.repeat)
                    print(f"{name:<10} {K:>3} {H:>2} {'fwd+bwd' if backward else 'fwd':<9} "
                          f"{row['fast']:>9.2f} {row['reference']:>9.2f} "
                          f"{row['reference'] / row['fast']:>8.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-trial random streams: every draw comes from a generator derived from the trial's seed.

No global RNG state is touched, so a trial gives the same numbers alone or inside a pack.
"""

from __future__ import annotations

import hashlib

import torch

STREAMS = ("init", "task", "data", "eval")


def derived_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for one named stream of one trial (stable across runs and machines)."""
    digest = hashlib.sha256(f"{seed}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def generator(seed: int, stream: str, device: str | torch.device = "cpu") -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(derived_seed(seed, stream))
    return gen

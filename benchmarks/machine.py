"""What every benchmark prints first: the machine it measured on (ratios differ between an
AVX2 and an AVX-512 CPU, so the figures name it)."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name, with " (AVX-512)" where it has AVX-512F."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip() + (" (AVX-512)" if "avx512f" in text else "")
    return platform.processor() or "unknown CPU"

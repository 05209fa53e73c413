"""Counts in words, for every message of sweeper and `analysis`: "1 seed", "2 seeds".

Here (standard library only, below the rest of the results contract) so that the commands, the
Python API and `analysis` all import it without torch.
"""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 seed', '0 seeds', '3 seeds'; `plural` for a noun that does not take an s ('1 cell
    summary', '2 cell summaries')."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"

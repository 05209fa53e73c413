"""Small inline SVG charts for the report: every seed's curve of a cell, coloured by outcome.

Written as markup (no script, no external resource), so the page stays one self-contained
file under its Content-Security-Policy; a cell's panel costs microseconds, not the ~0.1 s of a
matplotlib figure, so every cell of a sweep can have one.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

OUTCOME_COLORS = {"success": "#1a9850", "failure": "#d73027", "diverged": "#7b3294",
                  "other": "#999999"}


def _fmt(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e4 else f"{value:,.0f}"


def seeds_svg(lines: Sequence[tuple[str, np.ndarray, np.ndarray]], title: str,
              threshold: float | None = None, unit_range: bool = True,
              width: int = 260, height: int = 150) -> str:
    """One chart: `lines` are (outcome class, steps, values), one per seed."""
    left, right, top, bottom = 34, 8, 18, 22
    pw, ph = width - left - right, height - top - bottom
    steps = [s for _, s, _ in lines if len(s)]
    xmax = float(max((s.max() for s in steps), default=1.0)) or 1.0
    if unit_range:
        ylo, yhi = 0.0, 1.0
    else:
        values = [v[np.isfinite(v)] for _, _, v in lines]
        values = [v for v in values if len(v)]
        ylo = float(min((v.min() for v in values), default=0.0))
        yhi = float(max((v.max() for v in values), default=1.0))
        if yhi - ylo < 1e-12:
            yhi = ylo + 1.0

    def px(x):
        return left + pw * np.asarray(x, dtype=float) / xmax

    def py(y):
        return top + ph * (1 - (np.asarray(y, dtype=float) - ylo) / (yhi - ylo))

    parts = [f"<svg width='{width}' height='{height}' "
             f"viewBox='0 0 {width} {height}' role='img'>",
             f"<title>{html.escape(title)}</title>",
             f"<text x='{left}' y='12' font-size='11'>{html.escape(title)}</text>",
             f"<rect x='{left}' y='{top}' width='{pw}' height='{ph}' fill='none' "
             "stroke='#999' stroke-width='0.8'/>"]
    for y in (ylo, (ylo + yhi) / 2, yhi):
        parts.append(f"<text x='{left - 3}' y='{py(y) + 3:.1f}' font-size='9' "
                     f"text-anchor='end'>{_fmt(round(y, 3))}</text>")
    for x in (0.0, xmax):
        parts.append(f"<text x='{px(x):.1f}' y='{height - 8}' font-size='9' "
                     f"text-anchor='middle'>{_fmt(x)}</text>")
    parts.append(f"<text x='{left + pw / 2:.1f}' y='{height - 8}' font-size='9' "
                 "text-anchor='middle'>step</text>")
    for kind, s, v in lines:
        keep = np.isfinite(v)
        if not keep.any():
            continue
        points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px(s[keep]), py(v[keep]),
                                                                strict=True))
        dash = " stroke-dasharray='4 2'" if kind == "diverged" else ""
        parts.append(f"<polyline points='{points}' fill='none' stroke='{OUTCOME_COLORS[kind]}' "
                     f"stroke-width='1.2' stroke-opacity='0.75'{dash}/>")
    if threshold is not None and ylo <= threshold <= yhi:
        parts.append(f"<line x1='{left}' x2='{left + pw}' y1='{py(threshold):.1f}' "
                     f"y2='{py(threshold):.1f}' stroke='black' stroke-width='0.8' "
                     "stroke-dasharray='2 2'/>")
    parts.append("</svg>")
    return "".join(parts)


def legend_html() -> str:
    names = {"success": "succeeded", "failure": "did not", "diverged": "diverged (dashed)",
             "other": "failed or stopped"}
    return " ".join(f"<span style='color:{OUTCOME_COLORS[k]}'>&#9644; {v}</span>"
                    for k, v in names.items())


def finite_or_none(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None

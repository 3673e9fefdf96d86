"""Line charts as SVG text, drawn on the server: no JavaScript chart library, nothing to download or build.

A chart is a few dozen SVG elements: the page swaps it in when it polls, a test reads
the points from its attributes, and a browser draws it without any script.

    svg = line_chart({"reward": [0.2, 0.5, 0.9], "val_reward": [0.1, float("nan"), 0.8]}, x=[0, 1, 2],
                     bands={"val_reward": [(0.0, 0.4), None, (0.5, 1.0)]}, title="run-a")
    svg.startswith("<svg")   # True
"""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

WIDTH, HEIGHT = 640, 280
MARGIN = {"left": 52, "right": 16, "top": 28, "bottom": 44}
COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#be185d"]
Band = tuple[float, float] | None


def _finite(value: float | None) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / (count - 1)
    return [low + step * index for index in range(count)]


def _label(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() and abs(value) >= 1 else f"{value:.3g}"


def line_chart(series: dict[str, Sequence[float | None]], x: Sequence[float] | None = None,
               bands: dict[str, Sequence[Band]] | None = None, title: str = "", x_label: str = "epoch",
               width: int = WIDTH, height: int = HEIGHT) -> str:
    """One SVG with a line per series (a gap where a value is missing or NaN) and shaded intervals.

    ``bands[name][i]`` is the ``(low, high)`` interval of that series' point ``i`` (or None). Each
    line carries ``data-series`` and ``data-points`` (how many points it draws), so a test or a
    script can tell a drawn curve from an empty chart.
    """
    bands = bands or {}
    length = max((len(values) for values in series.values()), default=0)
    xs = list(x) if x is not None else list(range(length))
    values = [float(v) for points in series.values() for v in points if _finite(v)]
    values += [float(v) for intervals in bands.values() for band in intervals if band for v in band if _finite(v)]
    plot_w = width - MARGIN["left"] - MARGIN["right"]
    plot_h = height - MARGIN["top"] - MARGIN["bottom"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
             f'width="{width}" height="{height}" role="img" aria-label="{escape(title or "chart")}">',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    if title:
        parts.append(f'<text x="{MARGIN["left"]}" y="18" font-size="13" font-weight="600">{escape(title)}</text>')
    if not values or not xs:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" font-size="13" fill="#6b7280">'
                     'no history yet</text></svg>')
        return "".join(parts)
    low, high = min(values), max(values)
    if 0 <= low and high <= 1:
        low, high = 0.0, 1.0  # rewards and accuracies: a fixed [0, 1] axis keeps two runs comparable
    elif high == low:
        low, high = low - 1, high + 1
    finite_xs = [value for value in xs if _finite(value)] or [0.0]
    x_low, x_high = min(finite_xs), max(finite_xs)
    x_span = (x_high - x_low) or 1

    def px(value: float) -> float:
        return round(MARGIN["left"] + (value - x_low) / x_span * plot_w, 2) if x_high != x_low \
            else MARGIN["left"] + plot_w / 2

    def py(value: float) -> float:
        return round(MARGIN["top"] + (high - value) / (high - low) * plot_h, 2)

    for tick in _ticks(low, high):
        parts.append(f'<line x1="{MARGIN["left"]}" x2="{width - MARGIN["right"]}" y1="{py(tick)}" y2="{py(tick)}" '
                     'stroke="#e5e7eb"/>')
        parts.append(f'<text x="{MARGIN["left"] - 6}" y="{py(tick) + 4}" text-anchor="end" font-size="11" '
                     f'fill="#374151">{_label(tick)}</text>')
    shown_x = finite_xs if len(finite_xs) <= 12 else finite_xs[:: math.ceil(len(finite_xs) / 12)]
    for value in shown_x:
        parts.append(f'<text x="{px(value)}" y="{height - MARGIN["bottom"] + 16}" text-anchor="middle" '
                     f'font-size="11" fill="#374151">{_label(value)}</text>')
    parts.append(f'<text x="{MARGIN["left"] + plot_w / 2}" y="{height - 8}" text-anchor="middle" font-size="11" '
                 f'fill="#6b7280">{escape(x_label)}</text>')
    legend_x = MARGIN["left"] + 8 * len(title) + 24
    for index, (name, points) in enumerate(series.items()):
        color = COLORS[index % len(COLORS)]
        for i, band in enumerate(bands.get(name, [])):
            if band and i < len(xs) and _finite(xs[i]) and all(_finite(v) for v in band):
                parts.append(f'<line class="band" x1="{px(xs[i])}" x2="{px(xs[i])}" y1="{py(band[0])}" '
                             f'y2="{py(band[1])}" stroke="{color}" stroke-opacity="0.25" stroke-width="6"/>')
        segments, current = [], []
        drawn = 0
        for i, value in enumerate(points[:len(xs)]):
            if _finite(value) and _finite(xs[i]):
                current.append(f"{px(xs[i])},{py(float(value))}")
                drawn += 1
            elif current:
                segments.append(current)
                current = []
        if current:
            segments.append(current)
        parts.append(f'<g data-series="{escape(name)}" data-points="{drawn}">')
        for segment in segments:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2.5" points="{" ".join(segment)}"/>')
            for point in segment:
                cx, cy = point.split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="3.5" fill="{color}"/>')
        parts.append("</g>")
        # The legend runs along the title line, so it never hides a curve.
        parts.append(f'<rect x="{legend_x}" y="12" width="12" height="4" fill="{color}"/>'
                     f'<text x="{legend_x + 16}" y="18" font-size="11">{escape(name)}</text>')
        legend_x += 28 + 6.5 * len(name)
    parts.append("</svg>")
    return "".join(parts)

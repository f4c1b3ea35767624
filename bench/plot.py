"""A line chart as a self-contained SVG, for bench/'s growth curves (cost against a size on a
logarithmic x axis, the y axis from zero): no plotting library needed to draw a figure."""

from __future__ import annotations

import math
from html import escape

__all__ = ["line_chart"]

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 80, 20, 50, 110
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd")


def _nice_top(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value``."""
    power = 10 ** math.floor(math.log10(value)) if value > 0 else 1.0
    return next(power * m for m in (1, 2, 5, 10) if power * m >= value)


def line_chart(title: str, x_label: str, y_label: str,
               series: dict[str, list[tuple[float, float]]]) -> str:
    """An SVG of ``series`` (name -> (x, y) points, x > 0), x on a log scale."""
    xs = [x for points in series.values() for x, _ in points]
    y_top = _nice_top(max(y for points in series.values() for _, y in points) * 1.1)
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    span = hi - lo or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (math.log10(x) - lo) / span * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - y / y_top * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="24" text-anchor="middle" font-size="15">'
           f'{escape(title)}</text>']
    for i in range(6):  # y grid and ticks
        y = y_top * i / 5
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for x in sorted(set(xs)):  # x ticks at the measured sizes
        out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
                   'stroke="#eee"/>')
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">'
                   f'{x:,g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
               'stroke="#333"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{TOP + plot_h + 36}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text transform="translate(18 {TOP + plot_h / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    for n, (name, points) in enumerate(series.items()):
        colour = COLOURS[n % len(COLOURS)]
        dash = ' stroke-dasharray="6 4"' if n else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        if not n:
            out.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}"/>'
                       for x, y in points)
        legend_y = HEIGHT - 48 + n * 18
        out.append(f'<line x1="{LEFT}" x2="{LEFT + 30}" y1="{legend_y - 4}" '
                   f'y2="{legend_y - 4}" stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{LEFT + 38}" y="{legend_y}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"

"""Plots as inline SVG, drawn on the server: no chart library, nothing to load, readable by a
screen reader (``role="img"``, a title and a description; every page shows the numbers in
a table next to the plot).

All text goes through :func:`html.escape`; coordinates are numbers this module computes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["bar_chart", "count_ticks", "line_chart", "time_chart", "x_label"]

W, H = 640, 220
PAD_L, PAD_R, PAD_T, PAD_B = 48, 12, 12, 36
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea")
#: The width of one character of an 11 px label, at most (digits and dashes are narrower):
#: enough to keep a label inside the plot without measuring it.
_CHAR_W = 6.5


def _frame(title: str, desc: str, body: list[str], legend: Sequence[tuple[str, str]]) -> str:
    keys = "".join(
        f'<g transform="translate({PAD_L + 140 * i},{H - 8})"><rect width="10" height="10" y="-9" fill="{c}"/>'
        f'<text x="14" font-size="11">{escape(name)}</text></g>'
        for i, (name, c) in enumerate(legend)
    )
    return (
        f'<svg class="plot" viewBox="0 0 {W} {H}" role="img" aria-labelledby="t-{id(body)} d-{id(body)}" '
        f'xmlns="http://www.w3.org/2000/svg"><title id="t-{id(body)}">{escape(title)}</title>'
        f'<desc id="d-{id(body)}">{escape(desc)}</desc>' + "".join(body) + keys + "</svg>"
    )


def x_label(x: float, text: str) -> str:
    """An x-axis label centred on ``x``, unless that would cut it at the plot's edge: then it
    ends at the right edge (or starts at the left one)."""
    half = len(text) * _CHAR_W / 2
    anchor = "middle"
    if x + half > W - 2:
        x, anchor = W - 2, "end"
    elif x - half < 2:
        x, anchor = 2, "start"
    return (
        f'<text class="tick-x" x="{x:.1f}" y="{H - PAD_B + 14}" font-size="11" '
        f'text-anchor="{anchor}">{escape(text)}</text>'
    )


def count_ticks(v_max: float) -> list[int]:
    """Whole-number ticks from 0 for counts: a step of 1, 2 or 5 times a power of ten, at most
    five steps up to the first tick at or above ``v_max`` (never a fractional count)."""
    step = 1
    while math.ceil(v_max / step) > 5:
        for m in (2, 5 / 2, 2):  # 1 -> 2 -> 5 -> 10 -> 20 ...
            step = int(step * m)
            if math.ceil(v_max / step) <= 5:
                break
    top = max(1, math.ceil(v_max / step)) * step
    return list(range(0, top + 1, step))


def _count_label(v: float, top: float) -> str:
    """A count tick: whole, in k or M when the axis reaches ten thousand or ten million (the
    ticks are then multiples of 2,000 or 2,000,000, so still whole)."""
    if top >= 10_000_000:
        return f"{v / 1_000_000:g}M"
    if top >= 10_000:
        return f"{v / 1_000:g}k"
    return f"{int(v)}"


def _axes(ticks: Sequence[float], labels: Sequence[str], *, counts: bool = False) -> list[str]:
    out = []
    top = ticks[-1]
    for v in ticks:
        y = _y(v, top)
        text = _count_label(v, top) if counts else f"{v:g}"
        out.append(
            f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text class="tick-y" x="{PAD_L - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{text}</text>'
        )
    n = len(labels)
    step = max(1, (n + 7) // 8)  # at most about 8 labels on the x axis
    for i in range(0, n, step):
        out.append(x_label(_x(i, n), labels[i]))
    return out


def _x(i: int, n: int) -> float:
    plot_w = W - PAD_L - PAD_R
    return PAD_L + (plot_w * (i + 0.5) / n if n else 0)


def _y(v: float, y_max: float) -> float:
    plot_h = H - PAD_T - PAD_B
    return PAD_T + plot_h - (plot_h * v / y_max if y_max else 0)


def _nice(v: float) -> float:
    if v <= 0:
        return 1
    for m in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500):
        if v <= m:
            return m
    mag = 10 ** (len(str(int(v))) - 1)
    return float(((int(v) // mag) + 1) * mag)


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    y_max: float | None = None,
) -> str:
    """Lines over ``labels`` (one point per label; None leaves a gap)."""
    top = (
        y_max
        if y_max is not None
        else _nice(max((v for _, vs in series for v in vs if v is not None), default=1))
    )
    body = _axes([top * k / 4 for k in range(5)], labels)
    for (name, values), color in zip(series, COLORS, strict=False):
        runs: list[list[str]] = [[]]
        for i, v in enumerate(values):
            if v is None:
                runs.append([])
                continue
            x, y = _x(i, len(labels)), _y(v, top)
            runs[-1].append(f"{x:.1f},{y:.1f}")
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>{escape(name)} '
                f"{escape(labels[i])}: {v:g}</title></circle>"
            )
        for run in runs:
            if len(run) > 1:
                body.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(run)}"/>'
                )
    desc = "; ".join(
        f"{name}: "
        + ", ".join(f"{lab} {v:g}" for lab, v in zip(labels, values, strict=False) if v is not None)
        for name, values in series
    )
    return _frame(title, desc[:2000], body, [(n, c) for (n, _), c in zip(series, COLORS, strict=False)])


Stack = tuple[str, Sequence[tuple[str, Sequence[int]]]]


def bar_chart(title: str, labels: Sequence[str], bars: Sequence[Stack]) -> str:
    """Per label, one bar per ``(name, series)`` in ``bars``, side by side, each a stack of its
    series (pact outcomes in one bar, evaluations in the next: never one stack of both). A bar
    with no count at any label is left out (an agent with no evaluations gets no empty slot)."""
    colors = iter(COLORS)  # each series keeps its colour whichever bars are shown
    painted = [(bar, series, [next(colors, COLORS[-1]) for _ in series]) for bar, series in bars]
    shown = [(bar, series, cs) for bar, series, cs in painted if any(v for _, vs in series for v in vs)]
    n, per = len(labels), max(len(shown), 1)
    totals = [sum(vs[i] for _, vs in series) for _, series, _ in shown for i in range(n)]
    ticks = count_ticks(max(totals, default=1))
    top = ticks[-1]
    body = _axes(ticks, labels, counts=True)
    slot = (W - PAD_L - PAD_R) / max(n, 1)
    bar_w = max(2.0, slot * 0.8 / per)
    for i, lab in enumerate(labels):
        for b, (bar, series, palette) in enumerate(shown):
            left = _x(i, n) - bar_w * per / 2 + bar_w * b
            base = 0
            for (name, values), color in zip(series, palette, strict=True):
                v = values[i]
                if v:
                    y0, y1 = _y(base, top), _y(base + v, top)
                    body.append(
                        f'<rect data-bar="{escape(bar)}" x="{left + 0.5:.1f}" y="{y1:.1f}" '
                        f'width="{bar_w - 1:.1f}" height="{y0 - y1:.1f}" fill="{color}">'
                        f"<title>{escape(name)} {escape(lab)}: {v}</title></rect>"
                    )
                base += v
    desc = "; ".join(
        f"{lab}: " + ", ".join(f"{name} {vs[i]}" for _, series, _ in shown for name, vs in series)
        for i, lab in enumerate(labels)
    )
    legend = [(name, c) for _, series, cs in shown for (name, _), c in zip(series, cs, strict=True)]
    return _frame(title, desc[:2000], body, legend)


def time_chart(title: str, points: Sequence[tuple[int, float]], name: str) -> str:
    """One line over time: ``points`` are ``(microseconds since the epoch, value)``, placed
    in proportion to time (the x labels are clock times within two days, else dates)."""
    from datetime import UTC, datetime

    if len(points) < 2:
        return ""
    t0, t1 = points[0][0], points[-1][0]
    span = max(t1 - t0, 1)
    fmt = "%H:%M:%S" if span < 600_000_000 else "%H:%M" if span < 2 * 86_400_000_000 else "%Y-%m-%d"
    ticks = count_ticks(max(v for _, v in points))
    top = ticks[-1]
    plot_w = W - PAD_L - PAD_R - 20

    def x(t: int) -> float:
        return PAD_L + 10 + plot_w * (t - t0) / span

    body = _axes(ticks, [], counts=True)
    for k in range(5):
        t = t0 + span * k // 4
        body.append(x_label(x(t), datetime.fromtimestamp(t / 1e6, UTC).strftime(fmt)))
    pts = " ".join(f"{x(t):.1f},{_y(v, top):.1f}" for t, v in points)
    body.append(f'<polyline fill="none" stroke="{COLORS[0]}" stroke-width="2" points="{pts}"/>')
    first = datetime.fromtimestamp(t0 / 1e6, UTC).strftime("%Y-%m-%d %H:%M")
    last = datetime.fromtimestamp(t1 / 1e6, UTC).strftime("%Y-%m-%d %H:%M")
    desc = f"{name}: {points[0][1]:g} at {first} UTC to {points[-1][1]:g} at {last} UTC"
    return _frame(title, desc, body, [(name + " (UTC)", COLORS[0])])

"""Plots as inline SVG, drawn on the server: no chart library, nothing to load, readable by a
screen reader (``role="img"``, a title and a description; every page shows the numbers in
a table next to the plot).

All text goes through :func:`html.escape`; coordinates are numbers this module computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["bar_chart", "line_chart", "time_chart"]

W, H = 640, 220
PAD_L, PAD_R, PAD_T, PAD_B = 48, 12, 12, 36
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea")


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


def _axes(y_max: float, labels: Sequence[str]) -> list[str]:
    out = []
    plot_h = H - PAD_T - PAD_B
    for k in range(5):
        v = y_max * k / 4
        y = PAD_T + plot_h - plot_h * k / 4
        out.append(
            f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{v:g}</text>'
        )
    n = len(labels)
    step = max(1, (n + 7) // 8)  # at most about 8 labels on the x axis
    for i in range(0, n, step):
        x = _x(i, n)
        out.append(
            f'<text x="{x:.1f}" y="{H - PAD_B + 14}" font-size="11" text-anchor="middle">{escape(labels[i])}</text>'
        )
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
    body = _axes(top, labels)
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


def bar_chart(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[int]]]) -> str:
    """Stacked bars, one per label."""
    totals = [sum(vs[i] for _, vs in series) for i in range(len(labels))]
    top = _nice(max(totals, default=1))
    body = _axes(top, labels)
    n = len(labels)
    bar_w = max(2.0, (W - PAD_L - PAD_R) / max(n, 1) * 0.7)
    for i, lab in enumerate(labels):
        base = 0
        for (name, values), color in zip(series, COLORS, strict=False):
            v = values[i]
            if v:
                y0, y1 = _y(base, top), _y(base + v, top)
                body.append(
                    f'<rect x="{_x(i, n) - bar_w / 2:.1f}" y="{y1:.1f}" width="{bar_w:.1f}" '
                    f'height="{y0 - y1:.1f}" fill="{color}"><title>{escape(name)} {escape(lab)}: {v}</title></rect>'
                )
            base += v
    desc = "; ".join(
        f"{lab}: " + ", ".join(f"{name} {vs[i]}" for name, vs in series) for i, lab in enumerate(labels)
    )
    return _frame(title, desc[:2000], body, [(n, c) for (n, _), c in zip(series, COLORS, strict=False)])


def time_chart(title: str, points: Sequence[tuple[int, float]], name: str) -> str:
    """One line over time: ``points`` are ``(microseconds since the epoch, value)``, placed
    in proportion to time (the x labels are clock times within two days, else dates)."""
    from datetime import UTC, datetime

    if len(points) < 2:
        return ""
    t0, t1 = points[0][0], points[-1][0]
    span = max(t1 - t0, 1)
    fmt = "%H:%M:%S" if span < 600_000_000 else "%H:%M" if span < 2 * 86_400_000_000 else "%Y-%m-%d"
    top = _nice(max(v for _, v in points))
    plot_w = W - PAD_L - PAD_R - 20

    def x(t: int) -> float:
        return PAD_L + 10 + plot_w * (t - t0) / span

    body = _axes(top, [])
    for k in range(5):
        t = t0 + span * k // 4
        label = datetime.fromtimestamp(t / 1e6, UTC).strftime(fmt)
        body.append(
            f'<text x="{x(t):.1f}" y="{H - PAD_B + 14}" font-size="11" text-anchor="middle">{label}</text>'
        )
    pts = " ".join(f"{x(t):.1f},{_y(v, top):.1f}" for t, v in points)
    body.append(f'<polyline fill="none" stroke="{COLORS[0]}" stroke-width="2" points="{pts}"/>')
    first = datetime.fromtimestamp(t0 / 1e6, UTC).strftime("%Y-%m-%d %H:%M")
    last = datetime.fromtimestamp(t1 / 1e6, UTC).strftime("%Y-%m-%d %H:%M")
    desc = f"{name}: {points[0][1]:g} at {first} UTC to {points[-1][1]:g} at {last} UTC"
    return _frame(title, desc, body, [(name + " (UTC)", COLORS[0])])

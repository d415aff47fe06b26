"""Issue 44, finding 7: the web UI's server-drawn plots. Counts get whole-number ticks (a
weekly bar of 2 outcomes once had ticks at 0.5 and 1.5), the last x label of the log-size
plot stays inside the plot (it was centred on the right edge and cut), and a week's pact
outcomes and evaluations are two bars side by side (they were one stack of four series).
The browser test (tests/e2e/test_ui_browser.py) measures the same in chromium."""

from __future__ import annotations

import itertools
import re

from hypothesis import given
from hypothesis import strategies as st

from api.ui import plots

DAY_US = 86_400_000_000
START = 1_790_000_000_000_000


@given(st.integers(min_value=0, max_value=10**9))
def test_count_ticks_are_whole_numbers_up_to_the_largest_count(v_max: int) -> None:
    ticks = plots.count_ticks(v_max)
    assert ticks[0] == 0 and ticks[-1] >= max(v_max, 1)
    assert all(isinstance(t, int) for t in ticks)
    assert 2 <= len(ticks) <= 6
    step = ticks[1]
    assert all(b - a == step for a, b in itertools.pairwise(ticks))
    assert ticks[-1] - step < max(v_max, 1)  # no empty step above the data


def _ticks_y(svg: str) -> list[str]:
    return re.findall(r'<text class="tick-y"[^>]*>([^<]*)</text>', svg)


def _labels_x(svg: str) -> list[tuple[float, str, str]]:
    return [
        (float(x), anchor, text)
        for x, anchor, text in re.findall(
            r'<text class="tick-x" x="([\d.]+)"[^>]*text-anchor="(\w+)">([^<]*)</text>', svg
        )
    ]


def _inside(x: float, anchor: str, text: str) -> bool:
    width = len(text) * plots._CHAR_W
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left >= 0 and left + width <= plots.W


@given(
    st.integers(min_value=2, max_value=400),
    st.integers(min_value=1, max_value=200 * DAY_US),
    st.integers(min_value=2, max_value=3_000_000),
)
def test_the_log_size_plot_keeps_every_label_inside_and_whole_ticks(n: int, span: int, size: int) -> None:
    points = [(START + span * i // (n - 1), float(1 + (size - 1) * i // (n - 1))) for i in range(n)]
    svg = plots.time_chart("Log size over time", points, "entries")
    labels = _labels_x(svg)
    assert len(labels) == 5
    assert all(_inside(x, a, t) for x, a, t in labels), labels
    assert labels[-1][1] == "end" or _inside(*labels[-1])
    for tick in _ticks_y(svg):
        assert re.fullmatch(r"\d+[kM]?", tick), _ticks_y(svg)


def test_the_last_date_of_the_log_size_plot_ends_at_the_edge() -> None:
    """Regression: a date centred at x=618 of 640 ran past the plot's right edge."""
    svg = plots.time_chart("Log size", [(START, 1.0), (START + 60 * DAY_US, 351.0)], "entries")
    x, anchor, text = _labels_x(svg)[-1]
    assert text == "2026-11-20" and anchor == "end" and x <= plots.W
    assert _ticks_y(svg) == ["0", "100", "200", "300", "400"]


def test_weekly_outcomes_of_two_kinds_are_two_bars_with_whole_ticks() -> None:
    weeks = ["2026-10-05", "2026-10-12", "2026-10-19"]
    svg = plots.bar_chart(
        "Outcomes by week",
        weeks,
        [
            ("pact", [("fulfilled", [1, 2, 0]), ("violated", [1, 0, 0])]),
            ("eval", [("eval pass", [1, 0, 3]), ("eval fail", [0, 0, 0])]),
        ],
    )
    rects = re.findall(r'<rect data-bar="(\w+)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)
    assert {r[0] for r in rects} == {"pact", "eval"}
    spans = {(b, round(float(x))): float(x) + float(w) for b, x, w in rects}
    pact = [(x, end) for (b, x), end in spans.items() if b == "pact"]
    evals = [(x, end) for (b, x), end in spans.items() if b == "eval"]
    assert all(pe <= ex or ee <= px for px, pe in pact for ex, ee in evals)  # never one stack
    assert _ticks_y(svg) == ["0", "1", "2", "3"]
    # each series keeps its colour; an agent without evaluations gets no empty eval slot
    only_pacts = plots.bar_chart(
        "Outcomes by week",
        weeks,
        [("pact", [("fulfilled", [1, 2, 0]), ("violated", [1, 0, 0])]), ("eval", [("eval pass", [0, 0, 0])])],
    )
    assert 'data-bar="eval"' not in only_pacts and "eval pass" not in only_pacts
    assert 'fill="#2563eb"><title>fulfilled' in only_pacts
    assert 'fill="#16a34a"><title>eval pass' in svg

"""The benchmark report: figures, targets evaluated from ratios, the smoke check, the tables.

Standard library only and free of measurement code, so the unit tests exercise it without
running a benchmark (tests/unit/test_bench_harness.py).

* A :class:`Figure` is one measured number: a stable key, a label, a value and a unit. A
  figure that could not be measured keeps ``value=None`` and says why in ``reason``; nothing
  is ever filled in.
* A :class:`Target` is a bound on a ratio of two figures measured in the same run (for
  example in-process ingest over one core's Ed25519 verify rate), so the machine's speed and
  load cancel out. The issue states a few bounds as absolute numbers (p50 <= 5 ms, >= 3,000
  requests/s, >= 25,000 events/s); those are ratios to that constant (``reference=None``)
  and are marked absolute in the tables, since only they move with the machine.
* :func:`smoke_problems` is all that ``--smoke`` asserts: every planned figure is present
  and finite, and every section ran. No timing is asserted anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Figure",
    "Outcome",
    "Report",
    "SectionRun",
    "Target",
    "evaluate",
    "fmt_value",
    "smoke_problems",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One measured number (or, with ``value=None``, the reason it could not be measured)."""

    key: str
    label: str
    value: float | None
    unit: str
    section: str = ""
    note: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return isinstance(self.value, int | float) and math.isfinite(self.value)

    @classmethod
    def missing(cls, key: str, reason: str, *, section: str = "") -> Figure:
        return cls(key=key, label=key, value=None, unit="", section=section, reason=reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """``figure / (reference * scale)`` compared with ``bound`` (``op`` is ``>=`` or ``<=``).

    With ``reference=None`` the denominator is ``scale`` alone: a bound the issue states as
    an absolute number. With ``bound=None`` the ratio is a comparison only (no target).
    """

    key: str
    label: str
    figure: str
    reference: str | None
    bound: float | None
    op: str = ">="
    scale: float = 1.0
    text: str = ""

    def __post_init__(self) -> None:
        if self.op not in (">=", "<="):
            raise ValueError(f"target {self.key}: op must be >= or <=, not {self.op!r}")
        if self.scale <= 0:
            raise ValueError(f"target {self.key}: scale must be positive")

    @property
    def absolute(self) -> bool:
        return self.reference is None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """A target evaluated on one run's figures: the ratio and whether the bound holds."""

    target: Target
    ratio: float | None
    met: bool | None
    reason: str = ""

    @property
    def verdict(self) -> str:
        if self.met is None:
            return "n/a" if self.target.bound is None and self.ratio is not None else "not evaluated"
        return "met" if self.met else "MISSED"


def evaluate(target: Target, figures: Mapping[str, Figure]) -> Outcome:
    """The ratio of ``target``'s figures in this run, and met / missed against its bound."""
    num = figures.get(target.figure)
    if num is None or not num.ok:
        why = num.reason if num is not None and num.reason else "not measured in this run"
        return Outcome(target=target, ratio=None, met=None, reason=f"{target.figure}: {why}")
    assert num.value is not None
    if target.reference is None:
        denominator = target.scale
    else:
        ref = figures.get(target.reference)
        if ref is None or not ref.ok:
            why = ref.reason if ref is not None and ref.reason else "not measured in this run"
            return Outcome(target=target, ratio=None, met=None, reason=f"{target.reference}: {why}")
        assert ref.value is not None
        denominator = ref.value * target.scale
    if denominator == 0:
        return Outcome(target=target, ratio=None, met=None, reason="the reference figure is zero")
    ratio = num.value / denominator
    if target.bound is None:
        return Outcome(target=target, ratio=ratio, met=None)
    met = ratio >= target.bound if target.op == ">=" else ratio <= target.bound
    return Outcome(target=target, ratio=ratio, met=met)


@dataclass(frozen=True, slots=True, kw_only=True)
class SectionRun:
    """One section's child process: how long it ran, its peak RSS, and its error if it failed."""

    name: str
    seconds: float
    peak_rss_mib: float | None
    children_peak_rss_mib: float | None = None
    error: str = ""


def _dupes(keys: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for k in keys:
        if k in seen:
            out.append(k)
        seen.add(k)
    return out


@dataclass(slots=True)
class Report:
    """Everything one run measured, with the figures it planned and the targets it checks."""

    meta: dict[str, Any]
    expected: list[str]
    targets: list[Target]
    figures: list[Figure] = field(default_factory=list)
    sections: list[SectionRun] = field(default_factory=list)

    def by_key(self) -> dict[str, Figure]:
        return {f.key: f for f in self.figures}

    def outcomes(self) -> list[Outcome]:
        figures = self.by_key()
        return [evaluate(t, figures) for t in self.targets]

    def missing(self) -> list[str]:
        """Planned figures that are absent, None, NaN or infinite."""
        figures = self.by_key()
        return [k for k in self.expected if k not in figures or not figures[k].ok]

    def to_json(self) -> dict[str, Any]:
        outcomes = self.outcomes()
        return {
            "meta": self.meta,
            "figures": [{**asdict(f), "value": f.value if f.ok else None, "ok": f.ok} for f in self.figures],
            "targets": [
                {
                    **asdict(o.target),
                    "absolute": o.target.absolute,
                    "ratio": o.ratio,
                    "met": o.met,
                    "verdict": o.verdict,
                    "reason": o.reason,
                }
                for o in outcomes
            ],
            "sections": [asdict(s) for s in self.sections],
            "expected": self.expected,
            "missing": self.missing(),
            "summary": {
                "figures": len(self.figures),
                "targets_met": sum(1 for o in outcomes if o.met is True),
                "targets_missed": sum(1 for o in outcomes if o.met is False),
                "targets_not_evaluated": sum(
                    1 for o in outcomes if o.met is None and o.target.bound is not None
                ),
            },
        }

    # -- tables -----------------------------------------------------------------------

    def figure_rows(self) -> list[list[str]]:
        rows = []
        for f in self.figures:
            value = fmt_value(f.value) if f.ok else f"not measured: {f.reason or 'no value'}"
            rows.append([f.section, f.label, value, f.unit, f.key])
        return rows

    def target_rows(self) -> list[list[str]]:
        """label, as stated, ratio of (figure keys), ratio, bound, kind, verdict."""
        rows = []
        for o in self.outcomes():
            t = o.target
            if t.reference is None:
                of = f"{t.figure} / {t.scale:g}"
            else:
                of = f"{t.figure} / {t.reference}" + (f" x {t.scale:g}" if t.scale != 1 else "")
            verdict = "comparison" if t.bound is None and o.ratio is not None else o.verdict
            rows.append(
                [
                    t.label,
                    t.text or "-",
                    of,
                    "-" if o.ratio is None else f"{o.ratio:.3g}x",
                    "-" if t.bound is None else f"{t.op} {t.bound:g}x",
                    "absolute" if t.absolute else "ratio",
                    verdict + (f" ({o.reason})" if o.reason else ""),
                ]
            )
        return rows

    def section_rows(self) -> list[list[str]]:
        return [
            [
                s.name,
                f"{s.seconds:.1f}",
                "-" if s.peak_rss_mib is None else f"{s.peak_rss_mib:.0f}",
                "-" if s.children_peak_rss_mib is None else f"{s.children_peak_rss_mib:.0f}",
                s.error or "ok",
            ]
            for s in self.sections
        ]

    def table(self) -> str:
        """The human table (stdout): figures, targets (ratio against bound), sections."""
        figures = _text_table(["section", "figure", "value", "unit"], [r[:4] for r in self.figure_rows()])
        targets = _text_table(
            ["target", "as stated", "ratio", "bound", "verdict"],
            [[r[0], r[1], r[3], r[4], r[6]] for r in self.target_rows()],
        )
        sections = _text_table(
            ["section", "seconds", "peak RSS MiB", "children peak RSS MiB", "status"], self.section_rows()
        )
        return f"{figures}\n\n{targets}\n\n{sections}"

    def markdown(self) -> str:
        """The same tables as Markdown (docs/performance.md is regenerated from this)."""
        m = self.meta
        head = (
            f"Run of {m.get('date', '?')} at commit `{m.get('git_commit', '?')}`"
            f"{' (with uncommitted changes)' if m.get('git_dirty') else ''}, mode `{m.get('mode', '?')}`, "
            f"{m.get('cpu_count', '?')} CPUs ({m.get('cpu_model') or 'unknown model'}), "
            f"Python {m.get('python', '?')}, SQLite {m.get('sqlite', '?')}, "
            f"PostgreSQL {m.get('postgresql') or 'not used'}; {m.get('wall_seconds', 0):.0f} s in all."
        )
        targets = _md_table(
            ["target", "as stated", "ratio of", "ratio", "bound", "kind", "verdict"], self.target_rows()
        )
        figures = _md_table(["section", "figure", "value", "unit", "key"], self.figure_rows())
        sections = _md_table(
            ["section", "seconds", "peak RSS MiB", "children peak RSS MiB", "status"], self.section_rows()
        )
        return f"{head}\n\n#### Targets\n\n{targets}\n\n#### Figures\n\n{figures}\n\n#### Sections\n\n{sections}\n"


def smoke_problems(report: Report) -> list[str]:
    """What makes ``--smoke`` fail: a planned figure missing or not finite, a section that
    failed, a figure key produced twice. Timings are never asserted."""
    problems = [f"section {s.name} failed: {s.error}" for s in report.sections if s.error]
    figures = report.by_key()
    for key in report.missing():
        f = figures.get(key)
        problems.append(f"figure {key} missing" + (f": {f.reason}" if f is not None and f.reason else ""))
    problems += [f"figure {k} reported twice" for k in _dupes(f.key for f in report.figures)]
    return problems


def fmt_value(value: float | None) -> str:
    """Thousands separators from 100 up, three significant digits below."""
    if value is None or not math.isfinite(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)] if rows else []
    if not widths:
        widths = [len(h) for h in header]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(c: str) -> str:
        return str(c).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)

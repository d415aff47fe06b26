"""The distiller's instrumentation, read back: ``engram memory distill-report``.

Every ``memory.distilled`` entry records what its distillation cost and kept (its body's
``stats``: turns kept and dropped, input and output tokens, latency; see
specs/memory-events.md). This module reads those bodies from the log, one row per
distilled session, and sums them: what share of turns the distiller keeps, how many
memories a turn yields, the tokens spent and the latency. Entries distilled before the
instrumentation existed, and erased ones, have no figures and are counted apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DistillRow", "distill_rows", "summarize"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DistillRow:
    agent: str
    index: int
    session: str | None
    distiller: str | None
    entries: int
    stats: Mapping[str, Any] | None  # None: erased, or written before stats existed


def distill_rows(agent: str, bodies: Iterable[tuple[int, Mapping[str, Any] | None]]) -> list[DistillRow]:
    """One row per ``memory.distilled`` entry of ``agent`` (index, parsed body or None)."""
    rows = []
    for index, body in bodies:
        if body is None:
            rows.append(
                DistillRow(agent=agent, index=index, session=None, distiller=None, entries=0, stats=None)
            )
            continue
        d = body["distiller"]
        rows.append(
            DistillRow(
                agent=agent,
                index=index,
                session=body["session"],
                distiller=f"{d['name']}/{d['version']}",
                entries=len(body["entries"]),
                stats=body.get("stats"),
            )
        )
    return rows


def _pct(values: Sequence[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0


def summarize(rows: Sequence[DistillRow]) -> dict[str, Any]:
    """Totals over the rows that carry figures (``without_stats`` counts the others)."""
    measured = [r for r in rows if r.stats is not None]
    s = [r.stats for r in measured if r.stats is not None]
    turns = sum(x["turns"] for x in s)
    kept = sum(x["turns_kept"] for x in s)
    entries = sum(r.entries for r in measured)
    latencies = [x["latency_us"] for x in s]
    return {
        "sessions": len(rows),
        "without_stats": len(rows) - len(measured),
        "empty_sessions": sum(1 for r in measured if r.entries == 0),
        "turns": turns,
        "turns_kept": kept,
        "turns_dropped": turns - kept,
        "kept_share": round(kept / turns, 4) if turns else 0.0,
        "entries": entries,
        "entries_per_turn": round(entries / turns, 4) if turns else 0.0,
        "input_tokens": sum(x["input_tokens"] for x in s),
        "output_tokens": sum(x["output_tokens"] for x in s),
        "tokens_estimated": sum(1 for x in s if x["tokens"] == "estimated"),
        "latency_ms_p50": round(statistics.median(latencies) / 1000, 3) if latencies else 0.0,
        "latency_ms_p95": round(_pct(latencies, 0.95) / 1000, 3),
        "distillers": sorted({r.distiller for r in rows if r.distiller}),
    }

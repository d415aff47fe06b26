"""What the web UI asks of the service (api/ui): bounded pages of the log and frozen views.

Every page is a frozen value built here from the log's read side (:class:`LogReader`; the
SQL is the store's, ledger.storage.browse), so the pages never reach the store. Every read
is bounded whatever the log's size: pages are keyset pages (``before`` an index, ``after`` an
agent id) of at most :data:`MAX_PAGE` rows, each through an index the schema already has; a
filter no index serves (a kind across all agents) scans at most :data:`SCAN_WINDOW` leaves
per page and says where it stopped, so the next page goes on from there. Only entries inside
the latest checkpoint are shown: each then has an inclusion proof.

The owner's sessions record their sign-outs and spent tickets through
:func:`claim_ticket`, :func:`sign_out` and :func:`signed_out` (the only writes here, to the
service's own tables, never to the log).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from engram.protocol.errors import MalformedError
from ledger.log import Ledger
from ledger.oracle import agent_statement
from ledger.reader import LogReader
from ledger.storage.browse import AgentRow, EntryRow
from ledger.storage.store import StoredCheckpoint, StreamHead
from verifier.bundle import mean_quality
from verifier.jcs import parse_strict
from verifier.keys import KeyRecord

__all__ = [
    "MAX_PAGE",
    "SCAN_WINDOW",
    "SERIES_LIMIT",
    "AgentRow",
    "AgentSeries",
    "AgentView",
    "EntryPage",
    "EntryRow",
    "EntryView",
    "HomeView",
    "agent_series",
    "agent_view",
    "agents_page",
    "claim_ticket",
    "entries_page",
    "entry_row",
    "entry_view",
    "growth",
    "home_view",
    "sign_out",
    "signed_out",
]

MAX_PAGE = 100
#: Leaves one page may read to find entries of a kind across all agents (no index serves it).
SCAN_WINDOW = 20_000
#: Records per kind an agent page plots (the latest ones; the page says when it cut).
SERIES_LIMIT = 5_000


@dataclass(frozen=True, slots=True)
class EntryPage:
    rows: list[EntryRow]
    #: ``before`` of the next (older) page, or None when nothing older remains.
    next_before: int | None
    #: With a kind filter across all agents: the index the scan stopped at (it read
    #: :data:`SCAN_WINDOW` leaves without filling the page), else None.
    scanned_to: int | None
    size: int


def _bounded(limit: int, what: str) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise MalformedError(f"a page holds 1-{MAX_PAGE} {what}", check="request.limit")


def entries_page(
    reader: LogReader,
    size: int,
    *,
    agent: str | None = None,
    kind: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> EntryPage:
    """Entries of the tree of ``size`` with index < ``before`` (default: all), newest first,
    optionally of one agent and / or one kind: at most ``limit`` (1-:data:`MAX_PAGE`)."""
    _bounded(limit, "entries")
    top = size if before is None else max(0, min(before, size))
    scanned_to = None
    if agent is not None:
        rows = reader.store.entries_of_agent(agent, kind, top, limit)
    elif kind is None:
        rows = reader.store.entries_below(top, limit)
    else:
        floor = max(0, top - SCAN_WINDOW)
        rows = reader.store.entries_below(top, limit, kind=kind, floor=floor)
        if len(rows) < limit and floor > 0:
            scanned_to = floor
    if len(rows) == limit:
        next_before: int | None = rows[-1].index
    elif scanned_to is not None:
        next_before = scanned_to
    else:
        next_before = None
    if next_before == 0:
        next_before = None
    return EntryPage(rows=rows, next_before=next_before, scanned_to=scanned_to, size=size)


def entry_row(reader: LogReader, index: int) -> EntryRow | None:
    return reader.store.entry_row(index)


def agents_page(
    reader: LogReader, *, prefix: str = "", after: str | None = None, limit: int = 50
) -> tuple[list[AgentRow], str | None]:
    """Agents whose id starts with ``prefix``, in id order, after ``after``: a page and the
    ``after`` of the next one (None at the end). One range walk of the agent index."""
    _bounded(limit, "agents")
    found = reader.store.agent_rows(prefix, after, limit + 1)
    page = found[:limit]
    return page, (page[-1].agent if len(found) > limit else None)


def growth(reader: LogReader, size: int, points: int = 48) -> list[tuple[int, int]]:
    """The log's size over time: ``(timestamp_us, size)`` at up to ``points`` evenly spaced
    indices (the entry at index i made the log i + 1 long). ``points`` primary-key lookups."""
    if size <= 0:
        return []
    n = max(2, min(points, size))
    wanted = sorted({round(k * (size - 1) / (n - 1)) for k in range(n)})
    return [(ts, idx + 1) for idx, ts in reader.store.timestamps_at(wanted)]


@dataclass(frozen=True, slots=True, kw_only=True)
class HomeView:
    """The explorer's front page: the latest checkpoint with its cosignatures, the log's
    growth and its latest entries."""

    cp: StoredCheckpoint
    cosignatures: list[str]
    points: list[tuple[int, int]]
    latest: list[EntryRow]


def home_view(reader: LogReader, latest: int = 10) -> HomeView:
    cp, lines = reader.store.latest_cosigned()
    return HomeView(
        cp=cp,
        cosignatures=lines,
        points=growth(reader, cp.size),
        latest=entries_page(reader, cp.size, limit=latest).rows,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryView:
    """One entry's page: its row and leaf; its body only for its owner (``erased``: it has none)."""

    row: EntryRow
    leaf: bytes
    body: str | None
    erased: bool
    size: int


def entry_view(reader: LogReader, index: int, *, owner: str | None) -> EntryView | None:
    """Entry ``index`` of the latest checkpoint (None: not in it), with its body when
    ``owner`` is the entry's agent."""
    size = reader.size()
    row = reader.store.entry_row(index) if index < size else None
    leaf = None if row is None else reader.leaf(index)
    if row is None or leaf is None:
        return None
    sb = reader.body(index)
    body = sb[1].decode("utf-8") if sb is not None and owner == row.agent else None
    return EntryView(row=row, leaf=leaf, body=body, erased=sb is None, size=size)


@dataclass(frozen=True, slots=True)
class AgentSeries:
    """What an agent page plots: quality by month and outcomes by week."""

    #: ``(YYYY-MM, mean pact quality or None, mean eval score or None, records)``
    quality_by_month: list[tuple[str, float | None, float | None, int]] = field(default_factory=list)
    #: ``(week's Monday YYYY-MM-DD, fulfilled, violated, eval passes, eval fails)``
    outcomes_by_week: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    #: Records left out of the plots: older than the latest :data:`SERIES_LIMIT` per kind.
    cut: int = 0
    #: Records whose body was erased (counted nowhere but here).
    erased: int = 0
    #: Mean pact.outcome quality of the plotted records, as bundles state it (or None).
    mean_quality: str | None = None
    #: Records per kind the plots cover at most.
    plotted: int = SERIES_LIMIT


def _month(ts_us: int) -> str:
    return datetime.fromtimestamp(ts_us / 1e6, UTC).strftime("%Y-%m")


def _week(ts_us: int) -> str:
    d = datetime.fromtimestamp(ts_us / 1e6, UTC).date()
    return (d - timedelta(days=d.weekday())).isoformat()


def agent_series(reader: LogReader, agent: str, size: int) -> AgentSeries:
    """Quality by month (pact.outcome quality, eval.outcome score) and outcomes by week, by
    server time, from the agent's latest records in the tree of ``size``."""
    months: dict[str, list[list[int]]] = {}
    weeks: dict[str, list[int]] = {}
    cut = erased = 0
    qualities: list[int] = []
    for kind, field_name, ok, slot in (
        ("pact.outcome", "quality", "fulfilled", 0),
        ("eval.outcome", "score", "pass", 1),
    ):
        rows, left = reader.store.stream_tail(agent, kind, size, SERIES_LIMIT)
        cut += left
        for ts, raw in rows:
            if raw is None:
                erased += 1
                continue
            body = parse_strict(raw, max_bytes=1 << 20)
            m = months.setdefault(_month(ts), [[], []])
            m[slot].append(int(body[field_name]))
            if slot == 0:
                qualities.append(int(body[field_name]))
            w = weeks.setdefault(_week(ts), [0, 0, 0, 0])
            w[2 * slot + (0 if body["result"] == ok else 1)] += 1

    def mean(xs: Sequence[int]) -> float | None:
        return round(sum(xs) / len(xs), 2) if xs else None

    return AgentSeries(
        quality_by_month=[
            (k, mean(v[0]), mean(v[1]), len(v[0]) + len(v[1])) for k, v in sorted(months.items())
        ],
        outcomes_by_week=[(k, *v) for k, v in sorted(weeks.items())],  # type: ignore[misc]
        cut=cut,
        erased=erased,
        mean_quality=mean_quality(qualities) if qualities else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentView:
    """An agent's public page: its key history, the oracle's signed statement, its streams
    and its record series."""

    keys: list[KeyRecord]
    active: str | None
    oracle: dict[str, Any]
    oracle_note: str
    series: AgentSeries
    heads: list[StreamHead]
    size: int


def agent_view(ledger: Ledger, agent: str) -> AgentView | None:
    """The agent's page at the latest checkpoint, or None when the log has no such agent."""
    keys = ledger.agent_keys(agent)
    if not keys:
        return None
    answer = agent_statement(ledger, agent)
    return AgentView(
        keys=keys,
        active=ledger.active_key_id(agent),
        oracle=answer.payload,
        oracle_note=answer.note.decode("utf-8"),
        series=agent_series(ledger, agent, answer.size),
        heads=ledger.stream_heads(agent),
        size=answer.size,
    )


# -- the owner's sessions -------------------------------------------------------------------


def claim_ticket(
    reader: LogReader, agent: str, nonce: str, *, now_s: int, expires_s: int, grace_s: int
) -> bool:
    """Spend a UI ticket's nonce for ``agent`` (False: it was spent already)."""
    return reader.store.claim_nonce(f"ui:{agent}", nonce, now_s=now_s, expires_s=expires_s, grace_s=grace_s)


def sign_out(reader: LogReader, session: str, agent: str, *, now_s: int, expires_s: int) -> None:
    """Record that ``agent``'s UI session ``session`` was signed out (until ``expires_s``)."""
    reader.store.revoke_ui_session(session, agent, now_s=now_s, expires_s=expires_s)


def signed_out(reader: LogReader, session: str) -> bool:
    """Whether the UI session ``session`` was signed out."""
    return reader.store.ui_session_revoked(session)

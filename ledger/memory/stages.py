"""Recall's stages over one frozen :class:`~engram.protocol.queries.RecallQuery`.

The hub (:meth:`ledger.memory.recaller.Recaller.recall`) runs them in this order, each a
function of its own:

1. parse and bound: :meth:`RecallQuery.of`, or :func:`as_query` for the old text and
   keywords (a typed refusal naming ``request.*`` before anything is read);
2. gather candidates per signal (:func:`gather`): full text, embedding similarity, facets
   and the facts the query asks about, for memories and for records, bounded in the
   database or the vector index; past values only for a question about the past;
3. fuse (:func:`fuse_pools`): reciprocal rank fusion per pool, then one ranking of
   memories and records (ledger.memory.recall);
4. merge meshes (:func:`keep_shared`, :func:`merge_meshes`): the memories other agents
   share with this one through a Memory Mesh join the ranking, labelled;
5. apply time and supersession (:func:`to_lines`, :func:`with_earlier`): the rows as of
   now (age, validity), kept to the wanted scopes and to what the block shows, each current
   value saying what it replaced; mesh rows are labelled like the agent's own, so this
   stage follows the merge;
6. fit the budget (:func:`fit_budget`): HOT first, then up to ``limit`` rows, every line
   and heading counted in the tokenizer's tokens;
7. render (:func:`render_within`): the block, held to the budget as it is counted whole.

Stages 2 and 5 read the projection (through the arguments they are given); the others are
pure. HOT is not a stage's candidate: it is the agent's standing context (:func:`hot_lines`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engram.protocol.errors import EngramError, RejectedEventError
from engram.protocol.queries import RecallQuery, parse_query
from engram.protocol.schemas import CATEGORIES
from engram.protocol.scopes import GLOBAL, scope_of
from ledger.memory.block import (
    RecallLine,
    RecallResult,
    day_of,
    heading_tokens,
    line_tokens,
    recalled_item,
    section_of,
    to_recalled,
)
from ledger.memory.facts import TimeIntent, asked_fact_keys, fact_of, time_intent
from ledger.memory.projection import Projection
from ledger.memory.recall import FUSION, RRF_K, Fusion, fuse_signals, merge_pools
from ledger.memory.state import RECORD, Item, Session
from ledger.memory.terms import content_terms
from ledger.memory.tokens import count_tokens
from ledger.memory.vectors import VectorIndex
from ledger.mesh import Share

__all__ = [
    "CANDIDATES",
    "Pool",
    "Signals",
    "as_query",
    "fit_budget",
    "fuse_pools",
    "gather",
    "hot_lines",
    "keep_shared",
    "merge_meshes",
    "render_within",
    "to_lines",
    "with_earlier",
]

#: Candidates each signal brings per pool (full text, vectors, facets), at least 4 x limit.
CANDIDATES = 100

Scored = tuple[Item, float]
_T = TypeVar("_T", Item, tuple[Item, float])


# -- 1. parse and bound ---------------------------------------------------------------


def as_query(query: RecallQuery | str, **options: Any) -> RecallQuery:
    """The query value of a recall: ``query`` itself, or the old text and keywords parsed
    and bounded by :meth:`RecallQuery.of`. A query value carries its options: keywords
    beside it are refused (TypeError), never silently dropped. A value is bounded again as
    its ``of`` bounds it (one built by its bare constructor carries what no ``of`` takes)."""
    if isinstance(query, RecallQuery):
        given = sorted(k for k, v in options.items() if v != _DEFAULTS[k])
        if given:
            raise TypeError(f"a RecallQuery carries its own options; drop {', '.join(given)}")
        try:
            checked = parse_query(query.to_json())
        except (TypeError, ValueError) as e:  # a member of a type no JSON value has
            raise RejectedEventError("recall has a member of the wrong type", check="request.members") from e
        assert isinstance(checked, RecallQuery)  # its "ask" names recall
        return checked
    return RecallQuery.of(query, **options)


_DEFAULTS: Mapping[str, Any] = {
    f.name: f.default for f in dataclasses.fields(RecallQuery) if f.name != "text"
}


# -- 2. gather candidates per signal --------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """What each signal brought for one pool (memories, or records), best first."""

    fulltext: list[Item] = field(default_factory=list)
    similar: list[Scored] = field(default_factory=list)
    facets: list[Item] = field(default_factory=list)
    facts: list[Item] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Signals:
    """The candidates of one recall: per pool, or (an empty query) the newest items."""

    intent: TimeIntent
    memories: Pool = field(default_factory=Pool)
    records: Pool = field(default_factory=Pool)
    newest: list[Item] | None = None


def gather(
    projection: Projection, vectors: VectorIndex | None, agent: str, q: RecallQuery, notes: list[str]
) -> Signals:
    """Stage 2: the candidates each signal brings from the database or the vector index,
    bounded (:data:`CANDIDATES`, at least 4 x limit). Past values (replaced by a newer
    memory) are candidates only for a question about the past; corrections and confirmed
    duplicates never. What degraded (the embedder is down) goes to ``notes``."""
    tiers = ["WARM", "COLD"] if q.include_cold else ["WARM"]
    intent = time_intent(q.text)
    if not q.text.strip():
        newest = projection.newest(agent, tiers=tiers, statuses=["active"], limit=q.limit)
        return Signals(intent=intent, newest=newest)
    statuses = ["active", "archived", *(["superseded"] if intent.mode == "then" else [])]
    n = max(CANDIDATES, 4 * q.limit)
    words = content_terms(q.text)
    mem_similar, rec_similar = _similar(projection, vectors, agent, q.text, n, tiers, statuses, notes)
    memories = records = Pool()
    if q.sources != "records":
        categories = [c for c in CATEGORIES if c.casefold() in words or c.casefold() + "s" in words]
        memories = Pool(
            fulltext=past_values_only(
                projection.search_fulltext(agent, q.text, tiers=tiers, statuses=statuses, limit=n)
            ),
            similar=past_values_only(mem_similar),
            facets=past_values_only(
                projection.search_facets(
                    agent, categories=categories, words=words, tiers=tiers, statuses=statuses, limit=n
                )
            ),
            # the value of a fact the query asks about, wherever it is (HOT too)
            facts=past_values_only(
                projection.search_facts(
                    agent, asked_fact_keys(q.text), tiers=["HOT", *tiers], statuses=statuses, limit=n
                )
            ),
        )
    if q.sources != "memories":
        records = Pool(
            fulltext=projection.search_fulltext(agent, q.text, tiers=[RECORD], statuses=["active"], limit=n),
            similar=rec_similar,
            facets=projection.search_facets(
                agent, categories=[], words=words, tiers=[RECORD], statuses=["active"], limit=n
            ),
        )
    return Signals(intent=intent, memories=memories, records=records)


def _similar(
    projection: Projection,
    vectors: VectorIndex | None,
    agent: str,
    text: str,
    n: int,
    tiers: list[str],
    statuses: list[str],
    notes: list[str],
) -> tuple[list[Scored], list[Scored]]:
    """The embedding neighbours of ``text``: (memories, records), each with its similarity."""
    if vectors is None:
        return [], []
    found: tuple[list[Scored], list[Scored]] = ([], [])
    try:
        mem_hits, rec_hits = vectors.search(agent, text, n)
    except EngramError as e:
        notes.append(f"semantic ranking unavailable ({e}); ranked by words and facets only")
    else:
        mems = projection.items_by_refs(agent, [h.ref for h in mem_hits], tiers=tiers, statuses=statuses)
        recs = projection.items_by_refs(agent, [h.ref for h in rec_hits], tiers=[RECORD], statuses=["active"])
        found = (
            [(mems[h.ref], h.similarity) for h in mem_hits if h.ref in mems],
            [(recs[h.ref], h.similarity) for h in rec_hits if h.ref in recs],
        )
    if vectors.last_error is not None:
        notes.append(f"some items are not embedded yet ({vectors.last_error})")
    return found


def past_values_only(found: Sequence[_T]) -> list[_T]:
    """Superseded candidates that are past values (a ``memory.replaced`` named a newer one);
    corrections and confirmed duplicates are never recalled."""
    out = []
    for x in found:
        it = x[0] if isinstance(x, tuple) else x
        if it.status != "superseded" or it.valid_until_us is not None:
            out.append(x)
    return out


# -- 3. fuse --------------------------------------------------------------------------


def fuse_pools(signals: Signals, q: RecallQuery, fusion: Fusion = FUSION) -> list[Scored]:
    """Stage 3: one ranking, best first: each pool's signals fused (reciprocal rank
    fusion with ``fusion``'s weights), then memories and records merged (archived memories
    and records weighted; a record a memory above it cites is left out). An empty query
    lists the newest first."""
    if signals.newest is not None:
        return [(it, 1 / (RRF_K + r)) for r, it in enumerate(signals.newest, start=1)]
    m, r = signals.memories, signals.records
    memories = fuse_signals(
        q.text,
        fulltext=m.fulltext,
        similar=m.similar,
        facets=m.facets,
        facts=m.facts,
        intent=signals.intent,
        fusion=fusion,
    )
    records = fuse_signals(q.text, fulltext=r.fulltext, similar=r.similar, facets=r.facets, fusion=fusion)
    return merge_pools(memories, records, include_archived=q.include_archived)


# -- 4. merge meshes ------------------------------------------------------------------


def keep_shared(share: Share, ranked: Sequence[Scored], mesh_of: dict[tuple[str, str], str]) -> list[Scored]:
    """Of an author's own ranking, what ``share`` lets through: its WARM active memories of
    the categories it shares and the reader reads, from the index each began flowing
    (ledger.mesh). A memory shared through two meshes comes once (``mesh_of`` records the
    mesh each came through)."""
    out: list[Scored] = []
    for it, score in ranked:
        since = share.since.get(it.category)
        if (it.agent, it.ref) in mesh_of:
            continue
        if it.tier == "WARM" and it.status == "active" and since is not None and it.index >= since:
            mesh_of[(it.agent, it.ref)] = share.mesh
            out.append((it, score))
    return out


def merge_meshes(own: Sequence[Scored], shared: Sequence[Scored]) -> list[Scored]:
    """Stage 4: the agent's ranking and what its meshes share, one ranking by score."""
    if not shared:
        return list(own)
    return sorted([*own, *shared], key=lambda cs: (-cs[1], -cs[0].created_us, cs[0].agent, cs[0].ref))


# -- 5. apply time and supersession ---------------------------------------------------


def hot_lines(
    snapshot: Session | None, hot_items: Sequence[Item], now: int, wanted: frozenset[str] | None
) -> list[RecallLine]:
    """HOT, the standing context: inside a session its snapshot taken at the open (its bytes
    do not change mid-session, so prompt caches hold), else the HOT items now; kept to the
    wanted scopes."""
    if snapshot is not None:
        hot = [
            to_recalled(
                *(h["index"], h["ref"], "HOT", h["category"], h["content"], h["tags"], 0, h["created_us"]),
                snapshot.opened_us,
                0.0,
            )
            for h in snapshot.hot_snapshot
        ]
    else:
        hot = [recalled_item(i, now, 0.0) for i in hot_items]
    return [h for h in hot if wanted is None or scope_of(h.tags) in wanted]


def to_lines(
    scored: Sequence[Scored],
    *,
    agent: str,
    now: int,
    query: str,
    wanted: frozenset[str] | None,
    mesh_of: Mapping[tuple[str, str], str],
) -> list[RecallLine]:
    """Stage 5a: the ranked rows as of ``now`` (age; validity: since when, until when),
    kept to the wanted scopes (records are global) and to what the block shows (a
    superseded memory only as a past value); another agent's memory labelled with its
    author and mesh."""
    out: list[RecallLine] = []
    for it, score in scored:
        if wanted is not None and (GLOBAL if it.tier == RECORD else scope_of(it.tags)) not in wanted:
            continue
        r = recalled_item(it, now, score)
        if it.agent != agent:  # another agent's memory, shared through a mesh
            r = dataclasses.replace(r, author=it.agent, mesh=mesh_of.get((it.agent, it.ref)))
        if section_of(r, query) is not None:
            out.append(r)
    return out


def with_earlier(lines: Sequence[RecallLine], olds: Mapping[str, Item]) -> list[RecallLine]:
    """Stage 5b: each current value that replaced another says what that was ("earlier:
    nurse, until 2024-03-05"); ``olds`` are the replaced memories by ref."""
    out = []
    for r in lines:
        old = olds.get(r.replaces or "")
        if old is not None and old.replaced_by == r.ref:
            fact = fact_of(old.content)
            what = fact.value if fact is not None else old.content[:80]
            until = old.valid_until_us or r.valid_from_us
            r = dataclasses.replace(r, earlier=f"{what}, until {day_of(until)} (ref {old.ref})")
        out.append(r)
    return out


# -- 6. fit the budget ----------------------------------------------------------------


def fit_budget(
    lines: Sequence[RecallLine], *, query: str, limit: int, budget: int, used: int
) -> tuple[list[RecallLine], int]:
    """Stage 6: up to ``limit`` rows, best first, whose lines (and their sections' headings)
    fit ``budget`` after the ``used`` tokens (the frame and HOT); a long row does not crowd
    out shorter ones that still fit. Returns the rows and the tokens used in all."""
    kept: list[RecallLine] = []
    total = used
    opened: set[str] = set()
    for r in lines:
        if len(kept) >= limit:
            break
        heading = section_of(r, query) or ""
        cost = line_tokens(r) + (0 if heading in opened else heading_tokens(heading))
        if total + cost > budget:
            continue
        kept.append(r)
        opened.add(heading)
        total += cost
    return kept, total


# -- 7. render ------------------------------------------------------------------------


def render_within(result: RecallResult, budget: int) -> RecallResult:
    """Stage 7: the block held to the budget as the encoder counts it whole (a token may
    span a line break; the lines were counted one by one): the lowest-ranked rows go first."""
    fitted = result
    while fitted.ranked and count_tokens(fitted.render()) > budget:
        fitted = dataclasses.replace(fitted, ranked=fitted.ranked[:-1])
    if fitted.ranked != result.ranked:
        fitted = dataclasses.replace(fitted, total_tokens=count_tokens(fitted.render()))
    return fitted

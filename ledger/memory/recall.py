"""Recall: HOT first within its budget, then memories and raw records by rank fusion.

* HOT is not searched: it is the agent's standing context. Inside a session it is the
  snapshot taken when the session opened, so its bytes do not change mid-session and
  prompt caches hold.
* WARM (and COLD with ``include_cold``) memories, and the **records tier** (the agent's
  logged session turns, verbatim), are ranked by reciprocal rank fusion,
  ``score = sum(w / (k + rank))`` with k = 60 and each ranking's weight ``w``
  (:class:`Fusion`; issue 42 cross-validated them on LongMemEval-S), over up to four
  rankings, each computed in
  the database or the vector index and bounded (recall never loads every item):
  1. structured envelope match: the query names the item's category, one of its tags (a
     distilled memory is tagged with its subject), its session, or one of its provenance
     references; among equal matches, content relevance orders, never time;
  2. full-text rank over the query's content words (SQLite FTS5 bm25 / PostgreSQL ts_rank);
  3. embedding similarity (the configured :class:`~ledger.memory.embed.Embedder`);
  4. only when the query asks about recency ("latest", "now", ...): newest first.
  Relevance first: an item must match the query by (1), (2), or a similarity of at least
  :data:`MIN_SIMILARITY` in (3) to be returned (an empty query lists newest first);
  otherwise time only breaks ties, and uses never count.
* Decay never hides evidence: archived memories stay candidates, ranked at
  :data:`ARCHIVED_WEIGHT` of their score (``include_archived``: at full score), and marked.
* A record is left out when a memory ranked above it cites its turn (the memory covers it),
  or when a record ranked above it says the same words (a reply said again is shown once).
* Each result carries its log index, age in days and the command that proves it.

The rows and the block they render to live in :mod:`ledger.memory.block` (re-exported
here); the stages that run a recall over a :class:`~engram.protocol.queries.RecallQuery`
in :mod:`ledger.memory.stages`, their hub in :mod:`ledger.memory.recaller`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from engram.protocol.schemas import CATEGORIES
from ledger.memory.block import (
    DAY_US,
    RecallLine,
    RecallResult,
    block_overhead,
    day_of,
    heading_tokens,
    hot_within_budget,
    line_tokens,
    recalled_item,
    render,
    render_hot,
    section_of,
    to_recalled,
)
from ledger.memory.facts import TimeIntent, dates_in
from ledger.memory.state import Item, ref_key
from ledger.memory.terms import STOP_WORDS, asks_for_recency

__all__ = [
    "ARCHIVED_WEIGHT",
    "DAY_US",
    "FUSION",
    "MIN_SIMILARITY",
    "RRF_K",
    "Fusion",
    "RecallLine",
    "RecallResult",
    "Recalled",
    "block_overhead",
    "day_of",
    "envelope_matches",
    "fuse",
    "fuse_signals",
    "heading_tokens",
    "hot_within_budget",
    "line_tokens",
    "merge_pools",
    "recalled_item",
    "render",
    "render_hot",
    "section_of",
    "to_recalled",
]

#: The old name of :class:`RecallLine` (one class is named ``Recalled``: the answer in
#: engram.protocol.answers); kept so that old imports keep working.
Recalled = RecallLine

RRF_K = 60
#: An archived memory competes at this share of its fused score (1.0 with include_archived).
ARCHIVED_WEIGHT = 0.8
#: A record (raw turn) competes at this share of its fused score.
RECORD_WEIGHT = 0.7
#: Weight of the embedding ranking in the fusion. Issue 42's cross-validation on LongMemEval-S
#: (``bench/bench_fusion_cv.py``, docs/benchmarks.md) chose 3-6x the full text's weight in every
#: fold, but held out it scored the same as 1 and it cost the synthetic benchmark 8 points of
#: hit@10: the weights stay 1.
VECTOR_WEIGHT = 1.0
#: Weight of the full-text ranking (the same cross-validation).
FULLTEXT_WEIGHT = 1.0
#: Weight of the fact ranking: a memory that states the very fact the query asks about
#: (its subject and attribute) is a structured answer, as strong as three signals agreeing.
FACT_WEIGHT = 3.0
#: Cosine similarity from which an embedding neighbour counts as a match on its own.
MIN_SIMILARITY = 0.25


@dataclass(frozen=True, slots=True, kw_only=True)
class Fusion:
    """The weights of recall's rank fusion: each signal's weight, the fusion's ``k`` and the
    similarity from which an embedding neighbour matches on its own. :data:`FUSION` is the
    default; ``bench/bench_fusion_cv.py`` chooses it on the development set by k-fold
    cross-validation (docs/benchmarks.md), over all question types at once: no weight is
    keyed to a kind of question."""

    envelope: float = 1.0
    fulltext: float = FULLTEXT_WEIGHT
    similar: float = VECTOR_WEIGHT
    facts: float = FACT_WEIGHT
    time: float = 1.0
    k: int = RRF_K
    min_similarity: float = MIN_SIMILARITY


#: The fusion recall uses.
FUSION = Fusion()


def envelope_matches(item: Item, query: str) -> int:
    """How many structured facets of the item the query names (stop words never count)."""
    words = set(re.findall(r"[#]?[a-z0-9][a-z0-9_.-]*", query.casefold()))
    bare = {w.lstrip("#") for w in words} - STOP_WORDS
    score = 0
    if item.category.casefold() in bare or (
        item.category in CATEGORIES and item.category.casefold() + "s" in bare
    ):
        score += 1
    score += sum(1 for t in item.tags if t in bare)
    if item.session and item.session.casefold() in bare:
        score += 1
    score += sum(1 for p in item.provenance if p["source_ref"].casefold() in bare)
    return score


def fuse_signals(
    query: str,
    *,
    fulltext: Sequence[Item],
    similar: Sequence[tuple[Item, float]] = (),
    facets: Sequence[Item] = (),
    facts: Sequence[Item] = (),
    intent: TimeIntent | None = None,
    fusion: Fusion = FUSION,
) -> list[tuple[Item, float]]:
    """Relevance first: reciprocal rank fusion of envelope match, full-text rank and
    embedding similarity over the candidates the three signals brought (best first each).

    Only items that really match are returned: a facet the query names, a content word, or
    an embedding similarity of at least :data:`MIN_SIMILARITY`. Time is a tie-breaker (newer
    first), and a ranking of its own only when the query asks about recency ("latest",
    "now", "last time"); it is the item's creation time, so recalling an item (a use) never
    moves it up the relevance ranking.

    Time: ``facts`` are the memories that state a fact the query asks about
    (subject and attribute, ledger.memory.facts), a ranking of their own: for the current
    value (``intent`` now) the value that replaced another first, then the most recently
    true; for a question about the past (``then``) what was true in the period it names (or,
    without one, the earlier values first). A ``then`` question also ranks every candidate by
    whether it was true in the period; a ``when`` question ranks memories that state a date
    first. Memories replaced by a newer value are candidates only for ``then`` questions
    (the caller's statuses).
    """
    intent = intent or TimeIntent("now")
    cands: dict[str, Item] = {}
    for it in [*fulltext, *(i for i, _ in similar), *facets, *facts]:
        cands.setdefault(it.ref, it)
    fts_rank = _rank_of(fulltext)
    vec_rank = _rank_of([it for it, _ in similar])
    content_rank = {ref: min(fts_rank.get(ref, 1 << 30), vec_rank.get(ref, 1 << 30)) for ref in cands}
    fact_refs = {it.ref for it in facts}
    env_rank = _envelope_rank(query, cands.values(), content_rank, fact_refs)
    sure = fusion.min_similarity
    matches = {*env_rank, *fts_rank, *fact_refs, *(it.ref for it, sim in similar if sim >= sure)}
    matched = [c for c in cands.values() if c.ref in matches]
    # Each signal is a ranking with its weight: a new signal is one more row here.
    rankings = [(env_rank, fusion.envelope), (fts_rank, fusion.fulltext), (vec_rank, fusion.similar)]
    if facts:
        rankings.append((_fact_rank(facts, intent), fusion.facts))
    timed = _time_rank(query, matched, intent, content_rank)
    if timed is not None:
        rankings.append((timed, fusion.time))
    k = fusion.k
    out = [(c, sum(w / (k + rank[c.ref]) for rank, w in rankings if c.ref in rank)) for c in matched]
    out.sort(key=lambda cs: (-cs[1], -cs[0].created_us, ref_key(cs[0].ref)))
    return out


def _rank_of(items: Sequence[Item]) -> dict[str, int]:
    """Ref -> its place (1 is best) in a signal's own order."""
    return {it.ref: r for r, it in enumerate(items, start=1)}


def _envelope_rank(
    query: str, cands: Iterable[Item], content_rank: Mapping[str, int], fact_refs: Collection[str]
) -> dict[str, int]:
    """The structured envelope ranking: the candidates by how many facets the query names
    (a memory that states the fact asked about names two: subject and attribute), content
    relevance among equals, never time first. Candidates naming none are not ranked."""
    named = [(envelope_matches(c, query) + 2 * (c.ref in fact_refs), c) for c in cands]
    env = sorted(
        (mc for mc in named if mc[0] > 0),
        key=lambda mc: (-mc[0], content_rank[mc[1].ref], -mc[1].created_us, ref_key(mc[1].ref)),
    )
    return {c.ref: r for r, (_, c) in enumerate(env, start=1)}


def _time_rank(
    query: str, matched: Sequence[Item], intent: TimeIntent, content_rank: Mapping[str, int]
) -> dict[str, int] | None:
    """The ranking time adds, if the query asks about time: for ``then`` what was true in
    the period (else values since replaced) first; for ``when`` the memories that state a
    date; for recency ("latest", "now") the newest. None: time only breaks ties."""
    if intent.mode == "then":
        then = sorted(matched, key=lambda c: (not _true_in(c, intent), content_rank[c.ref], ref_key(c.ref)))
        return {c.ref: r for r, c in enumerate(then, start=1) if _true_in(c, intent)}
    if intent.mode == "when":
        return _rank_of(
            [c for c in sorted(matched, key=lambda c: content_rank[c.ref]) if dates_in(c.content)]
        )
    if asks_for_recency(query):
        return _rank_of(sorted(matched, key=lambda c: (-c.since_us, -c.created_us, ref_key(c.ref))))
    return None


def _true_in(it: Item, intent: TimeIntent) -> bool:
    """Whether the memory's fact was true in the period a ``then`` question names (without
    a period: whether a newer value replaced it, i.e. it is a past value)."""
    if intent.start_us is None or intent.end_us is None:
        return it.valid_until_us is not None
    until = it.valid_until_us if it.valid_until_us is not None else 1 << 62
    if it.since_us < intent.end_us and until > intent.start_us:
        return True
    # A memory that says when its event happened ("painted it last year (2022)") was about then.
    return any(intent.start_us <= us < intent.end_us for us in dates_in(it.content))


def _fact_rank(facts: Sequence[Item], intent: TimeIntent) -> dict[str, int]:
    if intent.mode == "then":
        order = sorted(facts, key=lambda c: (not _true_in(c, intent), c.since_us, ref_key(c.ref)))
    else:
        order = sorted(
            facts,
            key=lambda c: (c.valid_until_us is not None, c.replaces is None, -c.since_us, ref_key(c.ref)),
        )
    return {c.ref: r for r, c in enumerate(order, start=1)}


def fuse(candidates: Sequence[Item], fulltext_refs: Sequence[str], query: str) -> list[tuple[Item, float]]:
    """:func:`fuse_signals` over a known candidate set and the full-text order of its refs
    (no embeddings). An empty query lists the candidates newest first."""
    if not query.strip():
        newest = sorted(candidates, key=lambda c: (-c.created_us, ref_key(c.ref)))
        return [(c, 1 / (RRF_K + r)) for r, c in enumerate(newest, start=1)]
    by_ref = {c.ref: c for c in candidates}
    fts = [by_ref[r] for r in fulltext_refs if r in by_ref]
    named = [c for c in candidates if envelope_matches(c, query) > 0]
    return fuse_signals(query, fulltext=fts, facets=named)


def merge_pools(
    memories: Sequence[tuple[Item, float]],
    records: Sequence[tuple[Item, float]],
    *,
    include_archived: bool,
) -> list[tuple[Item, float]]:
    """One ranking of memories and records: archived memories and records weighted (see the
    module doc); a record whose turn a memory ranked above it cites is left out, and so is a
    record whose words a record ranked above it already says."""
    weighted = [
        (it, score * (ARCHIVED_WEIGHT if it.status == "archived" and not include_archived else 1.0))
        for it, score in memories
    ]
    # A turn's best citing memory score: the record is left out only below a memory that
    # cites it (an archived memory far down the list does not hide the turn it came from).
    cited: dict[str, float] = {}
    for it, score in weighted:
        for p in it.provenance:
            if p.get("source_type") in ("turn", "log"):
                cited[p["source_ref"]] = max(cited.get(p["source_ref"], 0.0), score)
    # A turn said again word for word (a repeated reply) is one record: the best ranked of
    # its copies stands for it, so RECORDS never shows the same words twice.
    said: set[str] = set()
    for it, score in sorted(records, key=lambda cs: (-cs[1], -cs[0].created_us, ref_key(cs[0].ref))):
        words = " ".join(it.content.casefold().split())
        if words in said or cited.get(str(it.index), -1.0) >= score * RECORD_WEIGHT:
            continue
        said.add(words)
        weighted.append((it, score * RECORD_WEIGHT))
    weighted.sort(key=lambda cs: (-cs[1], -cs[0].created_us, ref_key(cs[0].ref)))
    return weighted

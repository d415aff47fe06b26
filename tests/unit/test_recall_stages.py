"""Each stage of recall on its own (ledger.memory.stages), over hand-built candidates.

The stages run in the order the hub lists them (ledger.memory.recaller): parse and bound,
gather per signal, fuse, merge meshes, time and supersession, fit the budget, render. The
end-to-end behaviour is held by the contract recall tests on both backends; these pin what
each stage does alone (issue 41: recall as numbered stages, each with its own test).
"""

from __future__ import annotations

from typing import Any

import pytest

from engram.protocol.errors import RejectedEventError, StorageError
from engram.protocol.queries import RecallQuery
from ledger.memory.block import RecallLine, RecallResult, recalled_item
from ledger.memory.facts import TimeIntent
from ledger.memory.stages import (
    Pool,
    Signals,
    as_query,
    fit_budget,
    fuse_pools,
    gather,
    hot_lines,
    keep_shared,
    merge_meshes,
    render_within,
    to_lines,
    with_earlier,
)
from ledger.memory.state import RECORD, Item, Session
from ledger.memory.tokens import count_tokens
from ledger.mesh import Share

DAY = 86_400_000_000


def item(ref: str, content: str = "x", **kw: Any) -> Item:
    index = int(ref.split(".")[0])
    base: dict[str, Any] = {
        "agent": "ada",
        "ref": ref,
        "index": index,
        "source_kind": "memory.written",
        "tier": "WARM",
        "status": "active",
        "category": "LEARNING",
        "content": content,
        "created_us": index * DAY,
    }
    return Item(**(base | kw))


def line(ref: str, content: str = "x", score: float = 0.5, **kw: Any) -> RecallLine:
    return recalled_item(item(ref, content, **kw), 100 * DAY, score)


# -- 1. parse and bound --------------------------------------------------------------


def test_the_old_text_and_keywords_are_parsed_into_one_bounded_query() -> None:
    q = as_query("deploy days", limit=3, scopes=["project:x"], meshes=["ada/m1"])
    assert q == RecallQuery(text="deploy days", limit=3, scopes=frozenset({"project:x"}), meshes=("ada/m1",))
    with pytest.raises(RejectedEventError) as e:
        as_query("deploy", limit=0)
    assert e.value.check == "request.limit"


def test_a_query_value_passes_through_and_refuses_keywords_beside_it() -> None:
    q = RecallQuery.of("deploy", include_cold=True)
    assert as_query(q) == q  # the same value, bounded again (a bare constructor bounds nothing)
    assert as_query(q, limit=10, sources="all") == q  # the defaults are no options
    with pytest.raises(RejectedEventError) as e:
        as_query(RecallQuery(text="deploy", limit=0))
    assert e.value.check == "request.limit"
    with pytest.raises(TypeError, match="include_archived"):
        as_query(q, include_archived=True)


# -- 2. gather candidates per signal --------------------------------------------------


class Projection:
    """Answers each search from fixed candidates and records what it was asked."""

    def __init__(self, found: list[Item]) -> None:
        self.found = found
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def _answer(self, name: str, **kw: Any) -> list[Item]:
        self.asked.append((name, kw))
        return [it for it in self.found if it.tier in kw["tiers"] and it.status in kw["statuses"]]

    def search_fulltext(self, agent: str, query: str, **kw: Any) -> list[Item]:
        return self._answer("fulltext", **kw)

    def search_facets(self, agent: str, **kw: Any) -> list[Item]:
        return self._answer("facets", **kw)

    def search_facts(self, agent: str, keys: Any, **kw: Any) -> list[Item]:
        return self._answer("facts", **kw)

    def newest(self, agent: str, **kw: Any) -> list[Item]:
        return self._answer("newest", **kw)


class DownVectors:
    last_error: str | None = None

    def search(self, agent: str, query: str, k: int) -> Any:
        raise StorageError("the embedder endpoint refused")


def test_past_values_are_candidates_only_for_a_question_about_the_past() -> None:
    past = item("3.0", "Ada works as a nurse", status="superseded", valid_until_us=5 * DAY)
    fixed = item("4.0", "Ada works as a nurze", status="superseded")  # a correction: never recalled
    now = item("5.0", "Ada works as a doctor")
    proj = Projection([past, fixed, now])
    found = gather(proj, None, "ada", RecallQuery.of("what is Ada's job"), [])  # type: ignore[arg-type]
    assert [it.ref for it in found.memories.fulltext] == ["5.0"]
    found = gather(proj, None, "ada", RecallQuery.of("what was Ada's job before"), [])  # type: ignore[arg-type]
    assert found.intent.mode == "then"
    assert [it.ref for it in found.memories.fulltext] == ["3.0", "5.0"]


def test_gather_asks_only_the_pools_the_query_reads_and_notes_a_down_embedder() -> None:
    proj = Projection([item("1.0", "deploys on tuesday"), item("2.0", "deploys", tier=RECORD)])
    notes: list[str] = []
    found = gather(proj, DownVectors(), "ada", RecallQuery.of("deploys", sources="records"), notes)  # type: ignore[arg-type]
    assert found.memories == Pool()
    assert [it.ref for it in found.records.fulltext] == ["2.0"]
    assert {kw["tiers"][0] for _, kw in proj.asked} == {RECORD}
    assert notes and "semantic ranking unavailable" in notes[0]


def test_an_empty_query_gathers_the_newest_active_items() -> None:
    proj = Projection([item("1.0"), item("2.0", status="archived")])
    found = gather(proj, None, "ada", RecallQuery.of("", limit=4), [])  # type: ignore[arg-type]
    assert found.newest is not None and [it.ref for it in found.newest] == ["1.0"]
    assert proj.asked == [("newest", {"tiers": ["WARM"], "statuses": ["active"], "limit": 4})]


# -- 3. fuse --------------------------------------------------------------------------


def test_fusion_ranks_what_more_signals_agree_on_first_and_drops_a_cited_turn() -> None:
    both = item("1.0", "deploys happen on tuesday", provenance=[{"source_type": "log", "source_ref": "7"}])
    one = item("2.0", "tuesday standup")
    turn = item("7.0", "we deploy on tuesdays", tier=RECORD)
    signals = Signals(
        intent=TimeIntent("now"),
        memories=Pool(fulltext=[both, one], facets=[both]),
        records=Pool(fulltext=[turn]),
    )
    ranked = fuse_pools(signals, RecallQuery.of("tuesday deploys"))
    assert [it.ref for it, _ in ranked] == ["1.0", "2.0"]  # the turn 1.0 cites is left out
    assert ranked[0][1] > ranked[1][1]


def test_fusion_weighs_each_signal_as_its_weights_say() -> None:
    """Issue 42: the fusion's weights are a value (ledger.memory.recall.Fusion) the stage
    takes: a paraphrase only the embedding finds rises above a word match as its weight
    grows, and a neighbour under the similarity floor is not a match on its own."""
    from ledger.memory.recall import Fusion

    word = item("1.0", "dinner plans for tonight")
    meaning = item("2.0", "I have been vegetarian for years")
    other = item("3.0", "a recipe blog I follow")
    signals = Signals(
        intent=TimeIntent("now"),
        memories=Pool(fulltext=[word], similar=[(other, 0.6), (meaning, 0.5)]),
    )
    q = RecallQuery.of("what should I cook for dinner tonight")

    def order(fusion: Fusion) -> list[str]:
        return [it.ref for it, _ in fuse_pools(signals, q, fusion) if it.ref in ("1.0", "2.0")]

    assert order(Fusion(fulltext=1.0, similar=1.0)) == ["1.0", "2.0"]
    assert order(Fusion(fulltext=0.5, similar=2.0)) == ["2.0", "1.0"]
    assert order(Fusion(fulltext=1.0, similar=1.0, min_similarity=0.55)) == ["1.0"]


def test_the_newest_are_listed_newest_first_with_falling_scores() -> None:
    ranked = fuse_pools(
        Signals(intent=TimeIntent("now"), newest=[item("9.0"), item("3.0")]), RecallQuery.of("")
    )
    assert [(it.ref, round(s, 6)) for it, s in ranked] == [
        ("9.0", round(1 / 61, 6)),
        ("3.0", round(1 / 62, 6)),
    ]


# -- 4. merge meshes ------------------------------------------------------------------


def test_a_share_lets_through_warm_memories_of_shared_categories_since_they_flowed() -> None:
    share = Share(mesh="ops", author="bob", since={"LEARNING": 5})
    ranked = [
        (item("4.0", agent="bob"), 0.9),  # before LEARNING flowed
        (item("6.0", agent="bob"), 0.8),
        (item("7.0", agent="bob", category="PREFERENCE"), 0.7),  # a category not shared
        (item("8.0", agent="bob", tier="COLD"), 0.6),
    ]
    mesh_of: dict[tuple[str, str], str] = {}
    assert [it.ref for it, _ in keep_shared(share, ranked, mesh_of)] == ["6.0"]
    assert mesh_of == {("bob", "6.0"): "ops"}
    again = Share(mesh="dev", author="bob", since={"LEARNING": 0})
    assert keep_shared(again, ranked[1:2], mesh_of) == []  # shared through two meshes: once


def test_shared_memories_join_the_ranking_by_score() -> None:
    own = [(item("1.0"), 0.5), (item("2.0"), 0.1)]
    shared = [(item("6.0", agent="bob"), 0.3)]
    assert [it.ref for it, _ in merge_meshes(own, shared)] == ["1.0", "6.0", "2.0"]
    assert merge_meshes(own, []) == own


# -- 5. apply time and supersession ---------------------------------------------------


def test_inside_a_session_hot_is_its_snapshot_aged_at_the_open() -> None:
    snap = Session(
        agent="ada",
        session="s1",
        opened_index=9,
        opened_us=10 * DAY,
        hot_snapshot=[
            {
                "index": 2,
                "ref": "2.0",
                "category": "PREFERENCE",
                "content": "terse",
                "tags": [],
                "created_us": 2 * DAY,
            },
            {
                "index": 3,
                "ref": "3.0",
                "category": "PREFERENCE",
                "content": "x",
                "tags": ["project-y"],
                "created_us": 0,
            },
        ],
    )
    hot = hot_lines(snap, [item("99.0", tier="HOT")], 50 * DAY, frozenset({"global"}))
    assert [(h.ref, h.age_days) for h in hot] == [("2.0", 8.0)]
    assert [h.ref for h in hot_lines(None, [item("99.0", tier="HOT")], 100 * DAY, None)] == ["99.0"]


def test_rows_are_aged_now_kept_to_scopes_and_mesh_rows_labelled() -> None:
    scored = [
        (item("1.0", tags=["project-x"]), 0.4),
        (item("2.0", tags=["project-y"]), 0.3),
        (item("3.0", status="superseded"), 0.2),  # a correction: never shown
        (item("6.0", agent="bob", tags=["project-x"]), 0.1),
    ]
    lines = to_lines(
        scored,
        agent="ada",
        now=11 * DAY,
        query="q",
        wanted=frozenset({"project:x"}),
        mesh_of={("bob", "6.0"): "ops"},
    )
    assert [(r.ref, r.age_days, r.author, r.mesh) for r in lines] == [
        ("1.0", 10.0, None, None),
        ("6.0", 5.0, "bob", "ops"),
    ]


def test_a_current_value_says_what_it_replaced() -> None:
    old = item("3.0", "Ada works as a nurse", status="superseded", valid_until_us=20 * DAY, replaced_by="5.0")
    new = line("5.0", "Ada works as a doctor", replaces="3.0", valid_from_us=20 * DAY)
    other = line("6.0", "unrelated", replaces="4.0")
    out = with_earlier([new, other], {"3.0": old})
    assert out[0].earlier is not None and out[0].earlier.endswith("until 1970-01-21 (ref 3.0)")
    assert out[1].earlier is None  # what it replaced was not found: nothing is made up


# -- 6. fit the budget ----------------------------------------------------------------


def test_the_budget_keeps_the_limit_and_lets_short_rows_past_a_long_one() -> None:
    long = line("1.0", "word " * 400, score=0.9)
    short = [line(f"{n}.0", "short", score=0.5) for n in (2, 3, 4)]
    kept, total = fit_budget([long, *short], query="q", limit=2, budget=120, used=40)
    assert [r.ref for r in kept] == ["2.0", "3.0"]
    assert 40 < total <= 120


# -- 7. render ------------------------------------------------------------------------


def test_the_rendered_block_is_held_to_the_budget_by_dropping_the_lowest_rows() -> None:
    ranked = tuple(line(f"{n}.0", f"memory number {n} " * 5, score=1 / n) for n in range(1, 6))
    result = RecallResult(
        agent="ada",
        origin="log",
        query="memory",
        as_of_size=10,
        session=None,
        hot=(),
        ranked=ranked,
        hot_tokens=0,
        total_tokens=0,
    )
    whole = render_within(result, 10_000)
    assert whole == result
    cut = render_within(result, 150)
    assert 0 < len(cut.ranked) < 5 and cut.ranked == ranked[: len(cut.ranked)]
    assert count_tokens(cut.render()) <= 150
    assert cut.total_tokens == count_tokens(cut.render())

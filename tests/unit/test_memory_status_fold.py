"""The memory status a mesh proof is checked against (verifier/tiers.py; issue 40, finding 1:
nothing checked a memory's tier or status at the checkpoint). The offline fold over the
entries that name one memory agrees with the projection's ``evolve`` wherever it can see what
the projection sees, and where it cannot (a replacement or a confirmation, whose other memory
it does not see) it never calls a memory shareable that the projection does not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.memory.state import InMemoryState, LoggedEvent, evolve
from verifier.tiers import DEFAULT_TIER_V2_FROM_US, fold_status, names_memory

REF = "10.0"


def _fold(
    memory: dict[str, Any] | None, entries: list[tuple[int, int, str, Any]], ts: int = 5_000
) -> tuple[str, str]:
    st_ = fold_status(REF, (10, ts, "memory.written", memory), entries)
    return st_.status, st_.tier


@pytest.mark.parametrize(
    ("body", "ts", "tier"),
    [
        ({"category": "LEARNING", "content": "x", "confidence": 1}, 5_000, "HOT"),  # v1: no tier is HOT
        ({"category": "LEARNING", "content": "x", "confidence": 1}, DEFAULT_TIER_V2_FROM_US, "WARM"),
        ({"category": "PREFERENCE", "content": "x", "confidence": 1}, DEFAULT_TIER_V2_FROM_US, "HOT"),
        ({"category": "LEARNING", "tags": ["blocker"], "confidence": 1}, DEFAULT_TIER_V2_FROM_US, "HOT"),
        ({"category": "LEARNING", "session": "s", "confidence": 1}, DEFAULT_TIER_V2_FROM_US, "HOT"),
        ({"category": "LEARNING", "tier": "WARM", "confidence": 1}, 5_000, "WARM"),
    ],
)
def test_a_memory_starts_in_the_tier_its_body_and_the_v2_rule_say(
    body: dict[str, Any], ts: int, tier: str
) -> None:
    assert _fold(body, [], ts) == ("active", tier)


def test_a_distilled_memory_starts_hot_and_must_be_disclosed() -> None:
    body = {"entries": [{"category": "LEARNING"}, "ab" * 32]}
    assert fold_status("10.0", (10, 5, "memory.distilled", body), []).tier == "HOT"
    assert fold_status("10.1", (10, 5, "memory.distilled", body), []).status == "unknown"  # a digest


def test_decisions_apply_only_as_the_projection_applies_them() -> None:
    warm = {"category": "LEARNING", "tier": "WARM", "confidence": 1}
    move = {"item": REF, "from": "WARM", "to": "HOT"}
    assert _fold(warm, [(11, 6_000, "memory.tier_changed", move)]) == ("active", "HOT")
    assert _fold(warm, [(11, 6_000, "memory.tier_changed", {**move, "from": "HOT"})]) == ("active", "WARM")
    stale = {**move, "last_activity_us": 5_000}
    used = (11, 5_500, "memory.accessed", None)
    assert _fold(warm, [(12, 6_000, "memory.tier_changed", stale)]) == ("active", "HOT")
    assert _fold(warm, [used, (12, 6_000, "memory.tier_changed", stale)]) == ("active", "WARM")
    early = {**move, "not_before_us": 7_000}
    assert _fold(warm, [(11, 6_000, "memory.tier_changed", early)]) == ("active", "WARM")
    cold = [(11, 6_000, "memory.tier_changed", {"item": REF, "from": "WARM", "to": "COLD"})]
    assert _fold(
        warm, [*cold, (12, 7_000, "memory.tier_changed", {"item": REF, "from": "COLD", "to": "WARM"})]
    ) == (
        "active",
        "COLD",
    )
    confirm = {**move, "to": "WARM", "from": "WARM", "confirms": "3.0"}
    assert _fold(warm, [(11, 6_000, "memory.tier_changed", confirm)])[0] == "superseded"
    archive = (11, 6_000, "memory.archived", {"item": REF, "rule": "decay"})
    assert _fold(warm, [archive]) == ("archived", "WARM")
    assert _fold(warm, [archive, (12, 7_000, "memory.decay_exempted", None)]) == ("active", "WARM")
    assert _fold({**warm, "decay_exempt": True}, [archive]) == ("active", "WARM")
    linked = {**warm, "provenance": [{"source_type": "pact", "source_ref": "3"}]}
    assert _fold(linked, [archive]) == ("active", "WARM")
    for kind, body in (
        ("memory.superseded", {"item": REF}),
        ("memory.replaced", {"item": REF, "by": "12.0"}),
        ("memory.erased", {"refs": [REF]}),
        ("memory.erased", {"index": 10}),
    ):
        assert _fold(warm, [(11, 6_000, kind, body)])[0] in ("superseded", "erased"), kind
    # a disclosed kind without its body says nothing: unknown, never shareable
    assert _fold(warm, [(11, 6_000, "memory.tier_changed", None)])[0] == "unknown"
    # nothing before the memory's own entry changes it
    assert _fold(warm, [(9, 4_000, "memory.erased", {"refs": [REF]})]) == ("active", "WARM")


def test_what_names_a_memory() -> None:
    assert names_memory("memory.tier_changed", {"item": REF}, REF)
    assert not names_memory("memory.tier_changed", {"item": "10.1"}, REF)
    assert not names_memory("memory.tier_changed", {"confirms": REF, "item": "3.0"}, REF)
    assert names_memory("memory.accessed", {"items": ["1.0", REF]}, REF)
    assert names_memory("memory.erased", {"also": [4, 10]}, REF)
    assert not names_memory("memory.erased", {"also": [True]}, "1.0")
    assert not names_memory("memory.written", {"item": REF}, REF)


KINDS = [
    "memory.tier_changed",
    "memory.archived",
    "memory.decay_exempted",
    "memory.accessed",
    "memory.superseded",
    "memory.erased",
    "memory.replaced",
]
TIERS = ["HOT", "WARM", "COLD"]


@st.composite
def _history(draw: st.DrawFn) -> tuple[dict[str, Any], int, list[tuple[int, int, str, dict[str, Any]]]]:
    ts0 = draw(st.sampled_from([5_000, DEFAULT_TIER_V2_FROM_US]))
    body: dict[str, Any] = {
        "category": draw(st.sampled_from(["LEARNING", "PREFERENCE", "CONTEXT"])),
        "content": "Northwind settles on Fridays.",
        "confidence": 50,
    }
    if draw(st.booleans()):
        body["tier"] = draw(st.sampled_from(["HOT", "WARM"]))
    if draw(st.booleans()):
        body["decay_exempt"] = True
    events = []
    ts = ts0
    for n in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(KINDS))
        ts += draw(st.sampled_from([1, 10, 1_000_000]))
        b: dict[str, Any] = {"item": REF}
        if kind == "memory.tier_changed":
            b |= {
                "from": draw(st.sampled_from(TIERS)),
                "to": draw(st.sampled_from(TIERS)),
                "rule": "r",
                "policy_version": 1,
            }
            if draw(st.booleans()):
                b["last_activity_us"] = draw(st.sampled_from([ts0, ts - 1, 7]))
            if draw(st.booleans()):
                b["not_before_us"] = draw(st.sampled_from([0, ts + 5]))
        elif kind == "memory.archived":
            b |= {
                "rule": "decay",
                "policy_version": 1,
                "last_activity_us": draw(st.sampled_from([ts0, ts - 1])),
                "not_before_us": 0,
            }
        elif kind == "memory.decay_exempted":
            b["reason"] = "keep"
        elif kind == "memory.accessed":
            b = {"items": [REF]}
        elif kind == "memory.superseded":
            b |= {"content": "Northwind settles on Mondays.", "reason": "fixed"}
        elif kind == "memory.erased":
            b = {"index": 10, "refs": [REF], "reason": "asked"}
        elif kind == "memory.replaced":
            b = {"item": REF, "by": "11.0"}
        events.append((20 + n, ts, kind, b))
    return body, ts0, events


@settings(max_examples=400, deadline=None)
@given(_history())
def test_the_offline_fold_agrees_with_the_projection(history: tuple[dict[str, Any], int, list[Any]]) -> None:
    """Over the entries that name one memory, the fold gives the projection's status and tier;
    with a replacement in the history (whose newer memory it cannot see) it may refuse a
    memory the projection keeps, never the other way round."""
    body, ts0, events = history
    state = InMemoryState()
    evolve(state, LoggedEvent(index=10, timestamp_us=ts0, agent="ada", kind="memory.written", body=body))
    # the memory a replacement names, active and WARM, as the projection would hold it
    evolve(
        state,
        LoggedEvent(
            index=11,
            timestamp_us=ts0 + 1,
            agent="ada",
            kind="memory.written",
            body={"category": "CONTEXT", "content": "a newer value", "confidence": 50, "tier": "WARM"},
        ),
    )
    for i, ts, kind, b in events:
        evolve(state, LoggedEvent(index=i, timestamp_us=ts, agent="ada", kind=kind, body=b))
    item = state.item("ada", REF)
    assert item is not None
    offline = fold_status(REF, (10, ts0, "memory.written", body), [(i, ts, k, b) for i, ts, k, b in events])
    projected = (item.status, item.tier if item.status != "erased" else offline.tier)
    if any(k == "memory.replaced" for _, _, k, _ in events):
        assert not offline.shareable or (item.status == "active" and item.tier == "WARM")
    else:
        assert (offline.status, offline.tier) == projected, (offline, item)

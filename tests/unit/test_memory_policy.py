"""The tier rules, tested from their text with an injected clock, on the pure state.

Each test builds a log of events, folds it with ``evolve`` into ``InMemoryState``, asks
the policy to decide at a given time, applies the decisions as logged events again, and
checks where the memories ended up.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledger.memory.policy import PolicyConfig, decide_session_end, decide_sweep, importance
from ledger.memory.state import InMemoryState, LoggedEvent, evolve
from ledger.memory.tokens import HOT_BLOCK_OVERHEAD, hot_tokens

DAY = 86_400_000_000
T0 = 1_790_000_000_000_000


class Log:
    def __init__(self) -> None:
        self.state = InMemoryState()
        self.index = 0
        self.events: list[LoggedEvent] = []

    def add(self, kind: str, body: dict[str, Any], *, at: int, agent: str = "a") -> str:
        ev = LoggedEvent(index=self.index, timestamp_us=at, agent=agent, kind=kind, body=body)
        evolve(self.state, ev)
        self.events.append(ev)
        self.index += 1
        return f"{ev.index}.0"

    def write(
        self,
        content: str,
        *,
        at: int = T0,
        category: str = "LEARNING",
        tags: list[str] | None = None,
        tier: str | None = "HOT",
        session: str | None = "s1",
        confidence: int = 50,
        **extra: Any,
    ) -> str:
        body: dict[str, Any] = {
            "category": category,
            "content": content,
            "tags": tags or [],
            "confidence": confidence,
            **extra,
        }
        if tier:
            body["tier"] = tier
        if session:
            body["session"] = session
        return self.add("memory.written", body, at=at)

    def apply(self, decisions: list, *, at: int) -> None:
        for d in decisions:
            self.add(d.kind, d.body, at=at)

    def tier(self, ref: str) -> str:
        it = self.state.item("a", ref)
        assert it is not None
        return it.tier if it.status == "active" else it.status


CFG = PolicyConfig()


def test_session_end_files_each_memory_by_rule() -> None:
    log = Log()
    decision = log.write("we ship on mondays", category="COMMITMENT")
    task = log.write("rewrite the exporter", tags=["task"])
    blocker = log.write("waiting on finance approval", tags=["blocker"], category="CONTEXT")
    pref = log.write("customer prefers email", category="PREFERENCE")
    other = log.write("the cache warms in 5 minutes")
    elsewhere = log.write("from another session", session="s2")
    log.apply(decide_session_end(log.state, "a", "s1", CFG), at=T0 + 1)
    assert log.tier(decision) == "COLD"  # decisions -> COLD
    assert log.tier(task) == "COLD"  # task-tagged -> COLD
    assert log.tier(blocker) == "HOT"  # blocker -> HOT (within caps)
    assert log.tier(pref) == "HOT"  # preferences stay HOT until inactive
    assert log.tier(other) == "WARM"  # other HOT memories -> WARM
    # Issue 12: every compaction files every eligible memory, not only the session's.
    assert log.tier(elsewhere) == "WARM"


def test_hot_caps_move_the_least_recently_active_non_blockers_first() -> None:
    log = Log()
    cfg = PolicyConfig(hot_max_items=2)
    old_pref = log.write("old preference", category="PREFERENCE", at=T0)
    blocker = log.write("a blocker", category="CONTEXT", tags=["blocker"], at=T0 + 1)
    new_pref = log.write("new preference", category="PREFERENCE", at=T0 + 2)
    log.apply(decide_session_end(log.state, "a", "s1", cfg), at=T0 + 3)
    assert [log.tier(old_pref), log.tier(blocker), log.tier(new_pref)] == ["WARM", "HOT", "HOT"]
    assert log.state.item("a", old_pref).tier_history[-1]["rule"] == "hot_cap"


def test_hot_token_budget_is_a_cap_too() -> None:
    log = Log()
    a = log.write("p" * 80, category="PREFERENCE", at=T0)
    b = log.write("q" * 80, category="PREFERENCE", at=T0 + 1)
    # Room for the block's own lines and one of the two rendered lines, not both.
    one = max(hot_tokens(log.state.item("a", a)), hot_tokens(log.state.item("a", b)))
    cfg = PolicyConfig(hot_max_tokens=HOT_BLOCK_OVERHEAD + one + 1)
    log.apply(decide_session_end(log.state, "a", "s1", cfg), at=T0 + 2)
    assert [log.tier(a), log.tier(b)] == ["WARM", "HOT"]  # the newer one stays


def test_preferences_not_accessed_for_seven_days_move_to_warm() -> None:
    log = Log()
    stale = log.write("likes bullet points", category="PREFERENCE", session=None)
    used = log.write("likes short answers", category="PREFERENCE", session=None)
    log.add("memory.accessed", {"items": [used]}, at=T0 + 3 * DAY)
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 6 * DAY, CFG), at=T0 + 6 * DAY)
    assert log.tier(stale) == "HOT"  # six days: not yet
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 7 * DAY, CFG), at=T0 + 7 * DAY)
    assert log.tier(stale) == "WARM"
    assert log.tier(used) == "HOT"  # accessed on day 3: idle for 4 days only
    assert log.state.item("a", stale).tier_history[-1]["rule"] == "inactive_preference"


def test_warm_moves_to_cold_by_recency_times_importance() -> None:
    log = Log()
    important = log.write(
        "the billing API rejects retries without keys", tier="WARM", session=None, confidence=100
    )
    for _ in range(5):  # five confirmations by duplicates
        log.write("The billing API rejects retries without keys!", tier="WARM", session=None, confidence=100)
    log.add("memory.accessed", {"items": [important] * 1}, at=T0 + DAY)
    minor = log.write("a minor note", tier="WARM", session=None, confidence=40)
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 2 * DAY, CFG), at=T0 + 2 * DAY)
    assert log.state.item("a", important).confirmations == 6  # sightings: the first write and 5 more
    assert log.tier(important) == "COLD"
    assert log.tier(minor) == "WARM"


def test_decay_archives_at_the_end_of_the_window_unless_exempt_or_linked() -> None:
    log = Log()
    plain = log.write("plain low-importance note", tier="WARM", session=None, confidence=0)
    exempt = log.write("an exempt note", tier="WARM", session=None, confidence=0)
    linked = log.write(
        "note about pact p-1",
        tier="WARM",
        session=None,
        confidence=0,
        provenance=[{"source_type": "pact", "source_ref": "7"}],
    )
    log.add("memory.decay_exempted", {"item": exempt, "reason": "legal hold"}, at=T0 + DAY)
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 18 * DAY, CFG), at=T0 + 18 * DAY)
    # The window is warm_min_days = 14 plus 76 days x importance; one sighting is 0.06 of it.
    assert log.tier(plain) == "WARM"
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 19 * DAY, CFG), at=T0 + 19 * DAY)
    assert log.tier(plain) == "archived"
    assert log.tier(exempt) == "WARM"
    assert log.tier(linked) == "WARM"
    assert log.state.item("a", plain).content == "plain low-importance note"  # archived, never deleted


def test_importance_extends_the_retention_window() -> None:
    log = Log()
    low = log.write("low importance", tier="WARM", session=None, confidence=0)
    high = log.write("high importance", tier="WARM", session=None, confidence=90)
    cfg = PolicyConfig(promote_threshold=101)  # isolate decay from promotion
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 30 * DAY, cfg), at=T0 + 30 * DAY)
    assert log.tier(low) == "archived"
    assert log.tier(high) == "WARM"  # window 14 + 76 * (0.45 + 0.06) = ~53 days
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 52 * DAY, cfg), at=T0 + 52 * DAY)
    assert log.tier(high) == "WARM"
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 53 * DAY, cfg), at=T0 + 53 * DAY)
    assert log.tier(high) == "archived"


def test_dedup_at_the_target_tier_confirms_instead_of_adding() -> None:
    log = Log()
    warm = log.write("Deploys freeze on Fridays.", tier="WARM", session=None)
    hot = log.write("deploys freeze on fridays", session="s1")
    log.apply(decide_session_end(log.state, "a", "s1", CFG), at=T0 + 1)
    assert log.tier(hot) == "superseded"
    assert log.state.item("a", hot).superseded_by == warm
    assert log.state.item("a", warm).confirmations == 2
    assert [i.ref for i in log.state.all_items() if i.status == "active"] == [warm]


def test_cold_is_write_once_and_changes_only_by_supersession() -> None:
    log = Log()
    rec = log.add("commitment", {"promise": "reply within 24h"}, at=T0)
    assert log.tier(rec) == "COLD"
    log.add(
        "memory.tier_changed",
        {"item": rec, "from": "COLD", "to": "WARM", "rule": "x", "policy_version": 1},
        at=T0 + 1,
    )
    log.add("memory.archived", {"item": rec, "rule": "x", "policy_version": 1}, at=T0 + 2)
    assert log.tier(rec) == "COLD"  # neither moves nor decays
    new = log.add(
        "memory.superseded", {"item": rec, "content": "reply within 12h", "reason": "SLA"}, at=T0 + 3
    )
    assert log.tier(rec) == "superseded" and log.tier(new) == "COLD"
    assert log.state.item("a", new).supersedes == rec


def test_stale_or_repeated_decisions_have_no_effect() -> None:
    log = Log()
    ref = log.write("a note", session="s1")
    decisions = decide_session_end(log.state, "a", "s1", CFG)
    log.apply(decisions, at=T0 + 1)
    before = log.state.item("a", ref)
    log.apply(decisions, at=T0 + 2)  # a concurrent compaction's copy of the same decision
    after = log.state.item("a", ref)
    assert after.tier == before.tier == "WARM"
    assert after.tier_history == before.tier_history  # no second promotion recorded


def test_an_exemption_logged_before_an_archive_decision_wins() -> None:
    log = Log()
    ref = log.write("keep me", tier="WARM", session=None, confidence=0)
    decisions = decide_sweep(log.state, log.state.all_items(), T0 + 20 * DAY, CFG)  # decided on stale state
    log.add("memory.decay_exempted", {"item": ref, "reason": "needed"}, at=T0 + 20 * DAY)
    log.apply(decisions, at=T0 + 20 * DAY + 1)
    assert log.tier(ref) == "WARM"  # the flag is not lost
    assert log.state.item("a", ref).decay_exempt


def test_records_go_straight_to_cold() -> None:
    log = Log()
    refs = [
        log.add("pact.outcome", {"pact": "p", "result": "fulfilled", "quality": 94}, at=T0),
        log.add("eval.outcome", {"eval": "e", "result": "pass", "score": 80}, at=T0),
        log.add("boundary.event", {"type": "scope_violation", "description": "read HR files"}, at=T0),
        log.add("commitment", {"promise": "call back"}, at=T0),
    ]
    assert [log.tier(r) for r in refs] == ["COLD"] * 4
    assert [i.category for i in log.state.all_items()] == [
        "PERFORMANCE",
        "PERFORMANCE",
        "ANOMALY",
        "COMMITMENT",
    ]


def test_an_exemption_logged_after_archiving_restores_the_item() -> None:
    log = Log()
    ref = log.write("keep me too", tier="WARM", session=None, confidence=0)
    log.apply(decide_sweep(log.state, log.state.all_items(), T0 + 20 * DAY, CFG), at=T0 + 20 * DAY)
    assert log.tier(ref) == "archived"
    log.add("memory.decay_exempted", {"item": ref, "reason": "needed after all"}, at=T0 + 21 * DAY)
    assert log.tier(ref) == "WARM"
    assert log.state.item("a", ref).tier_history[-1]["rule"] == "exemption"


def test_a_time_based_decision_recorded_before_its_window_ends_has_no_effect() -> None:
    log = Log()
    ref = log.write("decays later", tier="WARM", session=None, confidence=0)
    early = decide_sweep(log.state, log.state.all_items(), T0 + 20 * DAY, CFG)  # planned for day 20
    log.apply(early, at=T0 + 2 * DAY)  # but recorded on day 2
    assert log.tier(ref) == "WARM"
    used = log.write("used again", tier="WARM", session=None, confidence=0)
    stale = decide_sweep(log.state, log.state.all_items(), T0 + 20 * DAY, CFG)
    log.add("memory.accessed", {"items": [used]}, at=T0 + 19 * DAY)  # used after the decision was taken
    log.apply(stale, at=T0 + 20 * DAY)
    assert log.tier(ref) == "archived"
    assert log.tier(used) == "WARM"  # its window moved: the stale decision does nothing


def test_a_duplicate_write_brings_its_flags_and_sources() -> None:
    log = Log()
    first = log.write("Refunds need approval", tier="WARM", session=None)
    log.write(
        "refunds need approval!",
        tier="WARM",
        session=None,
        decay_exempt=True,
        provenance=[{"source_type": "pact", "source_ref": "3"}],
    )
    it = log.state.item("a", first)
    assert it.confirmations == 2 and it.decay_exempt and it.linked_action
    assert {"source_type": "pact", "source_ref": "3"} in it.provenance


def test_erasure_leaves_the_same_tombstone_whether_or_not_the_body_is_still_there() -> None:
    with_body, without_body = Log(), Log()
    with_body.write("my home address is 1 Main St", session=None, category="CONTEXT")
    without_body.add("memory.written", None, at=T0)  # type: ignore[arg-type]  # body already erased
    for log in (with_body, without_body):
        log.add("memory.erased", {"index": 0, "refs": ["0.0"], "reason": "GDPR request"}, at=T0 + 1)
    a, b = with_body.state.item("a", "0.0"), without_body.state.item("a", "0.0")
    assert a == b and a.status == "erased" and a.content == ""


def test_confirmations_count_sightings_and_importance_saturates_at_five() -> None:
    """Regression (issue 12): the same text written twice was one item with confirmations 1
    (the rule counts 2 sightings), and importance saturated at 6 sightings instead of 5."""
    log = Log()
    ref = log.write("Standups start at 9:30", tier="WARM", session=None, confidence=0)
    assert log.state.item("a", ref).confirmations == 1  # the first write is a sighting
    log.write("standups start at 9:30!", tier="WARM", session=None, confidence=0)
    assert log.state.item("a", ref).confirmations == 2
    seen = []
    for _ in range(5):
        seen.append(importance(log.state.item("a", ref)))
        log.write("Standups start at 9:30", tier="WARM", session=None, confidence=0)
    assert seen[:4] == sorted(seen[:4]) and seen[3] == pytest.approx(0.3)  # 5 sightings: saturated
    assert importance(log.state.item("a", ref)) == pytest.approx(0.3)

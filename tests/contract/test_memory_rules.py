"""Memory keeps its own rules (issue 12), on every backend: the HOT caps hold whenever HOT
changes and in real tokens, and every compaction files every eligible memory."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol.bodies import DEFAULT_TIER_V2_FROM_US, written_body
from ledger.memory.service import MemoryService
from ledger.memory.tokens import count_tokens
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf
from tests.contract.test_memory_projection import pure_replay_digest

DAY = 86_400_000_000
ERROR_LOG = "\n".join(
    f'2026-11-24T08:{m:02d}:44Z ERROR billing.retry req_id=7f3a{m:04x}-42b0 status=503 path="/v2/invoices/{9000 + m}"'
    for m in range(30)
)


def test_caps_hold_for_blockers_written_outside_a_session(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Regression: 55 blockers written outside a session stayed HOT (caps held only at
    session end) and recall injected the oldest 50, never the newest."""
    ada = memory_of(make_agent("ada"))
    refs = [
        f"{ada.write(category='CONTEXT', content=f'Blocked on ticket OPS-{n}', tags=['blocker'], tier='HOT').index}.0"
        for n in range(55)
    ]
    hot = [i.ref for i in memory.projection.items("ada", tiers=["HOT"])]
    assert len(hot) == memory.config.hot_max_items == 50
    assert hot == refs[-50:]  # the newest stay; the oldest moved to WARM, not dropped
    assert {i.ref for i in memory.projection.items("ada", tiers=["WARM"])} == set(refs[:5])
    shown = [r.ref for r in memory.recall("ada", "", record_access=False).hot]
    assert refs[-1] in shown and refs[0] not in shown


def test_the_caps_count_real_tokens_of_the_rendered_block(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Regression: an error log and five preference paragraphs left 2,103 real tokens in HOT
    under a 2,000 cap (the estimate said 1,395, and the block's own lines were not counted)."""
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session()
    ada.write(category="FAILURE", content=ERROR_LOG, tags=["blocker"], tier="HOT", session=sid)
    ada.write(category="FAILURE", content=ERROR_LOG[::-1], tags=["blocker"], tier="HOT", session=sid)
    for n in range(5):
        paragraph = (
            f"Preference {n}: answers in British English, code in fenced blocks with the language named, "
            "timestamps in ISO 8601 UTC (2026-11-24T08:26:44Z), ids quoted verbatim, no emoji, "
            "tables for comparisons, and the shortest answer that is complete. " * 2
        )
        ada.write(category="PREFERENCE", content=paragraph, tier="HOT", session=sid)
    ada.close_session(sid)
    block = (
        memory.recall("ada", "", record_access=False).render_hot()
        + "(as of log size 1000)\n</memory-context>\n"
    )
    assert count_tokens(block) <= memory.config.hot_max_tokens
    assert len(ERROR_LOG) // 4 + 1 < count_tokens(ERROR_LOG) * 0.9  # what the old estimate missed


def test_decisions_written_between_sessions_reach_cold_at_any_compaction(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    """Regression: compaction filed only the closing session's memories, so a decision
    written between sessions stayed WARM and decay archived it 45 days later."""
    ada = memory_of(make_agent("ada"))
    decision = f"{ada.write(category='CONTEXT', content='We ship v2 on 3 March', tags=['decision']).index}.0"
    plain = f"{ada.write(category='LEARNING', content='Staging restarts nightly', tier='HOT').index}.0"
    assert memory.projection.item("ada", decision).tier == "WARM"
    sid = ada.open_session()  # another session ends: every eligible memory is filed
    ada.turn(sid, "user", "Thanks!")
    ada.close_session(sid)
    assert memory.projection.item("ada", decision).tier == "COLD"
    assert memory.projection.item("ada", plain).tier == "WARM"  # other HOT memories go to WARM
    task = f"{ada.write(category='CONTEXT', content='Rotate the API keys', tags=['task']).index}.0"
    blocker = f"{ada.write(category='CONTEXT', content='Waiting on legal review', tags=['blocker']).index}.0"
    clock.now += 45 * DAY
    memory.compact("ada")  # on demand: the same filing rules
    assert memory.projection.item("ada", task).tier == "COLD"
    assert memory.projection.item("ada", blocker).tier == "HOT"  # blockers to HOT, within the caps
    assert memory.projection.item("ada", decision).status == "active"


@pytest.mark.parametrize(
    ("category", "tags", "in_session", "tier"),
    [
        ("LEARNING", [], False, "WARM"),
        ("PREFERENCE", [], False, "HOT"),
        ("CONTEXT", ["blocker"], False, "HOT"),
        ("LEARNING", [], True, "HOT"),
    ],
)
def test_one_default_tier_for_a_memory_written_without_one(
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
    category: str,
    tags: list[str],
    in_session: bool,
    tier: str,
) -> None:
    """Regression: the SDK and CLI filled in WARM for a plain fact, but the log filed a body
    without `tier` (any client that follows the spec) in HOT, where it stayed. From memory
    events v2 the log applies the clients' rule; entries before it replay as they were."""
    clock.now = max(clock.now, DEFAULT_TIER_V2_FROM_US)
    ada = make_agent("ada")
    sid = memory_of(ada).open_session() if in_session else None
    body = {"category": category, "content": "Odile runs the Lisbon office", "tags": tags, "confidence": 70}
    if sid:
        body["session"] = sid
    sdk = written_body(
        memory.gate, category=category, content="Odile runs the Lisbon office", tags=tags, session=sid
    )
    receipt = ada.append("memory.written", body)  # no tier: as a third-party client may send it
    memory.sync()
    assert memory.projection.item("ada", f"{receipt.index}.0").tier == tier == sdk["tier"]
    assert pure_replay_digest(memory.ledger) == memory.digest()


def test_entries_written_before_the_v2_rule_replay_as_they_were(
    memory: MemoryService, make_agent: Callable[..., Agent], clock: StepClock
) -> None:
    ada = make_agent("ada")
    assert clock.now < DEFAULT_TIER_V2_FROM_US
    receipt = ada.append(
        "memory.written", {"category": "LEARNING", "content": "An old fact", "tags": [], "confidence": 70}
    )
    clock.now = DEFAULT_TIER_V2_FROM_US + DAY
    memory.rebuild()
    assert memory.projection.item("ada", f"{receipt.index}.0").tier == "HOT"  # v1 meaning kept

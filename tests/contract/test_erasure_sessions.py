"""Issue 25, finding 3: session titles and closing summaries (which MCP lets the model write)
could not be erased at all. A session's opening and closing entries are now erasable: the
body (title or summary) goes, the session keeps its turns and its state, replays and the
audit agree, and an erasure that names the wrong session or another kind is refused.
Both backends; and over HTTP with the client's own plan."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.app import create_app
from api.settings import ApiSettings
from engram.client.agent_memory import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from ledger.audit import audit
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory

TITLE = "Project quokkafern9 escalation"
SUMMARY = "Agreed the quokkafern9 refund of 420 EUR"


def _bodies_holding(ledger: Ledger, word: str) -> list[int]:
    with ledger.store.engine.connect() as conn:
        return [
            int(r[0])
            for r in conn.execute(text("SELECT idx, body FROM bodies"))
            if word.encode() in bytes(r[1])
        ]


def test_session_title_and_summary_are_erasable(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    memory = MemoryService(ledger, access_log="off")
    agent = make_agent("ada")
    agent.transport = InProcessMemory(memory)
    ada = AgentMemory(agent)
    sid = ada.open_session(title=TITLE)
    ada.turn(sid, "user", "Please check the refund for the customer.")
    ada.turn(sid, "assistant", "I checked it and will follow up tomorrow.")
    ada.close_session(sid, summary=SUMMARY)
    s = memory.projection.session("ada", sid)
    assert s is not None and s.title == TITLE and s.closed_index is not None
    assert len(_bodies_holding(ledger, "quokkafern9")) == 2  # the test can fail

    plan = memory.erasure_plan("ada", s.opened_index)
    assert plan.session == sid and plan.refs == () and plan.also == ()
    ada.erase(s.opened_index, reason="the title named the customer")
    ada.erase(s.closed_index, reason="so did the summary")

    assert _bodies_holding(ledger, "quokkafern9") == []
    after = memory.projection.session("ada", sid)
    assert after is not None
    assert (after.title, after.status, after.turns, after.closed_index) == (None, "closed", 2, s.closed_index)
    records = memory.projection.items("ada", tiers=["RECORD"])
    assert [r.content for r in records] == [
        "Please check the refund for the customer.",
        "I checked it and will follow up tomorrow.",
    ]
    # Replays agree: a rebuild gives the same projection, the audit finds nothing.
    incremental = memory.digest()
    assert MemoryService(ledger, access_log="off").rebuild() == incremental
    assert audit(ledger.store, ledger.verifier_key).clean
    # Once is enough: the body is gone.
    with pytest.raises(RejectedEventError) as e:
        ada.erase(s.opened_index, reason="again")
    assert e.value.check == "memory.missing_item"


def test_a_session_erasure_must_name_the_entry_session(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    memory = MemoryService(ledger, access_log="off")
    ada = make_agent("ada")
    ada.transport = InProcessMemory(memory)
    mem = AgentMemory(ada)
    sid = mem.open_session(title="first")
    other = mem.open_session(title="second")
    s = memory.projection.session("ada", sid)
    w = mem.write(category="LEARNING", content="Staging restarts nightly")
    assert s is not None
    bob = make_agent("bob")  # registered before the count: its registration is an entry
    size = ledger.size()
    # Another session's id: what a replay would fold the body-less entry as.
    with pytest.raises(RejectedEventError) as e:
        ada.append("memory.erased", {"index": s.opened_index, "session": other, "reason": "x"})
    assert e.value.check == "memory.erase"
    # A memory entry is not a session entry.
    with pytest.raises(RejectedEventError) as e:
        ada.append("memory.erased", {"index": w.index, "session": sid, "reason": "x"})
    assert e.value.check == "memory.erase"
    # Another agent's session entry.
    with pytest.raises(RejectedEventError) as e:
        bob.append("memory.erased", {"index": s.opened_index, "session": sid, "reason": "x"})
    assert e.value.check == "memory.erase"
    # Items may not ride along.
    with pytest.raises(RejectedEventError) as e:
        ada.append(
            "memory.erased",
            {"index": s.opened_index, "session": sid, "refs": [f"{w.index}.0"], "reason": "x"},
        )
    assert e.value.check == "body.memory.erased.refs"
    assert ledger.size() == size  # nothing written


def test_session_title_erased_over_http(ledger: Ledger) -> None:
    token = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"
    client = TestClient(create_app(ApiSettings(operator_token=token), ledger=ledger))
    transport = HttpTransport("http://testserver", operator_token=token, http=client)
    agent = Agent.generate("ada", log_vkey=ledger.vkey, transport=transport)
    agent.register()
    mem = AgentMemory(agent, transport)
    sid = mem.open_session(title=TITLE)
    mem.turn(sid, "user", "Please check the refund for the customer.")
    opened = mem.sessions()[0]
    assert opened.session == sid and opened.title == TITLE
    mem.erase(opened.opened_index, reason="the title named the customer")
    assert mem.session(sid).title is None and mem.session(sid).turns == 1
    assert _bodies_holding(ledger, "quokkafern9") == []

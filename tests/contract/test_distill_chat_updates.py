"""Issue 29, Deliver 3 (the chat distiller's side of the contract), on both backends,
against a fake OpenAI-compatible endpoint: the model is shown the agent's current facts
between <known> tags, an entry may say it ``updates`` one of them and when it became true
(``valid_from``), and the service turns that into a policy-signed ``memory.replaced``
(rule ``distiller_update``); an entry naming a fact it was not shown, or a malformed date, is
refused whole."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.distill import ChatCompletionsDistiller, DistillerError, Turn
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from tests.unit.test_memory_distill_recall import FakeChat


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    fake = FakeChat()
    yield fake
    fake.server.shutdown()


def _entry(content: str, **extra: object) -> dict[str, object]:
    return {
        "category": "CONTEXT",
        "subject": "Caroline",
        "content": content,
        "tags": [],
        "confidence": 80,
        "source_turns": [0],
        **extra,
    }


def test_the_chat_distiller_updates_a_known_fact(
    ledger: Ledger, make_agent: Callable[..., Agent], chat: FakeChat
) -> None:
    memory = MemoryService(ledger, distiller=ChatCompletionsDistiller(url=chat.url, model="m"))
    agent = make_agent("ada")
    agent.transport = InProcessMemory(memory)
    ada = AgentMemory(agent)
    nurse = ada.write(category="CONTEXT", content="Caroline works as a nurse at the children's hospital.")
    chat.content(
        {
            "entries": [
                _entry(
                    "Caroline now flies for a regional airline.", updates=nurse.ref, valid_from="2024-03-01"
                )
            ]
        }
    )
    sid = ada.open_session(title="chat")
    ada.turn(sid, "user", "Caroline: Guess what, I fly planes for a regional airline now!")
    closed = ada.close_session(sid)
    assert closed.entries == 1
    prompt = chat.requests[-1]["body"]["messages"][1]["content"]
    assert f"<known>\n[ref {nurse.ref}] Caroline works as a nurse" in prompt
    [body] = [b for _, b in ledger.stream_bodies("ada", "memory.replaced")]
    assert body is not None and body["rule"] == "distiller_update" and body["item"] == nurse.ref
    new = memory.item("ada", str(body["by"]))
    old = memory.item("ada", nurse.ref)
    assert new is not None and old is not None and old.status == "superseded"
    assert new.valid_from_us == int(datetime(2024, 3, 1, tzinfo=UTC).timestamp()) * 1_000_000
    # true until the new value began, never before it was itself recorded true
    assert old.valid_until_us == max(old.since_us, new.valid_from_us) and new.replaces == nurse.ref


@pytest.mark.parametrize(
    "extra",
    [{"updates": "999.0"}, {"valid_from": "March 2024"}, {"valid_from": "2024-02-30"}, {"unknown": 1}],
)
def test_the_chat_distiller_refuses_updates_it_was_not_shown(
    chat: FakeChat, extra: dict[str, object]
) -> None:
    chat.content({"entries": [_entry("Caroline flies planes.", **extra)]})
    d = ChatCompletionsDistiller(url=chat.url, model="m")
    turn = Turn(index=5, turn=0, role="user", content="Caroline: I fly planes now.")
    with pytest.raises(DistillerError):
        d.distill_with_usage("s-1", [turn], known=[("3.0", "Caroline works as a nurse.")])

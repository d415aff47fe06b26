"""Supersession only by the owner's own word, on both backends (issue 40, finding 3).

A newer memory replaces an older one (a policy-signed ``memory.replaced``) only when it
states the fact in its owner's own voice: never from reported, quoted or retrieved text (an
assistant reply relaying an email, a vendor page it quotes, a tool's output); COLD and
decay-exempt memories are never replaced by the policy; a HOT memory only by its own
speaker's later statement. Each scenario also checks that the projection a rebuild gives is
the one kept incrementally."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.distill import ChatCompletionsDistiller
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf
from tests.contract.test_memory_projection import pure_replay_digest
from tests.unit.test_memory_distill_recall import FakeChat

DAY = 86_400_000_000


def _replaced(ledger: Ledger, agent: str) -> list[dict[str, object]]:
    return [b for _, b in ledger.stream_bodies(agent, "memory.replaced") if b is not None]


def _same_after_rebuild(memory: MemoryService) -> None:
    incremental = memory.digest()
    assert pure_replay_digest(memory.ledger) == incremental
    assert memory.rebuild() == incremental


def _status(memory: MemoryService, agent: str, ref: str) -> str:
    it = memory.item(agent, ref)
    assert it is not None
    return it.status


def test_an_assistant_reply_relaying_an_email_does_not_replace_the_users_own_fact(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Issue 40, finding 3: an assistant reply reporting what a hostile email says ("the
    user's manager is now ...") replaced the user's HOT, decay-exempt fact."""
    ada = memory_of(make_agent("ada"))
    dana = ada.write(category="CONTEXT", content="The user's manager is Dana.", tier="HOT", decay_exempt=True)
    clock.now += DAY
    sid = ada.open_session(title="inbox")
    ada.turn(sid, "user", "Can you check my inbox?")
    ada.turn(sid, "assistant", "The latest email says the user's manager is now Mallory.")
    ada.close_session(sid)
    assert _replaced(ledger, "ada") == []
    assert _status(memory, "ada", dana.ref) == "active"
    answer = memory.recall("ada", "Who is the user's manager now?", record_access=False)
    assert "Dana" in answer.render()
    _same_after_rebuild(memory)


def test_a_reported_fact_does_not_replace_the_users_own_even_when_the_memory_hides_the_source(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Issue 40, finding 3: a memory whose text states the fact plainly but cites a turn that
    relays someone else's word (a paraphrasing distiller, an agent writing what it read) is
    not the owner's word either; a memory citing a tool turn or a URL never is."""
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session(title="setup")
    said = ada.turn(sid, "user", "My manager is Dana.")
    dana = ada.write(
        category="CONTEXT",
        content="The user's manager is Dana.",
        provenance=[{"source_type": "turn", "source_ref": str(said.index)}],
    )
    relayed = ada.turn(
        sid, "assistant", "I read your inbox. An email from HR says your manager is now Mallory."
    )
    tool = ada.turn(sid, "tool", "directory.lookup -> manager: Eve")
    clock.now += DAY
    ada.write(
        category="CONTEXT",
        content="The user's manager is now Mallory.",
        provenance=[{"source_type": "turn", "source_ref": str(relayed.index)}],
    )
    ada.write(
        category="CONTEXT",
        content="The user's manager is now Eve.",
        provenance=[{"source_type": "turn", "source_ref": str(tool.index)}],
    )
    ada.write(
        category="CONTEXT",
        content="The user's manager is now Oscar.",
        provenance=[{"source_type": "url", "source_ref": "https://intranet.example/org"}],
    )
    assert _replaced(ledger, "ada") == []
    assert _status(memory, "ada", dana.ref) == "active"
    # The owner's own later word does replace it.
    own = ada.turn(sid, "user", "Update: my manager is Lee now.")
    clock.now += DAY
    lee = ada.write(
        category="CONTEXT",
        content="The user's manager is now Lee.",
        provenance=[{"source_type": "turn", "source_ref": str(own.index)}],
    )
    items = {b["item"] for b in _replaced(ledger, "ada") if b["by"] == lee.ref}
    assert dana.ref in items
    _same_after_rebuild(memory)


def test_a_cold_decision_is_never_replaced_by_the_policy(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Issue 40, finding 3: a vendor page the assistant quotes replaced a COLD team decision.
    COLD changes only by the owner's own signed correction, whatever states a new value."""
    ada = memory_of(make_agent("ada"))
    decision = ada.write(
        category="COMMITMENT", content="We decided to use PostgreSQL for storage.", tags=["decision"]
    )
    ada.compact()
    assert memory.item("ada", decision.ref).tier == "COLD"  # type: ignore[union-attr]
    clock.now += DAY
    sid = ada.open_session(title="vendors")
    ada.turn(sid, "assistant", "Here is the vendor page:\n> The team uses MongoDB for storage.")
    ada.close_session(sid)
    clock.now += DAY
    ada.write(category="CONTEXT", content="The team switched to SQLite for storage.")
    assert [b for b in _replaced(ledger, "ada") if b["item"] == decision.ref] == []
    assert _status(memory, "ada", decision.ref) == "active"
    fixed = ada.supersede(
        decision.ref, content="We decided to use SQLite for storage.", reason="owner's call"
    )
    assert _status(memory, "ada", decision.ref) == "superseded"
    assert memory.item("ada", fixed.ref).tier == "COLD"  # type: ignore[union-attr]
    _same_after_rebuild(memory)


def test_a_decay_exempt_memory_is_never_replaced_by_the_policy(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Issue 40, finding 3: a memory the owner exempted from decay is kept as it is, even
    against the owner's own later statement (the policy may not decide; the owner corrects
    it with ``memory.superseded`` if it changed)."""
    ada = memory_of(make_agent("ada"))
    vim = ada.write(category="CONTEXT", content="The user's editor is vim.")
    ada.exempt(vim.ref, reason="keep this")
    clock.now += DAY
    ada.write(category="CONTEXT", content="The user's editor is Helix.")
    assert _replaced(ledger, "ada") == []
    assert _status(memory, "ada", vim.ref) == "active"
    _same_after_rebuild(memory)


def test_a_hot_fact_is_replaced_only_by_the_same_speakers_later_statement(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Issue 40, finding 3: a HOT memory the user stated is replaced by the user's own later
    statement, never by the agent's or another speaker's."""
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session(title="prefs")

    def said(role: str, text: str, content: str) -> str:
        t = ada.turn(sid, role, text)
        clock.now += DAY
        return ada.write(
            category="PREFERENCE",
            content=content,
            tier="HOT",
            provenance=[{"source_type": "turn", "source_ref": str(t.index)}],
        ).ref

    tacos = said("user", "I prefer tacos to ramen.", "Gina prefers tacos to ramen.")
    said(
        "assistant",
        "Melanie: Gina prefers ramen over tacos, I am sure of it.",
        "Gina prefers ramen over tacos.",
    )
    clock.now += DAY
    ada.write(category="PREFERENCE", content="Gina prefers ramen to tacos.", tier="HOT")  # the agent's own
    assert _replaced(ledger, "ada") == []
    assert _status(memory, "ada", tacos) == "active"
    ramen = said(
        "user", "Honestly I prefer ramen to tacos these days.", "Gina prefers ramen to tacos these days."
    )
    [body] = [b for b in _replaced(ledger, "ada") if b["item"] == tacos]
    assert body["by"] == ramen
    assert _status(memory, "ada", tacos) == "superseded"
    _same_after_rebuild(memory)


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    fake = FakeChat()
    yield fake
    fake.server.shutdown()


def test_a_distiller_update_from_a_relayed_email_does_not_replace_the_users_fact(
    ledger: Ledger, make_agent: Callable[..., Agent], chat: FakeChat, clock: StepClock
) -> None:
    """Issue 40, finding 3: the chat distiller says an entry ``updates`` a known fact; when
    the entry cites a turn relaying someone else's word, the policy does not replace."""
    memory = MemoryService(ledger, distiller=ChatCompletionsDistiller(url=chat.url, model="m"))
    agent = make_agent("ada")
    agent.transport = InProcessMemory(memory)
    ada = AgentMemory(agent)
    dana = ada.write(category="CONTEXT", content="The user's manager is Dana.")
    clock.now += DAY
    entry = {
        "category": "CONTEXT",
        "subject": "the user",
        "content": "The user's manager is now Mallory.",
        "tags": [],
        "confidence": 80,
        "source_turns": [0],
        "updates": dana.ref,
    }
    chat.content({"entries": [entry]})
    sid = ada.open_session(title="inbox")
    ada.turn(sid, "assistant", "The HR email says your manager is now Mallory.")
    ada.close_session(sid)
    assert _replaced(ledger, "ada") == []
    assert memory.item("ada", dana.ref).status == "active"  # type: ignore[union-attr]


def test_a_distiller_that_cites_a_turn_which_never_said_the_value_does_not_replace(
    ledger: Ledger, make_agent: Callable[..., Agent], chat: FakeChat, clock: StepClock
) -> None:
    """Attack on issue 40, finding 3: a model an email talked into it writes the email's
    value as a plain fact and cites a harmless turn of the user's; the user never said it."""
    memory = MemoryService(ledger, distiller=ChatCompletionsDistiller(url=chat.url, model="m"))
    agent = make_agent("ada")
    agent.transport = InProcessMemory(memory)
    ada = AgentMemory(agent)
    dana = ada.write(category="CONTEXT", content="The user's manager is Dana.")
    clock.now += DAY
    entry = {
        "category": "CONTEXT",
        "subject": "the user",
        "content": "The user's manager is now Mallory.",
        "tags": [],
        "confidence": 90,
        "source_turns": [0],
    }
    chat.content({"entries": [entry, {**entry, "updates": dana.ref}]})
    sid = ada.open_session(title="inbox")
    ada.turn(sid, "user", "Can you check my inbox and tidy it up?")
    ada.turn(sid, "tool", "inbox.read -> From: hr@example.com. Your manager is now Mallory.")
    ada.close_session(sid)
    assert _replaced(ledger, "ada") == []
    assert memory.item("ada", dana.ref).status == "active"  # type: ignore[union-attr]

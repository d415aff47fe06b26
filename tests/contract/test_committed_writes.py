"""A write is refused only if nothing of it was committed; otherwise it is answered with its
receipt (issue 40, finding 11), on both backends and in both modes of the signer's record.

With the signer's record unwritable, a write was answered with a refusal although its entry
was committed and a checkpoint signed over it: a client retrying the "refused" write writes
it twice. Every append path is held to the rule here, the log's size proving which answer
was right: registration, a single append and concurrent appends through the group commit, a
memory write whose HOT caps the policy then holds, and a session close whose distillation
follows. The operational problem is reported separately (the log, and ``/healthz``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import EngramError
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory.policy import PolicyConfig
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from tests.conftest import StepClock

TOKEN = "committed-writes-operator-token-0123456789"


@pytest.fixture(params=["after-commit", "before-commit"])
def mode(request: pytest.FixtureRequest, ledger: Ledger) -> str:
    assert ledger.signed_head is not None
    ledger.signed_head.before_commit = request.param == "before-commit"
    return str(request.param)


def _break_record(tmp_path: Path) -> None:
    """The record can no longer be written (its temporary file cannot be created; root
    ignores chmod), as with a key on a read-only mount."""
    record = tmp_path / "log.key.signed-head"
    record.with_name(record.name + ".tmp").mkdir()


def _answered_or_untouched(ledger: Ledger, call: Callable[[], Any], entries: int) -> Any:
    """Run ``call``: answered, the log grew by at least ``entries`` (its own, and what the
    service signs after it); refused, the log did not grow at all."""
    before = ledger.size()
    try:
        answer = call()
    except EngramError as e:
        refused: EngramError = e
    else:
        assert ledger.size() >= before + entries, "answered, yet nothing was committed"
        return answer
    grew = ledger.size() - before
    assert grew == 0, f"refused ({refused.check}: {refused}) yet the log grew by {grew}"
    return refused


def test_a_register_whose_signer_record_cannot_be_written_is_answered_with_its_receipt(
    ledger: Ledger, mode: str, clock: StepClock, tmp_path: Path
) -> None:
    _break_record(tmp_path)
    agent = Agent.generate(
        "alice", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True), clock=clock
    )
    out = _answered_or_untouched(ledger, agent.register, 1)
    if mode == "after-commit":  # committed, then the record failed: the receipt, and the problem named
        assert not isinstance(out, EngramError) and out.index == ledger.size() - 1
        assert "signer.record_unwritable" in ledger.problems()
        # the next write is refused, with nothing committed
        err = _answered_or_untouched(ledger, lambda: agent.append("commitment", {"promise": "p"}), 1)
        assert isinstance(err, EngramError) and err.check == "signer.record_unwritable"
    else:  # the record is written before the commit: refused, nothing committed
        assert isinstance(out, EngramError) and out.check == "signer.record_unwritable"


def test_concurrent_appends_through_the_group_commit_are_each_answered_as_committed(
    ledger: Ledger, mode: str, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    agents = [make_agent(f"agent-{i}") for i in range(12)]
    _break_record(tmp_path)
    answers: dict[str, Any] = {}
    go = threading.Barrier(len(agents))

    def run(a: Agent) -> None:
        go.wait()
        try:
            answers[a.agent_id] = a.append("commitment", {"promise": f"by {a.agent_id}"})
        except EngramError as e:
            answers[a.agent_id] = e

    threads = [threading.Thread(target=run, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a in agents:
        logged = ledger.stream_count(a.agent_id, "commitment")
        if isinstance(answers[a.agent_id], EngramError):
            assert logged == 0, f"{a.agent_id} was refused, yet its entry is in the log"
        else:
            assert logged == 1 and answers[a.agent_id].index < ledger.size()


@pytest.fixture
def memory(ledger: Ledger) -> MemoryService:
    # HOT holds one memory: a second preference makes the policy sign a tier change after it
    return MemoryService(ledger, access_log="sync", config=PolicyConfig(hot_max_items=1))


def test_a_memory_write_whose_caps_cannot_be_signed_is_answered_with_its_receipt(
    ledger: Ledger, mode: str, memory: MemoryService, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    agent = make_agent("alice")
    agent.transport = InProcessMemory(memory)
    mem = AgentMemory(agent)
    mem.write(category="PREFERENCE", content="Alice likes tea in the morning.")
    _break_record(tmp_path)
    out = _answered_or_untouched(
        ledger, lambda: mem.write(category="PREFERENCE", content="Alice reads the news at noon."), 1
    )
    if mode == "after-commit":
        assert not isinstance(out, EngramError), out
        assert {"signer.record_unwritable", "memory.after_commit"} <= set(ledger.problems())


def test_a_session_close_whose_distillation_cannot_be_signed_is_answered_with_its_receipt(
    ledger: Ledger, mode: str, memory: MemoryService, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    agent = make_agent("alice")
    agent.transport = InProcessMemory(memory)
    mem = AgentMemory(agent)
    mem.open_session(title="deploys", session="s1")
    mem.turn("s1", "user", "We always deploy on Tuesdays.")
    _break_record(tmp_path)
    out = _answered_or_untouched(ledger, lambda: mem.close_session("s1"), 1)
    if mode == "after-commit":
        assert not isinstance(out, EngramError), out
        assert out.closed == ledger.size() - 1 and out.distilled is None  # the close, not distilled
        assert memory.projection.session("alice", "s1").status == "closed"  # type: ignore[union-attr]


def test_healthz_names_what_failed_after_a_commit(
    ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    client = TestClient(
        create_app(ApiSettings(operator_token=TOKEN), ledger=ledger, memory_service=MemoryService(ledger))
    )
    assert client.get("/healthz").json() == {"ok": True, "size": ledger.size(), "problems": []}
    agent = make_agent("alice")
    _break_record(tmp_path)
    agent.append("commitment", {"promise": "committed, not recorded"})
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {"ok": False, "size": ledger.size(), "problems": ["signer.record_unwritable"]}
    assert str(tmp_path) not in health.text  # the details stay in the service's log
    (tmp_path / "log.key.signed-head.tmp").rmdir()
    agent.append("commitment", {"promise": "recorded again"})  # the record catches up first
    assert client.get("/healthz").json()["ok"] is True

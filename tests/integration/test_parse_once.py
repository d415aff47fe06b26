"""Issue 27, finding 5: "the same signed event is parsed 4 times per request and its body
twice". A write over HTTP is prepared once at the edge (``Ledger.prepare``: envelope,
signature, body commitment, schema, gate) and handed down parsed: the memory service's
door, the group commit and the append take it as it is."""

from __future__ import annotations

import collections
import sys
import threading
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient

import ledger.envelopes
import verifier.event
from api.app import create_app
from api.settings import ApiSettings
from engram.client.agent_memory import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.memory.service import MemoryService
from ledger.storage.db import make_engine

OPERATOR = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"


def _code(f: Any) -> CodeType:
    while hasattr(f, "__wrapped__"):
        f = f.__wrapped__
    return getattr(f, "__func__", f).__code__  # type: ignore[no-any-return]


def _server_calls(do: Any, watched: dict[CodeType, str]) -> collections.Counter[str]:
    """How often each watched function ran in threads other than this one (the TestClient
    serves the app in its own thread) while ``do()`` ran."""
    counts: collections.Counter[str] = collections.Counter()
    me = threading.get_ident()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in watched and threading.get_ident() != me:
            counts[watched[frame.f_code]] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        do()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return counts


@pytest.mark.parametrize("kind", ["memory.written", "session.turn"])
def test_a_write_is_parsed_once_at_the_edge(tmp_path: Path, kind: str) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'parse.db'}")
    log = create_ledger(
        engine,
        LogKey("example.com/parse-once", Ed25519PrivateKey.generate()),
        policy_key=Ed25519PrivateKey.generate(),
        signed_head=tmp_path / "signed-head",
    )
    memory = MemoryService(log, access_log="off")
    client = TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=log, memory_service=memory))
    transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    mem = AgentMemory(Agent.generate("parser", log_vkey=log.vkey, transport=transport, state_dir=None))
    mem.agent.register()
    sid = mem.open_session(title="warm-up")
    mem.turn(sid, "user", "the caches are warm after this")
    mem.write(category="LEARNING", content="the caches are warm after this write")

    def write() -> None:
        if kind == "memory.written":
            mem.write(category="LEARNING", content="this write is the one counted")
        else:
            mem.turn(sid, "user", "this turn is the one counted")

    watched = {
        _code(ledger.envelopes.parse_envelope): "parse_envelope",
        _code(verifier.event.verify_body): "verify_body",
    }
    counts = _server_calls(write, watched)
    assert counts["parse_envelope"] == 1, counts  # the submitted envelope, once
    assert counts["verify_body"] == 1, counts  # the submitted body against its commitment, once
    engine.dispose()

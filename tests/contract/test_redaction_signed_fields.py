"""Issue 25, findings 1 and 2, on both backends: every recall signed the raw prompt into the
log (``memory.accessed``'s ``query``, kept verbatim, secrets included, and not erasable), and
fields a kind does not declare (a turn's tool result, an erasure's reason) were never
scanned. Now every string of every body is redacted by the signer and re-checked by the log,
and an access entry carries only a keyed digest of its query."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engram.client.sdk import Agent
from engram.protocol.gate import GateRejection
from ledger.log import Ledger
from ledger.memory.access import query_digest, query_key
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf
from verifier.event import Leaf

GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
AWS = "AKIA" + "QWERTYUIOPASDFGH"
PROMPT = f"why does the deploy fail with {GITHUB} and aws key {AWS}? the pelican-orchid build broke"


def _entries(ledger: Ledger) -> Iterator[tuple[Leaf, dict[str, Any]]]:
    for i in range(ledger.size()):
        raw = ledger.store.leaf(i)
        assert raw is not None
        body = ledger.store.body(i)
        yield Leaf.from_bytes(raw), ({} if body is None else json.loads(body[1]))


def _no_secret_anywhere(ledger: Ledger, *secrets: str) -> None:
    for i in range(ledger.size()):
        body = ledger.store.body(i)
        if body is not None:
            for s in secrets:
                assert s.encode() not in body[1], (i, s)


def test_recall_signs_no_raw_query(
    memory: MemoryService, ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 25, finding 1."""
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session(title="deploys")
    ada.turn(sid, "user", PROMPT)  # what the hook logs before it recalls
    ada.write(category="LEARNING", content="The pelican-orchid build needs the staging cache")
    memory.access.flush()
    size = ledger.size()
    result = memory.recall("ada", PROMPT, session=sid)
    assert result.ranked  # something was used, so an access entry is written
    memory.access.flush()
    accessed = [(leaf, body) for leaf, body in _entries(ledger) if leaf.envelope.kind == "memory.accessed"]
    assert accessed and ledger.size() > size
    for _leaf, body in accessed:
        assert "query" not in body
        assert "pelican" not in json.dumps(body)  # no words of the prompt either
        assert body["query_digest"] == query_digest(query_key(ledger.policy_key), "ada", PROMPT)  # type: ignore[arg-type]
    _no_secret_anywhere(ledger, GITHUB, AWS)


def test_query_digest_is_keyed_and_normalised(ledger: Ledger) -> None:
    """Issue 25, finding 1."""
    assert ledger.policy_key is not None
    key = query_key(ledger.policy_key)
    d = query_digest(key, "ada", "Which  ORDER was it?")
    assert d == query_digest(key, "ada", "which order was it?")
    assert d != query_digest(key, "bob", "which order was it?")  # per agent
    assert d != query_digest(b"\x00" * 32, "ada", "which order was it?")  # keyed
    assert len(d) == 64


def test_undeclared_fields_are_redacted_before_signing(
    memory: MemoryService, ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 25, finding 2."""
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session()
    env = f"DB_PASSWORD=hunter2-prod\nSTRIPE_SECRET_KEY=sk_live_{'a1B2c3D4e5F6g7H8i9J0k1L2'}\n"
    ada.turn(
        sid,
        "tool",
        "read the env file",
        tool={"name": "Bash", "arguments": {"command": "cat .env"}, "result": env},
    )
    t = ada.turn(sid, "user", "my token is fine")
    ada.erase(t.index, reason=f"pasted {GITHUB} by mistake")
    _no_secret_anywhere(ledger, "hunter2-prod", "sk_live_a1B2", GITHUB)
    bodies = [(leaf.envelope.kind, body) for leaf, body in _entries(ledger)]
    (erased,) = [b for k, b in bodies if k == "memory.erased"]
    assert "[REDACTED:github_token]" in erased["reason"]
    (tool_turn,) = [b for k, b in bodies if k == "session.turn" and "tool" in b]
    assert "DB_PASSWORD=[REDACTED:assigned_secret]" in tool_turn["tool"]["result"]


def test_a_signed_body_with_a_secret_in_any_field_is_refused(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 25, finding 2."""
    ada = make_agent("ada")
    sid = memory_of(ada).open_session()
    size = ledger.size()
    monkeypatch.setattr(
        "engram.protocol.signer.redact_body", lambda body: body
    )  # a client that does not redact
    body = {
        "session": sid,
        "turn": 0,
        "role": "tool",
        "content": "ran it",
        "tool": {"name": "Bash", "result": {"stdout": f"export PGPASSWORD=pg-s3cr3t-{AWS}"}},
    }
    with pytest.raises(GateRejection) as e:
        ada.append("session.turn", body)
    assert e.value.check == "gate.secret" and "$.tool.result.stdout" in str(e.value)
    assert ledger.size() == size

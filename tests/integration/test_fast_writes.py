"""Issue 28, Deliver 4: the agent-signed writes served before the framework (api/fastwrites.py)
answer exactly as the framework's routes do.

Two logs start identical (same log and policy keys, same deterministic clock) behind two apps:
one takes these writes on the fast path, the other through FastAPI's routing. Every request
goes to both, and the answers must be byte-identical (status, headers, body): the successful
writes (same index, timestamp, leaf, checkpoint and proof on both logs), the refusals the route
makes (a stale stream head, a wrong agent or kind, a bad signature) and whatever the fast path
leaves to the framework (a body that is not the model, a path or header the patterns refuse,
another content type, a query string). Hypothesis mutates valid requests to find a difference.
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api import fastwrites
from api.app import create_app
from api.settings import ApiSettings
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.bodies import opened_body, turn_body, written_body
from engram.protocol.gate import WriteGate
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger, memory_rules
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.conftest import StepClock

OPERATOR = "2KszfFVxSihaUFeuDLDTyjZFHFyM2i4VjKml0tK_"


class Tee:
    """An HTTP client for HttpTransport that sends every request to both apps and checks the
    two answers are the same bytes; returns the fast path's."""

    def __init__(self, fast: TestClient, framework: TestClient) -> None:
        self.fast, self.framework = fast, framework
        self.compared = 0

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        a = self.fast.request(method, url, **kw)
        b = self.framework.request(method, url, **kw)
        assert (a.status_code, a.headers.raw, a.content) == (b.status_code, b.headers.raw, b.content), (
            method,
            url,
        )
        self.compared += 1
        return a


@dataclass
class Twins:
    tee: Tee
    fast_app: FastAPI
    agent: Agent
    session: str


def _app(url: str, log_key: LogKey, policy_key: Ed25519PrivateKey, record: Path, fast: bool) -> TestClient:
    ledger = Ledger(
        SqlStore(make_engine(url)),
        log_key,
        clock=StepClock(start=1_800_000_000_000_000),
        policy_key=policy_key,
        rules=memory_rules(),
        signed_head=record,
    )
    # No background writers: the two logs stay in step only if nothing but the requests appends.
    memory = MemoryService(ledger, access_log="off")
    app = create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger, memory_service=memory)
    app.state.fast_writes = fast
    return TestClient(app)  # no lifespan: no follower; the door syncs in the request


@pytest.fixture
def twins(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    log_key: LogKey,
    policy_key: Ed25519PrivateKey,
) -> Iterator[Twins]:
    """One new log (its first entries carry random salts), copied: two identical logs."""
    record = tmp_path / "log.key.signed-head"
    if backend == "sqlite":
        urls = [f"sqlite:///{tmp_path / 'fast.db'}", f"sqlite:///{tmp_path / 'framework.db'}"]
    else:
        server = request.getfixturevalue("pg_server")
        urls = [server.new_database()]
    engine = make_engine(urls[0])
    create_ledger(engine, log_key, clock=StepClock(), policy_key=policy_key, signed_head=record)
    engine.dispose()
    if backend == "sqlite":
        with sqlite3.connect(tmp_path / "fast.db") as src, sqlite3.connect(tmp_path / "framework.db") as dst:
            src.backup(dst)
    else:
        name = f"{urls[0].rsplit('/', 1)[1]}_twin"
        server._exec(f'CREATE DATABASE "{name}" TEMPLATE "{urls[0].rsplit("/", 1)[1]}"')
        server.created.append(name)
        urls.append(server.url(name))
    (tmp_path / "b").mkdir()
    shutil.copy(record, tmp_path / "b" / record.name)
    fast = _app(urls[0], log_key, policy_key, record, True)
    framework = _app(urls[1], log_key, policy_key, tmp_path / "b" / record.name, False)
    tee = Tee(fast, framework)
    t = HttpTransport("http://testserver", operator_token=OPERATOR, http=tee)
    agent = Agent.generate("twin", log_vkey=log_key.vkey, transport=t, clock=StepClock())
    agent.register()
    session = "s1"
    agent.append("session.opened", opened_body(session, "twins"))
    yield Twins(tee=tee, fast_app=fast.app, agent=agent, session=session)  # type: ignore[arg-type]
    for c in (fast, framework):
        c.app.state.services.ledger.store.engine.dispose()  # type: ignore[attr-defined]
    if backend != "sqlite":
        for u in urls:
            server.drop(u)


def _wire(agent: Agent, kind: str, body: dict[str, Any]) -> dict[str, str]:
    version, prev = agent._next(kind, refresh=True)
    sub = agent.signer.event(kind, body, version=version, prev=prev, client_time_us=agent.clock())
    return {
        "envelope": base64.b64encode(sub.envelope).decode(),
        "signature": base64.b64encode(sub.signature).decode(),
        "body": base64.b64encode(sub.body).decode(),
        "salt": base64.b64encode(sub.salt).decode(),
    }


def _valid(tw: Twins, route: str, n: int) -> tuple[str, dict[str, str]]:
    a = tw.agent
    if route == "records":
        return f"/v1/agents/{a.agent_id}/records", _wire(a, "commitment", {"promise": f"promise {n}"})
    if route == "memories":
        body = written_body(WriteGate(), category="LEARNING", content=f"learned thing {n}")
        return f"/v1/agents/{a.agent_id}/memories", _wire(a, "memory.written", body)
    if route == "turns":
        head = a._next("session.turn", refresh=True)[0]
        body = turn_body(tw.session, head, "user", f"turn {n}")
        return f"/v1/agents/{a.agent_id}/sessions/{tw.session}/turns", _wire(a, "session.turn", body)
    return f"/v1/agents/{a.agent_id}/sessions", _wire(a, "session.opened", opened_body(f"s-{n}", "more"))


def _post(
    tw: Twins, path: str, content: bytes, headers: dict[str, str] | list[tuple[str, str]]
) -> httpx.Response:
    return tw.tee.request("POST", "http://testserver" + path, content=content, headers=headers)


def test_fast_writes_answer_as_the_framework_does(twins: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each route's success, with and without Engram-Known-Size, taken by the fast path."""
    calls: list[str] = []
    answer = fastwrites._answer

    def counted(route: Any, *a: Any) -> bytes:
        calls.append(route.__name__)
        return answer(route, *a)

    monkeypatch.setattr(fastwrites, "_answer", counted)
    taken = []
    for n, route in enumerate(["records", "memories", "turns", "sessions", "records", "turns"]):
        path, ev = _valid(twins, route, n)
        headers = {"content-type": "application/json"}
        if n % 2:
            headers["engram-known-size"] = "2"
        r = _post(twins, path, json.dumps(ev).encode(), headers)
        assert r.status_code == 201, r.text
        taken.append(r.json())
    assert calls == ["write_record", "write_memory", "turn", "open_session", "write_record", "turn"]
    assert any(
        "consistency" in (t.get("receipt") or t) and (t.get("receipt") or t)["consistency"] for t in taken
    )


_CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "text/plain", "APPLICATION/JSON", ""]
_KNOWN = [None, "0", "3", "007", "-1", " 4", "4 ", "9007199254740992", "9007199254740993", "x", "1e3", "+2"]


_BODIES = [
    "spaced",
    "drop-field",
    "extra-field",
    "not-json",
    "empty",
    "list",
    "int-field",
    "dup-key",
    "bad-signature",
    "bad-base64",
    "long-field",
    "stale",
    "utf16",
]
_PATHS = ["other-agent", "bad-agent", "newline", "slash", "bad-session", "upper"]


@st.composite
def _mutation(draw: st.DrawFn) -> dict[str, Any]:
    """A valid request of a route with at most one part changed (a third of them valid)."""
    m: dict[str, Any] = {
        "route": draw(st.sampled_from(["records", "memories", "turns", "sessions"])),
        "content_type": "application/json",
        "known": draw(st.sampled_from([None, "0", "3"])),
        "known_twice": False,
        "query": "",
        "path": "same",
        "body": "same",
    }
    part = draw(st.sampled_from(["none", "none", "none", "content_type", "known", "query", "path", "body"]))
    if part == "content_type":
        m["content_type"] = draw(st.sampled_from(_CONTENT_TYPES[1:]))
    elif part == "known":
        m["known"] = draw(st.sampled_from(_KNOWN))
        m["known_twice"] = draw(st.booleans())
    elif part == "query":
        m["query"] = "?x=1"
    elif part == "path":
        m["path"] = draw(st.sampled_from(_PATHS))
    elif part == "body":
        m["body"] = draw(st.sampled_from(_BODIES))
    return m


def _mutate(tw: Twins, m: dict[str, Any], n: int) -> tuple[str, bytes, list[tuple[str, str]]]:
    path, ev = _valid(tw, m["route"], n)
    agent = tw.agent.agent_id
    if m["path"] == "other-agent":
        path = path.replace(f"/agents/{agent}/", "/agents/someone-else/")
    elif m["path"] == "bad-agent":
        path = path.replace(f"/agents/{agent}/", "/agents/-bad/")
    elif m["path"] == "newline":
        path = path.replace(f"/agents/{agent}/", f"/agents/{agent}%0A/")
    elif m["path"] == "slash":
        path += "/"
    elif m["path"] == "bad-session" and "/turns" in path:
        path = path.replace(f"/sessions/{tw.session}/", "/sessions/.bad/")
    elif m["path"] == "upper":
        path = path.replace("/v1/", "/V1/")
    body = m["body"]
    data: bytes
    if body == "spaced":
        data = json.dumps(ev, indent=2).encode()
    elif body == "drop-field":
        data = json.dumps({k: v for k, v in ev.items() if k != "salt"}).encode()
    elif body == "extra-field":
        data = json.dumps({**ev, "more": 1}).encode()
    elif body == "not-json":
        data = b"{not json"
    elif body == "empty":
        data = b""
    elif body == "list":
        data = json.dumps([ev]).encode()
    elif body == "int-field":
        data = json.dumps({**ev, "salt": 5}).encode()
    elif body == "dup-key":
        data = json.dumps(ev)[:-1].encode() + b', "salt": "AAAAAAAAAAAAAAAAAAAAAA=="}'
    elif body == "bad-signature":
        sig = bytearray(base64.b64decode(ev["signature"]))
        sig[0] ^= 1
        data = json.dumps({**ev, "signature": base64.b64encode(bytes(sig)).decode()}).encode()
    elif body == "bad-base64":
        data = json.dumps({**ev, "body": "!!!!"}).encode()
    elif body == "long-field":
        data = json.dumps({**ev, "salt": "A" * 40}).encode()
    elif body == "stale":
        _post(tw, path, json.dumps(ev).encode(), {"content-type": "application/json"})
        data = json.dumps(ev).encode()  # the same event again: its stream head moved
    elif body == "utf16":
        data = json.dumps(ev).encode("utf-16")
    else:
        data = json.dumps(ev).encode()
    headers = [("content-type", m["content_type"])] if m["content_type"] else []
    if m["known"] is not None:
        headers.append(("engram-known-size", m["known"]))
        if m["known_twice"]:
            headers.append(("engram-known-size", "1"))
    return path + m["query"], data, headers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fast_writes_property_same_bytes_as_the_framework(twins: Twins, data: st.DataObject) -> None:
    """Generated requests, valid and not: the two apps answer each with the same bytes."""
    m = data.draw(_mutation())
    n = twins.tee.compared
    path, body, headers = _mutate(twins, m, n)
    before = twins.tee.compared
    answer = _post(twins, path, body, headers)
    assert twins.tee.compared == before + 1
    if m == {**m, "content_type": "application/json", "query": "", "path": "same", "body": "same"} and (
        m["known"] in (None, "0", "3") and not m["known_twice"]
    ):
        assert answer.status_code == 201, answer.text  # a valid request: written, on the fast path

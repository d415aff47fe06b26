"""Issue 31, Deliver 1: the web UI's pages and queries, on both backends (the browser itself
is driven in tests/e2e/test_ui_browser.py).

* The explorer's bounded queries (ledger.explore) page through exactly what a brute-force
  listing of the log holds, newest first, by agent, by kind and by both.
* The owner view opens only with a one-time ticket signed by the agent's active key, once,
  before it expires, for this log; the session shows that agent and no other, ends when the
  key is rotated, and a forged or altered cookie opens nothing.
* Public pages never show a body; the owner sees its own.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from api.app import create_app
from api.settings import ApiSettings
from api.ui.session import COOKIE
from engram.client.sdk import Agent
from engram.protocol.errors import AuthError
from engram.protocol.uiticket import MAX_TICKET_S, make_ticket, parse_ticket
from ledger import explore
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf

TOKEN = "ui-test-operator-token-0123456789abcdef"


def _brute(ledger: Ledger, agent: str | None = None, kind: str | None = None) -> list[int]:
    from sqlalchemy import select

    from ledger.storage.schema import leaves

    with ledger.store.read() as conn:
        rows = conn.execute(select(leaves.c.idx, leaves.c.agent, leaves.c.kind).order_by(leaves.c.idx.desc()))
        return [
            int(r.idx)
            for r in rows
            if r.idx < ledger.size()
            and (agent is None or r.agent == agent)
            and (kind is None or r.kind == kind)
        ]


def _walk(ledger: Ledger, **flt: str | None) -> list[int]:
    seen: list[int] = []
    before = None
    for _ in range(1000):
        page = explore.entries_page(ledger, ledger.size(), before=before, limit=7, **flt)  # type: ignore[arg-type]
        seen += [r.index for r in page.rows]
        for r in page.rows:
            assert (flt.get("agent") in (None, r.agent)) and (flt.get("kind") in (None, r.kind))
        if page.next_before is None:
            return seen
        before = page.next_before
    raise AssertionError("paging did not end")


@pytest.fixture
def busy(ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf) -> dict[str, Agent]:
    agents = {n: make_agent(n) for n in ("ann", "bob", "cy")}
    for i in range(12):
        a = agents[("ann", "bob", "cy")[i % 3]]
        a.append(
            "pact.outcome",
            {"pact": f"p{i}", "result": "fulfilled" if i % 4 else "violated", "quality": 60 + i},
        )
        if i % 2:
            a.append("eval.outcome", {"eval": f"e{i}", "result": "pass", "score": 70 + i})
    memory_of(agents["ann"]).write(category="PREFERENCE", content="Ann likes terse answers.")
    return agents


def test_entry_pages_list_exactly_the_log_newest_first(ledger: Ledger, busy: dict[str, Agent]) -> None:
    assert _walk(ledger) == _brute(ledger)
    for agent in ("ann", "bob", "nobody"):
        assert _walk(ledger, agent=agent) == _brute(ledger, agent=agent)
    for kind in ("pact.outcome", "eval.outcome", "key.registered", "mesh.created"):
        assert _walk(ledger, kind=kind) == _brute(ledger, kind=kind)
        assert _walk(ledger, agent="cy", kind=kind) == _brute(ledger, agent="cy", kind=kind)


def test_a_kind_across_agents_reads_a_bounded_window(
    ledger: Ledger, busy: dict[str, Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(explore, "SCAN_WINDOW", 5)
    page = explore.entries_page(ledger, ledger.size(), kind="key.registered", limit=50)
    # the window holds none of the registrations (they are the log's first entries): the
    # page says where it stopped and the next page goes on from there
    assert page.rows == [] and page.scanned_to == ledger.size() - 5 and page.next_before == ledger.size() - 5
    assert _walk(ledger, kind="key.registered") == _brute(ledger, kind="key.registered")


def test_agents_page_growth_and_series(ledger: Ledger, busy: dict[str, Agent]) -> None:
    rows, nxt = explore.agents_page(ledger, limit=2)
    assert [r.agent for r in rows] == ["ann", "bob"] and nxt == "bob"
    rows, nxt = explore.agents_page(ledger, after="bob", limit=2)
    assert [r.agent for r in rows] == ["cy", "engram.policy"] and nxt is None  # the policy agent too
    assert [r.agent for r in explore.agents_page(ledger, prefix="b")[0]] == ["bob"]
    points = explore.growth(ledger, ledger.size(), points=5)
    assert points[-1][1] == ledger.size() and points[0][1] == 1
    assert [s for _, s in points] == sorted(s for _, s in points)
    s = explore.agent_series(ledger, "ann", ledger.size())
    pacts = [60 + i for i in range(0, 12, 3)]
    assert sum(n for *_, n in s.quality_by_month) == len(pacts) + 2  # 4 pacts, 2 evals (i = 3, 9)
    assert s.mean_quality == f"{sum(pacts) / len(pacts):.2f}"
    weeks = s.outcomes_by_week
    # ann has i = 0, 3, 6, 9: violated at 0 (i % 4 == 0), fulfilled at 3, 6, 9; evals at 3 and 9
    assert [sum(w[k] for w in weeks) for k in (1, 2, 3, 4)] == [3, 1, 2, 0]
    with pytest.raises(Exception, match="1-100"):
        explore.entries_page(ledger, ledger.size(), limit=101)


def _client(ledger: Ledger) -> TestClient:
    memory = MemoryService(ledger, access_log="off")
    return TestClient(create_app(ApiSettings(operator_token=TOKEN), ledger=ledger, memory_service=memory))


def _ticket(ledger: Ledger, agent: Agent, **kw: int) -> str:
    return make_ticket(
        ledger.origin, agent.agent_id, agent.signer.private_key, now_s=kw.pop("now", 0) or _now(), **kw
    )


def _now() -> int:
    import time

    return int(time.time())


def test_public_pages_render_and_show_no_body(ledger: Ledger, busy: dict[str, Agent]) -> None:
    client = _client(ledger)
    for path in (
        "/ui",
        "/ui/entries",
        "/ui/entries?agent=ann",
        "/ui/entries?kind=pact.outcome",
        "/ui/agents",
        "/ui/agents/ann",
        "/ui/verify",
        "/ui/entries/3",
        "/ui/static/ui.js",
        "/ui/static/engram-verify.js",
    ):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:300])
    home = client.get("/ui")
    assert "default-src 'none'" in home.headers["content-security-policy"]
    assert ledger.vkey in home.text and f"{ledger.size():,} entries" in home.text
    agent = client.get("/ui/agents/ann").text
    assert "Pacts fulfilled" in agent and "<svg" in agent and "Quality by month" in agent
    ann_write = _brute(ledger, agent="ann", kind="memory.written")[0]
    page = client.get(f"/ui/entries/{ann_write}").text
    assert "withheld" in page and "terse answers" not in page
    assert client.get("/ui/agents/nobody").status_code == 404
    assert client.get(f"/ui/entries/{ledger.size()}").status_code == 404
    assert client.get("/ui/entries?limit=101").status_code == 400
    assert client.get("/ui/entries?agent=%3Cscript%3E").status_code == 400
    assert client.get("/ui/entry?index=2", follow_redirects=False).headers["location"] == "/ui/entries/2"


def test_templates_and_assets_load_nothing_from_elsewhere() -> None:
    from pathlib import Path

    ui = Path(__file__).resolve().parents[2] / "api" / "ui"
    for f in [*ui.glob("templates/*.html"), *ui.glob("static/*.css"), ui / "static" / "ui.js"]:
        text = f.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), f
        assert "<script>" not in text, f  # no inline script: the CSP allows only /ui/static


def test_the_owner_view_needs_the_agents_authority(
    ledger: Ledger, busy: dict[str, Agent], memory_of: MemoryOf
) -> None:
    client = _client(ledger)
    ann, bob = busy["ann"], busy["bob"]
    r = client.get("/ui/agents/ann/memory")
    assert r.status_code == 401 and "terse" not in r.text and "engram ui" in r.text
    ticket = _ticket(ledger, ann)
    r = client.get(f"/ui/login?ticket={ticket}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/agents/ann/memory"
    cookie = r.cookies[COOKIE]
    set_cookie = r.headers["set-cookie"].lower()
    assert "httponly" in set_cookie and "samesite=strict" in set_cookie and "path=/ui" in set_cookie
    page = client.get("/ui/agents/ann/memory?tier=HOT")
    assert page.status_code == 200 and "Ann likes terse answers." in page.text
    recalled = client.post(
        "/ui/agents/ann/memory",
        data={"q": "how should answers be?", "tier": "HOT"},
        headers={"Sec-Fetch-Site": "same-origin"},
    )
    assert "&lt;memory-context" in recalled.text and "terse answers" in recalled.text
    # the session shows ann's bodies on entry pages, and nothing of bob
    ann_write = _brute(ledger, agent="ann", kind="memory.written")[0]
    assert "terse answers" in client.get(f"/ui/entries/{ann_write}").text
    other = client.get("/ui/agents/bob/memory")
    assert other.status_code == 403 and "Not your agent" in other.text
    bob_pact = _brute(ledger, agent="bob", kind="pact.outcome")[0]
    assert "withheld" in client.get(f"/ui/entries/{bob_pact}").text
    # the ticket works once
    fresh = TestClient(client.app)
    again = fresh.get(f"/ui/login?ticket={ticket}", follow_redirects=False)
    assert again.status_code == 401 and "ui.replay" in again.text
    # an altered cookie opens nothing; a cookie of ann's does not name bob
    text, tag = cookie.split(".")
    forged = (
        base64.urlsafe_b64encode(
            base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).replace(b"ann", b"bob", 1)
        )
        .rstrip(b"=")
        .decode()
    )
    fresh.cookies.set(COOKIE, f"{forged}.{tag}", path="/ui")
    assert fresh.get("/ui/agents/bob/memory").status_code == 401
    # rotating the key ends the session
    ann.rotate()
    assert client.get("/ui/agents/ann/memory").status_code == 401
    # a ticket bob signs opens bob's memory only
    r = fresh.get(f"/ui/login?ticket={_ticket(ledger, bob)}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/agents/bob/memory"


@pytest.mark.parametrize(
    ("how", "check"),
    [
        ("expired", "ui.expired"),
        ("too_long", "ui.expired"),
        ("other_log", "ui.origin"),
        ("not_the_agents_key", "ui.key"),
        ("bit_flip", "ui.signature"),
        ("garbage", "ui.ticket"),
    ],
)
def test_bad_tickets_are_refused_by_name(
    ledger: Ledger, busy: dict[str, Agent], how: str, check: str
) -> None:
    ann = busy["ann"]
    now = _now()
    if how == "expired":
        t = _ticket(ledger, ann, now=now - 200, lifetime_s=60)
    elif how == "too_long":
        t = make_ticket(ledger.origin, "ann", ann.signer.private_key, now_s=now + MAX_TICKET_S, lifetime_s=60)
    elif how == "other_log":
        t = make_ticket("example.org/other", "ann", ann.signer.private_key, now_s=now)
    elif how == "not_the_agents_key":
        t = make_ticket(ledger.origin, "ann", Ed25519PrivateKey.generate(), now_s=now)
    elif how == "bit_flip":
        text, sig = _ticket(ledger, ann).split(".")
        raw = bytearray(base64.urlsafe_b64decode(sig + "=="))
        raw[5] ^= 1
        t = text + "." + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    else:
        t = "x" * 2000
    r = _client(ledger).get("/ui/login", params={"ticket": t}, follow_redirects=False)
    if how == "garbage":
        assert r.status_code == 400  # longer than a ticket can be: refused before it is read
        return
    assert r.status_code == 401 and f"[{check}]" in r.text and COOKIE not in r.headers.get("set-cookie", "")


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=8), st.integers(min_value=0, max_value=400))
def test_a_changed_ticket_text_never_parses_to_the_signed_text(junk: bytes, at: int) -> None:
    key = Ed25519PrivateKey.from_private_bytes(bytes(32))
    t = make_ticket("example.com/log", "ann", key, now_s=1_800_000_000)
    text_part, sig = t.split(".")
    text = base64.urlsafe_b64decode(text_part + "=" * (-len(text_part) % 4))
    at %= len(text)
    changed = text[:at] + junk + text[at + 1 :]
    if changed == text:
        return
    wire = base64.urlsafe_b64encode(changed).rstrip(b"=").decode() + "." + sig
    try:
        parsed = parse_ticket(wire)
    except AuthError as e:
        failed = e.check
    else:
        failed = None
    if failed is not None:
        assert failed == "ui.ticket"
        return
    # it parsed: then it is a different, canonical text, which the signature does not cover
    assert parsed.text == changed != text


def test_the_memory_tabs_count_what_they_list(
    ledger: Ledger, busy: dict[str, Agent], memory_of: MemoryOf
) -> None:
    """The owner view's tab counts come from one grouped count (item_counts), not from reading
    every item of each tab: they equal what listing the tab returns."""
    ann = memory_of(busy["ann"])
    ann.write(category="CONTEXT", content="Ann's editor is vim.")
    ann.write(category="CONTEXT", content="Ann's editor is VS Code.")  # replaces the vim one
    memory = MemoryService(ledger, access_log="off")
    memory.sync()
    by = memory.item_counts("ann")
    for tier in ("HOT", "WARM", "COLD"):
        assert by.get((tier, "active"), 0) == len(memory.items("ann", tiers=[tier], status="active"))
    superseded = sum(n for (_, st), n in by.items() if st == "superseded")
    assert superseded == len(memory.items("ann", status="superseded")) >= 1
    client = _client(ledger)
    r = client.get(f"/ui/login?ticket={_ticket(ledger, busy['ann'])}", follow_redirects=False)
    assert r.status_code == 303
    page = client.get("/ui/agents/ann/memory?tier=past").text
    assert f'Past values\n<span class="count">{superseded}</span>' in page and "editor is vim" in page

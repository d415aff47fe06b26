"""The web UI's owner sessions end when the owner says so, and the recall playground's
question travels in a same-origin POST (issue 40, finding 9), on both backends.

"Sign out" only deleted the browser's cookie: a copy of it opened the memory view for the rest
of its 30 minutes. Signing out now records the session's id in the database every worker
shares, and each worker refuses the cookie on every owner request. The playground was a GET
form, so the service's access log kept every question; it is a POST now, accepted from this
site's own pages only."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from api.settings import ApiSettings
from api.ui.session import COOKIE, SESSION_S, OwnerSessions
from engram.client.sdk import Agent
from engram.protocol.errors import StorageError
from engram.protocol.uiticket import make_ticket
from ledger.compose import memory_rules
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.storage.db import make_engine
from ledger.storage.schema import ui_revoked_sessions
from ledger.storage.store import SqlStore
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf

TOKEN = "ui-test-operator-token-0123456789abcdef"
SAME = {"Sec-Fetch-Site": "same-origin"}
QUESTION = "Is my HIV test from March relevant, and is the key sk_live_4eC39HqLyjWDarjtT1zdp7dc still valid?"


def _app(ledger: Ledger) -> TestClient:
    return TestClient(
        create_app(
            ApiSettings(operator_token=TOKEN),
            ledger=ledger,
            memory_service=MemoryService(ledger, access_log="off"),
        )
    )


@pytest.fixture
def workers(ledger: Ledger, db_url: str, clock: StepClock) -> Iterator[tuple[TestClient, TestClient]]:
    """Two workers of one service: each its own engine, ledger and app over one database."""
    engine = make_engine(db_url)
    other = Ledger(SqlStore(engine), ledger.log_key, clock=clock, rules=memory_rules())
    try:
        yield _app(ledger), _app(other)
    finally:
        engine.dispose()


WRITTEN: dict[str, int] = {}


@pytest.fixture
def ann(make_agent: Callable[..., Agent], memory_of: MemoryOf) -> Agent:
    agent = make_agent("ann")
    WRITTEN["ann"] = memory_of(agent).write(category="PREFERENCE", content="Ann likes terse answers.").index
    return agent


def _login(client: TestClient, ledger: Ledger, agent: Agent) -> str:
    ticket = make_ticket(ledger.origin, agent.agent_id, agent.signer.private_key, now_s=int(time.time()))
    r = client.get(f"/ui/login?ticket={ticket}", follow_redirects=False)
    assert r.status_code == 303, r.text
    return str(r.cookies[COOKIE])


def _as(client: TestClient, cookie: str) -> TestClient:
    """The client with only this session cookie (a copy of it, as another browser holds)."""
    client.cookies.clear()
    client.cookies.set(COOKIE, cookie)
    return client


def _view(client: TestClient, cookie: str) -> int:
    return _as(client, cookie).get("/ui/agents/ann/memory?tier=HOT").status_code


def test_a_signed_out_session_cookie_is_refused_by_every_worker(
    ledger: Ledger, workers: tuple[TestClient, TestClient], ann: Agent
) -> None:
    a, b = workers
    cookie = _login(a, ledger, ann)
    copied = cookie  # what a shoulder-surfer or a stolen browser profile holds
    assert _view(a, copied) == 200 and _view(b, copied) == 200
    entry = f"/ui/entries/{WRITTEN['ann']}"
    assert "terse answers" in _as(b, copied).get(entry).text  # the owner sees the body
    out = _as(a, cookie).post("/ui/logout", headers=SAME, follow_redirects=False)
    assert out.status_code == 303 and 'engram_ui=""' in out.headers["set-cookie"]
    # every worker refuses the copy at once: the memory view, the owner's bodies, /ui/me
    assert _view(a, copied) == 401 and _view(b, copied) == 401
    withheld = _as(b, copied).get(entry).text
    assert "withheld" in withheld and "terse answers" not in withheld
    assert _as(b, copied).get("/ui/me", follow_redirects=False).status_code == 401
    played = _as(b, copied).post("/ui/agents/ann/memory", data={"q": "answers?", "tier": "HOT"}, headers=SAME)
    assert played.status_code == 401 and "terse" not in played.text
    # a new sign-in opens a new session; signing out twice is harmless
    fresh = _login(b, ledger, ann)
    assert _view(a, fresh) == 200
    assert _as(a, copied).post("/ui/logout", headers=SAME, follow_redirects=False).status_code == 303


def test_revoked_sessions_are_pruned_once_their_cookies_expired(
    ledger: Ledger, ann: Agent, clock: StepClock
) -> None:
    now = [int(time.time())]
    sessions = OwnerSessions(ledger, clock=lambda: now[0])

    def rows() -> int:
        with ledger.store.read() as conn:
            return int(conn.execute(select(func.count()).select_from(ui_revoked_sessions)).scalar_one())

    cookies = []
    for _ in range(3):
        ticket = make_ticket(ledger.origin, "ann", ann.signer.private_key, now_s=now[0])
        cookies.append(sessions.redeem(ticket)[0])
    for c in cookies[:2]:
        assert sessions.revoke(c) is not None and sessions.check(c) is None
    assert sessions.check(cookies[2]) is not None and rows() == 2
    now[0] += SESSION_S + 301  # both expired, and past the clock grace
    ticket = make_ticket(ledger.origin, "ann", ann.signer.private_key, now_s=now[0])
    later, _ = sessions.redeem(ticket)
    assert sessions.revoke(later) is not None
    assert rows() == 1  # the two expired rows went with this write


def test_the_playground_question_is_posted_and_a_get_recalls_nothing(
    ledger: Ledger, workers: tuple[TestClient, TestClient], ann: Agent
) -> None:
    a, _ = workers
    cookie = _login(a, ledger, ann)
    page = _as(a, cookie).get("/ui/agents/ann/memory").text
    assert '<form method="post" action="/ui/agents/ann/memory"' in page
    posted = _as(a, cookie).post("/ui/agents/ann/memory", data={"q": QUESTION, "tier": "HOT"}, headers=SAME)
    assert posted.status_code == 200 and 'id="recall-block"' in posted.text
    assert posted.headers["cache-control"] == "no-store"
    # the question in a URL is no longer acted on (a link or a log line recalls nothing)
    got = _as(a, cookie).get("/ui/agents/ann/memory", params={"q": "terse answers"})
    assert got.status_code == 200 and 'id="recall-block"' not in got.text
    # a long question is recalled by its most informative sentences, not refused
    long_q = "How terse should answers be?\n" + "filler words here. " * 400
    long_post = _as(a, cookie).post("/ui/agents/ann/memory", data={"q": long_q, "tier": "HOT"}, headers=SAME)
    assert long_post.status_code == 200 and 'id="recall-block"' in long_post.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://testserver.evil.example"},
        {},
    ],
)
def test_a_cross_site_post_to_the_playground_or_sign_out_is_refused(
    ledger: Ledger, workers: tuple[TestClient, TestClient], ann: Agent, headers: dict[str, str]
) -> None:
    a, _ = workers
    cookie = _login(a, ledger, ann)
    r = _as(a, cookie).post(
        "/ui/agents/ann/memory",
        data={"q": "answers?", "tier": "HOT"},
        headers=headers,
    )
    assert r.status_code == 403 and "ui.origin" in r.text and "recall-block" not in r.text
    out = _as(a, cookie).post("/ui/logout", headers=headers, follow_redirects=False)
    assert out.status_code == 403 and _view(a, cookie) == 200  # a forged sign-out ends nothing
    ok = _as(a, cookie).post(
        "/ui/agents/ann/memory",
        data={"q": "answers?", "tier": "HOT"},
        headers={"Origin": "http://testserver"},
    )
    assert ok.status_code == 200  # a browser without Sec-Fetch-Site, from this origin


def test_a_playground_form_that_is_not_one_is_refused_unread(
    ledger: Ledger, workers: tuple[TestClient, TestClient], ann: Agent
) -> None:
    a, _ = workers
    cookie = _login(a, ledger, ann)
    for kwargs in (
        {
            "content": b"q=" + b"x" * (200 * 1024),
            "headers": {**SAME, "Content-Type": "application/x-www-form-urlencoded"},
        },
        {"json": {"q": "answers?"}, "headers": SAME},
        {"content": b"q=a&q=b", "headers": {**SAME, "Content-Type": "application/x-www-form-urlencoded"}},
        {"content": b"q=%FF", "headers": {**SAME, "Content-Type": "application/x-www-form-urlencoded"}},
        {"data": {"q": "answers?", "tier": "SECRET"}, "headers": SAME},
    ):
        r = _as(a, cookie).post("/ui/agents/ann/memory", **kwargs)  # type: ignore[arg-type]
        assert r.status_code == 400 and "ui.form" in r.text, kwargs


def test_a_sign_out_the_database_cannot_record_says_the_session_still_opens_the_view(
    ledger: Ledger, workers: tuple[TestClient, TestClient], ann: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack on the change: a sign-out that silently failed would tell the owner the session
    ended while a copied cookie still works."""
    a, b = workers
    cookie = _login(a, ledger, ann)

    def down(*args: object, **kwargs: object) -> None:
        raise StorageError("database error: the disk is full")

    monkeypatch.setattr(ledger.store, "revoke_ui_session", down)
    out = _as(a, cookie).post("/ui/logout", headers=SAME, follow_redirects=False)
    assert out.status_code == 503 and "still opens the view until it expires" in out.text
    assert 'engram_ui=""' in out.headers["set-cookie"]  # this browser's copy goes anyway
    assert _view(b, cookie) == 200  # what the page said: the session was not ended

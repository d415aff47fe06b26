"""Issue 44, finding 7: what a newcomer meets in the web UI, on both backends (the browser
test, tests/e2e/test_ui_browser.py, checks the same pages in chromium).

* A wrong query value (``?tier=``, ``?limit=``) or an unknown page under ``/ui`` answers an
  HTML page with the status and what was wrong, not the API's raw problem JSON; the API's
  routes keep their problem JSON.
* ``/favicon.ico`` is an icon, not a 404.
* The owner view opens on HOT; an empty tab says how memories get in, with a command.
* The agent page shows its ratios as percentages with their counts (not 0.9333).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.sdk import Agent
from engram.protocol.uiticket import make_ticket
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf


def _client(ledger: Ledger) -> TestClient:
    memory = MemoryService(ledger, access_log="off")
    settings = ApiSettings(operator_token="ui-first-look-operator-token-0123456789")
    return TestClient(create_app(settings, ledger=ledger, memory_service=memory))


def _sign_in(client: TestClient, ledger: Ledger, agent: Agent) -> None:
    ticket = make_ticket(ledger.origin, agent.agent_id, agent.signer.private_key, now_s=int(time.time()))
    assert client.get(f"/ui/login?ticket={ticket}", follow_redirects=False).status_code == 303


def test_bad_input_on_a_ui_route_answers_an_html_page_and_the_api_keeps_problems(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    ann = make_agent("ann")
    client = _client(ledger)
    _sign_in(client, ledger, ann)
    for path, status, names in (
        ("/ui/agents/ann/memory?tier=WARMEST", 400, "tier"),
        ("/ui/entries?limit=101", 400, "limit"),
        ("/ui/entries?agent=%3Cscript%3E", 400, "agent"),
        ("/ui/entries/-1", 400, "index"),
        ("/ui/no-such-page", 404, "/ui/no-such-page"),
    ):
        r = client.get(path)
        assert r.status_code == status, (path, r.text[:200])
        assert r.headers["content-type"].startswith("text/html"), (path, r.headers["content-type"])
        assert "default-src 'none'" in r.headers["content-security-policy"]
        assert "<h1>" in r.text and names in r.text and '"type":' not in r.text, (path, r.text[:400])
        assert "<script>" not in r.text  # the page's only script is /ui/static/ui.js (CSP)
    api = client.get("/v1/proofs/inclusion?index=-1")
    assert api.status_code == 400 and api.headers["content-type"] == "application/problem+json"
    assert api.json()["type"].endswith("/malformed")
    assert client.get("/v1/no-such-route").headers["content-type"] == "application/problem+json"


def test_favicon_is_an_icon(ledger: Ledger) -> None:
    r = _client(ledger).get("/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
    assert r.text.startswith("<svg") and "<script" not in r.text


def test_the_owner_view_opens_on_hot_and_empty_tabs_name_the_next_step(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ann = make_agent("ann")
    client = _client(ledger)
    _sign_in(client, ledger, ann)
    page = client.get("/ui/agents/ann/memory").text
    assert re.search(r'tier=HOT" aria-current="page"', page), page[:2000]
    assert "No HOT memories yet" in page and "Memories get in when the agent writes" in page
    assert "engram memory write --key-file ann.key --server http://testserver --category PREFERENCE" in page
    cold = client.get("/ui/agents/ann/memory?tier=COLD").text
    assert "No COLD records yet" in cold and "engram event append --key-file ann.key" in cold
    memory_of(ann).write(category="PREFERENCE", content="Ann likes terse answers.")
    page = client.get("/ui/agents/ann/memory").text
    assert "Ann likes terse answers." in page and "No HOT memories yet" not in page
    # the playground's form without a tier recalls on HOT too
    r = client.post(
        "/ui/agents/ann/memory", data={"q": "answers?"}, headers={"Sec-Fetch-Site": "same-origin"}
    )
    assert r.status_code == 200 and re.search(r'tier=HOT" aria-current="page"', r.text)


def test_the_agent_page_shows_ratios_as_percentages_with_counts(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    bob = make_agent("bob")
    mem = memory_of(bob)
    for i in range(3):  # three sessions, two of them holding an outcome: coverage 2 of 3
        sid = mem.open_session(title=f"s{i}")
        mem.turn(sid, "user", f"question {i}")
        if i:
            body = {"pact": f"p{i}", "result": "fulfilled", "quality": 90}
            mem.record("pact.outcome", body | ({"evidence": "ticket"} if i == 1 else {}))
        mem.close_session(sid)
    page = _client(ledger).get("/ui/agents/bob").text
    assert re.search(
        r'id="coverage" title="0.6667 in the signed statement">66.7% <span class="of">2 of 3 closed', page
    )
    assert re.search(r'id="attestation"[^>]*>50% <span class="of">1 of 2 with evidence', page)
    assert "0.6667 (" not in page and "0.5000 (" not in page
    empty = _client(ledger).get(f"/ui/agents/{make_agent('cy').agent_id}").text
    assert "No pact or evaluation outcome yet. Outcomes get here when the agent records them" in empty

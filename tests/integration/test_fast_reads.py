"""The public transparency reads served before the framework (api/fastpath.py, issue 14):
the same bytes as the routes, strong ETags and 304s, tiles from an immutable cache, and
everything else still answered by the routes with its problem, on both backends."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.sdk import Agent
from engram.protocol.errors import StorageError
from ledger.log import Ledger
from ledger.tiles import entry_bundle, hash_tile

OPERATOR = "2KszfFVxSihaUFeuDLDTyjZFHFyM2i4VjKml0tK_"


@pytest.fixture
def client(ledger: Ledger) -> TestClient:
    return TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))


def test_checkpoint_has_a_strong_etag_and_answers_304_until_the_log_grows(
    client: TestClient, ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    first = client.get("/checkpoint")
    assert first.status_code == 200
    assert first.content == ledger.cosigned_note(ledger.latest_checkpoint())
    assert first.headers["content-type"] == "text/plain; charset=utf-8"
    assert first.headers["cache-control"] == "no-cache"
    tag = first.headers["etag"]
    assert tag.startswith('"') and tag.endswith('"')
    same = client.get("/checkpoint", headers={"If-None-Match": tag})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == tag
    assert client.get("/checkpoint", headers={"If-None-Match": f'"other", W/{tag}'}).status_code == 304
    head = client.head("/checkpoint")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len(first.content)
    make_agent("alice").append("commitment", {"promise": "grow"})
    grown = client.get("/checkpoint", headers={"If-None-Match": tag})
    assert grown.status_code == 200 and grown.headers["etag"] != tag
    assert grown.content == ledger.cosigned_note(ledger.latest_checkpoint())


def test_tiles_are_served_from_the_cache_once_read(
    client: TestClient, ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = make_agent("alice")
    for i in range(4):
        alice.append("commitment", {"promise": f"p{i}"})
    size = ledger.size()
    paths = {
        f"/tile/0/000.p/{size}": hash_tile(ledger.store, 0, 0, size),
        f"/tile/entries/000.p/{size}": entry_bundle(ledger.store, 0, size),
    }
    tags = {}
    for path, expected in paths.items():
        r = client.get(path)
        assert r.status_code == 200 and r.content == expected
        assert r.headers["cache-control"] == "public, max-age=10"
        tags[path] = r.headers["etag"]

    def down(*_: object) -> None:
        raise StorageError("the database is down")

    # Served from memory: the database is not read again for a tile already served.
    monkeypatch.setattr(ledger.store, "nodes_at_level", down)
    monkeypatch.setattr(ledger.store, "leaves", down)
    for path, expected in paths.items():
        assert client.get(path).content == expected
        assert client.get(path, headers={"If-None-Match": tags[path]}).status_code == 304


def test_what_the_fast_path_does_not_serve_gets_the_routes_problem(
    client: TestClient, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = ledger.size()
    beyond = client.get(f"/tile/0/000.p/{size + 1}")
    assert beyond.status_code == 404 and beyond.headers["content-type"] == "application/problem+json"
    for bad in ("/tile/0/0000", "/tile/0/000.p/256", "/tile/9/000", "/tile/entries/x1/000"):
        r = client.get(bad)
        assert r.status_code in (400, 404), (bad, r.status_code)
        assert r.headers["content-type"] == "application/problem+json", bad

    def down(*_: object) -> None:
        raise StorageError("the database is down")

    monkeypatch.setattr(ledger.store, "latest_cosigned", down)
    monkeypatch.setattr(ledger.store, "latest_checkpoint", down)
    r = client.get("/checkpoint")
    assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"


def test_rate_limits_still_apply_to_the_fast_reads(ledger: Ledger) -> None:
    settings = ApiSettings(
        operator_token=OPERATOR, rate_limit_per_client_per_minute=60, rate_limit_per_client_burst=3
    )
    client = TestClient(create_app(settings, ledger=ledger))
    codes = [client.get("/checkpoint").status_code for _ in range(6)]
    assert codes[:3] == [200, 200, 200] and 429 in codes[3:]

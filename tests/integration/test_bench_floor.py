"""The floor server of bench.floor (issue 28, Deliver 1) does what the floor must: it verifies
each event's signature, refuses what does not verify, and writes gap-free indices durably.
A floor that skipped a check would make every ratio to it flatter Engram's gap."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from bench.floor import _SCHEMA, app_factory, presign


@pytest.fixture
def floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, Path, object]:
    events = presign("bench.example/floor", 6, "t")
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(events.keys))
    db = tmp_path / "floor.db"
    with sqlite3.connect(db) as c:
        for stmt in _SCHEMA:
            c.execute(stmt.replace("BYTEA", "BLOB"))
    monkeypatch.setenv("FLOOR_DB", f"sqlite:///{db}")
    monkeypatch.setenv("FLOOR_KEYS", str(keys))
    return TestClient(app_factory()), db, events


def test_the_floor_appends_verified_events_gap_free(floor: tuple[TestClient, Path, object]) -> None:
    client, db, events = floor
    indices = [client.post("/append", content=b).json()["index"] for b in events.records]  # type: ignore[attr-defined]
    assert indices == list(range(6))
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*), min(idx), max(idx) FROM leaves").fetchone() == (6, 0, 5)
        assert c.execute("SELECT count(*) FROM bodies").fetchone() == (6,)


def test_the_floor_refuses_what_does_not_verify(floor: tuple[TestClient, Path, object]) -> None:
    client, db, events = floor
    ev = json.loads(events.records[0])  # type: ignore[attr-defined]
    sig = bytearray(base64.b64decode(ev["signature"]))
    sig[0] ^= 1
    forged = {**ev, "signature": base64.b64encode(bytes(sig)).decode()}
    assert client.post("/append", json=forged).status_code == 422
    stranger = json.loads(presign("bench.example/floor", 1, "stranger").records[0])  # a key it was not given
    assert client.post("/append", json=stranger).status_code == 422
    assert client.post("/append", content=b"not json").status_code == 422
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM leaves").fetchone() == (0,)

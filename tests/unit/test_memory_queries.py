"""The narrow memory port's query values (engram.protocol.queries): each one round-trips
through its JSON, every malformed one is refused naming the check, and every query has a
handler on the service's side and a reader of its answer on the HTTP client's.

Issue 41, Deliver 3: the transport carries ``submit(events)`` and ``ask(query)``.
"""

from __future__ import annotations

from typing import Any

import pytest

from engram.client.http import _ANSWERS
from engram.protocol.errors import RejectedEventError
from engram.protocol.queries import (
    QUERIES,
    CheckpointQuery,
    CompactQuery,
    EntryQuery,
    HotBlockQuery,
    ItemQuery,
    ItemsQuery,
    MeshesQuery,
    MeshProofQuery,
    Query,
    RecallQuery,
    SessionQuery,
    SessionsQuery,
    parse_query,
)
from ledger.memory.asking import HANDLERS

EXAMPLES: list[Query[Any]] = [
    RecallQuery.of("what db?", limit=3, scopes=["global"], meshes=["ada/team"], session="s-1"),
    RecallQuery.of(""),
    ItemsQuery.of(),
    ItemsQuery.of(tier="RECORD", status="all", after="12.0", limit=5),
    ItemQuery.of(ref="3.1"),
    SessionsQuery.of(),
    SessionQuery.of(session="s-abc"),
    MeshesQuery.of(),
    MeshProofQuery.of(mesh="ada/team", ref="7.0"),
    HotBlockQuery.of(session="s-1", scopes=["project:engram"]),
    HotBlockQuery.of(),
    CompactQuery.of(),
    CheckpointQuery.of(),
    EntryQuery.of(index=0),
]


@pytest.mark.parametrize("query", EXAMPLES, ids=lambda q: q.name)
def test_a_query_reads_back_from_its_json_unchanged(query: Query[Any]) -> None:
    assert parse_query(query.to_json()) == query


def test_every_query_is_exemplified_and_named_once() -> None:
    assert {type(q) for q in EXAMPLES} == set(QUERIES.values())
    assert len(QUERIES) == len(set(QUERIES.values()))


def test_every_query_has_a_service_handler_and_an_http_answer_reader() -> None:
    """A query without a row would fail only when first asked: the tables are complete."""
    assert set(HANDLERS) == set(QUERIES.values())
    raw_bytes = {MeshProofQuery, CheckpointQuery}  # answered as the body itself
    assert set(_ANSWERS) == set(QUERIES.values()) - raw_bytes


@pytest.mark.parametrize(
    ("data", "check"),
    [
        ([], "request.members"),
        ("recall", "request.members"),
        ({f"m{i}": 1 for i in range(17)}, "request.members"),
        ({}, "request.ask"),
        ({"ask": "drop_table"}, "request.ask"),
        ({"ask": 3}, "request.ask"),
        ({"ask": "recall"}, "request.members"),
        ({"ask": "recall", "text": "q", "agent": "bob"}, "request.members"),
        ({"ask": "recall", "text": 5}, "request.query"),
        ({"ask": "recall", "text": "q", "limit": 101}, "request.limit"),
        ({"ask": "recall", "text": "q", "limit": "5"}, "request.limit"),
        ({"ask": "recall", "text": "q", "budget_tokens": 10**9}, "request.budget"),
        ({"ask": "recall", "text": "q", "include_cold": "yes"}, "request.include_cold"),
        ({"ask": "recall", "text": "q", "session": "../x"}, "request.session"),
        ({"ask": "recall", "text": "q", "scopes": "global"}, "request.scopes"),
        ({"ask": "recall", "text": "q", "scopes": [1]}, "request.scopes"),
        ({"ask": "recall", "text": "q", "meshes": ["x" * 98]}, "request.meshes"),
        ({"ask": "recall", "text": "q", "meshes": [{}]}, "request.meshes"),
        ({"ask": "items", "tier": "LUKEWARM"}, "request.tier"),
        ({"ask": "items", "status": "deleted"}, "request.status"),
        ({"ask": "items", "after": "x.y"}, "request.ref"),
        ({"ask": "items", "limit": 0}, "request.limit"),
        ({"ask": "items", "limit": 1001}, "request.limit"),
        ({"ask": "item"}, "request.members"),
        ({"ask": "item", "ref": 3}, "request.ref"),
        ({"ask": "item", "ref": "01.0"}, "request.ref"),
        ({"ask": "session", "session": ""}, "request.session"),
        ({"ask": "session", "session": None}, "request.session"),
        ({"ask": "mesh_proof", "mesh": "no-slash", "ref": "1.0"}, "request.mesh"),
        ({"ask": "mesh_proof", "mesh": "ada/team", "ref": "1"}, "request.ref"),
        ({"ask": "hot_block", "session": 7}, "request.session"),
        ({"ask": "entry", "index": -1}, "request.index"),
        ({"ask": "entry", "index": True}, "request.index"),
        ({"ask": "entry", "index": 2**63}, "request.index"),
        ({"ask": "sessions", "agent": "bob"}, "request.members"),
    ],
)
def test_a_malformed_query_is_refused_naming_the_check(data: object, check: str) -> None:
    with pytest.raises(RejectedEventError) as e:
        parse_query(data)
    assert e.value.check == check


def test_the_memory_port_is_the_sdk_transport_and_one_question() -> None:
    """The face is wide, the port narrow: a new read is a query value, not a method here."""
    from engram.client.agent_memory import MemoryTransport
    from engram.client.sdk import Transport

    def methods(cls: type) -> set[str]:
        return {n for n in vars(cls) if not n.startswith("_") and callable(getattr(cls, n))}

    assert methods(Transport) == {"submit", "head", "consistency"}
    assert methods(MemoryTransport) == {"ask"}

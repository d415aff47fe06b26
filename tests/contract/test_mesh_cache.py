"""Mesh folds are cached by log size (issue 40, Deliver 9), on both backends: a member's recall
costs the same whatever else its meshes' creator does (finding 10: every recall re-read and
parsed every mesh body of every member, so 300 unrelated meshes of the creator made a
member's recall 4-10x slower; bench/bench_mesh.py prints the figures), and what the cache
answers is what a fresh read of the tables answers, through appends, erasures and bodies
deleted outside an erasure."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.mesh import ERASING_KINDS, MeshCache, MeshReader
from tests.contract.conftest import MemoryOf


@contextmanager
def _statements(ledger: Ledger) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        seen.append(statement)

    event.listen(ledger.store.engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(ledger.store.engine, "before_cursor_execute", count)


def _team(make_agent: Callable[..., Agent], memory_of: MemoryOf) -> tuple[str, AgentMemory, AgentMemory]:
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    team = ada.mesh_create("team")
    ada.mesh_invite(team, "bob")
    bob.mesh_join(team)
    ada.mesh_grant(team, share=["LEARNING"], read=[])
    bob.mesh_grant(team, share=[], read=["LEARNING"])
    ada.write(category="LEARNING", content="Northwind settles bond trades on Fridays.", tier="WARM")
    return team, ada, bob


def _recall_cost(ledger: Ledger, memory: MemoryService) -> tuple[int, int]:
    """(SQL statements, mesh bodies parsed) of one warm recall by bob."""
    import ledger.mesh as mesh_module

    memory.recall("bob", "Northwind bond trades", record_access=False)  # warm
    parsed = [0]
    real = mesh_module.parse_strict

    def counting(*args: object, **kw: object) -> object:
        parsed[0] += 1
        return real(*args, **kw)  # type: ignore[arg-type]

    mesh_module.parse_strict = counting  # type: ignore[assignment]
    try:
        with _statements(ledger) as seen:
            res = memory.recall("bob", "Northwind bond trades", record_access=False)
    finally:
        mesh_module.parse_strict = real
    assert any(r.author == "ada" for r in res.ranked)
    return len(seen), parsed[0]


def test_a_members_recall_costs_the_same_whatever_meshes_the_creator_adds(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    """Issue 40, finding 10. Counted, not timed: the statements a warm recall runs and the
    mesh bodies it parses do not grow with the creator's unrelated meshes."""
    _, ada, _ = _team(make_agent, memory_of)
    before = _recall_cost(ledger, memory)
    for m in range(12):
        side = ada.mesh_create(f"side-{m}", title=f"side project {m}")
        ada.mesh_invite(side, "cy")
        ada.mesh_grant(side, share=["CONTEXT"], read=["CONTEXT"])
    after = _recall_cost(ledger, memory)
    assert after == before, (before, after)
    assert after[1] == 0  # nothing appended since the last recall: no body parsed again


def _fresh(ledger: Ledger, mesh: str) -> dict[str, object] | None:
    """The mesh as a reader with a cache of its own folds it now (a fresh read of the tables)."""
    reader = MeshReader(ledger.store)
    reader.cache = MeshCache(ledger.store)
    folded = reader.mesh(mesh, ledger.size())
    return None if folded is None else folded.to_json()


def _cached(ledger: Ledger, mesh: str) -> dict[str, object] | None:
    folded = MeshReader(ledger.store).mesh(mesh, ledger.size())
    return None if folded is None else folded.to_json()


def test_the_cached_fold_is_the_fresh_fold_through_appends_and_erasures(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    team, ada, bob = _team(make_agent, memory_of)
    cy = memory_of(make_agent("cy"))
    assert _cached(ledger, team) == _fresh(ledger, team)  # warm
    ada.mesh_invite(team, "cy")
    cy.mesh_join(team)
    cy.mesh_grant(team, share=["LEARNING"], read=["LEARNING"])
    assert _cached(ledger, team) == _fresh(ledger, team)
    assert [m["agent"] for m in (_cached(ledger, team) or {})["members"]] == ["ada", "bob", "cy"]  # type: ignore[index]
    # an erasure drops the erasing agent's streams: read again, they say the same
    note = ada.write(category="CONTEXT", content="A scratch note to erase.", tier="WARM")
    ada.erase(note.index, reason="scratch")
    assert _cached(ledger, team) == _fresh(ledger, team)
    # a body deleted outside an erasure (an old log's erased mesh.left): the cache starts over
    left = bob.mesh_leave(team)
    assert _cached(ledger, team) == _fresh(ledger, team)
    assert ledger.store.delete_body(left.index)
    cached = _cached(ledger, team)
    assert cached == _fresh(ledger, team)
    bob_row = next(m for m in cached["members"] if m["agent"] == "bob")  # type: ignore[index]
    assert bob_row["left_index"] == left.index  # the body-less leave keeps its effect


def test_the_cache_knows_every_kind_that_erases_bodies() -> None:
    from engram.protocol.kinds import KINDS, _erases_nothing

    assert set(ERASING_KINDS) == {k for k, spec in KINDS.items() if spec.erases is not _erases_nothing}


@pytest.mark.parametrize("size_offset", [0, -3])
def test_a_fold_at_an_earlier_size_reads_only_what_was_there(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf, size_offset: int
) -> None:
    team, ada, _ = _team(make_agent, memory_of)
    at = ledger.size()
    ada.mesh_grant(team, share=[], read=[])
    ada.mesh_dissolve(team)
    reader = MeshReader(ledger.store)
    fresh = MeshReader(ledger.store)
    fresh.cache = MeshCache(ledger.store)
    for size in (at + size_offset, ledger.size()):
        a, b = reader.mesh(team, size), fresh.mesh(team, size)
        assert (None if a is None else a.to_json()) == (None if b is None else b.to_json())
    then = reader.mesh(team, at)
    assert then is not None and not then.dissolved

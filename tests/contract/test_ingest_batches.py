"""Issue 42, Deliver 5, on both backends: a session's turns and the embeddings of what a write
applies follow in batches, not one projection transaction and one embedder call per write,
and a reader still sees its own writes (the turn it just logged, with its vector)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from sqlalchemy import event

from engram.client.sdk import Agent
from ledger.log import Ledger, PolicyEvent
from ledger.memory.follower import MAX_LAG
from ledger.memory.service import MemoryService
from tests.contract.test_memory_projection import memory_for


class CountingEmbedder:
    """One axis per word class, so recall's vector stage has something to rank by."""

    model_id = "counting:test:4"
    dim = 4

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, hash(t.split()[0].casefold()) % 4] = 1.0
        return out


def _cursor_moves(ledger: Ledger) -> list[str]:
    moves: list[str] = []

    def count(_c: object, _cur: object, statement: str, *_: object) -> None:
        if statement.lstrip().upper().startswith("UPDATE MEM_CURSOR SET APPLIED_SIZE"):
            moves.append(statement)

    event.listen(ledger.store.engine, "before_cursor_execute", count)
    return moves


def test_a_sessions_turns_are_applied_in_one_batch_and_recall_reads_them_at_once(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    embedder = CountingEmbedder()
    memory = MemoryService(ledger, embedder=embedder, access_log="off")
    # The follower's path (the pass left the entries, as it leaves an erasure's): the append
    # pass's own projector is off here; tests/contract/test_projection_in_pass.py covers it.
    ledger.on_commit_tx = None
    ada = memory_for(memory, make_agent("ada"))
    sid = ada.open_session(title="ingest")
    moves = _cursor_moves(ledger)
    turns = [f"turn number {i} mentions the staging database" for i in range(12)]
    for i, text in enumerate(turns):
        ada.turn(sid, "user" if i % 2 == 0 else "assistant", text)
    last = ada.turn(sid, "user", "Zanzibar is where the offsite happens")
    # 13 turns: at most the first turn's precondition applies the opening; never one per turn
    assert len(moves) <= 1, moves
    assert embedder.calls == []  # nothing embedded per write
    res = memory.recall("ada", "Zanzibar offsite", record_access=False)
    assert res.ranked and res.ranked[0].index == last.index  # read-your-writes, right after the turn
    assert embedder.calls[0] == 13  # every turn in one batch (then the query)


def test_deferred_turns_are_applied_once_the_lag_bound_is_reached(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    memory = MemoryService(ledger, access_log="off")
    # The follower's path (the pass left the entries, as it leaves an erasure's): the append
    # pass's own projector is off here; tests/contract/test_projection_in_pass.py covers it.
    ledger.on_commit_tx = None
    ada = memory_for(memory, make_agent("ada"))
    sid = ada.open_session()
    moves = _cursor_moves(ledger)
    for i in range(MAX_LAG + 2):
        ada.turn(sid, "user", f"line {i}")
    assert 1 <= len(moves) <= 3, moves  # the first turn's check, then the lag bound
    assert memory.projection.applied_size() >= MAX_LAG  # applied without any reader asking


def test_a_closed_sessions_memories_are_embedded_in_a_batch_and_recalled_with_vectors(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    embedder = CountingEmbedder()
    memory = MemoryService(ledger, embedder=embedder, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    for s in range(3):
        sid = ada.open_session(title=f"chat {s}")
        ada.turn(sid, "user", f"We decided to deploy service {s} on Tuesdays.")
        ada.turn(sid, "assistant", "Noted, Tuesdays it is.")
        ada.close_session(sid)
    writes = len(embedder.calls)
    res = memory.recall("ada", "deploy Tuesdays", include_cold=True, record_access=False)
    assert res.ranked
    assert writes < 3  # the closes left their embedding to a batch
    assert memory.vectors is not None
    with ledger.store.engine.connect() as conn:
        embedded = conn.exec_driver_sql("SELECT embedded_size, applied_size FROM mem_cursor").one()
    assert embedded[0] == embedded[1]  # after the recall every applied item has its vector


def test_a_closes_decisions_check_their_shared_checkpoint_signature_once(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    import engram.client.http as http

    memory = MemoryService(ledger, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    sid = ada.open_session()
    for i in range(4):
        ada.turn(sid, "user", f"We decided to move service {i} to the new cluster on Friday.")
    checked: list[bytes] = []
    real = http.verify_checkpoint

    def counting(data: bytes, *args: object, **kw: object) -> object:
        checked.append(data)
        return real(data, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(http, "verify_checkpoint", counting)
    closed = ada.close_session(sid)
    assert closed.decisions >= 2  # several decisions, verified before the close returned
    assert len(checked) == len(set(checked))  # each checkpoint's signature checked once


def test_a_receipt_is_refused_with_a_checkpoint_verified_for_other_bytes(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    from engram.client.http import verify_receipt
    from engram.protocol.errors import ProofError
    from verifier.note import verify_checkpoint

    memory = MemoryService(ledger, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    sid = ada.open_session()
    ref = f"{ada.turn(sid, 'user', 'We decided to ship on Monday.').index}.0"
    use = {"items": [ref]}
    first = ledger.append([PolicyEvent(agent="ada", kind="memory.accessed", body=use, expect_head=None)])[0]
    second = ledger.append(
        [PolicyEvent(agent="ada", kind="memory.accessed", body=use, expect_head=first.index)]
    )[0]
    other = verify_checkpoint(first.checkpoint, ada.agent.log_key)
    with pytest.raises(ProofError) as e:
        verify_receipt(second, ada.agent.log_key, agent="ada", kinds={"memory.accessed"}, verified=other)
    assert e.value.check == "receipt.checkpoint"

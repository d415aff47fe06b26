"""Issue 28: the pipelined group commit (ledger.groupcommit) with a stand-in log: every
caller is answered whatever the mix of streams and authorities, each batch holds at most one
event per stream and one authority, and the record follows each batch before its answers."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from ledger import groupcommit
from ledger.groupcommit import GroupCommit


def test_a_leader_whose_batch_left_it_queued_leads_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: after the record moved outside the leadership, a caller that led a batch
    not holding its own event (its stream was taken, or another authority was first) waited
    for an answer nobody would give; 18 racers on shared streams hung the e2e suite."""
    monkeypatch.setattr(groupcommit, "_stream", lambda sub: sub.stream)
    batches: list[list[Any]] = []
    recorded: list[int] = []
    size = [0]
    lock = threading.Lock()

    def append_batch(subs: list[Any], *, operator: bool, system: bool, record: bool = True) -> list[Any]:
        with lock:
            assert len({s.stream for s in subs}) == len(subs)  # one event per stream
            assert {(s.operator, s.system) for s in subs} == {(operator, system)}
            batches.append(list(subs))
            out = []
            for _ in subs:
                size[0] += 1
                out.append(SimpleNamespace(index=size[0] - 1, proof=SimpleNamespace(size=size[0], root=b"r")))
        time.sleep(0.002)  # a commit
        return out

    def record(n: int, root: bytes) -> None:
        time.sleep(0.001)
        with lock:
            recorded.append(n)

    gc = GroupCommit(append_batch, record=record)
    answers: list[Any] = []
    errors: list[BaseException] = []

    def caller(i: int) -> None:
        try:
            for k in range(10):
                sub = SimpleNamespace(stream=("shared", str(i % 3)), operator=(i + k) % 4 == 0, system=False)
                r = gc.append(sub, operator=sub.operator)
                with lock:
                    assert max(recorded) >= r.proof.size  # recorded before it was answered
                    answers.append(r)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(18)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a caller was never answered"
    assert not errors, errors[0]
    assert len(answers) == 180
    assert sorted(a.index for a in answers) == list(range(180))


def test_a_leader_of_a_batch_without_its_own_event_leads_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exact interleaving: A's event is queued (A has not reached the leadership yet),
    then B, of the same stream, arrives and leads: its batch holds A's event alone. B must
    lead again for its own, not wait for an answer no leader owes it."""
    monkeypatch.setattr(groupcommit, "_stream", lambda sub: sub.stream)
    n = [0]

    def append_batch(subs: list[Any], *, operator: bool, system: bool, record: bool = True) -> list[Any]:
        out = []
        for _ in subs:
            n[0] += 1
            out.append(SimpleNamespace(index=n[0], proof=SimpleNamespace(size=n[0], root=b"r")))
        return out

    gc = GroupCommit(append_batch, record=lambda size, root: None)
    a = groupcommit._Waiter(SimpleNamespace(stream=("s", "s")), False, False, ("s", "s"))
    gc._queue.append(a)  # queued; its thread is elsewhere for now
    got: list[Any] = []
    b = threading.Thread(
        target=lambda: got.append(gc.append(SimpleNamespace(stream=("s", "s")))), daemon=True
    )
    b.start()
    b.join(5)
    assert not b.is_alive(), "B waited for an answer no leader owed it"
    assert a.done and a.receipt is not None and a.receipt.index == 1
    assert got[0].index == 2

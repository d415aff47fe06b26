"""The in-process transport to a bare log: an client SDK's ``Agent`` talking to a
:class:`~ledger.log.Ledger` in the same process, appending as the log takes events
(``Ledger.append``; the log's own tests, benchmarks, registering an agent).

With a memory service beside the log, use its transport instead
(``ledger.memory.transport.InProcessMemory``, ``Services.transport()``): its events go in
through the service's door, so the memory rules follow every write (issue 27, finding 4)."""

from __future__ import annotations

from collections.abc import Sequence

from engram.protocol.wire import Receipt, StreamState, Submission
from ledger.log import Ledger

__all__ = ["InProcess"]


class InProcess:
    """Transport that calls a :class:`~ledger.log.Ledger` in the same process."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def submit(self, submissions: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        return self.ledger.append(submissions, operator=operator)

    def head(self, agent: str, kind: str) -> StreamState | None:
        h = self.ledger.stream_head(agent, kind)
        return None if h is None else StreamState(h.version, h.leaf_hash.hex())

    def consistency(self, old_size: int, new_size: int) -> Sequence[bytes]:
        return self.ledger.prove_consistency(old_size, new_size).hashes

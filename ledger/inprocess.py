"""The in-process transport: an :class:`~engram.client.Agent` talking to a
:class:`~ledger.log.Ledger` in the same process (the CLI, the embedded demo, tests).

With a memory service beside the log, its events go in through the service's door
(``door=services.memory.accept``, what ``POST /v1/events`` calls), so the memory rules
follow every write that arrives this way too (issue 27, finding 4); a log alone takes them
as they are (``Ledger.append``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from engram.protocol.wire import Receipt, StreamState, Submission
from ledger.log import Ledger

__all__ = ["Door", "InProcess"]


class Door(Protocol):
    """Where signed events go in: ``MemoryService.accept`` or ``Ledger.append``."""

    def __call__(self, subs: Sequence[Submission], /, *, operator: bool = False) -> list[Receipt]: ...


class InProcess:
    """Transport that calls a :class:`~ledger.log.Ledger` in the same process, through
    ``door`` (default: the log's own append)."""

    def __init__(self, ledger: Ledger, *, door: Door | None = None) -> None:
        self.ledger = ledger
        self._door: Door = door if door is not None else ledger.append

    def submit(self, submissions: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        return self._door(submissions, operator=operator)

    def head(self, agent: str, kind: str) -> StreamState | None:
        h = self.ledger.stream_head(agent, kind)
        return None if h is None else StreamState(h.version, h.leaf_hash.hex())

    def consistency(self, old_size: int, new_size: int) -> Sequence[bytes]:
        return self.ledger.prove_consistency(old_size, new_size).hashes

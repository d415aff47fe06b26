"""The in-process transport: an :class:`~engram.client.Agent` talking to a
:class:`~ledger.log.Ledger` in the same process (the CLI, the embedded demo, tests)."""

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

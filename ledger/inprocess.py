"""The in-process transport to a bare log: an client SDK's ``Agent`` talking to a
:class:`~ledger.log.Ledger` in the same process, appending as the log takes events
(``Ledger.append``: registering or rotating a key, revoking a share token).

Memory kinds (sessions, memories, records: :data:`MEMORY_KINDS`, the kinds whose arrival
the memory rules follow) go through the memory service's door, its transport
(``ledger.memory.transport.InProcessMemory``, ``Services.transport()``), so that the rules
follow every write: this transport refuses them (``transport.memory_door``) unless it is
built ``log_only`` for a log no memory service serves (the log's own tests and
benchmarks), so a bypass is spelled where it happens, never taken by default.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.protocol.errors import RejectedEventError
from engram.protocol.kinds import kinds_where
from engram.protocol.wire import Receipt, StreamState, Submission
from ledger.log import Ledger
from verifier.event import Envelope

__all__ = ["MEMORY_KINDS", "InProcess"]

#: The kinds only the memory service's door takes (``ledger.memory.door.FOLDED_KINDS``).
MEMORY_KINDS = kinds_where(group="session") | kinds_where(group="memory") | kinds_where(group="record")


class InProcess:
    """Transport that calls a :class:`~ledger.log.Ledger` in the same process."""

    def __init__(self, ledger: Ledger, *, log_only: bool = False) -> None:
        """``log_only``: no memory service serves this log, and memory kinds are appended
        to it as they are, without the memory rules (the log's own tests, benchmarks)."""
        self.ledger = ledger
        self.log_only = log_only

    def submit(self, submissions: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        if not self.log_only:
            for sub in submissions:
                kind = Envelope.from_bytes(sub.envelope).kind
                if kind in MEMORY_KINDS:
                    raise RejectedEventError(
                        f"a {kind} goes in through the memory service's door (Services.transport()), "
                        "not the bare log's transport",
                        check="transport.memory_door",
                    )
        return self.ledger.append(submissions, operator=operator)

    def head(self, agent: str, kind: str) -> StreamState | None:
        h = self.ledger.stream_head(agent, kind)
        return None if h is None else StreamState(h.version, h.leaf_hash.hex())

    def consistency(self, old_size: int, new_size: int) -> Sequence[bytes]:
        return self.ledger.prove_consistency(old_size, new_size).hashes

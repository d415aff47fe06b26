"""One agent's memory in process: the transport the client's ``AgentMemory`` uses when the
log is an embedded database in this process (the CLI, the MCP server and the hooks without
``--server``, Hermes, the demo).

It calls what the HTTP routes call: a single signed event goes to ``MemoryService.submit``
with its own kind (``api/routes/memory.py`` names the kinds each route takes), several to
``MemoryService.accept`` (``POST /v1/events``); a question (a frozen query value of
:mod:`engram.protocol.queries`) goes to :func:`ledger.memory.asking.ask`, the dispatcher
the query route calls too. Answers are the protocol's frozen values, the same the HTTP
adapter (the client's ``HttpTransport``) reads from the route's JSON. The service never
imports the client: this class satisfies the client's ``MemoryTransport`` by its shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

from engram.protocol.queries import Query
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt, StreamState, Submission
from ledger.memory.asking import Asker, ask
from ledger.memory.service import MemoryService

__all__ = ["InProcessMemory"]

A = TypeVar("A")


class InProcessMemory:
    """The memory transport over a :class:`MemoryService` of this process."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory
        self.ledger = memory.ledger

    # -- the SDK's Transport -------------------------------------------------------------

    def submit(self, submissions: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        if len(submissions) != 1:
            return self.memory.accept(submissions, operator=operator)
        p = self.ledger.prepare(submissions[0], operator=operator)  # parsed once, handed down
        env = p.envelope
        done = self.memory.submit(p, agent=env.agent, kinds={env.kind}, operator=operator)
        return [dataclasses.replace(done.receipt, answer=done.outcome())]

    def head(self, agent: str, kind: str) -> StreamState | None:
        h = self.ledger.stream_head(agent, kind)
        return None if h is None else StreamState(h.version, h.leaf_hash.hex())

    def consistency(self, old_size: int, new_size: int) -> Sequence[bytes]:
        return self.ledger.prove_consistency(old_size, new_size).hashes

    # -- the narrow port: one question (the caller is the agent: nothing to authenticate) --

    def ask(self, signer: AgentSigner, query: Query[A]) -> A:
        return ask(self.memory, Asker(agent=signer.agent), query)

    def log_key(self) -> str:
        return self.ledger.vkey

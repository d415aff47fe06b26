"""One agent's memory in process: the transport the client's ``AgentMemory`` uses when the
log is an embedded database in this process (the CLI, the MCP server and the hooks without
``--server``, Hermes, the demo).

It calls what the HTTP routes call (issue 27, finding 2): a single signed event goes to
``MemoryService.submit`` with its own kind (``api/routes/memory.py`` names the kinds each
route takes), several to ``MemoryService.accept`` (``POST /v1/events``); reads are the
service's queries. Answers are the protocol's frozen values, the same the HTTP adapter
(the client's ``HttpTransport``) builds from the routes' JSON. The service never
imports the client: this class satisfies the client's ``MemoryTransport``
by its shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from engram.protocol.answers import EntryProof, ItemProof, ItemRow, Recalled, SessionRow
from engram.protocol.errors import NotFoundError
from engram.protocol.recall_block import hot_part
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt, StreamState, Submission
from ledger.memory.service import MemoryService

__all__ = ["InProcessMemory"]


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

    # -- the log -------------------------------------------------------------------------

    def log_key(self) -> str:
        return self.ledger.vkey

    def checkpoint(self) -> bytes:
        return self.ledger.latest_cosigned_note()

    def entry(self, index: int) -> EntryProof:
        leaf = self.ledger.leaf(index)
        if leaf is None:
            raise NotFoundError(f"the log has no entry {index}", check="proof.index")
        inc = self.ledger.prove_inclusion(index)
        assert inc.checkpoint is not None  # the latest checkpoint is always published
        return EntryProof(
            index=index,
            leaf=leaf,
            leaf_hash=inc.leaf_hash,
            size=inc.size,
            root=inc.root,
            proof=inc.hashes,
            checkpoint=inc.checkpoint,
        )

    # -- one agent's memory (the caller is the agent: in process, nothing to authenticate) --

    def sessions(self, signer: AgentSigner) -> list[SessionRow]:
        self.memory.sync()
        return [SessionRow.of(dataclasses.asdict(s)) for s in self.memory.sessions(signer.agent)]

    def session(self, signer: AgentSigner, session: str) -> SessionRow:
        self.memory.sync()
        s = self.memory.session(signer.agent, session)
        if s is None:
            raise NotFoundError(f"no session {session} of {signer.agent}", check="memory.session")
        return SessionRow.of(dataclasses.asdict(s))

    def items(self, signer: AgentSigner, *, tier: str | None = None, status: str = "active") -> list[ItemRow]:
        self.memory.sync()
        items = self.memory.items(
            signer.agent, tiers=None if tier is None else [tier], status=None if status == "all" else status
        )
        return [ItemRow.of(dataclasses.asdict(i)) for i in items]

    def item(self, signer: AgentSigner, ref: str) -> ItemProof:
        self.memory.sync()
        return self.memory.item_proof(signer.agent, ref)

    def recall(
        self,
        signer: AgentSigner,
        query: str,
        *,
        include_cold: bool = False,
        include_archived: bool = False,
        limit: int = 10,
        budget_tokens: int | None = None,
        session: str | None = None,
        scopes: Sequence[str] | None = None,
        meshes: Sequence[str] | None = None,
    ) -> Recalled:
        res = self.memory.recall(
            signer.agent,
            query,
            include_cold=include_cold,
            include_archived=include_archived,
            budget_tokens=budget_tokens,
            session=session,
            limit=limit,
            scopes=scopes,
            meshes=meshes,
        )
        return Recalled.of(
            context=res.render(),
            hot=[dataclasses.asdict(r) for r in res.hot],
            ranked=[dataclasses.asdict(r) for r in res.ranked],
            notes=res.notes,
            as_of_size=res.as_of_size,
        )

    def meshes(self, signer: AgentSigner) -> list[dict[str, Any]]:
        return [m.to_json() for m in self.memory.meshes_of(signer.agent)]

    def mesh_proof(self, signer: AgentSigner, mesh: str, ref: str) -> bytes:
        return self.memory.mesh_proof(signer.agent, mesh, ref)

    def hot_block(
        self, signer: AgentSigner, *, session: str | None = None, scopes: Sequence[str] | None = None
    ) -> str:
        """The HOT section alone, closed (``hot_part``, as the HTTP adapter cuts it), without
        recording a use (a hook injects it at every session start)."""
        res = self.memory.recall(
            signer.agent, "", session=session, limit=1, record_access=False, scopes=scopes
        )
        return hot_part(res.render())

    def compact(self, signer: AgentSigner) -> list[Receipt]:
        return self.memory.compact(signer.agent)

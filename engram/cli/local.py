"""One agent's memory on the embedded log: :class:`engram.client.agent_memory.AgentMemory`
over the :class:`~ledger.memory.service.MemoryService` of this process (the MCP server and
the hooks without ``--server``; the CLI's agent-side commands)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engram.client.agent_memory import verify_proof
from engram.client.http import verify_item_proof
from engram.client.sdk import Agent
from engram.protocol.answers import Appended, Closed, Proven, Recalled, Shown, Written
from engram.protocol.errors import NotFoundError
from ledger.compose import Services, open_services
from ledger.config import Settings
from verifier.note import VerifierKey, b64encode
from verifier.token import mint

__all__ = ["LocalAgentMemory", "open_local"]


class LocalAgentMemory:
    """:class:`~engram.client.agent_memory.AgentMemory` in process."""

    def __init__(self, services: Services, agent: Agent) -> None:
        self.services = services
        self.agent = agent
        self.mem = services.memory
        self.ledger = services.ledger

    @property
    def agent_id(self) -> str:
        return self.agent.agent_id

    # -- sessions -----------------------------------------------------------------------

    def open_session(self, *, title: str | None = None, session: str | None = None) -> str:
        return self.mem.open_session(self.agent, title=title, session=session)

    def turn(self, session: str, role: str, content: str) -> Appended:
        return Appended(index=self.mem.turn(self.agent, session, role, content).index)

    def close_session(self, session: str, *, summary: str | None = None) -> Closed:
        r = self.mem.close_session(self.agent, session, summary=summary)
        return Closed(
            closed=r.closed.index,
            distilled=None if r.distilled is None else r.distilled.index,
            entries=r.entries,
            decisions=len(r.decisions),
        )

    def session_turns(self, session: str) -> int | None:
        self.mem.sync()
        s = self.mem.projection.session(self.agent_id, session)
        return None if s is None else s.turns

    # -- writes -------------------------------------------------------------------------

    def _answer(self, index: int) -> Written:
        ref = self.mem.ref_for(self.agent_id, index)
        return Written(index=index, ref=ref, duplicate=ref is not None and ref != f"{index}.0")

    def write(
        self,
        *,
        category: str,
        content: str,
        tags: Sequence[str] = (),
        confidence: int = 70,
        session: str | None = None,
        tier: str | None = None,
        evidence: str | None = None,
        provenance: Sequence[Mapping[str, str]] = (),
    ) -> Written:
        r = self.mem.write(
            self.agent,
            category=category,
            content=content,
            tags=tags,
            confidence=confidence,
            session=session,
            tier=tier,
            evidence=evidence,
            provenance=provenance,
        )
        return self._answer(r.index)

    def record(self, kind: str, body: Mapping[str, Any]) -> Written:
        return self._answer(self.mem.record(self.agent, kind, body).index)

    def supersede(self, ref: str, *, content: str, reason: str) -> Written:
        return self._answer(self.mem.supersede(self.agent, ref, content=content, reason=reason).index)

    def erase(self, index: int, *, reason: str) -> Appended:
        return Appended(index=self.mem.erase(self.agent, index, reason=reason).index)

    # -- reads --------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        include_cold: bool = False,
        include_archived: bool = False,
        limit: int = 10,
        budget_tokens: int | None = None,
        session: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Recalled:
        res = self.mem.recall(
            self.agent_id,
            query,
            include_cold=include_cold,
            include_archived=include_archived,
            limit=limit,
            budget_tokens=budget_tokens,
            session=session,
            scopes=scopes,
        )
        return Recalled.of(
            context=res.render(),
            hot=[dataclasses.asdict(r) for r in res.hot],
            ranked=[dataclasses.asdict(r) for r in res.ranked],
            notes=res.notes,
            as_of_size=res.as_of_size,
        )

    def items(self, *, tier: str | None = None, status: str = "active") -> list[dict[str, Any]]:
        self.mem.sync()
        items = self.mem.projection.items(
            self.agent_id, tiers=None if tier is None else [tier], status=None if status == "all" else status
        )
        return [dataclasses.asdict(i) for i in items]

    def item(self, ref: str) -> Shown:
        self.mem.sync()
        it = self.mem.projection.item(self.agent_id, ref)
        if it is None:
            raise NotFoundError(f"{self.agent_id} has no item {ref}", check="memory.item")
        leaf = self.ledger.store.leaf(it.index)
        assert leaf is not None  # an item is made by a logged entry
        sb = self.ledger.store.body(it.index)
        inc = self.ledger.prove_inclusion(it.index)
        assert inc.checkpoint is not None
        out = {
            "item": dataclasses.asdict(it),
            "leaf": b64encode(leaf),
            "inclusion": {
                "size": inc.size,
                "proof": [b64encode(h) for h in inc.hashes],
                "checkpoint": inc.checkpoint.decode("utf-8"),
            },
            "salt": None if sb is None else b64encode(sb[0]),
            "body": None if sb is None else b64encode(sb[1]),
        }
        key = VerifierKey.parse(self.ledger.vkey)
        verify_item_proof(out, key, agent=self.agent_id, ref=ref)
        proof = verify_proof(key, index=it.index, leaf=leaf, checkpoint=inc.checkpoint, proof=inc.hashes)
        return Shown(item=dataclasses.asdict(it), proof=proof)

    def prove(self, index: int) -> Proven:
        leaf = self.ledger.store.leaf(index)
        if leaf is None:
            raise NotFoundError(f"the log has no entry {index}", check="proof.index")
        inc = self.ledger.prove_inclusion(index)
        assert inc.checkpoint is not None
        return verify_proof(
            VerifierKey.parse(self.ledger.vkey),
            index=index,
            leaf=leaf,
            checkpoint=inc.checkpoint,
            proof=inc.hashes,
        )

    def mint_token(self, *, audience: str, kinds: Sequence[str], expires: int) -> str:
        return mint(
            seed=self.agent.signer.private_key.private_bytes_raw(),
            origin=self.ledger.origin,
            agent=self.agent_id,
            audience=audience,
            kinds=kinds,
            expires=expires,
        )

    def hot_block(self, session: str | None = None, scopes: Sequence[str] | None = None) -> str:
        res = self.mem.recall(self.agent_id, "", session=session, limit=1, record_access=False, scopes=scopes)
        return res.render_hot()

    def log_key(self) -> str:
        return self.ledger.vkey

    def checkpoint(self) -> str:
        cp = self.ledger.latest_checkpoint()
        return self.ledger.cosigned_note(cp).decode("utf-8")


def open_local(key_file: Path, settings: Settings | None = None) -> LocalAgentMemory:
    """The agent of ``key_file`` on the embedded log the settings name (``ENGRAM_HOME``)."""
    from engram.protocol.errors import ConfigError

    if not key_file.is_file():
        raise ConfigError(f"no agent key file at {key_file} (--key-file / ENGRAM_KEY_FILE)")
    services = open_services(settings or Settings.from_env())
    agent = Agent.load(key_file, log_vkey=services.ledger.vkey, transport=services.transport())
    return LocalAgentMemory(services, agent)

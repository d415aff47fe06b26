"""The memory application service: one face over the memory wing's rooms.

This is the impure shell around the pure parts (schemas, gate, evolve, policy, distill,
recall): it reads the clock (or takes ``now_us``), signs policy decisions with the ledger's
policy key, appends, and keeps the projection in step with the log. Each job has a room of
its own in ``ledger/memory/``, and this class wires them and answers for them (its methods
delegate, so callers name one service):

* the follower (follower.py): the projection in step with the log, the background round;
* the door and its queries (door.py): every agent-signed event, what the routes read;
* session closing (closing.py): the transcript, the one distillation, the session-end rules;
* policy decisions (decisions.py): the HOT caps, the sweep, replacements, signed appends;
* recall (recaller.py, over the stages of stages.py): HOT, then the ranked rows.

The arrows point down that list's reverse: the door asks closing, closing asks decisions,
decisions and recall ask the follower; no room imports this face.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Collection, Sequence

from engram.protocol.answers import ItemProof
from engram.protocol.erasure import ErasurePlan
from engram.protocol.queries import RecallQuery
from ledger.log import Ledger, Prepared, Receipt, Submission
from ledger.memory.access import AccessLog, query_key
from ledger.memory.closing import CloseResult, Closing
from ledger.memory.decisions import Decisions
from ledger.memory.distill import Distiller, RuleBasedDistiller, Turn
from ledger.memory.door import Door, Submitted
from ledger.memory.embed import Embedder
from ledger.memory.embed_batches import LengthBatched
from ledger.memory.follower import Follower
from ledger.memory.in_pass import InPassProjector
from ledger.memory.policy import Decision, PolicyConfig
from ledger.memory.projection import Projection
from ledger.memory.recall import RecallResult
from ledger.memory.recaller import Recaller
from ledger.memory.report import DistillRow
from ledger.memory.stages import as_query
from ledger.memory.state import Item, Session
from ledger.memory.vectors import VectorIndex
from ledger.mesh import Mesh

__all__ = ["CloseResult", "MemoryService", "Submitted"]


class MemoryService:
    """Memory operations over one ledger: one door for agent-signed events (:meth:`accept`,
    :meth:`submit`), queries, recall, and the policy operations it signs itself. Agents sign
    their events elsewhere (the client's ``AgentMemory``, over HTTP or in process); the
    service never holds an agent's key."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        config: PolicyConfig | None = None,
        distiller: Distiller | None = None,
        embedder: Embedder | None = None,
        access_log: str = "async",
        rand: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        """``embedder``: the semantic ranking's model (None: recall ranks without vectors).
        ``access_log``: ``"async"`` (uses are appended by a background writer, off the
        reader's path), ``"sync"`` (each recall appends its use before it returns) or
        ``"off"``. ``rand``: random bytes (the nonces of distilled entries)."""
        if access_log not in ("async", "sync", "off"):
            raise ValueError(f"access_log must be async, sync or off, not {access_log!r}")
        self.ledger = ledger
        self.config = config or PolicyConfig()
        self.distiller: Distiller = distiller or RuleBasedDistiller()
        self.gate = ledger.gate  # one gate for the log and the memory service (ledger.compose)
        self.projection = Projection(ledger.store)
        # The follower embeds in batches; texts of similar length go together (embed_batches).
        self.vectors = None if embedder is None else VectorIndex(ledger.store.engine, LengthBatched(embedder))
        self.access_mode = access_log
        # The rooms, wired bottom up; the follower's round holds the caps decisions take.
        self.follower = Follower(ledger, self.projection, self.vectors)
        self.decisions = Decisions(ledger, self.projection, self.follower, self.config, self.flush_access)
        self.follower.hold_caps = self.decisions.hold_caps
        # The committing pass applies the projection for what it commits (in_pass); the
        # follower catches up what it leaves.
        self.in_pass = InPassProjector(self.follower)
        ledger.on_commit_tx = self.in_pass
        self.access = AccessLog(
            lambda agent, bodies: self.decisions.append_retrying(agent, "memory.accessed", *bodies),
            key=None if ledger.policy_key is None else query_key(ledger.policy_key),
        )
        self.closing = Closing(
            ledger,
            self.projection,
            self.follower,
            self.decisions,
            config=self.config,
            distiller=self.distiller,
            flush_access=self.flush_access,
            rand=rand,
        )
        self.door = Door(ledger, self.projection, self.follower, self.decisions, self.closing)
        self.recaller = Recaller(
            ledger,
            self.projection,
            self.follower,
            self.vectors,
            config=self.config,
            access=self.access,
            access_mode=access_log,
        )

    # -- the follower: consistency with the log ---------------------------------------

    def sync(self, min_size: int | None = None) -> int:
        """Bring the projection to at least ``min_size`` (default: the latest checkpoint)
        (:meth:`Follower.sync`)."""
        return self.follower.sync(min_size)

    def follow(self, stop: threading.Event, interval_s: float = 0.5) -> None:
        """The background projector until ``stop`` is set (:meth:`Follower.follow`)."""
        self.follower.follow(stop, interval_s)

    def sync_through(self, index: int | None) -> int:
        """Read-your-writes through entry ``index`` (:meth:`Follower.sync_through`)."""
        return self.follower.sync_through(index)

    def flush_access(self) -> None:
        """Wait until every use recorded so far is in the log (see ledger.memory.access)."""
        self.access.flush()

    # -- the door and its queries -----------------------------------------------------

    def accept(self, subs: Sequence[Submission | Prepared], *, operator: bool = False) -> list[Receipt]:
        """Append signed events atomically, then the memory rules (:meth:`Door.accept`)."""
        return self.door.accept(subs, operator=operator)

    def submit(
        self,
        sub: Submission | Prepared,
        *,
        agent: str,
        kinds: Collection[str],
        session: str | None = None,
        operator: bool = False,
    ) -> Submitted:
        """Append one event ``agent`` signed, of one of ``kinds`` (:meth:`Door.submit`)."""
        return self.door.submit(sub, agent=agent, kinds=kinds, session=session, operator=operator)

    def sessions(self, agent: str) -> list[Session]:
        """Every session of ``agent``, in id order."""
        return self.door.sessions(agent)

    def session(self, agent: str, session: str) -> Session | None:
        return self.door.session(agent, session)

    def items(self, agent: str, **query: object) -> list[Item]:
        """``agent``'s items (``Projection.items``: tiers, status, source kinds, a page)."""
        return self.door.items(agent, **query)

    def item_counts(self, agent: str) -> dict[tuple[str, str], int]:
        """``agent``'s items per (tier, status)."""
        return self.door.item_counts(agent)

    def item(self, agent: str, ref: str) -> Item | None:
        return self.door.item(agent, ref)

    def item_proof(self, agent: str, ref: str, *, visible: Callable[[str], bool] | None = None) -> ItemProof:
        """``agent``'s item ``ref`` with the proof of the entry that made it (:meth:`Door.item_proof`)."""
        return self.door.item_proof(agent, ref, visible=visible)

    def ref_for(self, agent_id: str, index: int) -> str | None:
        """The item an entry made, or, if it was a duplicate, the item it confirmed."""
        return self.door.ref_for(agent_id, index)

    def erasure_plan(self, agent_id: str, index: int) -> ErasurePlan:
        """What erasing ``agent_id``'s entry ``index`` takes with it."""
        return self.door.erasure_plan(agent_id, index)

    # -- session closing ----------------------------------------------------------------

    def after_close(self, closed: Receipt, agent_id: str, session: str) -> CloseResult:
        """What follows an appended ``session.closed``: distill and compact (per config)."""
        return self.closing.after_close(closed, agent_id, session)

    def finish_session(self, agent_id: str, session: str) -> tuple[Receipt | None, int, list[Receipt]]:
        """Distill a closed session (unless done) and apply the session-end rules."""
        return self.closing.finish_session(agent_id, session)

    def transcript(self, agent_id: str, session: str) -> list[Turn]:
        return self.closing.transcript(agent_id, session)

    def distill(self, agent_id: str, session: str) -> tuple[Receipt | None, int]:
        """Run the distiller over the session and record the result (:meth:`Closing.distill`)."""
        return self.closing.distill(agent_id, session)

    def distill_report(self, agent_id: str | None = None) -> list[DistillRow]:
        """One row per ``memory.distilled`` entry, with the figures its body recorded."""
        return self.closing.distill_report(agent_id)

    # -- policy decisions ---------------------------------------------------------------

    def hold_caps(self, agent_id: str) -> list[Receipt]:
        """The HOT caps after a change to HOT (:meth:`Decisions.hold_caps`)."""
        return self.decisions.hold_caps(agent_id)

    def plan(self, agent_id: str, now_us: int) -> list[Decision]:
        """The decisions a sweep at ``now_us`` would take (nothing is appended)."""
        return self.decisions.plan(agent_id, now_us)

    def compact(self, agent_id: str) -> list[Receipt]:
        """Apply the time-based rules now (:meth:`Decisions.compact`)."""
        return self.decisions.compact(agent_id)

    # -- recall ---------------------------------------------------------------------------

    def recall(
        self,
        agent_id: str,
        query: RecallQuery | str,
        *,
        include_cold: bool = False,
        include_archived: bool = False,
        budget_tokens: int | None = None,
        session: str | None = None,
        now_us: int | None = None,
        limit: int = 10,
        record_access: bool = True,
        sources: str = "all",
        scopes: Sequence[str] | None = None,
        min_index: int | None = None,
        meshes: Sequence[str] | None = None,
    ) -> RecallResult:
        """HOT, then up to ``limit`` memories and raw records ranked for ``query`` within
        ``budget_tokens`` (:meth:`Recaller.recall`, the stages of ledger.memory.stages).

        ``query`` is a :class:`RecallQuery` (it carries the options), or the text with the
        options as keywords (parsed and bounded by :meth:`RecallQuery.of`): ``sources``
        (``all``, ``memories``, ``records``), ``scopes`` (None: every scope), ``meshes``
        (None: every mesh the agent is an active member of; empty: none). ``min_index``:
        recall as soon as the projection holds this entry (:meth:`sync_through`)."""
        q = as_query(
            query,
            include_cold=include_cold,
            include_archived=include_archived,
            limit=limit,
            budget_tokens=budget_tokens,
            session=session,
            sources=sources,
            scopes=scopes,
            meshes=meshes,
        )
        return self.recaller.recall(
            agent_id, q, now_us=now_us, record_access=record_access, min_index=min_index
        )

    def meshes_of(self, agent_id: str) -> list[Mesh]:
        """The Memory Meshes ``agent_id`` is an active member of, folded from the log."""
        return self.recaller.meshes_of(agent_id)

    def mesh_proof(self, reader: str, mesh: str, ref: str) -> bytes:
        """A bundle proving memory ``ref`` was shared with ``reader`` through ``mesh``
        (:meth:`Recaller.mesh_proof`)."""
        return self.recaller.mesh_proof(reader, mesh, ref)

    # -- rebuild --------------------------------------------------------------------------

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> tuple[int, str]:
        """Drop the projection (and its vectors) and replay the whole log, then re-embed
        (``progress(done, total)`` as it goes: entries read and replayed, then embedded);
        return (size, digest)."""
        self.flush_access()
        self.projection.rebuild(progress)
        if self.vectors is not None:
            self.vectors.embed_pending(progress)
        return self.projection.digest()

    def digest(self) -> tuple[int, str]:
        self.flush_access()
        self.sync()
        return self.projection.digest()

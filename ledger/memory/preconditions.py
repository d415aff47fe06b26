"""State-dependent refusals for memory events, handed to every :class:`~ledger.log.Ledger` by
the composition root (:mod:`ledger.compose`) as a batch validator.

Body schemas and the write gate are stateless and run in the append path itself. These
checks need the memory projection, so they run before the append lock on a synced
projection (and every ledger runs them, whatever path submitted the events: the SDK, the
CLI's ``event append``, later the HTTP API). ``evolve`` re-checks what matters in log
order, so an event that slips through a race has no effect rather than a wrong one.

Refused (``RejectedEventError``): a session opened twice; turns or a close for a session
that is not open; supersession of a missing or inactive item; exemption of a missing item
or one that is neither active nor archived; erasure of items that do not exist or are
already erased; a memory that repeats one of its provenance sources word for word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engram.protocol.errors import RejectedEventError
from engram.protocol.gate import WriteGate
from engram.protocol.kinds import ERASABLE_KINDS
from ledger.memory.projection import Projection
from ledger.memory.state import RECORD, SESSION_ENTRY_KINDS
from ledger.mesh import MESH_KINDS, Mesh, MeshReader, MeshRuleError, apply_event
from ledger.storage.store import SqlStore
from verifier.event import Envelope, Leaf
from verifier.jcs import parse_strict

__all__ = ["PRECONDITIONS", "MemoryPreconditions"]


class _Batch:
    """What the checks of one batch share: the store, a synced projection, the gate, and the
    sessions opened or closed by the batch's earlier events."""

    def __init__(self, store: SqlStore, gate: WriteGate) -> None:
        self.store = store
        self.gate = gate
        self.projection = Projection(store)
        self.opened: dict[tuple[str, str], str] = {}
        #: Meshes as folded from the log plus this batch's earlier mesh events.
        self.meshes: dict[str, Mesh | None] = {}


Check = Callable[[_Batch, Envelope, Mapping[str, Any]], None]


def _none(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    """Nothing state-dependent to check (the log's own checks and the body schema suffice)."""


def _session_opened(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    key = (env.agent, body["session"])
    if key in batch.opened or batch.projection.session(*key) is not None:
        raise RejectedEventError(f"session {body['session']} already exists", check="memory.session")
    batch.opened[key] = "open"


def _session_is_open(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    key = (env.agent, body["session"])
    s = batch.projection.session(*key)
    status = batch.opened.get(key) or (None if s is None else s.status)
    if status != "open":
        raise RejectedEventError(
            f"session {body['session']} of {env.agent} is not open", check="memory.session"
        )


def _session_closed(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    _session_is_open(batch, env, body)
    batch.opened[(env.agent, body["session"])] = "closed"


def _live_item(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    """memory.superseded and memory.decay_exempted name an item that exists and is active
    (an exemption may also bring back an archived one)."""
    it = batch.projection.item(env.agent, body["item"])
    if it is None:
        raise RejectedEventError(
            f"{env.kind} names item {body['item']}, which does not exist", check="memory.missing_item"
        )
    if it.tier == RECORD:
        raise RejectedEventError(
            f"item {it.ref} is a session-turn record, not a memory", check="memory.item_state"
        )
    restorable = env.kind == "memory.decay_exempted" and it.status == "archived"
    if it.status != "active" and not restorable:
        raise RejectedEventError(f"item {it.ref} is {it.status}", check="memory.item_state")


def _erasable(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    """Erasure removes text, never state (specs/memory-events.md):

    1. the named items exist and are not erased yet (``memory.missing_item``);
    2. every entry whose body goes is the agent's own (``memory.erase``): an agent never
       erases another's entry, whether or not it made an item;
    3. every one of them holds content (``memory.erase_control``): a control entry (a key,
       a mesh, a policy decision, an exemption, a revocation, an erasure) keeps its body,
       except a version 1 ``memory.replaced``, which copied the values of the memories it
       names: the erasure names its decision (``replaced``), checked against its body here,
       and replays fold that decision in its place;
    4. the erasure is exactly its plan (``memory.erase_plan``): ``also``, ``refs``,
       ``sessions`` and ``replaced`` are what engram.protocol.erasure computes from the
       agent's items, the same on client and server, so no entry rides along that the plan
       does not take.

    A session entry's erasure: the entry is the agent's opening or closing entry of that
    session, its body is still stored, and that body names the session (what replays read
    once the body is gone: ledger.memory.state.stand_ins)."""
    if "session" in body:
        _erasable_session_entry(batch, env, body["index"], body["session"])
        return
    for ref in body.get("refs") or ():
        it = batch.projection.item(env.agent, ref)
        if it is None or it.status == "erased":
            raise RejectedEventError(f"nothing to erase at {ref}", check="memory.missing_item")
    entries = [body["index"], *(body.get("also") or ())]
    kinds = {}
    for index in entries:
        raw = batch.store.leaf(index)
        if raw is None or Leaf.from_bytes(raw).envelope.agent != env.agent:
            raise RejectedEventError(f"entry {index} is not one of {env.agent}'s", check="memory.erase")
        kinds[index] = Leaf.from_bytes(raw).envelope.kind
    decisions = {r["index"]: r for r in body.get("replaced") or ()}
    for index, kind in kinds.items():
        if kind == "memory.replaced" and index in decisions:
            _copies_values(batch, index, decisions[index])
        elif kind not in ERASABLE_KINDS:
            raise RejectedEventError(
                f"entry {index} is a {kind}, a control entry: its body is state, not text an erasure "
                "may remove",
                check="memory.erase_control",
            )
    stray = sorted(decisions.keys() - {i for i, k in kinds.items() if k == "memory.replaced"})
    if stray:
        raise RejectedEventError(f"entry {stray[0]} is not a replacement decision", check="memory.erase_plan")
    _is_the_plan(batch, env.agent, body)


def _copies_values(batch: _Batch, index: int, decision: Mapping[str, Any]) -> None:
    """Entry ``index`` is a version 1 ``memory.replaced`` whose body, still stored, copies the
    two values, and ``decision`` is its decision: what a replay folds once the body is gone
    (ledger.memory.state.stand_ins). A version 2 body names memories only: a control entry."""
    stored = batch.store.body(index)
    body = None if stored is None else parse_strict(stored[1], max_bytes=1 << 24)
    if body is None or "was" not in body:
        raise RejectedEventError(
            f"entry {index} is a replacement decision that copies no value: a control entry",
            check="memory.erase_control",
        )
    if (body.get("item"), body.get("by")) != (decision["item"], decision["by"]):
        raise RejectedEventError(
            f"entry {index} decided that {body.get('by')} replaces {body.get('item')}, not what this erasure says",
            check="memory.erase_plan",
        )


def _is_the_plan(batch: _Batch, agent: str, body: Mapping[str, Any]) -> None:
    plan = batch.projection.erasure_plan(agent, body["index"])  # raises its own named check
    named = (
        set(body.get("also") or ()),
        set(body.get("refs") or ()),
        set(body.get("sessions") or ()),
        {(r["index"], r["item"], r["by"]) for r in body.get("replaced") or ()},
    )
    planned = (set(plan.also), set(plan.refs), set(plan.sessions), set(plan.replaced))
    if plan.session is not None or named != planned:
        raise RejectedEventError(
            f"erasing entry {body['index']} takes entries {sorted(plan.also)}, items {list(plan.refs)}, "
            f"sessions {list(plan.sessions)} and replacement decisions {sorted(i for i, _, _ in plan.replaced)} "
            "with it; this erasure names others",
            check="memory.erase_plan",
        )


def _erasable_session_entry(batch: _Batch, env: Envelope, index: int, session: str) -> None:
    raw = batch.store.leaf(index)
    leaf = None if raw is None else Leaf.from_bytes(raw)
    if leaf is None or leaf.envelope.agent != env.agent:
        raise RejectedEventError(f"entry {index} is not one of {env.agent}'s", check="memory.erase")
    if leaf.envelope.kind not in SESSION_ENTRY_KINDS:
        raise RejectedEventError(
            f"entry {index} is a {leaf.envelope.kind}, not a session's opening or closing entry",
            check="memory.erase",
        )
    stored = batch.store.body(index)
    if stored is None:
        raise RejectedEventError(f"entry {index} holds nothing to erase", check="memory.missing_item")
    if parse_strict(stored[1], max_bytes=1 << 24).get("session") != session:
        raise RejectedEventError(f"entry {index} is not of session {session}", check="memory.erase")


#: Every entry stored so far (leaves not yet in a checkpoint included).
_ALL = 1 << 62


def _mesh_rules(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    """A mesh event the fold would give no effect is refused with the rule's check name
    (ledger.mesh): folded from the log and this batch's earlier mesh events."""
    mesh = str(body["mesh"])
    if mesh not in batch.meshes:
        batch.meshes[mesh] = MeshReader(batch.store).mesh(mesh, _ALL)
    try:
        batch.meshes[mesh] = apply_event(batch.meshes[mesh], _ALL, env.agent, env.kind, body)
    except MeshRuleError as e:
        raise RejectedEventError(str(e).split("] ", 1)[-1], check=e.check) from e


def _not_verbatim(batch: _Batch, env: Envelope, body: Mapping[str, Any]) -> None:
    if body.get("provenance"):
        sources = MemoryPreconditions.source_texts(batch.store, body["provenance"], env.agent)
        batch.gate.check_not_verbatim(body["content"], sources)


#: One check per registered kind (engram.protocol.kinds.KINDS; a test checks the rows).
PRECONDITIONS: dict[str, Check] = {
    "key.registered": _none,
    "key.rotated": _none,
    "key.revoked": _none,
    "session.opened": _session_opened,
    "session.turn": _session_is_open,
    "session.closed": _session_closed,
    "memory.written": _not_verbatim,
    "memory.distilled": _none,
    "memory.tier_changed": _none,
    "memory.superseded": _live_item,
    "memory.decay_exempted": _live_item,
    "memory.archived": _none,
    "memory.replaced": _none,
    "memory.accessed": _none,
    "memory.erased": _erasable,
    "pact.outcome": _none,
    "eval.outcome": _none,
    "boundary.event": _none,
    "commitment": _none,
    "share.revoked": _none,
    **dict.fromkeys(MESH_KINDS, _mesh_rules),
}

#: Kinds whose checks read the projection, which is synced first (memory.written alone
#: reads only stored bodies).
_NEEDS_STATE = frozenset(k for k, c in PRECONDITIONS.items() if c not in (_none, _not_verbatim, _mesh_rules))
#: Kinds whose check may pass on the projection as it stands, before it is synced (issue 28,
#: Deliver 2: a turn, the hot path, never waits on the projection): a turn for a session the
#: projection shows open. The projection only lags the log, so what it shows open was opened;
#: if the session was closed in the part not applied yet, the turn is logged and ``evolve``
#: gives it no effect (the race this module's docstring names, as between the check and the
#: writer lock). A turn the projection cannot confirm is checked again on a synced one.
_LAG_SAFE = frozenset({"session.turn"})


class MemoryPreconditions:
    """Callable batch validator: the store and ``(envelope, body)`` pairs in, raises to refuse."""

    def __init__(self, gate: WriteGate) -> None:
        self.gate = gate

    @staticmethod
    def source_texts(store: SqlStore, provenance: Sequence[Mapping[str, str]], agent: str) -> list[str]:
        """Texts of the agent's own log records a memory cites (turns, records), for the
        verbatim check. Another agent's entries are never read: whether a write is refused
        must not depend on bodies the writer cannot see (else a refusal would confirm a
        guess of another agent's private text)."""
        texts = []
        for p in provenance:
            if p["source_type"] in ("log", "turn", "pact", "eval"):
                index = int(p["source_ref"])
                leaf = store.leaf(index)
                if leaf is None or Leaf.from_bytes(leaf).envelope.agent != agent:
                    continue
                sb = store.body(index)
                if sb is None:
                    continue
                body = parse_strict(sb[1], max_bytes=1 << 24)
                for f in ("content", "promise", "description", "evidence"):
                    if isinstance(body.get(f), str):
                        texts.append(body[f])
        return texts

    def __call__(self, store: SqlStore, batch: Sequence[tuple[Envelope, Mapping[str, Any]]]) -> None:
        needs = {e.kind for e, _ in batch} & _NEEDS_STATE
        if needs and needs <= _LAG_SAFE:
            try:
                self._check(_Batch(store, self.gate), batch)
            except RejectedEventError:
                pass  # perhaps only not applied yet: decide on a synced projection
            else:
                return
        state = _Batch(store, self.gate)
        if needs:
            state.projection.sync()
        self._check(state, batch)

    @staticmethod
    def _check(state: _Batch, batch: Sequence[tuple[Envelope, Mapping[str, Any]]]) -> None:
        for env, body in batch:
            PRECONDITIONS[env.kind](state, env, body)

"""Memory over HTTP: sessions, writes and records (agent-signed events); recall, tier views
and single items (signed requests, or a share token's audience for what the token allows).

A client of the narrow memory port asks every read through one route, ``POST
/v1/agents/{agent}/ask``, with a query value of :mod:`engram.protocol.queries` as JSON
(answered by :mod:`ledger.memory.asking`, as in process); the per-read routes stay for the
clients that use them.

No route returns one agent's memory to another: reads go through :func:`api.deps.reader`,
which admits the agent itself or the audience of a valid share token, and then only items
of the kinds the token allows.
"""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from api import convert
from api.deps import (
    AgentPath,
    KnownSize,
    MinIndex,
    ReaderDep,
    SelfDep,
    ServicesDep,
    SignedDep,
    TokenHeader,
    counted,
    reader,
    receipt_out,
    self_only,
    submit_signed,
)
from api.problems import problem_responses
from api.schemas import (
    MESH,
    REF,
    SESSION,
    CloseOut,
    CountedReceiptOut,
    Decisions,
    ItemProofOut,
    ItemsOut,
    MeshesOut,
    NowCurrentOut,
    RecallIn,
    RecallOut,
    SessionOpened,
    SessionOut,
    SignedEvent,
    WriteOut,
)
from engram.protocol.answers import EntryProof, ItemProof
from engram.protocol.errors import NotFoundError
from engram.protocol.kinds import kinds_where
from engram.protocol.queries import MeshProofQuery, parse_query
from engram.protocol.records import RECORD_KINDS
from engram.protocol.schemas import parse_ref
from engram.protocol.wire import Receipt
from ledger.memory.asking import READER_QUERIES, Asker, ask
from ledger.memory.state import Session
from verifier.bundle import MEDIA_TYPE as BUNDLE_MEDIA_TYPE

router = APIRouter(tags=["memory"], responses=problem_responses())

SessionPath = Annotated[str, Path(pattern=SESSION)]
_PROBLEMS = problem_responses(401, 403, 404, 409, 422)
#: What an agent submits to its /memories route: the memory kinds it signs itself.
MEMORY_KINDS = kinds_where(group="memory", signer="agent")


@router.post("/v1/agents/{agent}/sessions", status_code=201, responses=_PROBLEMS)
def open_session(
    agent: AgentPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None
) -> SessionOpened:
    """Open a session: a signed ``session.opened`` event. HOT memory is frozen for it."""
    done = submit_signed(svc, ev, agent=agent, kinds={"session.opened"})
    return SessionOpened(
        session=str(done.body["session"]),
        receipt=receipt_out(svc, done.receipt, known),
        redacted=done.redacted,
    )


def _session_out(s: Session) -> SessionOut:
    return SessionOut(
        agent=s.agent,
        session=s.session,
        status=s.status,
        title=s.title,
        opened_index=s.opened_index,
        closed_index=s.closed_index,
        turns=s.turns,
        distilled=s.distilled,
    )


@router.get("/v1/agents/{agent}/sessions", responses=_PROBLEMS)
def session_list(access: SelfDep, svc: ServicesDep, min_index: MinIndex = None) -> list[SessionOut]:
    """Every session of the agent, in id order (an erasure plan reads their opening and
    closing entries: a title and a summary are erasable). Signed by the agent."""
    svc.memory.sync_through(min_index)
    return [_session_out(s) for s in svc.memory.sessions(access.agent)]


@router.get("/v1/agents/{agent}/sessions/{session}", responses=_PROBLEMS)
def session_state(
    agent: AgentPath, session: SessionPath, access: SelfDep, svc: ServicesDep, min_index: MinIndex = None
) -> SessionOut:
    """A session's state (the next turn number is ``turns``). Signed by the agent."""
    svc.memory.sync_through(min_index)
    s = svc.memory.session(access.agent, session)
    if s is None:
        raise NotFoundError(f"no session {session} of {agent}", check="memory.session")
    return _session_out(s)


@router.post("/v1/agents/{agent}/sessions/{session}/turns", status_code=201, responses=_PROBLEMS)
def turn(
    agent: AgentPath, session: SessionPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None
) -> CountedReceiptOut:
    """One turn, full fidelity: a signed ``session.turn`` event (its secrets were redacted
    before signing; ``redacted`` says how many)."""
    done = submit_signed(svc, ev, agent=agent, kinds={"session.turn"}, session=session)
    return counted(receipt_out(svc, done.receipt, known), done.body)


@router.post("/v1/agents/{agent}/sessions/{session}/close", status_code=201, responses=_PROBLEMS)
def close_session(
    agent: AgentPath, session: SessionPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None
) -> CloseOut:
    """Close a session (signed ``session.closed``); the service then distills it and applies
    the session-end rules, signing those decisions with the ledger's policy key."""
    done = submit_signed(svc, ev, agent=agent, kinds={"session.closed"}, session=session)
    result = done.close
    assert result is not None  # the door closes every session.closed it appends
    return CloseOut(
        closed=receipt_out(svc, result.closed, known),
        distilled=None if result.distilled is None else receipt_out(svc, result.distilled, known),
        entries=result.entries,
        decisions=[receipt_out(svc, r, None) for r in result.decisions],
        redacted=done.redacted,
    )


@router.post("/v1/agents/{agent}/memories", status_code=201, responses=_PROBLEMS)
def write_memory(agent: AgentPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None) -> WriteOut:
    """A signed ``memory.written``, ``memory.superseded``, ``memory.decay_exempted`` or
    ``memory.erased`` event (an erasure deletes the erased entry's body)."""
    done = submit_signed(svc, ev, agent=agent, kinds=MEMORY_KINDS)
    return WriteOut(
        receipt=receipt_out(svc, done.receipt, known),
        ref=done.ref,
        current=[NowCurrentOut(erased=e, current=c) for e, c in done.current],
        redacted=done.redacted,
    )


@router.post("/v1/agents/{agent}/records", status_code=201, responses=_PROBLEMS)
def write_record(agent: AgentPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None) -> WriteOut:
    """A COLD record, signed: ``pact.outcome``, ``eval.outcome``, ``boundary.event`` or
    ``commitment``."""
    done = submit_signed(svc, ev, agent=agent, kinds=set(RECORD_KINDS))
    return WriteOut(receipt=receipt_out(svc, done.receipt, known), ref=done.ref, redacted=done.redacted)


@router.post("/v1/agents/{agent}/recall", responses=_PROBLEMS)
async def recall(
    agent: AgentPath, req: RecallIn, access: SelfDep, svc: ServicesDep, min_index: MinIndex = None
) -> RecallOut:
    """Recall for a prompt (signed by the agent): HOT first, then WARM memories (COLD on
    request), archived memories that match, and raw session turns (tier ``RECORD``) ranked;
    each result names its log index. Use is recorded (``memory.accessed``, asynchronously)."""
    result = await run_in_threadpool(
        svc.memory.recall,
        access.agent,
        req.query,
        include_cold=req.include_cold,
        include_archived=req.include_archived,
        budget_tokens=req.budget_tokens,
        session=req.session,
        limit=req.limit,
        scopes=req.scopes,
        min_index=min_index,
        meshes=req.meshes,
    )
    return RecallOut(
        agent=result.agent,
        query=result.query,
        as_of_size=result.as_of_size,
        session=result.session,
        hot=[convert.recalled(r) for r in result.hot],
        ranked=[convert.recalled(r) for r in result.ranked],
        hot_tokens=result.hot_tokens,
        total_tokens=result.total_tokens,
        notes=list(result.notes),
        context=result.render(),
    )


@router.get("/v1/agents/{agent}/meshes", responses=_PROBLEMS)
def meshes(agent: AgentPath, access: SelfDep, svc: ServicesDep) -> MeshesOut:
    """The Memory Meshes the agent is an active member of (signed by the agent: only a
    member reads a mesh), folded from the log: creator, members and each member's grant."""
    size = svc.memory.ledger.size()
    return MeshesOut(
        agent=access.agent, as_of_size=size, meshes=[m.to_json() for m in svc.memory.meshes_of(access.agent)]
    )


@router.get(
    "/v1/agents/{agent}/meshes/proof",
    responses={200: {"content": {BUNDLE_MEDIA_TYPE: {}}, "description": "a mesh_read bundle"}, **_PROBLEMS},
)
async def mesh_proof(
    agent: AgentPath,
    access: SelfDep,
    svc: ServicesDep,
    mesh: Annotated[str, Query(pattern=MESH, max_length=97)],
    ref: Annotated[str, Query(pattern=REF)],
) -> Response:
    """A bundle proving offline that memory ``ref`` was written by its author, was active and
    WARM at the latest checkpoint and was shared with the agent through ``mesh`` under grants
    valid then; it discloses that memory and the entries that bear on it, nothing else (signed
    by the reading agent; refused, ``mesh.not_shared``, unless it holds, specs/mesh.md)."""
    data = await run_in_threadpool(svc.memory.mesh_proof, access.agent, mesh, ref)
    return Response(data, media_type=BUNDLE_MEDIA_TYPE, headers={"Cache-Control": "no-store"})


@router.get("/v1/agents/{agent}/memory", responses=_PROBLEMS)
def tier_view(
    agent: AgentPath,
    access: ReaderDep,
    svc: ServicesDep,
    tier: Annotated[Literal["HOT", "WARM", "COLD", "RECORD"] | None, Query()] = None,
    status: Annotated[Literal["active", "superseded", "archived", "erased", "all"], Query()] = "active",
    after: Annotated[str | None, Query(pattern=REF, description="page after this item reference")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    min_index: MinIndex = None,
) -> ItemsOut:
    """One agent's memory items by tier, in log order, a page at a time (signed by the
    agent, or by a share token's audience: then only items of the kinds the token allows).
    ``tier=RECORD`` lists the session-turn records (what an erasure plan needs).
    ``next`` is the ``after`` of the following page, or null at the end."""
    size = svc.memory.sync_through(min_index)
    items = svc.memory.items(
        access.agent,
        tiers=None if tier is None else [tier],
        status=None if status == "all" else status,
        source_kinds=None if access.kinds is None else sorted(access.kinds),
        after=None if after is None else parse_ref(after),
        limit=limit + 1,
    )
    page = items[:limit]
    return ItemsOut(
        agent=access.agent,
        as_of_size=size,
        items=[convert.item(i) for i in page],
        next=page[-1].ref if len(items) > limit else None,
    )


@router.get("/v1/agents/{agent}/memory/{ref}", responses=_PROBLEMS)
def memory_item(
    agent: AgentPath,
    ref: Annotated[str, Path(pattern=REF)],
    access: ReaderDep,
    svc: ServicesDep,
    min_index: MinIndex = None,
) -> ItemProofOut:
    """One item with its provenance, the leaf that made it and that leaf's inclusion proof
    in the latest checkpoint."""
    svc.memory.sync_through(min_index)
    return convert.item_proof(svc.memory.item_proof(access.agent, ref, visible=access.sees))


@router.post("/v1/agents/{agent}/compact", responses=_PROBLEMS)
def compact(agent: AgentPath, access: SelfDep, svc: ServicesDep) -> Decisions:
    """Apply the time-based rules now (signed by the agent); decisions are policy-signed."""
    return Decisions(decisions=[receipt_out(svc, r, None) for r in svc.memory.compact(access.agent)])


_ASK_EXAMPLE = {"ask": "recall", "text": "deploy checklist", "limit": 5}


@router.post(
    "/v1/agents/{agent}/ask",
    responses={
        200: {
            "content": {"application/json": {}, BUNDLE_MEDIA_TYPE: {}, "application/octet-stream": {}},
            "description": '{"ask": name, "answer": ...}; a mesh proof is the bundle, a checkpoint its note',
        },
        **_PROBLEMS,
    },
)
async def ask_memory(
    agent: AgentPath,
    vr: SignedDep,
    svc: ServicesDep,
    query: Annotated[dict[str, Any], Body(examples=[_ASK_EXAMPLE])],
    token: TokenHeader = None,
    min_index: MinIndex = None,
) -> Response:
    """One question of the agent's memory (engram.protocol.queries: recall, items, item,
    sessions, session, meshes, mesh_proof, hot_block, compact, checkpoint, entry), signed by
    the agent, or for ``items`` and ``item`` by a share token's audience (only the kinds the
    token allows), as the per-read routes admit them. The query is parsed and bounded first,
    refused naming the check (``request.ask``, ``request.members``, ``request.<member>``)
    before the request's nonce is spent or anything is read."""
    q = parse_query(query)
    access = await (reader if type(q) in READER_QUERIES else self_only)(agent, vr, svc, token)
    asker = Asker(agent=access.agent, kinds=access.kinds, min_index=min_index)
    answer = await run_in_threadpool(ask, svc.memory, asker, q)
    if isinstance(answer, bytes):
        media = BUNDLE_MEDIA_TYPE if isinstance(q, MeshProofQuery) else "application/octet-stream"
        return Response(answer, media_type=media, headers={"Cache-Control": "no-store"})
    return JSONResponse({"ask": q.name, "answer": _wire(svc, answer)}, headers={"Cache-Control": "no-store"})


def _wire(svc: ServicesDep, answer: object) -> Any:
    """An answer value as JSON (what the client's ``HttpTransport.ask`` reads back)."""
    if isinstance(answer, list):
        return [_wire(svc, a) for a in answer]
    if isinstance(answer, str):
        return answer
    if isinstance(answer, Receipt):
        return receipt_out(svc, answer, None).model_dump(mode="json")
    if isinstance(answer, ItemProof):
        return convert.item_proof(answer).model_dump(mode="json")
    if isinstance(answer, EntryProof):
        return {
            "index": answer.index,
            "leaf": convert.b64(answer.leaf),
            "leaf_hash": answer.leaf_hash.hex(),
            "size": answer.size,
            "root": convert.b64(answer.root),
            "proof": [convert.b64(h) for h in answer.proof],
            "checkpoint": answer.checkpoint.decode("utf-8"),
        }
    return answer.to_json()  # type: ignore[attr-defined]  # the protocol's frozen answers

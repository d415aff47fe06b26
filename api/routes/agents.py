"""Signed events, agents and their keys.

Every event is signed by its agent and verified by the ledger; the routes only decode,
charge rate limits and say which kinds belong where. Registering a key needs the
operator token besides the key's own proof of possession (the ``key.registered`` event
is self-signed and carries a PoP bound to the log and agent).
"""

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from api import convert
from api.deps import (
    AgentPath,
    KnownSize,
    OperatorFlag,
    ServicesDep,
    charged,
    counted,
    receipt_out,
    require_operator,
    submission,
    unb64,
)
from api.problems import problem_responses
from api.schemas import (
    KIND,
    AgentOut,
    AuditOut,
    EventBatch,
    ForceRevoke,
    HeadOut,
    KeyOut,
    ProofFromKnown,
    ReceiptOut,
    Receipts,
    SignedEvent,
)
from engram.protocol.errors import NotFoundError, RejectedEventError
from ledger.log import Prepared
from ledger.storage.store import StreamHead
from verifier.event import Envelope

router = APIRouter(responses=problem_responses())

_PROBLEMS = problem_responses(401, 403, 409, 422)


@router.post("/v1/events", status_code=201, tags=["events"], responses=_PROBLEMS)
def submit(batch: EventBatch, svc: ServicesDep, operator: OperatorFlag, known: KnownSize = None) -> Receipts:
    """Append signed events atomically (authenticated by their signatures); answers after
    integration with receipts: index, timestamp, leaf, checkpoint, inclusion proof.
    Registering an agent key needs the operator token."""
    agents = [_agent_of(e) for e in batch.events]
    per_agent = {a: agents.count(a) for a in set(agents)}  # a batch needs a token per event of each agent
    subs = [
        submission(svc, e, cost=per_agent[a], operator=operator)
        for e, a in zip(batch.events, agents, strict=True)
    ]
    # The memory service's door: memory kinds get the memory rules here too.
    receipts = charged(svc, svc.memory.accept(subs, operator=operator))
    proofs: dict[int, ProofFromKnown] = {}
    return Receipts(
        receipts=[
            counted(receipt_out(svc, r, known, proofs), p.body) for r, p in zip(receipts, subs, strict=True)
        ]
    )


def _agent_of(e: SignedEvent) -> str:
    """The agent an event of a batch names (each agent's budget is checked for all of its
    events in the batch before any is prepared)."""
    return Envelope.from_bytes(unb64(e.envelope, "envelope")).agent


def _one(
    svc: ServicesDep, ev: SignedEvent, agent: str | None, kind: str, *, operator: bool = False
) -> Prepared:
    p = submission(svc, ev, operator=operator)
    if p.envelope.kind != kind or (agent is not None and p.envelope.agent != agent):
        raise RejectedEventError(
            f"this route takes a {kind} event{'' if agent is None else ' of ' + agent}", check="request.kind"
        )
    return p


@router.post(
    "/v1/agents",
    status_code=201,
    tags=["agents"],
    dependencies=[Depends(require_operator)],
    responses=_PROBLEMS,
)
def register(ev: SignedEvent, svc: ServicesDep, known: KnownSize = None) -> ReceiptOut:
    """Register an agent: a self-signed ``key.registered`` event (proof of possession
    inside) and the operator token."""
    sub = _one(svc, ev, None, "key.registered", operator=True)
    return receipt_out(svc, charged(svc, svc.memory.accept([sub], operator=True))[0], known)


@router.get("/v1/agents/{agent}", tags=["agents"], responses=problem_responses(404))
def agent_info(agent: AgentPath, svc: ServicesDep) -> AgentOut:
    """An agent's public key history and stream heads (both are public: leaves are public)."""
    keys = svc.ledger.agent_keys(agent)
    if not keys:
        raise NotFoundError(f"no agent {agent} in this log", check="agent.unknown")
    return AgentOut(
        agent=agent,
        active_key=svc.ledger.active_key_id(agent),
        keys=[
            KeyOut(
                key_id=k.key_id,
                public_key=convert.b64(k.public_key),
                added_at=k.added_at,
                retired_at=k.retired_at,
                retired_how=k.retired_how,
            )
            for k in keys
        ],
        streams=[_head(h) for h in svc.ledger.stream_heads(agent)],
    )


def _head(h: StreamHead) -> HeadOut:
    return HeadOut(agent=h.agent, kind=h.kind, version=h.version, index=h.index, leaf_hash=h.leaf_hash.hex())


@router.get("/v1/agents/{agent}/streams/{kind}", tags=["agents"], responses=problem_responses(404))
def stream_head(agent: AgentPath, kind: Annotated[str, Path(pattern=KIND)], svc: ServicesDep) -> HeadOut:
    """The head of one stream (what the next event's version and prev must follow)."""
    h = svc.ledger.stream_head(agent, kind)
    if h is None:
        raise NotFoundError(f"stream {agent}/{kind} is empty", check="stream.empty")
    return _head(h)


@router.post("/v1/agents/{agent}/keys/rotate", status_code=201, tags=["agents"], responses=_PROBLEMS)
def rotate(agent: AgentPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None) -> ReceiptOut:
    """A ``key.rotated`` event signed by the active key, with the new key's proof of possession."""
    return receipt_out(svc, charged(svc, svc.memory.accept([_one(svc, ev, agent, "key.rotated")]))[0], known)


@router.post("/v1/agents/{agent}/keys/revoke", status_code=201, tags=["agents"], responses=_PROBLEMS)
def revoke(agent: AgentPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None) -> ReceiptOut:
    """A ``key.revoked`` event signed by the agent's active key: it signs nothing more."""
    return receipt_out(svc, charged(svc, svc.memory.accept([_one(svc, ev, agent, "key.revoked")]))[0], known)


@router.post(
    "/v1/agents/{agent}/keys/force-revoke",
    status_code=201,
    tags=["agents"],
    dependencies=[Depends(require_operator)],
    responses=_PROBLEMS,
)
def force_revoke(agent: AgentPath, req: ForceRevoke, svc: ServicesDep) -> ReceiptOut:
    """Operator: revoke a lost or compromised key with the ledger's policy key."""
    return receipt_out(svc, svc.ledger.force_revoke(agent, req.reason), None)


@router.post(
    "/v1/operator/audit",
    tags=["operator"],
    dependencies=[Depends(require_operator)],
    responses=_PROBLEMS,
)
def operator_audit(svc: ServicesDep) -> AuditOut:
    """Operator: ``engram audit`` over HTTP. Re-derives every table from the leaves and names
    each row and column that differs (``clean`` false); read-only. It reads the whole log:
    run it nightly, not per request."""
    from ledger.audit import audit_ledger

    report = audit_ledger(svc.ledger)
    return AuditOut.model_validate(report.to_json())

"""Sharing and the trust oracle.

Share tokens are minted by the agent's client with the agent's own key (the service never
holds agent keys); the service revokes them when the agent logs ``share.revoked`` and
serves bundles to a token's audience, which proves possession of the audience key
(``ed25519:<hex>``) by signing the request. The oracle's answers are notes signed by the
log key and bound to the checkpoint served beside them (specs/oracle.md).
"""

import json
import re
from collections import OrderedDict
from typing import Annotated, Any
from weakref import WeakKeyDictionary

from fastapi import APIRouter, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from api.deps import AgentPath, KnownSize, ServicesDep, receipt_out, signed_request, spend, submit_signed
from api.problems import problem_responses
from api.schemas import AGENT, KIND, OracleAgentOut, OracleClaimOut, ReceiptOut, SignedEvent, TaskClaim
from engram.protocol.errors import AuthError, MalformedError
from ledger.bundle import create_bundle, pact_claim
from ledger.log import Ledger
from ledger.oracle import agent_statement, evaluate_claim
from ledger.sharing import verify_share_token
from verifier.bundle import MEDIA_TYPE

router = APIRouter(responses=problem_responses())
_KIND = re.compile(KIND)

TokenHeader = Annotated[
    str | None, Header(max_length=16_384, description="a share token (specs/share-token.md)")
]
_PROBLEMS = problem_responses(401, 403, 404, 422)

#: What an anonymous oracle claim costs against its address's budget (ENGRAM_RATE_LIMIT_*
#: per key), in requests: evaluating one and building its evidence bundle costs about 100x
#: a checkpoint read; an answer from the verdict cache costs 1.
CLAIM_COST = 25
#: Verdicts kept per log (claim, checkpoint size): the same claim at the same checkpoint has
#: the same signed answer.
VERDICTS_CACHED = 1024
_VERDICTS: WeakKeyDictionary[Ledger, OrderedDict[tuple[str, int], OracleClaimOut]] = WeakKeyDictionary()


@router.post("/v1/agents/{agent}/tokens/revoke", status_code=201, tags=["sharing"], responses=_PROBLEMS)
def revoke_token(agent: AgentPath, ev: SignedEvent, svc: ServicesDep, known: KnownSize = None) -> ReceiptOut:
    """Revoke a share token: a signed ``share.revoked`` event naming its revocation id."""
    receipt = submit_signed(svc, ev, agent=agent, kinds={"share.revoked"}).receipt
    return receipt_out(svc, receipt, known)


async def _token_holder(request: Request, svc: ServicesDep, token: str, agent: str, kinds: list[str]) -> str:
    """The audience key that signed this request, once the token allows ``kinds`` of
    ``agent``'s to it; only then is the request's nonce spent."""
    vr = await signed_request(request, svc)
    if vr.principal.agent is not None:
        raise AuthError(
            "a share token is presented in a request signed by its audience key (ed25519:<hex>)",
            check="auth.audience",
        )
    audience = vr.principal.signer
    await run_in_threadpool(
        verify_share_token, svc.ledger, token, agent=agent, audience=audience, kinds=kinds
    )
    await spend(svc, vr)
    return audience


@router.get(
    "/v1/bundles",
    tags=["sharing"],
    responses={200: {"content": {MEDIA_TYPE: {}}, "description": "an attestation bundle"}, **_PROBLEMS},
)
async def bundle(
    request: Request,
    svc: ServicesDep,
    agent: Annotated[str, Query(pattern=AGENT)],
    kind: Annotated[list[str], Query(min_length=1, max_length=8)],
    engram_share_token: TokenHeader = None,
    trusted_size: Annotated[int | None, Query(ge=0, le=2**53)] = None,
) -> Response:
    """A bundle proving the agent's records of ``kind`` (counts; for ``pact.outcome`` also
    fulfilled count and mean quality), limited to the token's scope. The request must be
    signed by the token's audience key."""
    for k in kind:
        if not _KIND.fullmatch(k):
            raise MalformedError("kind must be an event kind name", check="request.kind")
    if engram_share_token is None:
        raise AuthError("a bundle needs the agent's share token (Engram-Share-Token)", check="auth.token")
    kinds = sorted(set(kind))
    audience = await _token_holder(request, svc, engram_share_token, agent, kinds)
    statements: list[dict[str, Any]] = []
    for k in kinds:
        if k == "pact.outcome":
            statements += pact_claim(svc.ledger, agent)["statements"]
        else:
            n = svc.ledger.stream_count(agent, k)
            statements.append({"predicate": "count", "agent": agent, "kind": k, "value": n})
    data = await run_in_threadpool(
        create_bundle,
        svc.ledger,
        {"statements": statements},
        trusted_size=trusted_size,
        token=engram_share_token,
        audience=audience,
    )
    return Response(data, media_type=MEDIA_TYPE, headers={"Cache-Control": "no-store"})


@router.get("/v1/oracle/agents/{agent}", tags=["oracle"], responses=_PROBLEMS)
def oracle_agent(agent: AgentPath, svc: ServicesDep) -> OracleAgentOut:
    """What the log says about an agent: pact counts and memory-quality dimensions computed
    from COLD records, each with its definition; signed by the log key at the checkpoint."""
    answer = agent_statement(svc.ledger, agent)
    return OracleAgentOut(
        agent=agent,
        checkpoint=answer.checkpoint.decode("utf-8"),
        statement=answer.note.decode("utf-8"),
        payload=answer.payload,
    )


@router.post("/v1/oracle/claims", tags=["oracle"], responses=_PROBLEMS)
async def oracle_claim(
    claim: TaskClaim, request: Request, svc: ServicesDep, engram_share_token: TokenHeader = None
) -> OracleClaimOut:
    """Check "completed N tasks (of task_type) with mean quality Q" against the log: supported,
    contradicted or unknown, signed by the log key, with an evidence bundle. With the agent's
    share token for ``pact.outcome`` (request signed by its audience key) the bundle discloses
    the bodies and proves the actual figures offline; without one it proves the record count."""
    c = claim.model_dump(exclude_none=True)
    audience = None
    if engram_share_token is not None:
        audience = await _token_holder(request, svc, engram_share_token, claim.agent, ["pact.outcome"])
    else:
        # Anonymous claims are charged by cost against the caller's address, and a verdict
        # is computed once per claim and checkpoint (one address's 300 claims
        # raised another client's median latency from 6 to 184 ms).
        budget = "claims:" + (request.client.host if request.client else "unknown")
        cache = _VERDICTS.setdefault(svc.ledger, OrderedDict())
        size = (await run_in_threadpool(svc.ledger.latest_checkpoint)).size
        key = (json.dumps(c, sort_keys=True), size)
        cached = cache.get(key)
        svc.key_limits.check(budget, 1 if cached is not None else CLAIM_COST)
        if cached is not None:
            svc.key_limits.charge(budget, 1)
            return cached
    answer, proving, public = await run_in_threadpool(evaluate_claim, svc.ledger, c)
    payload = answer.payload
    if audience is not None:
        evidence = await run_in_threadpool(
            create_bundle,
            svc.ledger,
            proving,
            token=engram_share_token,
            audience=audience,
            at_size=answer.size,  # the evidence is built at the verdict's checkpoint
            trusted_size=answer.size,
        )
    else:
        evidence = await run_in_threadpool(
            create_bundle,
            svc.ledger,
            public,
            disclose_bodies=False,
            at_size=answer.size,
            trusted_size=answer.size,
        )
    out = OracleClaimOut(
        verdict=payload["verdict"],
        reason=payload["reason"],
        actual=payload["actual"],
        checkpoint=answer.checkpoint.decode("utf-8"),
        statement=answer.note.decode("utf-8"),
        evidence=json.loads(evidence),
        evidence_discloses_bodies=audience is not None,
    )
    if audience is None:
        svc.key_limits.charge(budget, CLAIM_COST)
        cache[(json.dumps(c, sort_keys=True), answer.size)] = out  # the verdict at its checkpoint
        while len(cache) > VERDICTS_CACHED:
            cache.popitem(last=False)
    return out

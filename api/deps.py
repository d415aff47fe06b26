"""Typed dependencies: the services one app holds, and who is asking.

Three ways a request is authorized (specs/http-api.md §2):

* **signed events** (writes) authenticate themselves: the ledger verifies every signature;
  the rate limit is charged to the agent only after its signature verified;
* **signed requests** (reads of an agent's memory, recall, compaction): ``Engram-Signer:
  agent:<id>`` and a signature by that agent's active key, with a fresh nonce; or, with an
  ``Engram-Share-Token``, a request signed by the token's audience key ``ed25519:<hex>``,
  which then sees only the kinds the token allows;
* **the operator bearer token** (key registration, forced revocation), compared in
  constant time.
"""

import hmac
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request
from starlette.concurrency import run_in_threadpool

from api import convert
from api.auth import Principal, RequestAuthenticator, VerifiedRequest
from api.fairness import KnownKeys
from api.ratelimit import RateLimiter
from api.schemas import AGENT, CountedReceiptOut, ProofFromKnown, ReceiptOut, SignedEvent
from api.settings import ApiSettings
from engram.protocol.errors import AuthError, ForbiddenError, MalformedError, StorageError
from engram.protocol.kinds import kinds_where
from engram.protocol.redact import count_redactions
from ledger.log import Ledger, Prepared, Receipt, Submission
from ledger.memory.service import MemoryService, Submitted
from ledger.sharing import allowed_kinds
from verifier.note import b64decode_strict

__all__ = [
    "Access",
    "AgentPath",
    "KnownSize",
    "ReaderDep",
    "Services",
    "ServicesDep",
    "SignedDep",
    "charged",
    "receipt_out",
    "spend",
    "submission",
    "submit_signed",
    "unb64",
]

_log = logging.getLogger("engram.api")

#: The kinds whose records and memory items a share token can open for reading.
READABLE_KINDS = tuple(sorted(kinds_where(items=("body", "entries", "record"))))


@dataclass
class Services:
    settings: ApiSettings
    ledger: Ledger
    memory: MemoryService
    auth: RequestAuthenticator
    key_limits: RateLimiter
    #: keys that verified a request or event here: fair admission's only identities
    known: KnownKeys | None = None


async def get_services(request: Request) -> Services:  # async: no threadpool hop
    svc: Services = request.app.state.services
    return svc


ServicesDep = Annotated[Services, Depends(get_services)]
AgentPath = Annotated[str, Path(pattern=AGENT, description="agent id")]


def unb64(text: str, what: str) -> bytes:
    """Bytes a request carries as canonical standard base64 (``what`` names the member)."""
    if not isinstance(text, str):
        raise MalformedError(f"{what} is not base64", check="request.base64")
    return b64decode_strict(text, check="request.base64")


def submission(svc: Services, ev: SignedEvent, cost: float = 1.0, *, operator: bool = False) -> Prepared:
    """Decode a signed event and prepare it once (``Ledger.prepare``: envelope, signature,
    body, schema and gate, parsed here and handed down parsed), refusing it (429) as soon
    as its signature names an agent whose budget is spent, before its body is read. Nothing
    is charged here: :func:`charged` charges the agent once the append succeeded, so that
    forged or replayed events (which fail) never spend another agent's budget.
    Registrations are charged to the operator."""
    sub = Submission(
        envelope=unb64(ev.envelope, "envelope"),
        signature=unb64(ev.signature, "signature"),
        body=unb64(ev.body, "body"),
        salt=unb64(ev.salt, "salt"),
    )

    def admit(agent: str, public_key: bytes, registered: bool) -> None:
        if registered:
            svc.key_limits.check("agent:" + agent, cost)
            if svc.known is not None:
                svc.known.learn(agent, public_key)  # fair admission may queue it as this agent now

    return svc.ledger.prepare(sub, operator=operator, admit=admit)


def charged(svc: Services, receipts: list[Receipt]) -> list[Receipt]:
    """Charge each appended event to its agent (registrations: to the operator). The events
    are committed: a charge that fails (the workers' shared bucket file) is logged, and the
    write is still answered with its receipts."""
    for r in receipts:
        try:
            svc.key_limits.charge("operator" if r.kind == "key.registered" else "agent:" + r.agent)
        except OSError as e:
            _log.warning("could not charge entry %d to its rate limit: %s", r.index, e)
    return receipts


def submit_signed(
    svc: Services, ev: SignedEvent, *, agent: str, kinds: Collection[str], session: str | None = None
) -> Submitted:
    """One agent-signed event for a route that takes ``kinds`` of ``agent``'s, through the
    memory service's door (the memory rules follow it): the receipt, the body, the item it
    made or confirmed and, for a ``session.closed``, what its close did (the in-process
    transport, ``ledger.memory.transport``, makes the same call)."""
    done = svc.memory.submit(submission(svc, ev), agent=agent, kinds=kinds, session=session)
    charged(svc, [done.receipt])
    return done


MinIndex = Annotated[
    int | None,
    Header(
        alias="engram-min-index",
        ge=0,
        le=2**53,
        description="read-your-writes: answer as soon as the memory projection holds this log "
        "entry (e.g. the reader's own last write), without bringing it to the latest checkpoint",
    ),
]

KnownSize = Annotated[
    int | None,
    Header(
        alias="engram-known-size",
        ge=0,
        le=2**53,
        description="the largest checkpoint size the client verified; receipts then carry the "
        "consistency proof from it, saving a round trip",
    ),
]


def counted(out: ReceiptOut, body: Mapping[str, Any]) -> CountedReceiptOut:
    """``out`` with the redaction markers of the event's ``body``."""
    return CountedReceiptOut(**dict(out), redacted=count_redactions(body))


def receipt_out(
    svc: Services, r: Receipt, known: int | None, proofs: dict[int, ProofFromKnown] | None = None
) -> ReceiptOut:
    """A receipt for the wire; with ``known``, the consistency proof from it (computed once
    per checkpoint size when ``proofs`` is shared across a batch)."""
    out = convert.receipt(r)
    if known is not None and 0 < known <= r.proof.size:
        cache = {} if proofs is None else proofs
        if r.proof.size not in cache:
            try:
                p = svc.ledger.prove_consistency(known, r.proof.size)
            except StorageError:
                # the entry is committed: its receipt goes out without the convenience proof
                # (the client asks GET /v1/proofs/consistency), never as an error (issue 40, f11)
                return out
            cache[r.proof.size] = ProofFromKnown(old_size=known, proof=[convert.b64(h) for h in p.hashes])
        out.consistency = cache[r.proof.size]
    return out


def _target(request: Request) -> str:
    """The path and query exactly as sent (what the client signed)."""
    raw: bytes = request.scope.get("raw_path") or str(request.scope["path"]).encode("utf-8")
    query: bytes = request.scope.get("query_string") or b""
    try:
        target = raw.decode("ascii") + ("?" + query.decode("ascii") if query else "")
    except UnicodeDecodeError as e:
        raise MalformedError(
            "the request target must be ASCII (percent-encoded)", check="request.target"
        ) from e
    return target


async def signed_request(request: Request, svc: ServicesDep) -> VerifiedRequest:
    """The verified signer of this request (signature and time window). The nonce is not
    spent yet: the dependency that authorizes the request spends it (:func:`spend`)."""
    body = await request.body()
    vr = await run_in_threadpool(
        svc.auth.verify,
        method=request.method,
        target=_target(request),
        headers=request.headers,
        body=body,
    )
    svc.key_limits.check(vr.principal.signer)
    return vr


async def spend(svc: Services, vr: VerifiedRequest) -> Principal:
    """Spend an authorized request's nonce (refusing a replay) and charge its signer."""
    await run_in_threadpool(svc.auth.consume, vr)
    svc.key_limits.charge(vr.principal.signer)
    return vr.principal


SignedDep = Annotated[VerifiedRequest, Depends(signed_request)]


@dataclass(frozen=True)
class Access:
    """A verified reader of one agent's memory: the agent itself (``kinds`` None: all of
    it) or a share token's audience (only items and records of ``kinds``)."""

    agent: str
    principal: Principal
    kinds: frozenset[str] | None

    def sees(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds


async def _authorize(
    agent: str, vr: VerifiedRequest, svc: Services, token: str | None, *, allow_token: bool
) -> Access:
    """Authorize a signed request for ``agent``'s memory, then spend its nonce: nothing is
    recorded or charged for a request refused here."""
    principal = vr.principal
    if token is not None:
        if not allow_token:
            raise ForbiddenError(
                "a share token allows reading records, not acting as the agent", check="auth.agent"
            )
        if principal.agent is not None:
            raise AuthError(
                "a share token is presented in a request signed by its audience key (ed25519:<hex>)",
                check="auth.audience",
            )
        kinds = await run_in_threadpool(
            allowed_kinds,
            svc.ledger,
            token,
            agent=agent,
            audience=principal.signer,
            candidates=READABLE_KINDS,
        )
        await spend(svc, vr)
        return Access(agent=agent, principal=principal, kinds=kinds)
    if principal.agent != agent:
        raise ForbiddenError(
            f"only {agent} itself, or the audience of its share token, can read its memory",
            check="auth.agent",
        )
    await spend(svc, vr)
    return Access(agent=agent, principal=principal, kinds=None)


TokenHeader = Annotated[str | None, Header(alias="engram-share-token", max_length=16_384)]


async def reader(agent: AgentPath, vr: SignedDep, svc: ServicesDep, token: TokenHeader = None) -> Access:
    """The agent itself, or a share token's audience (then only the kinds it allows)."""
    return await _authorize(agent, vr, svc, token, allow_token=True)


ReaderDep = Annotated[Access, Depends(reader)]


async def self_only(agent: AgentPath, vr: SignedDep, svc: ServicesDep, token: TokenHeader = None) -> Access:
    """Operations only the agent itself may ask for (recall, compaction, session state)."""
    return await _authorize(agent, vr, svc, token, allow_token=False)


SelfDep = Annotated[Access, Depends(self_only)]


async def operator_bearer(svc: ServicesDep, authorization: Annotated[str | None, Header()] = None) -> bool:
    """True when the request carries the operator token (constant-time comparison)."""
    expected = svc.settings.operator_secret
    if not authorization or not authorization.startswith("Bearer ") or not expected:
        return False
    return hmac.compare_digest(authorization[7:].encode(), expected.encode())


OperatorFlag = Annotated[bool, Depends(operator_bearer)]


async def require_operator(is_operator: OperatorFlag, svc: ServicesDep) -> None:
    if not is_operator:
        raise AuthError("this needs the operator token (Authorization: Bearer ...)", check="auth.operator")
    svc.key_limits.hit("operator")

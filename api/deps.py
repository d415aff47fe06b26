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

import base64
import binascii
import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from starlette.concurrency import run_in_threadpool

from api.schemas import AGENT, SignedEvent
from api.settings import ApiSettings
from ledger.errors import AuthError, ForbiddenError, MalformedError
from ledger.httpauth import Principal, RequestAuthenticator
from ledger.log import Ledger, Submission
from ledger.memory.service import MemoryService
from ledger.ratelimit import RateLimiter
from ledger.sharing import allowed_kinds

__all__ = [
    "Access",
    "AgentPath",
    "ReaderDep",
    "Services",
    "ServicesDep",
    "SignedDep",
    "submission",
]

#: The kinds whose records and memory items a share token can open for reading.
READABLE_KINDS = (
    "memory.written",
    "memory.distilled",
    "memory.superseded",
    "pact.outcome",
    "eval.outcome",
    "boundary.event",
    "commitment",
)


@dataclass
class Services:
    settings: ApiSettings
    ledger: Ledger
    memory: MemoryService
    auth: RequestAuthenticator
    key_limits: RateLimiter


def get_services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


ServicesDep = Annotated[Services, Depends(get_services)]
AgentPath = Annotated[str, Path(pattern=AGENT, description="agent id")]


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise MalformedError(f"{what} is not base64", check="request.base64") from e


def submission(svc: Services, ev: SignedEvent) -> Submission:
    """Decode a signed event; verify its signature and charge its agent's rate limit."""
    sub = Submission(
        envelope=_unb64(ev.envelope, "envelope"),
        signature=_unb64(ev.signature, "signature"),
        body=_unb64(ev.body, "body"),
        salt=_unb64(ev.salt, "salt"),
    )
    agent = svc.ledger.event_signer(sub)
    svc.key_limits.hit("agent:" + agent)
    return sub


async def signed_request(request: Request, svc: ServicesDep) -> Principal:
    """The verified signer of this request (signature, time window, fresh nonce)."""
    body = await request.body()
    query = request.url.query
    target = request.url.path + ("?" + query if query else "")
    principal = await run_in_threadpool(
        svc.auth.authenticate,
        method=request.method,
        target=target,
        headers=request.headers,
        body=body,
    )
    svc.key_limits.hit(principal.signer)
    return principal


SignedDep = Annotated[Principal, Depends(signed_request)]


@dataclass(frozen=True)
class Access:
    """A verified reader of one agent's memory: the agent itself (``kinds`` None: all of
    it) or a share token's audience (only items and records of ``kinds``)."""

    agent: str
    principal: Principal
    kinds: frozenset[str] | None

    def sees(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds


async def reader(
    agent: AgentPath,
    principal: SignedDep,
    svc: ServicesDep,
    engram_share_token: Annotated[str | None, Header(max_length=16_384)] = None,
) -> Access:
    if engram_share_token is not None:
        if principal.agent is not None:
            raise AuthError(
                "a share token is presented in a request signed by its audience key (ed25519:<hex>)",
                check="auth.audience",
            )
        kinds = await run_in_threadpool(
            allowed_kinds,
            svc.ledger,
            engram_share_token,
            agent=agent,
            audience=principal.signer,
            candidates=READABLE_KINDS,
        )
        return Access(agent=agent, principal=principal, kinds=kinds)
    if principal.agent != agent:
        raise ForbiddenError(
            f"only {agent} itself, or the audience of its share token, can read its memory",
            check="auth.agent",
        )
    return Access(agent=agent, principal=principal, kinds=None)


ReaderDep = Annotated[Access, Depends(reader)]


def self_only(access: ReaderDep) -> Access:
    """Operations only the agent itself may ask for (recall, compaction, session state)."""
    if access.kinds is not None:
        raise ForbiddenError(
            "a share token allows reading records, not acting as the agent", check="auth.agent"
        )
    return access


SelfDep = Annotated[Access, Depends(self_only)]


def operator_bearer(svc: ServicesDep, authorization: Annotated[str | None, Header()] = None) -> bool:
    """True when the request carries the operator token (constant-time comparison)."""
    expected = svc.settings.operator_token.get_secret_value()
    if not authorization or not authorization.startswith("Bearer ") or not expected:
        return False
    return hmac.compare_digest(authorization[7:].encode(), expected.encode())


OperatorFlag = Annotated[bool, Depends(operator_bearer)]


def require_operator(is_operator: OperatorFlag, svc: ServicesDep) -> None:
    if not is_operator:
        raise AuthError("this needs the operator token (Authorization: Bearer ...)", check="auth.operator")
    svc.key_limits.hit("operator")

"""Request authentication for the HTTP layer (specs/http-api.md §2): checks the signed
requests :mod:`engram.protocol.httpsign` builds and refuses replays.

Trust role: reads of an agent's private memory and bundle disclosures are authorized only
by these signatures. A request is accepted once: ``(signer, nonce)`` is recorded in the
database until the time window closes, which holds across every worker process sharing the
database.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from engram.protocol.errors import AuthError, ReplayError
from engram.protocol.httpsign import (
    H_NONCE,
    H_SIGNATURE,
    H_SIGNER,
    H_TIMESTAMP,
    KEY_SIGNER_PATTERN,
    MAX_TARGET,
    NONCE_PATTERN,
    TIMESTAMP_PATTERN,
    WINDOW_S,
    request_signing_input,
)
from ledger.storage.store import SqlStore
from verifier.ed25519 import check_public_key
from verifier.errors import VerificationError
from verifier.event import check_agent_id

if TYPE_CHECKING:
    from api.fairness import KnownKeys

__all__ = ["Principal", "RequestAuthenticator", "VerifiedRequest"]


@dataclass(frozen=True, slots=True)
class VerifiedRequest:
    """A request whose signature verified; its nonce is not yet spent (see
    :meth:`RequestAuthenticator.consume`)."""

    principal: Principal
    nonce: str
    timestamp: int


@dataclass(frozen=True, slots=True)
class Principal:
    """Who signed a request: an agent (with the key id that signed) or a bare key."""

    signer: str
    agent: str | None = None
    key_id: str | None = None
    public_key: bytes | None = None


class RequestAuthenticator:
    """Checks signed requests against the log's key history and the nonce table."""

    def __init__(
        self,
        store: SqlStore,
        origin: str,
        *,
        window_s: int = WINDOW_S,
        clock: Callable[[], float] = time.time,
        known: KnownKeys | None = None,
    ) -> None:
        """``known``: where a key that verified a request is remembered, so that fair
        admission queues that agent's next requests by its verified identity."""
        self.store = store
        self.origin = origin
        self.window_s = window_s
        self.clock = clock
        self.known = known
        if known is not None:
            known.origin = origin

    def authenticate(self, *, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Principal:
        """Verify and spend the nonce at once (for callers with no authorization step)."""
        vr = self.verify(method=method, target=target, headers=headers, body=body)
        self.consume(vr)
        return vr.principal

    def consume(self, vr: VerifiedRequest) -> None:
        """Spend the request's nonce, or raise :class:`ReplayError` if it was spent.

        Callers authorize first (right agent, token in scope) and spend the nonce last, so
        a request that is refused anyway never costs a database write.
        """
        now = int(self.clock())
        if not self.store.claim_nonce(
            vr.principal.signer,
            vr.nonce,
            now_s=now,
            expires_s=vr.timestamp + self.window_s + 1,
            grace_s=self.window_s,
        ):
            raise ReplayError("this request was already received (nonce reused)", check="auth.replay")

    def verify(self, *, method: str, target: str, headers: Mapping[str, str], body: bytes) -> VerifiedRequest:
        """Return the verified request, or raise :class:`AuthError`.

        Order: parse every header strictly, check the time window, verify the signature.
        Nothing is written: the nonce is spent by :meth:`consume`.
        """
        signer = headers.get(H_SIGNER)
        ts_text = headers.get(H_TIMESTAMP)
        nonce = headers.get(H_NONCE)
        sig_text = headers.get(H_SIGNATURE)
        if signer is None or ts_text is None or nonce is None or sig_text is None:
            raise AuthError(
                "this request must be signed (Engram-Signer, Engram-Timestamp, Engram-Nonce, "
                "Engram-Signature; specs/http-api.md)",
                check="auth.missing",
            )
        if len(target) > MAX_TARGET:
            raise AuthError("request target too long to sign", check="auth.format")
        if not TIMESTAMP_PATTERN.fullmatch(ts_text):
            raise AuthError("Engram-Timestamp must be Unix seconds", check="auth.format")
        if not NONCE_PATTERN.fullmatch(nonce):
            raise AuthError("Engram-Nonce must be 16-64 characters of [A-Za-z0-9_-]", check="auth.format")
        try:
            signature = base64.b64decode(sig_text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as e:
            raise AuthError("Engram-Signature is not base64", check="auth.format") from e
        if len(signature) != 64:
            raise AuthError("Engram-Signature must be a 64-byte Ed25519 signature", check="auth.format")
        ts = int(ts_text)
        now = int(self.clock())
        if abs(now - ts) > self.window_s:
            raise AuthError(
                f"Engram-Timestamp is more than {self.window_s} s from the server's clock", check="auth.time"
            )
        principal, public_key = self._signer_key(signer)
        msg = request_signing_input(
            origin=self.origin,
            method=method,
            target=target,
            signer=signer,
            timestamp=ts,
            nonce=nonce,
            body=body,
        )
        try:
            Ed25519PublicKey.from_public_bytes(public_key).verify(signature, msg)
        except InvalidSignature as e:
            raise AuthError("the request signature does not verify", check="auth.signature") from e
        if self.known is not None and principal.agent is not None:
            self.known.learn(principal.agent, public_key)  # a registered key of that agent
        return VerifiedRequest(principal=principal, nonce=nonce, timestamp=ts)

    def _signer_key(self, signer: str) -> tuple[Principal, bytes]:
        m = KEY_SIGNER_PATTERN.fullmatch(signer)
        if m is not None:
            raw = bytes.fromhex(m.group(1))
            try:
                check_public_key(raw)
            except VerificationError as e:
                raise AuthError("the signer key is not a usable Ed25519 key", check="auth.signer") from e
            return Principal(signer=signer, public_key=raw), raw
        if not signer.startswith("agent:"):
            raise AuthError("Engram-Signer is agent:<id> or ed25519:<hex>", check="auth.format")
        try:
            agent = check_agent_id(signer[6:])
        except VerificationError as e:
            raise AuthError("Engram-Signer names no valid agent id", check="auth.format") from e
        key_id = self.store.active_key_id(agent)
        record = next((k for k in self.store.keys_of(agent) if k.key_id == key_id), None)
        if key_id is None or record is None:
            # Most often the client's --server names another log's service than the one the
            # agent was registered on: say which log this is and what to check.
            raise AuthError(
                f"agent {agent} has no active key in the log {self.origin} served here: point --server / "
                "ENGRAM_URL at the service the agent was registered on, or register it on this one "
                f"(`engram agent create {agent} --key-file FILE` where this log is)",
                check="auth.signer",
            )
        return Principal(signer=signer, agent=agent, key_id=key_id, public_key=record.public_key), (
            record.public_key
        )

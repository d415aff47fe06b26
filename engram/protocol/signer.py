"""The event signer: builds envelopes (specs/event-envelope.md) for one agent key and signs
their exact canonical bytes. Stateless about streams; the SDK's :class:`~engram.client.Agent`
tracks heads and verifies receipts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import MalformedError
from engram.protocol.redact import redact_body
from engram.protocol.wire import Submission
from verifier.event import (
    SALT_SIZE,
    Envelope,
    agent_key_id,
    check_agent_id,
    commitment_of,
    sign_event,
    sign_pop,
)
from verifier.jcs import canonical_bytes

__all__ = ["AgentSigner"]


def _submission(envelope: bytes, signature: bytes, body: bytes, salt: bytes) -> Submission:
    return Submission(envelope=envelope, signature=signature, body=body, salt=salt)


class AgentSigner:
    """Builds and signs envelopes for one agent key (stateless about streams)."""

    def __init__(
        self,
        agent: str,
        private_key: Ed25519PrivateKey,
        *,
        origin: str,
        rand: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self.agent = check_agent_id(agent)
        self.private_key = private_key
        self.public_key = private_key.public_key().public_bytes_raw()
        self.key_id = agent_key_id(self.public_key)
        self.origin = origin
        self._rand = rand

    def event(
        self,
        kind: str,
        body: Mapping[str, Any],
        *,
        version: int,
        prev: str | None,
        client_time_us: int,
        new_key: Ed25519PrivateKey | None = None,
    ) -> Submission:
        """Sign one event. ``body`` must be a JSON object without floats."""
        if not isinstance(body, Mapping):
            raise MalformedError("a body is a JSON object", check="body.type")
        # One redaction pass over every string of every body, whatever the kind declares
        # (engram.protocol.redact): the log is permanent and refuses a body still carrying one.
        body_bytes = canonical_bytes(redact_body(body))
        salt = self._rand(SALT_SIZE)
        envelope = Envelope(
            origin=self.origin,
            agent=self.agent,
            key_id=self.key_id,
            kind=kind,
            version=version,
            prev=prev,
            client_time_us=client_time_us,
            body_commitment=commitment_of(kind, salt, body_bytes),
            new_key=None
            if new_key is None
            else sign_pop(origin=self.origin, agent=self.agent, private_key=new_key),
        )
        # Round-trip through the strict parser so the SDK never submits what the log refuses.
        raw = envelope.canonical()
        Envelope.from_bytes(raw)
        return _submission(raw, sign_event(envelope, self.private_key), body_bytes, salt)

    def registration(
        self,
        *,
        client_time_us: int,
        version: int = 0,
        prev: str | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> Submission:
        """A self-signed ``key.registered`` event for this key (proof of possession inside)."""
        return self.event(
            "key.registered",
            body or {},
            version=version,
            prev=prev,
            client_time_us=client_time_us,
            new_key=self.private_key,
        )

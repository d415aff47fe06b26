"""Signed HTTP requests (specs/http-api.md §2): the exact bytes an agent or an audience key
signs to prove who is asking. The service's checker is :mod:`api.auth`.

The signed bytes are domain-separated and cover the origin, method, path with query,
signer, timestamp, nonce and a SHA-256 of the exact body, so a signature cannot be moved to
another request, another log or another body.

Signers are ``agent:<agent id>`` (verified with the agent's *active* key from the log's key
history) or ``ed25519:<64 hex>`` (a bare key, used by a share token's audience to prove
possession).
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import MalformedError
from verifier.ed25519 import check_public_key

__all__ = [
    "DOMAIN",
    "H_NONCE",
    "H_SIGNATURE",
    "H_SIGNER",
    "H_TIMESTAMP",
    "KEY_SIGNER_PATTERN",
    "MAX_TARGET",
    "NONCE_PATTERN",
    "TIMESTAMP_PATTERN",
    "WINDOW_S",
    "audience_for_key",
    "request_signing_input",
    "sign_request",
]

DOMAIN = b"engram/http-request/v1\n"
WINDOW_S = 300  # a signed request is valid this long either side of the server's clock
H_SIGNER, H_TIMESTAMP, H_NONCE, H_SIGNATURE = (
    "engram-signer",
    "engram-timestamp",
    "engram-nonce",
    "engram-signature",
)
NONCE_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,64}")
KEY_SIGNER_PATTERN = re.compile(r"ed25519:([0-9a-f]{64})")
TIMESTAMP_PATTERN = re.compile(r"[1-9][0-9]{0,11}")
MAX_TARGET = 4096


def audience_for_key(public_key: bytes) -> str:
    """The share-token audience naming a bare Ed25519 key (``ed25519:<hex>``)."""
    return "ed25519:" + check_public_key(public_key).hex()


def request_signing_input(
    *, origin: str, method: str, target: str, signer: str, timestamp: int, nonce: str, body: bytes
) -> bytes:
    """The exact bytes signed: one field per line after a domain-separation prefix."""
    lines = [origin, method.upper(), target, signer, str(timestamp), nonce, hashlib.sha256(body).hexdigest()]
    if any("\n" in f for f in lines):
        raise MalformedError("request fields cannot contain newlines", check="auth.format")
    return DOMAIN + "\n".join(lines).encode("utf-8") + b"\n"


def sign_request(
    private_key: Ed25519PrivateKey,
    *,
    origin: str,
    method: str,
    target: str,
    signer: str,
    body: bytes = b"",
    now_s: int | None = None,
    nonce: str | None = None,
) -> dict[str, str]:
    """Headers that authenticate one request (``target`` is the path plus ``?query``)."""
    ts = int(time.time()) if now_s is None else now_s
    n = nonce or secrets.token_urlsafe(18)
    msg = request_signing_input(
        origin=origin, method=method, target=target, signer=signer, timestamp=ts, nonce=n, body=body
    )
    return {
        H_SIGNER: signer,
        H_TIMESTAMP: str(ts),
        H_NONCE: n,
        H_SIGNATURE: base64.b64encode(private_key.sign(msg)).decode("ascii"),
    }

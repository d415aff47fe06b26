"""One-time tickets that open the web UI's owner view (``engram ui``; specs/http-api.md §9).

A ticket is the agent's authority, handed to a browser once: a short text signed by the
agent's Ed25519 key, domain-separated from every other thing the key signs (events and
requests start with other headers), bound to the log's origin, the agent, the key that
signs, an expiry at most :data:`MAX_TICKET_S` away and a random nonce the service accepts
once. The service trades it for a session cookie; the operator token is never involved.

Wire form: ``base64url(text) "." base64url(signature)`` (no padding), at most
:data:`MAX_TICKET_CHARS` characters, where ``text`` is exactly::

    engram.ui-ticket/v1
    <origin>
    <agent>
    <key id>
    <expires, Unix seconds>
    <nonce, 32 lowercase hex digits>
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import AuthError
from verifier.errors import VerificationError
from verifier.event import agent_key_id, check_agent_id

__all__ = [
    "HEADER",
    "MAX_TICKET_CHARS",
    "MAX_TICKET_S",
    "Ticket",
    "b64url",
    "make_ticket",
    "parse_ticket",
    "unb64url",
]

HEADER = "engram.ui-ticket/v1"
#: Longest a ticket may live: it is meant to be opened at once.
MAX_TICKET_S = 300
MAX_TICKET_CHARS = 1024
_B64URL = re.compile(r"[A-Za-z0-9_-]+")
_KEY_ID = re.compile(r"[0-9a-f]{32}")
_NONCE = re.compile(r"[0-9a-f]{32}")
_SECONDS = re.compile(r"[1-9][0-9]{0,11}")
_ORIGIN = re.compile(r"[\x21-\x7e]{1,255}")


@dataclass(frozen=True, slots=True)
class Ticket:
    origin: str
    agent: str
    key_id: str
    expires_s: int
    nonce: str
    #: The exact bytes the signature covers.
    text: bytes
    signature: bytes


def b64url(data: bytes) -> str:
    """Unpadded base64url (tickets and the UI's session cookie)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """Strict unpadded base64url: canonical, or :class:`AuthError` (``ui.ticket``)."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise AuthError("the ticket is not base64url", check="ui.ticket")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise AuthError("the ticket is not base64url", check="ui.ticket") from None
    if b64url(data) != text:  # canonical: no stray bits in the last character
        raise AuthError("the ticket is not canonical base64url", check="ui.ticket")
    return data


def ticket_text(origin: str, agent: str, key_id: str, expires_s: int, nonce: str) -> bytes:
    return f"{HEADER}\n{origin}\n{agent}\n{key_id}\n{expires_s}\n{nonce}".encode()


def make_ticket(
    origin: str, agent: str, private_key: Ed25519PrivateKey, *, now_s: int, lifetime_s: int = 120
) -> str:
    """A ticket for ``agent`` on the log ``origin``, signed by ``private_key``, valid for
    ``lifetime_s`` (1 to :data:`MAX_TICKET_S`) seconds from ``now_s``."""
    if not 1 <= lifetime_s <= MAX_TICKET_S:
        raise ValueError(f"a ticket lives 1-{MAX_TICKET_S} s")
    key_id = agent_key_id(private_key.public_key().public_bytes_raw())
    text = ticket_text(origin, agent, key_id, now_s + lifetime_s, secrets.token_hex(16))
    return b64url(text) + "." + b64url(private_key.sign(text))


def parse_ticket(wire: str) -> Ticket:
    """Parse a ticket strictly (the signature is checked by the service, which knows the
    agent's key). Raises :class:`AuthError` (check ``ui.ticket``)."""
    if not isinstance(wire, str) or len(wire) > MAX_TICKET_CHARS or wire.count(".") != 1:
        raise AuthError("not an Engram UI ticket (engram ui prints one)", check="ui.ticket")
    text_part, sig_part = wire.split(".")
    text, signature = unb64url(text_part), unb64url(sig_part)
    if len(signature) != 64:
        raise AuthError("the ticket's signature is not 64 bytes", check="ui.ticket")
    try:
        lines = text.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise AuthError("the ticket text is not ASCII", check="ui.ticket") from None
    if len(lines) != 6 or lines[0] != HEADER:
        raise AuthError(f"the ticket is not {HEADER}", check="ui.ticket")
    _, origin, agent, key_id, expires, nonce = lines
    try:
        check_agent_id(agent)
    except VerificationError:
        raise AuthError("the ticket names no valid agent id", check="ui.ticket") from None
    if not (
        _ORIGIN.fullmatch(origin)
        and _KEY_ID.fullmatch(key_id)
        and _SECONDS.fullmatch(expires)
        and _NONCE.fullmatch(nonce)
    ):
        raise AuthError("the ticket's fields are malformed", check="ui.ticket")
    if ticket_text(origin, agent, key_id, int(expires), nonce) != text:
        raise AuthError("the ticket text is not canonical", check="ui.ticket")
    return Ticket(origin, agent, key_id, int(expires), nonce, text, signature)

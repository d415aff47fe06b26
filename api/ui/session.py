"""Owner sessions of the web UI: a one-time ticket signed by the agent's key (``engram ui``,
engram.protocol.uiticket) is traded for a short-lived session cookie that shows that agent's
memory and nothing of any other agent (specs/http-api.md §9).

* The ticket must name this log's origin and the agent's *active* key, verify under it,
  expire within :data:`~engram.protocol.uiticket.MAX_TICKET_S` and not be spent: its nonce
  is recorded in the database's nonce table, so it opens one session across every worker.
* The cookie is ``base64url(agent "\\n" key id "\\n" expires "\\n" session id) "." tag``,
  tag = HMAC-SHA256 under a key derived from the log's private key (every worker holds it;
  nothing is stored per open session). It is HttpOnly, SameSite=Strict, scoped to ``/ui`` and
  Secure over https. It stops working when it expires (:data:`SESSION_S`), when the key
  that signed the ticket is no longer the agent's active key (rotated or revoked), or once
  its owner signed out (:meth:`OwnerSessions.revoke`: its random id is recorded in the
  database's ``ui_revoked_sessions`` table until it would have expired, and every worker
  reads that table on every request that shows the owner's view; issue 40, finding 9: a copied
  cookie opened the memory view for the rest of its 30 minutes after "Sign out").
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from engram.protocol.errors import AuthError, ReplayError
from engram.protocol.uiticket import MAX_TICKET_S, b64url, parse_ticket, unb64url
from ledger import explore
from ledger.log import Ledger

__all__ = ["COOKIE", "SESSION_S", "OwnerSession", "OwnerSessions"]

COOKIE = "engram_ui"
#: How long an owner session lasts (then run ``engram ui`` again).
SESSION_S = 30 * 60
_SESSION_DOMAIN = b"engram.ui-session/v1 cookie key"
_MAX_COOKIE = 512
_COOKIE_TEXT = re.compile(r"([a-z0-9][a-z0-9._-]{0,63})\n([0-9a-f]{32})\n([1-9][0-9]{0,11})\n([0-9a-f]{32})")


@dataclass(frozen=True, slots=True)
class OwnerSession:
    agent: str
    key_id: str
    expires_s: int
    #: the session's random id (what signing out revokes)
    session: str = ""


class OwnerSessions:
    def __init__(self, ledger: Ledger, *, clock: Callable[[], float] = time.time) -> None:
        self.ledger = ledger
        self.clock = clock
        raw = ledger.log_key.private_key.private_bytes_raw()
        self._mac_key = hmac.new(raw, _SESSION_DOMAIN, hashlib.sha256).digest()

    def _tag(self, text: bytes) -> bytes:
        return hmac.new(self._mac_key, text, hashlib.sha256).digest()

    def redeem(self, wire: str) -> tuple[str, OwnerSession]:
        """Check a ticket and spend it: the cookie value and the session it opens. Raises
        :class:`AuthError` naming the check (``ui.ticket``, ``ui.origin``, ``ui.expired``,
        ``ui.key``, ``ui.signature``) or :class:`ReplayError` (``ui.replay``)."""
        t = parse_ticket(wire)
        now = int(self.clock())
        if t.origin != self.ledger.origin:
            raise AuthError(
                f"the ticket is for the log {t.origin}, not {self.ledger.origin}", check="ui.origin"
            )
        if t.expires_s <= now:
            raise AuthError("the ticket has expired: run `engram ui` again", check="ui.expired")
        if t.expires_s > now + MAX_TICKET_S:
            raise AuthError(f"a ticket may live at most {MAX_TICKET_S} s", check="ui.expired")
        active = self.ledger.active_key_id(t.agent)
        if active is None or not hmac.compare_digest(active, t.key_id):
            raise AuthError(f"the ticket is not signed by {t.agent}'s active key", check="ui.key")
        found = self.ledger.public_key(t.key_id)
        if found is None or found[0] != t.agent:
            raise AuthError(f"the ticket is not signed by {t.agent}'s active key", check="ui.key")
        try:
            Ed25519PublicKey.from_public_bytes(found[1]).verify(t.signature, t.text)
        except InvalidSignature:
            raise AuthError("the ticket's signature does not verify", check="ui.signature") from None
        if not explore.claim_ticket(
            self.ledger, t.agent, t.nonce, now_s=now, expires_s=t.expires_s + 1, grace_s=MAX_TICKET_S
        ):
            raise ReplayError("this ticket was already used: run `engram ui` again", check="ui.replay")
        session = OwnerSession(
            agent=t.agent, key_id=t.key_id, expires_s=now + SESSION_S, session=secrets.token_hex(16)
        )
        text = f"{session.agent}\n{session.key_id}\n{session.expires_s}\n{session.session}".encode()
        return b64url(text) + "." + b64url(self._tag(text)), session

    def check(self, cookie: str | None) -> OwnerSession | None:
        """The session a cookie holds, or None (absent, forged, expired, its key is no
        longer the agent's active key, or it was signed out)."""
        if not cookie or len(cookie) > _MAX_COOKIE or cookie.count(".") != 1:
            return None
        text_part, tag_part = cookie.split(".")
        try:
            text, tag = unb64url(text_part), unb64url(tag_part)
        except AuthError:
            return None
        if not hmac.compare_digest(tag, self._tag(text)):
            return None
        m = _COOKIE_TEXT.fullmatch(text.decode("ascii", "replace"))
        if m is None:
            return None
        agent, key_id, expires, sid = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        if expires <= int(self.clock()):
            return None
        active = self.ledger.active_key_id(agent)
        if active is None or not hmac.compare_digest(active, key_id):
            return None
        if explore.signed_out(self.ledger, sid):
            return None
        return OwnerSession(agent=agent, key_id=key_id, expires_s=expires, session=sid)

    def revoke(self, cookie: str | None) -> OwnerSession | None:
        """Sign out: the session the cookie holds is refused from now on by every worker
        sharing the database (recorded until it would have expired). Returns it, or None
        when the cookie opened nothing anyway. Raises ``StorageError`` if the database could
        not record it (the caller must not claim the session ended)."""
        session = self.check(cookie)
        if session is None:
            return None
        explore.sign_out(
            self.ledger, session.session, session.agent, now_s=int(self.clock()), expires_s=session.expires_s
        )
        return session

"""Share tokens checked against the log: the agent's active key, its revocations, now.

Trust role: every disclosure under a token (bundles, memory reads over HTTP, oracle
evidence) goes through :func:`verify_share_token` first; nothing is read for disclosure
before it returns.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from ledger.log import Ledger
from verifier.errors import VerificationError
from verifier.token import TokenError, VerifiedToken, verify_token

__all__ = ["allowed_kinds", "revoked_token_ids", "verify_share_token"]


def revoked_token_ids(ledger: Ledger, agent: str) -> list[str]:
    out = []
    for i, body in ledger.stream_bodies(agent, "share.revoked", max_bytes=1 << 16):
        if body is None:
            continue
        token_id = body.get("token_id")
        if not isinstance(token_id, str):
            raise TokenError(
                f"share.revoked entry {i} names no token id: the revocation list cannot be read",
                check="token.revoked",
            )
        out.append(token_id)
    return out


def verify_share_token(
    ledger: Ledger,
    token: str,
    *,
    agent: str,
    audience: str,
    kinds: Collection[str],
    now: int | None = None,
    candidates: Collection[str] = (),
) -> VerifiedToken:
    """The token allows disclosing every one of ``kinds`` of ``agent``'s to ``audience`` now.

    Only the agent's *active* key may have signed it (a rotated or revoked key's tokens die
    with the key), and no revocation logged by the agent names it.
    """
    active = ledger.store.active_key_id(agent)
    keys = [k.public_key for k in ledger.store.keys_of(agent) if k.key_id == active]
    if not keys:
        raise TokenError(
            f"agent {agent} has no active key, so no token of its is valid", check="token.signature"
        )
    try:
        return _verify(ledger, token, keys, agent, audience, kinds, now, candidates)
    except TokenError:
        raise
    except VerificationError as e:  # a token that does not parse or verify is refused as a token
        message = str(e).removeprefix(f"[{e.check}] ")
        raise TokenError(message, check=e.check) from e


def _verify(
    ledger: Ledger,
    token: str,
    keys: list[bytes],
    agent: str,
    audience: str,
    kinds: Collection[str],
    now: int | None,
    candidates: Collection[str],
) -> VerifiedToken:
    return verify_token(
        token,
        agent_keys=keys,
        origin=ledger.origin,
        agent=agent,
        audience=audience,
        kinds=sorted(kinds),
        candidates=sorted(candidates),
        now=int(time.time()) if now is None else now,
        revoked_ids=lambda: revoked_token_ids(ledger, agent),  # read only for a validly signed token
    )


def allowed_kinds(
    ledger: Ledger,
    token: str,
    *,
    agent: str,
    audience: str,
    candidates: Collection[str],
    now: int | None = None,
) -> frozenset[str]:
    """Which of ``candidates`` the token allows (one parse); raises if it is invalid or
    allows none of them."""
    verified = verify_share_token(
        ledger, token, agent=agent, audience=audience, kinds=(), now=now, candidates=candidates
    )
    if not verified.kinds:
        raise TokenError(f"the token allows none of {', '.join(sorted(candidates))}", check="token.scope")
    return frozenset(verified.kinds)

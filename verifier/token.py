"""Share tokens: an agent's scoped, expiring, attenuable permission to disclose some kinds
of its records (specs/share-token.md). Biscuit v3 tokens (biscuit-python, pinned).

Trust role: a token is accepted only if its authority block is signed by one of the
agent's keys from the log's key history (not revoked), every block verifies, and the
biscuit authorizer allows each disclosed kind for this audience at this time. Only fixed,
versioned datalog templates are ever produced or accepted by the tools; the authorizer's
policy is fixed too, so a token cannot grant itself anything: rights come only from the
authority block, and attenuation blocks can only add checks (narrower kinds, sooner
expiry).

Authority block, template ``engram.share/v1``::

    token_format("engram.share/v1"); origin({origin}); agent({agent});
    right({kind}); ...                      (one per allowed kind)
    check if audience($a), $a == {audience};
    check if time($t), $t <= {expires};     (expires: Unix seconds)

Attenuation templates: ``check if kind($k), {kinds}.contains($k);`` and
``check if time($t), $t <= {expires};``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from verifier.errors import MalformedError, SignatureError, VerificationError

__all__ = [
    "TOKEN_FORMAT",
    "TokenError",
    "VerifiedToken",
    "attenuate",
    "inspect",
    "mint",
    "revocation_ids",
    "verify_token",
]

TOKEN_FORMAT = "engram.share/v1"  # noqa: S105 - a format label, not a secret
MAX_TOKEN_CHARS = 16 * 1024
_KIND = re.compile(r"[a-z][a-z0-9_.]{0,63}")
_AUDIENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}")


class TokenError(VerificationError):
    """The share token does not allow this disclosure (scope, audience, expiry, revocation)."""

    default_check = "token"


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedToken:
    agent: str
    origin: str
    audience: str
    kinds: tuple[str, ...]  # kinds this token allows, for this audience, now
    revocation_ids: tuple[str, ...]
    root_key: bytes


def _biscuit() -> Any:
    try:
        import biscuit_auth
    except ImportError as e:  # pragma: no cover - declared dependency
        raise MalformedError("share tokens need the biscuit-python package", check="token.library") from e
    return biscuit_auth


def _check_kinds(kinds: Iterable[str]) -> list[str]:
    out = sorted(set(kinds))
    if not out or not all(_KIND.fullmatch(k) for k in out):
        raise MalformedError("kinds must be 1+ event kind names", check="token.kinds")
    return out


def _check_audience(audience: str) -> str:
    if not isinstance(audience, str) or not _AUDIENCE.fullmatch(audience):
        raise MalformedError("audience must be 1-128 characters of [A-Za-z0-9._:@/-]", check="token.audience")
    return audience


def mint(*, seed: bytes, origin: str, agent: str, audience: str, kinds: Sequence[str], expires: int) -> str:
    """A token signed by the agent's Ed25519 key (its 32-byte seed); URL-safe base64."""
    b = _biscuit()
    source = (
        "token_format({fmt});\norigin({origin});\nagent({agent});\n"
        + "".join(f"right({{k{i}}});\n" for i in range(len(kinds)))
        + "check if audience($a), $a == {aud};\ncheck if time($t), $t <= {exp};\n"
    )
    params: dict[str, Any] = {
        "fmt": TOKEN_FORMAT,
        "origin": origin,
        "agent": agent,
        "aud": _check_audience(audience),
        "exp": int(expires),
    }
    params.update({f"k{i}": k for i, k in enumerate(_check_kinds(kinds))})
    key = b.PrivateKey.from_bytes(seed, b.Algorithm.Ed25519)
    token: str = b.BiscuitBuilder(source, params).build(key).to_base64()
    return token


def attenuate(
    token: str, *, agent_keys: Sequence[bytes], kinds: Sequence[str] | None = None, expires: int | None = None
) -> str:
    """Narrow a token offline, without any private key: fewer kinds and/or a sooner expiry.

    ``agent_keys`` are public keys to check the token against before extending it."""
    b = _biscuit()
    if kinds is None and expires is None:
        raise MalformedError("attenuation narrows kinds, expiry or both", check="token.attenuate")
    lines: list[str] = []
    params: dict[str, Any] = {}
    if kinds is not None:
        lines.append("check if kind($k), {kinds}.contains($k);")
        params["kinds"] = set(_check_kinds(kinds))
    if expires is not None:
        lines.append("check if time($t), $t <= {exp};")
        params["exp"] = int(expires)
    parsed = _parse(b, token, agent_keys)[0]
    out: str = parsed.append(b.BlockBuilder("\n".join(lines), params)).to_base64()
    return out


_ATTENUATION_LINES = (
    re.compile(
        r'check if kind\(\$k\), \{"[a-z][a-z0-9_.]{0,63}"(, "[a-z][a-z0-9_.]{0,63}")*\}\.contains\(\$k\);'
    ),
    re.compile(r"check if time\(\$t\), \$t <= [0-9]{1,12};"),
)


def _parse(b: Any, token: str, agent_keys: Sequence[bytes]) -> tuple[Any, bytes]:
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
        raise TokenError(f"a token is 1-{MAX_TOKEN_CHARS} characters", check="token.format")
    for key in agent_keys:
        try:
            parsed = b.Biscuit.from_base64(token, b.PublicKey.from_bytes(key, b.Algorithm.Ed25519))
        except Exception:  # noqa: S112 - the library raises several types; try the next key
            continue
        _check_templates(parsed)
        return parsed, key
    raise SignatureError("the token is not signed by a valid key of this agent", check="token.signature")


def _check_templates(parsed: Any) -> None:
    """Blocks after the authority block must be the fixed attenuation templates, nothing else
    (no facts, no rules: nothing that could grow the authorizer's work or its world)."""
    for i in range(1, parsed.block_count()):
        try:
            source = str(parsed.block_source(i))
        except Exception as e:  # biscuit-auth converts a block when it is read (BiscuitBlockError)
            raise TokenError(
                f"block {i} cannot be read as Datalog: not an engram.share/v1 attenuation",
                check="token.template",
            ) from e
        lines = [ln.strip() for ln in source.split("\n") if ln.strip()]
        if not lines or not all(any(p.fullmatch(ln) for p in _ATTENUATION_LINES) for ln in lines):
            raise TokenError(f"block {i} is not an engram.share/v1 attenuation", check="token.template")


def revocation_ids(token: str, *, agent_keys: Sequence[bytes]) -> list[str]:
    """Hex revocation ids of a verified token, authority block first (revoking it revokes all)."""
    parsed = _parse(_biscuit(), token, agent_keys)[0]
    return [str(i) for i in parsed.revocation_ids]


def inspect(token: str) -> list[str]:
    """The datalog source of each block (unverified: for display only). Anything that is not
    a token, of any size, is refused with ``token.format``."""
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
        raise TokenError(f"a token is 1-{MAX_TOKEN_CHARS} characters", check="token.format")
    b = _biscuit()
    try:
        u = b.UnverifiedBiscuit.from_base64(token)
        return [str(u.block_source(i)) for i in range(u.block_count())]
    except Exception as e:  # the library raises several untyped errors for a non-token
        raise TokenError(
            "the text is not a Biscuit token (base64url of its bytes)", check="token.format"
        ) from e


def verify_token(
    token: str,
    *,
    agent_keys: Sequence[bytes],
    origin: str,
    agent: str,
    audience: str,
    kinds: Sequence[str],
    now: int,
    revoked_ids: Iterable[str] | Callable[[], Iterable[str]] = (),
    candidates: Sequence[str] = (),
) -> VerifiedToken:
    """Check the token allows disclosing each of ``kinds`` to ``audience`` at ``now``.

    ``candidates`` are further kinds to try without failing: the result's ``kinds`` lists
    those of them the token allows too (one parse for many kinds). ``revoked_ids`` may be
    a callable, called only once the signature and template verified, so that an invalid
    token never costs the caller a read of the revocation list.

    Steps: ``token.format`` (size, encoding); ``token.signature`` (the authority block is
    signed by one of ``agent_keys`` and every block verifies); ``token.template`` (format,
    origin and agent facts); ``token.revoked`` (no revocation id is in ``revoked_ids``);
    ``token.scope`` (the authorizer allows every kind for the audience at ``now``).
    """
    b = _biscuit()
    _check_audience(audience)
    parsed, root = _parse(b, token, agent_keys)
    facts = _authority_facts(b, parsed)
    if (
        facts.get("token_format") != [TOKEN_FORMAT]
        or facts.get("origin") != [origin]
        or facts.get("agent") != [agent]
    ):
        raise TokenError(
            "the token is not an engram.share/v1 token of this agent and log", check="token.template"
        )
    ids = tuple(parsed.revocation_ids)
    revoked = set(revoked_ids() if callable(revoked_ids) else revoked_ids) & set(ids)
    if revoked:
        raise TokenError(f"the token was revoked ({sorted(revoked)[0][:16]}...)", check="token.revoked")
    allowed = []
    required = set(kinds)
    for kind in sorted(required | set(candidates)):
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            if kind in required:
                raise MalformedError(f"{str(kind)[:64]!r} is not a kind", check="token.kinds")
            continue
        try:
            authorizer = _builder(
                b,
                "kind({k});\naudience({a});\ntime({t});\nallow if right($r), kind($r);",
                {"k": kind, "a": audience, "t": int(now)},
            ).build(parsed)
            authorizer.authorize()
        except Exception as e:
            if _over_limits(e):  # not a refusal of this kind: say so (never skip a candidate for it)
                raise TokenError(
                    f"the token could not be evaluated within its limits for {kind}: {e}",
                    check="token.limits",
                ) from e
            if kind not in required:
                continue
            raise TokenError(
                f"the token does not allow disclosing {kind} to {audience} at {now} (scope, audience or expiry)",
                check="token.scope",
            ) from e
        allowed.append(kind)
    return VerifiedToken(
        agent=agent, origin=origin, audience=audience, kinds=tuple(allowed), revocation_ids=ids, root_key=root
    )


#: The fixed templates need a handful of facts and one iteration; the library's default
#: time budget (1 ms) fails valid tokens on a loaded machine, so time is bounded loosely
#: while facts and iterations keep the library's tight bounds (those bound the work a token
#: can ask for; the templates allow nothing else). The budget is wall time: 100 ms still
#: failed about one valid token in 600 under the mixed load harness on 2 busy cores (a
#: thread descheduled mid-evaluation), reported as a scope refusal.
MAX_AUTHORIZER_TIME = datetime.timedelta(seconds=2)

_LIMITS = "execution limits"


def _over_limits(e: BaseException) -> bool:
    """Whether the library's refusal ``e`` is its execution limits (time, facts,
    iterations), not the token's checks."""
    return _LIMITS in str(e)


def _builder(b: Any, code: str, params: dict[str, Any] | None = None) -> Any:
    builder = b.AuthorizerBuilder(code, params) if params is not None else b.AuthorizerBuilder(code)
    limits = builder.limits()
    limits.max_time = MAX_AUTHORIZER_TIME
    builder.set_limits(limits)
    return builder


def _authority_facts(b: Any, parsed: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    try:
        authorizer = _builder(b, "allow if true;").build(parsed)
        for name in ("token_format", "origin", "agent"):
            rule = b.Rule(f"q($x) <- {name}($x) trusting authority")
            out[name] = sorted(str(f.terms[0]) for f in authorizer.query(rule))
    except Exception as e:
        raise TokenError(f"the token cannot be evaluated: {e}", check="token.limits") from e
    return out

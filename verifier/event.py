"""Event envelopes, body commitments and log leaves (specs/event-envelope.md, specs/leaf.md).

Trust role: turns leaf bytes into a :class:`Leaf` value only if they are the one canonical
encoding of a well-formed leaf, and checks agent signatures and body commitments over the
exact bytes that were signed.

Domain separation: every hash or signature input starts with its own ASCII label followed
by a NUL byte, so no signature or hash made for one purpose is valid for another:

* event signature: Ed25519 over ``b"engram/event/v1\\x00" || JCS(envelope)``
* key possession:  Ed25519 over ``b"engram/key-pop/v1\\x00" || JCS(statement)``
* body commitment: SHA-256(``b"engram/body/v1\\x00" || salt(16) || JCS(body)``)
* a ``memory.distilled`` body of per-entry form (``"disclosure": "per-entry/v1"``):
  SHA-256(``b"engram/body-digest/v1\\x00" || salt(16) || JCS(digest form)``), where the digest
  form is the body with each entry replaced by hex SHA-256(``b"engram/distilled-entry/v1\\x00"
  || JCS(entry)``) (each entry carries its own random ``nonce``), so one entry can be
  disclosed with the others given only as their digests (specs/event-envelope.md §3)
* agent key id:    SHA-256(``b"engram/agent-key/v1\\x00" || public key``)[:16], hex

The leaf itself is hashed as an RFC 9162 leaf (0x00 prefix) by :mod:`verifier.merkle`.
Checkpoint notes cannot collide with these inputs because notes may not contain NUL.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from verifier.ed25519 import check_public_key
from verifier.errors import (
    CanonicalFormError,
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    SignatureError,
)
from verifier.jcs import MAX_SAFE_INTEGER, canonical_bytes, canonical_bytes_of_parsed, parse_canonical
from verifier.merkle import leaf_hash
from verifier.note import b64decode_strict

__all__ = [
    "AGENT_OR_POLICY_KINDS",
    "BODY_DOMAIN",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_LEAF_BYTES",
    "DIGEST_BODY_DOMAIN",
    "DISCLOSURE_MEMBER",
    "DISTILLED_ENTRY_DOMAIN",
    "ENVELOPE_VERSION",
    "EVENT_DOMAIN",
    "KEY_KINDS",
    "LEAF_FORMAT",
    "PER_ENTRY",
    "POLICY_AGENT",
    "POLICY_KINDS",
    "POP_DOMAIN",
    "SALT_SIZE",
    "Envelope",
    "Leaf",
    "NewKey",
    "agent_key_id",
    "body_commitment",
    "check_agent_id",
    "check_kind",
    "commitment_of",
    "digest_form",
    "disclose_entries",
    "entry_digest",
    "event_signing_input",
    "pop_signing_input",
    "sign_event",
    "sign_pop",
    "verify_body",
    "verify_event_signature",
    "verify_pop",
]

ENVELOPE_VERSION = 1
LEAF_FORMAT = "engram.leaf/v1"
EVENT_DOMAIN = b"engram/event/v1\x00"
POP_DOMAIN = b"engram/key-pop/v1\x00"
BODY_DOMAIN = b"engram/body/v1\x00"
#: Per-entry commitments of ``memory.distilled`` bodies: the body's commitment
#: is over its digest form, each entry's digest over its own bytes and nonce.
DIGEST_BODY_DOMAIN = b"engram/body-digest/v1\x00"
DISTILLED_ENTRY_DOMAIN = b"engram/distilled-entry/v1\x00"
#: The member (inside the committed bytes) that says a ``memory.distilled`` body is of the
#: per-entry form, and its one value; each entry then carries a 16-byte hex ``nonce``.
DISCLOSURE_MEMBER = "disclosure"
PER_ENTRY = "per-entry/v1"
KEY_ID_DOMAIN = b"engram/agent-key/v1\x00"
SALT_SIZE = 16
#: tlog-tiles entry bundles prefix each entry with a uint16 length, so a leaf can never be
#: longer than 65,535 bytes; this is also the default (and the maximum) configurable limit.
DEFAULT_MAX_LEAF_BYTES = 65_535
DEFAULT_MAX_BODY_BYTES = 64 * 1024
MAX_ENVELOPE_BYTES = 8 * 1024
#: The ledger's own authority (policy decisions, forced revocations). Agent ids beginning
#: with "engram." are reserved for the ledger.
POLICY_AGENT = "engram.policy"
KEY_KINDS = frozenset({"key.registered", "key.rotated", "key.revoked"})
#: Kinds signed by the ledger's policy key in the subject agent's streams (event-envelope.md §5).
POLICY_KINDS = frozenset(
    {"memory.distilled", "memory.tier_changed", "memory.archived", "memory.replaced", "memory.accessed"}
)
#: Kinds that the agent itself or the policy key may sign.
AGENT_OR_POLICY_KINDS = frozenset({"memory.decay_exempted"})

_AGENT_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}(\.[a-z][a-z0-9_]{0,31}){0,3}")
_KEY_ID = re.compile(r"[0-9a-f]{32}")
_HEX_HASH = re.compile(r"[0-9a-f]{64}")


def check_agent_id(agent: object) -> str:
    """Agent ids: 1-64 chars of ``[a-z0-9._-]``, starting with a letter or digit."""
    if not isinstance(agent, str) or not _AGENT_ID.fullmatch(agent):
        raise MalformedError(
            f"agent id {str(agent)[:80]!r} must match [a-z0-9][a-z0-9._-]{{0,63}}",
            check="envelope.agent",
        )
    return agent


def check_kind(kind: object) -> str:
    """Kind names: dotted lowercase identifiers (the registry is closed; see engram.protocol.kinds)."""
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise MalformedError(f"kind {str(kind)[:80]!r} is not a valid kind name", check="envelope.kind")
    return kind


def agent_key_id(public_key: bytes) -> str:
    """Key id of an agent Ed25519 public key: hex of a domain-separated SHA-256, 16 bytes.

    The key itself is validated (:func:`verifier.ed25519.check_public_key`) where it is
    introduced, in :meth:`NewKey.from_obj`."""
    if len(public_key) != 32:
        raise MalformedError("Ed25519 public keys are 32 bytes", check="key.public_key")
    return hashlib.sha256(KEY_ID_DOMAIN + public_key).digest()[:16].hex()


def body_commitment(salt: bytes, body_jcs: bytes) -> str:
    """Hex SHA-256 over the body domain label, a 16-byte salt and the body's JCS bytes."""
    if len(salt) != SALT_SIZE:
        raise MalformedError(f"salt must be {SALT_SIZE} bytes", check="body.salt")
    return hashlib.sha256(BODY_DOMAIN + salt + body_jcs).hexdigest()


_NONCE = re.compile(r"[0-9a-f]{32}")


def _form_error(why: str) -> MalformedError:
    return MalformedError(f"a per-entry memory.distilled body {why}", check="body.form")


def entry_digest(entry: Any) -> str:
    """Hex SHA-256 of one distilled entry (with its ``nonce``): what stands in its place in
    the digest form, and what a bundle gives for an entry it does not disclose."""
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("nonce"), str)
        or not _NONCE.fullmatch(entry["nonce"])
    ):
        raise _form_error("has an entry without a 16-byte hex nonce")
    return hashlib.sha256(DISTILLED_ENTRY_DOMAIN + canonical_bytes(entry)).hexdigest()


def _per_entry(kind: str, body: Any) -> bool:
    """Whether ``body`` is committed to in the per-entry form: a ``memory.distilled`` body
    whose ``disclosure`` member (inside the committed bytes) says so. Only that kind and
    only that one value: any other value is refused, never read as the whole-body form."""
    if kind != "memory.distilled" or not isinstance(body, dict) or DISCLOSURE_MEMBER not in body:
        return False
    if body[DISCLOSURE_MEMBER] != PER_ENTRY:
        raise _form_error(f"names disclosure {str(body[DISCLOSURE_MEMBER])[:40]!r}, not {PER_ENTRY!r}")
    return True


def digest_form(body: dict[str, Any]) -> dict[str, Any]:
    """The digest form of a per-entry body, full or partly disclosed: every entry that is
    an object is replaced by its :func:`entry_digest`; an entry already given as a digest
    (64 lowercase hex) stays. Anything else is ``body.form``."""
    entries = body.get("entries")
    if not isinstance(entries, list):
        raise _form_error("has no list of entries")
    out = []
    for e in entries:
        if isinstance(e, str):
            if not _HEX_HASH.fullmatch(e):
                raise _form_error("gives an undisclosed entry that is not a hex SHA-256")
            out.append(e)
        else:
            out.append(entry_digest(e))
    return {**body, "entries": out}


def disclose_entries(body: dict[str, Any], keep: set[int] | frozenset[int]) -> dict[str, Any]:
    """A per-entry body with only the entries at positions ``keep`` disclosed: the others
    are given as their digests, so the result still opens the same commitment."""
    if not _per_entry("memory.distilled", body):
        raise _form_error("is needed to disclose entries one at a time (this body is whole-body)")
    full = digest_form(body)
    return {
        **body,
        "entries": [e if n in keep else full["entries"][n] for n, e in enumerate(body["entries"])],
    }


def commitment_of(kind: str, salt: bytes, body_jcs: bytes, *, parsed: Any = None) -> str:
    """The commitment an event of ``kind`` signs for a body: :func:`body_commitment` of its
    bytes, or for a per-entry ``memory.distilled`` body (its ``disclosure`` member says so),
    SHA-256 over ``engram/body-digest/v1``, the salt and the JCS of its :func:`digest_form`.
    The two use different domain labels, so a body of one form never opens a commitment of
    the other. ``parsed``: the body already parsed from ``body_jcs`` (saves a parse)."""
    if kind != "memory.distilled":
        return body_commitment(salt, body_jcs)
    value = parse_canonical(body_jcs, max_bytes=max(len(body_jcs), 1)) if parsed is None else parsed
    if not _per_entry(kind, value):
        return body_commitment(salt, body_jcs)
    if len(salt) != SALT_SIZE:
        raise MalformedError(f"salt must be {SALT_SIZE} bytes", check="body.salt")
    return hashlib.sha256(DIGEST_BODY_DOMAIN + salt + canonical_bytes(digest_form(value))).hexdigest()


def _int_field(obj: dict[str, Any], name: str, *, minimum: int = 0) -> int:
    value = obj.get(name)
    if type(value) is not int or not minimum <= value <= MAX_SAFE_INTEGER:
        raise MalformedError(f"{name} must be an integer >= {minimum}", check=f"envelope.{name}")
    return value


def _str_field(obj: dict[str, Any], name: str, pattern: re.Pattern[str], check: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise MalformedError(f"{name} is malformed", check=check)
    return value


def _exact_fields(obj: object, required: set[str], optional: set[str], check: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise MalformedError("expected a JSON object", check=check)
    keys = set(obj)
    missing = required - keys
    extra = keys - required - optional
    if missing:
        raise MalformedError(f"missing fields {sorted(missing)}", check=check)
    if extra:
        raise MalformedError(f"unknown fields {sorted(extra)}", check=check)
    return obj


@dataclass(frozen=True, slots=True, kw_only=True)
class NewKey:
    """A key introduced by ``key.registered`` / ``key.rotated``, with proof of possession."""

    key_id: str
    public_key: bytes
    pop: bytes

    @classmethod
    def from_obj(cls, obj: object) -> NewKey:
        o = _exact_fields(obj, {"alg", "key_id", "public_key", "pop"}, set(), "envelope.new_key")
        if o["alg"] != "ed25519":
            raise MalformedError("only ed25519 agent keys are supported", check="envelope.new_key")
        if not isinstance(o["public_key"], str) or not isinstance(o["pop"], str):
            raise MalformedError("public_key and pop are base64 strings", check="envelope.new_key")
        public_key = b64decode_strict(o["public_key"], check="envelope.new_key")
        pop = b64decode_strict(o["pop"], check="envelope.new_key")
        key_id = _str_field(o, "key_id", _KEY_ID, "envelope.new_key")
        if len(public_key) != 32 or len(pop) != 64:
            raise MalformedError("bad public key or pop length", check="envelope.new_key")
        check_public_key(public_key)
        if not hmac.compare_digest(key_id, agent_key_id(public_key)):
            raise MalformedError("new key id does not match its public key", check="envelope.new_key")
        return cls(key_id=key_id, public_key=public_key, pop=pop)

    def to_obj(self) -> dict[str, Any]:
        return {
            "alg": "ed25519",
            "key_id": self.key_id,
            "public_key": base64.b64encode(self.public_key).decode("ascii"),
            "pop": base64.b64encode(self.pop).decode("ascii"),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """What an agent signs. Stream = (agent, kind); ``version`` counts from 0 per stream."""

    origin: str
    agent: str
    key_id: str
    kind: str
    version: int
    prev: str | None
    client_time_us: int
    body_commitment: str
    new_key: NewKey | None = None

    @property
    def stream(self) -> tuple[str, str]:
        return (self.agent, self.kind)

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "v": ENVELOPE_VERSION,
            "origin": self.origin,
            "agent": self.agent,
            "key_id": self.key_id,
            "kind": self.kind,
            "version": self.version,
            "client_time_us": self.client_time_us,
            "body_commitment": self.body_commitment,
        }
        if self.prev is not None:
            obj["prev"] = self.prev
        if self.new_key is not None:
            obj["new_key"] = self.new_key.to_obj()
        return obj

    def canonical(self) -> bytes:
        return canonical_bytes(self.to_obj())

    @classmethod
    def from_obj(cls, obj: object) -> Envelope:
        """Validate a parsed envelope object (exact field set, types, ranges, prev rule)."""
        o = _exact_fields(
            obj,
            {"v", "origin", "agent", "key_id", "kind", "version", "client_time_us", "body_commitment"},
            {"prev", "new_key"},
            "envelope.fields",
        )
        if o["v"] != ENVELOPE_VERSION or type(o["v"]) is not int:
            raise MalformedError(f"unsupported envelope version {o['v']!r}", check="envelope.v")
        origin = o["origin"]
        if not isinstance(origin, str) or not 0 < len(origin) <= 255:
            raise MalformedError("origin must be a non-empty string", check="envelope.origin")
        version = _int_field(o, "version")
        prev = o.get("prev")
        # Presence, not value: "prev": null at version 0 would be a second encoding of the
        # same envelope (a different leaf hash for the same signed event).
        if version == 0 and "prev" in o:
            raise MalformedError("version 0 has no prev member", check="envelope.prev")
        if version > 0 and (not isinstance(prev, str) or not _HEX_HASH.fullmatch(prev)):
            raise MalformedError(f"version {version} needs prev, a hex leaf hash", check="envelope.prev")
        kind = check_kind(o["kind"])
        new_key = NewKey.from_obj(o["new_key"]) if "new_key" in o else None
        if (kind in {"key.registered", "key.rotated"}) != (new_key is not None):
            raise MalformedError(
                "new_key is required for key.registered/key.rotated and forbidden otherwise",
                check="envelope.new_key",
            )
        return cls(
            origin=origin,
            agent=check_agent_id(o["agent"]),
            key_id=_str_field(o, "key_id", _KEY_ID, "envelope.key_id"),
            kind=kind,
            version=version,
            prev=prev,
            client_time_us=_int_field(o, "client_time_us"),
            body_commitment=_str_field(o, "body_commitment", _HEX_HASH, "envelope.body_commitment"),
            new_key=new_key,
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Envelope:
        """Parse envelope bytes that must be canonical JCS and exactly this envelope's encoding."""
        env = cls.from_obj(parse_canonical(data, max_bytes=MAX_ENVELOPE_BYTES))
        # from_obj keeps only parsed values, so the fast encoder applies (verifier.jcs).
        if canonical_bytes_of_parsed(env.to_obj(), data) != data:  # pragma: no cover - a guard
            raise CanonicalFormError("envelope does not re-encode to its bytes", check="envelope.form")
        return env


def event_signing_input(envelope_jcs: bytes) -> bytes:
    return EVENT_DOMAIN + envelope_jcs


def pop_signing_input(*, origin: str, agent: str, key_id: str, public_key: bytes) -> bytes:
    statement = {
        "origin": origin,
        "agent": agent,
        "key_id": key_id,
        "public_key": base64.b64encode(public_key).decode("ascii"),
    }
    return POP_DOMAIN + canonical_bytes(statement)


def sign_event(envelope: Envelope, private_key: Ed25519PrivateKey) -> bytes:
    return private_key.sign(event_signing_input(envelope.canonical()))


def sign_pop(*, origin: str, agent: str, private_key: Ed25519PrivateKey) -> NewKey:
    public = private_key.public_key().public_bytes_raw()
    key_id = agent_key_id(public)
    pop = private_key.sign(pop_signing_input(origin=origin, agent=agent, key_id=key_id, public_key=public))
    return NewKey(key_id=key_id, public_key=public, pop=pop)


def _ed25519_verify(public_key: bytes, signature: bytes, message: bytes, check: str, what: str) -> None:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError) as e:
        raise SignatureError(f"{what} does not verify", check=check) from e


def verify_event_signature(
    envelope: Envelope, signature: bytes, public_key: bytes, *, envelope_jcs: bytes | None = None
) -> None:
    """Raise :class:`SignatureError` unless ``signature`` is the key's over the envelope.

    The caller has chosen ``public_key`` as the key valid for ``envelope.key_id`` at this
    log position (see :mod:`verifier.keys`); the key id must match the key.
    ``envelope_jcs`` may pass the exact bytes the envelope was parsed from (already proven
    canonical by :meth:`Envelope.from_bytes`) to save re-encoding them.
    """
    if not hmac.compare_digest(agent_key_id(public_key), envelope.key_id):
        raise SignatureError("envelope key_id does not belong to that public key", check="event.key_id")
    if len(signature) != 64:
        raise SignatureError("Ed25519 signatures are 64 bytes", check="event.signature")
    signed = envelope.canonical() if envelope_jcs is None else envelope_jcs
    _ed25519_verify(
        public_key,
        signature,
        event_signing_input(signed),
        "event.signature",
        f"event signature of {envelope.agent}/{envelope.kind} v{envelope.version}",
    )


def verify_pop(envelope: Envelope) -> NewKey:
    """Check the new key's proof of possession bound to this origin and agent."""
    nk = envelope.new_key
    if nk is None:
        raise MalformedError("envelope introduces no key", check="envelope.new_key")
    _ed25519_verify(
        nk.public_key,
        nk.pop,
        pop_signing_input(
            origin=envelope.origin, agent=envelope.agent, key_id=nk.key_id, public_key=nk.public_key
        ),
        "key.pop",
        f"proof of possession for key {nk.key_id}",
    )
    return nk


def verify_body(
    envelope: Envelope, salt: bytes, body: bytes, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> Any:
    """Check a disclosed body against the envelope's commitment; return the parsed body.

    The body must be a canonical JSON object; the commitment is compared in constant time.
    A per-entry ``memory.distilled`` body may give undisclosed entries as their digests
    (:func:`commitment_of`); the parsed body then holds those digests as strings.
    """
    value = parse_canonical(body, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise MalformedError("a body is a JSON object", check="body.type")
    if not hmac.compare_digest(
        commitment_of(envelope.kind, salt, body, parsed=value), envelope.body_commitment
    ):
        raise SignatureError("body does not match the signed commitment", check="body.commitment")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Leaf:
    """A log leaf: index, server timestamp, the agent-signed envelope and its signature."""

    index: int
    timestamp_us: int
    envelope: Envelope
    signature: bytes
    raw: bytes

    @property
    def hash(self) -> bytes:
        return leaf_hash(self.raw)

    def envelope_jcs(self) -> bytes:
        """The envelope's canonical bytes, as they appear inside this leaf (what its agent
        signed); by the C encoder path, since every value came from the leaf's bytes."""
        return canonical_bytes_of_parsed(self.envelope.to_obj(), self.raw)

    @staticmethod
    def _obj(*, index: int, timestamp_us: int, envelope: Envelope, signature: bytes) -> dict[str, Any]:
        return {
            "format": LEAF_FORMAT,
            "index": index,
            "timestamp_us": timestamp_us,
            "event": envelope.to_obj(),
            "sig": base64.b64encode(signature).decode("ascii"),
        }

    @staticmethod
    def build(*, index: int, timestamp_us: int, envelope: Envelope, signature: bytes) -> Leaf:
        raw = canonical_bytes(
            Leaf._obj(index=index, timestamp_us=timestamp_us, envelope=envelope, signature=signature)
        )
        return Leaf(index=index, timestamp_us=timestamp_us, envelope=envelope, signature=signature, raw=raw)

    @classmethod
    def from_bytes(
        cls, data: bytes, *, max_bytes: int = DEFAULT_MAX_LEAF_BYTES, origin: str | None = None
    ) -> Leaf:
        """Parse leaf bytes: canonical JCS, exact fields, valid envelope, bounded size.

        Steps: ``leaf.size`` bound; ``canonical.*`` JCS form; ``leaf.fields``;
        ``envelope.*``; ``origin`` when the expected origin is given. The agent signature
        is *not* checked here (it needs the key valid at ``index``; see verifier.keys).
        """
        if len(data) > max_bytes:
            raise LimitExceededError(f"leaf of {len(data)} bytes exceeds {max_bytes}", check="leaf.size")
        obj = parse_canonical(data, max_bytes=max_bytes)
        o = _exact_fields(obj, {"format", "index", "timestamp_us", "event", "sig"}, set(), "leaf.fields")
        if o["format"] != LEAF_FORMAT:
            raise MalformedError(f"unknown leaf format {o['format']!r}", check="leaf.format")
        index = _int_field(o, "index")
        timestamp_us = _int_field(o, "timestamp_us", minimum=1)
        if not isinstance(o["sig"], str):
            raise MalformedError("sig must be base64", check="leaf.sig")
        signature = b64decode_strict(o["sig"], check="leaf.sig")
        if len(signature) != 64:
            raise MalformedError("sig must be 64 bytes", check="leaf.sig")
        envelope = Envelope.from_obj(o["event"])
        if origin is not None and envelope.origin != origin:
            raise OriginMismatchError(
                f"leaf names origin {envelope.origin!r}, expected {origin!r}", check="leaf.origin"
            )
        # Exact bytes: the leaf must be what build() makes of its parsed values, so the
        # signature checked over envelope.canonical() is over the very bytes in the leaf.
        # (Its values all come from the parsed leaf: the C encoder path applies, verifier.jcs.)
        rebuilt = cls._obj(index=index, timestamp_us=timestamp_us, envelope=envelope, signature=signature)
        if canonical_bytes_of_parsed(rebuilt, bytes(data)) != data:
            raise CanonicalFormError("leaf does not re-encode to its bytes", check="leaf.form")
        return cls(
            index=index, timestamp_us=timestamp_us, envelope=envelope, signature=signature, raw=bytes(data)
        )

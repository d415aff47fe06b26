"""Attestation bundles: verify, offline, that a claim about an agent's records is true and
that no record of the claimed streams was left out (specs/bundle.md).

Trust role: bytes + the log's verifier key (+ optionally a checkpoint the buyer already
trusts) in, a :class:`VerifiedBundle` out, or a :class:`VerificationError` naming the first
failed check. Nothing in the bundle is trusted because it is in the bundle: keys come from
the key-history entries (which are themselves proven and complete), sizes and roots from
the signed checkpoint, stream heads from a statement the log signed for that checkpoint.

Checks, in order (the numbers the CLI prints):

1. ``format``: media type, exact members, bounded sizes, strict base64.
2. ``checkpoint``: the checkpoint is signed by the log key, for the expected origin.
3. ``trusted``: (if the buyer has a trusted checkpoint) the bundle's checkpoint is not older
   and the bundle proves it consistent with the trusted one.
4. ``inclusion``: every entry's leaf is in the checkpoint's tree at its index.
5. ``heads``: the stream-head statement is signed by the log key and bound to the
   checkpoint (same origin, size and root).
6. ``signatures``: replaying the key-history streams with the entries in log order, every
   agent signature verifies under the key valid at that index.
7. ``completeness``: for every stream the claim uses (and the key streams), versions
   0..head are all present, each ``prev`` is the previous entry's leaf hash, and the last
   entry is the attested head. An included entry beyond the attested head is a fraud proof:
   the log contradicted its own statement.
8. ``bodies``: every disclosed body matches its signed commitment; erased entries are
   reported as undisclosed. ``token``: if the bundle carries a share token, it is signed
   by one of the agent's (unrevoked) keys, allows every disclosed and claimed kind to the
   verifying audience now, and none of its revocation ids is in the agent's complete
   ``share.revoked`` stream.
9. ``claim``: each statement, recomputed from the disclosed bodies, equals the claim.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from verifier.errors import (
    LimitExceededError,
    MalformedError,
    ProofError,
    StreamChainError,
    VerificationError,
)
from verifier.event import KEY_KINDS, POLICY_AGENT, Leaf, check_agent_id, check_kind, verify_body
from verifier.keys import KeyHistory
from verifier.merkle import verify_consistency, verify_inclusion
from verifier.note import SignedNote, VerifiedCheckpoint, VerifierKey, verify_checkpoint
from verifier.token import TokenError, verify_token

__all__ = [
    "HEADS_HEADER",
    "MAX_BUNDLE_BYTES",
    "MEDIA_TYPE",
    "ClaimResult",
    "VerifiedBundle",
    "heads_text",
    "verify_bundle",
]

MEDIA_TYPE = "application/vnd.engram.bundle.v1+json"
HEADS_HEADER = "engram.stream-heads/v1"
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 100_000
MAX_STATEMENTS = 32


class ClaimError(VerificationError):
    """The claim does not match what the records say."""

    default_check = "claim"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimResult:
    statement: dict[str, Any]
    recomputed: Any
    holds: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedBundle:
    checkpoint: VerifiedCheckpoint
    entries: int
    streams: dict[tuple[str, str], int]  # stream -> head version
    erased: list[int]
    claims: list[ClaimResult]
    steps: list[tuple[str, str]]  # (check, detail) in order


def heads_text(origin: str, size: int, root_b64: str, heads: list[tuple[str, str, int, int, str]]) -> str:
    """Note text of a stream-head statement (signed by the log key)."""
    lines = [HEADS_HEADER, f"origin {origin}", f"size {size}", f"root {root_b64}"]
    lines += [f"head {a} {k} {v} {i} {h}" for a, k, v, i, h in sorted(heads)]
    return "\n".join(lines) + "\n"


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise MalformedError(f"{what} must be base64", check="format")
    try:
        raw = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise MalformedError(f"{what} is not base64", check="format") from e
    if base64.b64encode(raw).decode("ascii") != value:
        raise MalformedError(f"{what} is not canonical base64", check="format")
    return raw


def _exact(obj: object, required: set[str], optional: set[str], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise MalformedError(f"{what} must be an object", check="format")
    missing, extra = required - set(obj), set(obj) - required - optional
    if missing or extra:
        raise MalformedError(f"{what}: missing {sorted(missing)}, unknown {sorted(extra)}", check="format")
    return obj


def _parse_heads(
    note: bytes, key: VerifierKey, cp: VerifiedCheckpoint
) -> dict[tuple[str, str], tuple[int, int, str]]:
    signed = SignedNote.parse(note)
    signed.verify([key])
    lines = signed.text.rstrip("\n").split("\n")
    root_b64 = base64.b64encode(cp.root).decode("ascii")
    if lines[:4] != [HEADS_HEADER, f"origin {cp.origin}", f"size {cp.size}", f"root {root_b64}"]:
        raise ProofError("the stream-head statement is not bound to this checkpoint", check="heads.binding")
    heads: dict[tuple[str, str], tuple[int, int, str]] = {}
    for line in lines[4:]:
        parts = line.split(" ")
        if len(parts) != 6 or parts[0] != "head":
            raise MalformedError(f"bad head line {line[:80]!r}", check="heads.format")
        agent, kind = check_agent_id(parts[1]), check_kind(parts[2])
        try:
            version, index = int(parts[3]), int(parts[4])
        except ValueError as e:
            raise MalformedError("head version and index are decimals", check="heads.format") from e
        if str(version) != parts[3] or str(index) != parts[4] or index >= cp.size:
            raise MalformedError(
                "head version/index not canonical or beyond the checkpoint", check="heads.format"
            )
        if (agent, kind) in heads:
            raise MalformedError("a stream has two head lines", check="heads.format")
        heads[(agent, kind)] = (version, index, parts[5])
    return heads


def _check_token(
    token: str,
    leaves: list[tuple[Leaf, dict[str, Any]]],
    bodies: dict[int, dict[str, Any] | None],
    history: KeyHistory,
    statements: list[dict[str, Any]],
    claim_agents: set[str],
    origin: str,
    audience: str | None,
    now: int | None,
) -> tuple[str, str]:
    if audience is None:
        raise TokenError(
            "this bundle carries a share token: give the audience you verify as", check="token.audience"
        )
    (agent,) = claim_agents
    for lf, _ in leaves:
        if bodies.get(lf.index) is not None and lf.envelope.agent != agent:
            raise TokenError(f"entry {lf.index} of another agent is disclosed", check="token.scope")
    revocations = [
        lf for lf, _ in leaves if lf.envelope.kind == "share.revoked" and lf.envelope.agent == agent
    ]
    if any(bodies.get(lf.index) is None for lf in revocations):
        raise TokenError("the revocation list is not fully disclosed", check="token.revoked")
    revoked = [str(b["token_id"]) for lf in revocations if (b := bodies.get(lf.index)) is not None]
    disclosed = {lf.envelope.kind for lf, _ in leaves if bodies.get(lf.index) is not None}
    scope = (disclosed | {s["kind"] for s in statements}) - {"share.revoked", "memory.erased"}
    # Only the agent's key active at the checkpoint: a token carries no issue time, so a
    # rotated-out (possibly leaked) key must not mint tokens that still verify.
    active = history.active_key(agent)
    keys = [history.keys[active].public_key] if active is not None else []
    verified = verify_token(
        token,
        agent_keys=keys,
        origin=origin,
        agent=agent,
        audience=audience,
        kinds=sorted(scope),
        now=int(time.time()) if now is None else now,
        revoked_ids=revoked,
    )
    return (
        "token",
        f"share token of {agent} allows {', '.join(verified.kinds)} to {audience}; "
        f"not revoked ({len(revoked)} revocations checked)",
    )


def _no_float(text: str) -> Any:
    raise MalformedError(f"number {text!r} is not an integer", check="format")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise MalformedError(f"duplicate member {k!r}", check="format")
        out[k] = v
    return out


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise MalformedError("text is not valid Unicode (lone surrogate)", check="format") from e


def _same(a: Any, b: Any) -> bool:
    """Type-strict equality (True is not 1, 1 is not "1"), recursively."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _where(body: dict[str, Any], where: dict[str, Any]) -> bool:
    return all(k in body and _same(body[k], v) for k, v in where.items())


def _evaluate(statement: dict[str, Any], records: list[dict[str, Any] | None]) -> Any:
    pred = statement["predicate"]
    where = statement.get("where") or {}
    if pred == "count" and not where:
        return len(records)
    if any(r is None for r in records):
        raise ClaimError("the claim needs bodies that are erased or undisclosed", check="claim.undisclosed")
    bodies = [r for r in records if r is not None and _where(r, where)]
    if pred == "count":
        return len(bodies)
    if pred == "exists":
        return len(bodies) > 0
    if pred == "mean":
        field = statement["field"]
        values = [b.get(field) for b in bodies]
        ints = [v for v in values if type(v) is int]
        if not values or len(ints) != len(values):
            raise ClaimError(f"no integer {field!r} to average", check="claim.field")
        mean = (Decimal(sum(ints)) / Decimal(len(ints))).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
        return str(mean)
    raise MalformedError(f"unknown predicate {pred!r}", check="format.claim")


def _claim_statements(claim: object) -> list[dict[str, Any]]:
    c = _exact(claim, {"statements"}, set(), "claim")
    stmts = c["statements"]
    if not isinstance(stmts, list) or not 0 < len(stmts) <= MAX_STATEMENTS:
        raise MalformedError(f"a claim holds 1-{MAX_STATEMENTS} statements", check="format.claim")
    out = []
    for raw in stmts:
        s = _exact(raw, {"predicate", "agent", "kind", "value"}, {"where", "field"}, "statement")
        if s["predicate"] not in ("count", "mean", "exists"):
            raise MalformedError(f"unknown predicate {s['predicate']!r}", check="format.claim")
        check_agent_id(s["agent"])
        check_kind(s["kind"])
        if "where" in s and (not isinstance(s["where"], dict) or len(s["where"]) > 8):
            raise MalformedError("where is an object of at most 8 members", check="format.claim")
        if s["predicate"] == "mean" and not isinstance(s.get("field"), str):
            raise MalformedError("mean needs a field", check="format.claim")
        if any(v is None for v in (s.get("where") or {}).values()):
            raise MalformedError("where values cannot be null", check="format.claim")
        expected = {"count": int, "exists": bool, "mean": str}[s["predicate"]]
        if type(s["value"]) is not expected:
            raise MalformedError(f"a {s['predicate']} value is a {expected.__name__}", check="format.claim")
        out.append(s)
    return out


def verify_bundle(
    data: bytes,
    log_key: VerifierKey,
    *,
    trusted_checkpoint: bytes | None = None,
    steps: list[tuple[str, str]] | None = None,
    audience: str | None = None,
    now: int | None = None,
) -> VerifiedBundle:
    """Run checks 1-9 (module docstring); return the verified bundle or raise.

    ``steps``, if given, receives ``(check, detail)`` for each check as it passes, so a
    report can show how far verification got before a failure."""
    steps = [] if steps is None else steps
    # 1. format
    if len(data) > MAX_BUNDLE_BYTES:
        raise LimitExceededError(f"bundle of {len(data)} bytes exceeds {MAX_BUNDLE_BYTES}", check="format")
    try:
        doc = json.loads(data, parse_float=_no_float, object_pairs_hook=_unique)
    except (ValueError, RecursionError) as err:
        raise MalformedError(f"bundle is not JSON: {err}", check="format") from err
    b = _exact(
        doc,
        {"media_type", "origin", "checkpoint", "stream_heads", "entries", "claim"},
        {"consistency", "token"},
        "bundle",
    )
    if b["media_type"] != MEDIA_TYPE:
        raise MalformedError(f"unknown media type {b['media_type']!r}", check="format")
    entries_in = b["entries"]
    if not isinstance(entries_in, list) or not 0 < len(entries_in) <= MAX_ENTRIES:
        raise MalformedError(f"a bundle holds 1-{MAX_ENTRIES} entries", check="format")
    statements = _claim_statements(b["claim"])
    steps.append(("format", f"{MEDIA_TYPE}, {len(entries_in)} entries, {len(statements)} claim statements"))

    # 2. checkpoint
    if not isinstance(b["checkpoint"], str) or not isinstance(b["stream_heads"], str):
        raise MalformedError("checkpoint and stream_heads are note texts", check="format")
    cp = verify_checkpoint(_utf8(b["checkpoint"]), log_key, origin=b["origin"])
    steps.append(("checkpoint", f"signed by {log_key.name}: size {cp.size}"))

    # 3. trusted checkpoint
    if trusted_checkpoint is not None:
        trusted = verify_checkpoint(trusted_checkpoint, log_key)
        if trusted.size > cp.size:
            raise ProofError(
                f"the bundle's checkpoint (size {cp.size}) is older than the trusted one (size {trusted.size})",
                check="trusted.stale",
            )
        cons = _exact(b.get("consistency") or {}, {"old_size", "proof"}, set(), "consistency")
        if cons["old_size"] != trusted.size or not isinstance(cons["proof"], list):
            raise ProofError(
                "the bundle carries no consistency proof from the trusted size", check="trusted.missing"
            )
        verify_consistency(
            old_size=trusted.size,
            new_size=cp.size,
            old_root=trusted.root,
            new_root=cp.root,
            proof=[_b64(h, "consistency hash") for h in cons["proof"]],
        )
        steps.append(("trusted", f"consistent with the trusted checkpoint at size {trusted.size}"))

    # 4. inclusion
    leaves: list[tuple[Leaf, dict[str, Any]]] = []
    seen: set[int] = set()
    for raw_entry in entries_in:
        e = _exact(raw_entry, {"index", "leaf", "proof"}, {"body", "salt", "erased"}, "entry")
        if type(e["index"]) is not int or e["index"] in seen:
            raise MalformedError("entry indices are distinct integers", check="format")
        seen.add(e["index"])
        leaf = Leaf.from_bytes(_b64(e["leaf"], "leaf"), origin=cp.origin)
        if leaf.index != e["index"]:
            raise MalformedError(
                f"entry {e['index']} holds the leaf of index {leaf.index}", check="inclusion.index"
            )
        if not isinstance(e["proof"], list):
            raise MalformedError("proof is a list of base64 hashes", check="format")
        verify_inclusion(
            leaf_hash=leaf.hash,
            index=leaf.index,
            size=cp.size,
            proof=[_b64(h, "proof hash") for h in e["proof"]],
            root=cp.root,
        )
        leaves.append((leaf, e))
    leaves.sort(key=lambda le: le[0].index)
    steps.append(("inclusion", f"{len(leaves)} leaves proven in the checkpoint's tree"))

    # 5. stream heads
    heads = _parse_heads(_utf8(b["stream_heads"]), log_key, cp)
    steps.append(("heads", f"{len(heads)} stream heads signed by the log for this checkpoint"))

    # 6. signatures (key history replayed in log order)
    history = KeyHistory()
    for leaf, _ in leaves:
        history.check_and_apply(leaf)
    steps.append(
        (
            "signatures",
            f"every signature valid under the key of its agent at its index ({len(history.keys)} keys)",
        )
    )

    # 7. completeness
    by_stream: dict[tuple[str, str], list[Leaf]] = {}
    for leaf, _ in leaves:
        by_stream.setdefault(leaf.envelope.stream, []).append(leaf)
    needed = {(s["agent"], s["kind"]) for s in statements}
    claim_agents = {a for a, _ in needed}
    token = b.get("token")
    if token is not None:
        if len(claim_agents) != 1:
            raise MalformedError(
                "a bundle with a share token makes claims about one agent", check="format.claim"
            )
        # The revocation list must be complete too: a hidden share.revoked would hide a revocation.
        needed |= {(a, "share.revoked") for a in claim_agents if (a, "share.revoked") in heads}
    agents = claim_agents | {POLICY_AGENT}
    needed |= {(a, k) for (a, k) in heads if a in agents and k in KEY_KINDS}
    for stream in sorted(needed | set(by_stream)):
        got = sorted(by_stream.get(stream, []), key=lambda lf: lf.envelope.version)
        head = heads.get(stream)
        if head is None:
            if stream in needed and not got:
                continue  # the log attests no head: the stream is empty at this checkpoint
            raise StreamChainError(f"stream {stream} has no attested head", check="completeness.head")
        version, index, leaf_hash_hex = head
        for lf in got:
            if lf.envelope.version > version:
                raise StreamChainError(
                    f"fraud proof: entry {lf.index} is version {lf.envelope.version} of {stream}, "
                    f"beyond the head version {version} the log signed",
                    check="completeness.fraud",
                )
        if stream not in needed:
            continue
        if [lf.envelope.version for lf in got] != list(range(version + 1)):
            missing = sorted(set(range(version + 1)) - {lf.envelope.version for lf in got})
            raise StreamChainError(
                f"stream {stream} lacks versions {missing[:10]}", check="completeness.missing"
            )
        prev = None
        for lf in got:
            if lf.envelope.prev != prev:
                raise StreamChainError(
                    f"stream {stream} version {lf.envelope.version}: broken prev link",
                    check="completeness.prev",
                )
            prev = lf.hash.hex()
        if got[-1].index != index or got[-1].hash.hex() != leaf_hash_hex:
            raise StreamChainError(
                f"stream {stream} ends before its attested head", check="completeness.head"
            )
    steps.append(("completeness", f"{len(needed)} streams complete from version 0 to their attested heads"))

    # 8. bodies
    bodies: dict[int, dict[str, Any] | None] = {}
    erased: list[int] = []
    erasures = {
        int(body["index"])
        for lf, e2 in leaves
        if lf.envelope.kind == "memory.erased" and "body" in e2
        for body in [
            verify_body(
                lf.envelope, _b64(e2.get("salt"), "salt"), _b64(e2["body"], "body"), max_bytes=1 << 20
            )
        ]
        if isinstance(body.get("index"), int)
    }
    for leaf, e in leaves:
        if "erased" in e:
            if e["erased"] is not True:
                raise MalformedError("erased is true or absent", check="format")
            if leaf.index not in erasures:
                raise MalformedError(
                    f"entry {leaf.index} is marked erased, but no proven memory.erased entry erases it",
                    check="bodies.erased",
                )
            if "body" in e or "salt" in e:
                raise MalformedError(
                    f"entry {leaf.index} is marked erased but carries a body", check="format"
                )
            bodies[leaf.index] = None
            erased.append(leaf.index)
        elif "body" in e:
            body = verify_body(
                leaf.envelope, _b64(e.get("salt"), "salt"), _b64(e["body"], "body"), max_bytes=1 << 20
            )
            bodies[leaf.index] = body
        else:
            bodies[leaf.index] = None
    steps.append(
        (
            "bodies",
            f"{sum(1 for v in bodies.values() if v is not None)} bodies match their commitments; {len(erased)} erased",
        )
    )

    # 8b. share token: every disclosed and every claimed kind within its scope
    if token is not None:
        steps.append(
            _check_token(
                str(token), leaves, bodies, history, statements, claim_agents, cp.origin, audience, now
            )
        )

    # 9. claim
    results = []
    for s in statements:
        records = [
            bodies[lf.index]
            for lf in sorted(by_stream.get((s["agent"], s["kind"]), []), key=lambda lf: lf.envelope.version)
        ]
        value = _evaluate(s, records)
        holds = _same(value, s["value"])
        results.append(ClaimResult(statement=s, recomputed=value, holds=holds))
        if not holds:
            raise ClaimError(
                f"claim says {s['predicate']} of {s['agent']}/{s['kind']} {s.get('where') or ''} is {s['value']!r}; "
                f"the records say {value!r}",
                check="claim.value",
            )
    steps.append(
        (
            "claim",
            "; ".join(
                f"{r.statement['predicate']} {r.statement['kind']} = {r.recomputed!r}" for r in results
            ),
        )
    )
    return VerifiedBundle(
        checkpoint=cp,
        entries=len(leaves),
        streams={s: heads[s][0] for s in needed if s in heads},
        erased=erased,
        claims=results,
        steps=steps,
    )

"""Attestation bundles: verify, offline, that a claim about an agent's records is true and
that no record of the claimed streams was left out (specs/bundle.md, bundle v2).

Trust role: bytes + the log's verifier key (+ optionally checkpoints the buyer already
trusts or remembers, and a witness policy) in, a :class:`VerifiedBundle` out, or a
:class:`VerificationError` naming the first failed check. Nothing in the bundle is
trusted because it is in the bundle: keys come from the key-history entries (which are
themselves proven and complete), sizes and roots from the signed checkpoint, stream heads
and the set of agents they cover from a statement the log signed for that checkpoint.

Checks, in order (the numbers the CLI prints; one function per step below):

1. ``format``: media type, exact members, bounded sizes and counts before parsing,
   strict JSON (no floats, NaN or Infinity, no duplicate members), strict base64; every
   optional member is validated when present.
2. ``checkpoint``: the checkpoint is signed by the log key, for the expected origin.
3. ``witnesses``: (with a witness policy) cosignatures on the checkpoint meet its quorum.
4. ``trusted``: (with trusted or remembered checkpoints) the bundle's checkpoint is not
   older than any of them and the bundle proves it consistent with each (same root at
   the same size, or a consistency proof from that size).
5. ``inclusion``: every entry's leaf is in the checkpoint's tree at its index.
6. ``timestamps``: server timestamps strictly increase with the index across every
   disclosed entry; the log signed both leaves, so a violation is a fraud proof.
7. ``heads``: the stream-head statement is signed by the log key, bound to the checkpoint
   (same origin, size and root), and names every agent it covers with the number of its
   streams.
8. ``signatures``: replaying the key-history streams with the entries in log order, every
   agent signature verifies under the key valid at that index.
9. ``completeness``: every agent a statement is about (and ``engram.policy``) is covered
   by the stream-head statement; for every stream the claim uses (and the key streams),
   versions 0..head are all present, each ``prev`` is the previous entry's leaf hash, and
   the last entry is the attested head. An included entry beyond the attested head is a
   fraud proof: the log contradicted its own statement.
10. ``bodies``: every disclosed body matches its signed commitment (a per-entry
    ``memory.distilled`` body through its digest form); erased entries are reported as
    undisclosed.
10b. ``index`` (``mesh_read`` statements only): each statement's mesh-read index is signed
    by the log for this checkpoint and claim, every entry it lists is carried and is what
    its role says, and nothing else is carried or disclosed (verifier.mesh_index); an
    unlisted entry that bears on the claim is a fraud proof.
11. ``token``: if the bundle carries a share token, it is signed by the agent's active
    key, allows every disclosed and claimed kind to the verifying audience now, and none
    of its revocation ids is in the agent's complete ``share.revoked`` stream.
12. ``claim``: each statement, recomputed from the disclosed bodies, equals the claim (a
    ``mesh_read``: the memory active and WARM at the checkpoint, verifier.tiers, and shared
    by the mesh's fold, verifier.mesh).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
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
from verifier.jcs import parse_strict
from verifier.keys import KeyHistory
from verifier.merkle import HASH_SIZE, verify_inclusion
from verifier.mesh import MEMORY_KINDS, MESH_ID, mesh_read, statement_agents, statement_streams
from verifier.mesh_index import MeshReadIndex, allowed_entries, check_index, parse_index
from verifier.note import (
    SignedNote,
    VerifiedCheckpoint,
    VerifierKey,
    b64decode_strict,
    parse_decimal,
    verify_checkpoint,
)
from verifier.state import StateError, require_extends
from verifier.tiers import fold_status
from verifier.token import TokenError, verify_token

__all__ = [
    "HEADS_HEADER",
    "MAX_BUNDLE_BYTES",
    "MEDIA_TYPE",
    "ClaimResult",
    "StreamHeads",
    "VerifiedBundle",
    "describe_statement",
    "heads_text",
    "mean_quality",
    "verify_bundle",
]

MEDIA_TYPE = "application/vnd.engram.bundle.v2+json"
HEADS_HEADER = "engram.stream-heads/v2"
#: Media types of earlier bundle versions, refused with the reason (specs/bundle.md, Versions).
RETIRED_MEDIA_TYPES = {
    "application/vnd.engram.bundle.v1+json": (
        "bundle v1 is no longer accepted: its stream-head statement does not say which agents it "
        "covers, so it cannot prove that an agent has no records; ask for a v2 bundle "
        "(engram >= 0.9, `engram bundle create`)"
    ),
}
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 100_000
MAX_STATEMENTS = 32
MAX_CONSISTENCY_PROOFS = 8
MAX_PROOF_HASHES = 64
#: Bounds checked by a linear pre-scan before the JSON is parsed (jcs.check_shape): two
#: containers per entry (the entry and its proof) plus room for the claim; a 64 MiB
#: bundle of real entries (a ~1 KB leaf and a 20-40 hash proof each) holds far fewer values.
MAX_CONTAINERS = 2 * MAX_ENTRIES + 4096
MAX_VALUES = 2_000_000
_HEX_HASH = re.compile(r"[0-9a-f]{64}")
_TOKEN_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


class ClaimError(VerificationError):
    """The claim does not match what the records say."""

    default_check = "claim"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimResult:
    statement: dict[str, Any]
    recomputed: Any
    holds: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamHeads:
    """A verified stream-head statement: the agents it covers and their streams' heads."""

    covered: frozenset[str]
    heads: dict[tuple[str, str], tuple[int, int, str]]  # stream -> (version, index, leaf hash hex)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedBundle:
    checkpoint: VerifiedCheckpoint
    entries: int
    streams: dict[tuple[str, str], int]  # stream -> head version
    erased: list[int]
    claims: list[ClaimResult]
    steps: list[tuple[str, str]]  # (check, detail) in order
    covered: frozenset[str] = frozenset()
    witnesses: tuple[str, ...] = ()
    #: the bundle's consistency proofs by old size (verified against any anchor of that size)
    consistency: dict[int, list[bytes]] = field(default_factory=dict)


def heads_text(
    origin: str,
    size: int,
    root_b64: str,
    heads: Sequence[tuple[str, str, int, int, str]],
    *,
    agents: Sequence[str],
) -> str:
    """Note text of a stream-head statement (signed by the log key).

    ``agents`` are the agents the statement covers: each gets an ``agent <id> <n>`` line,
    even with no streams, followed by its ``n`` head lines. ``heads`` must hold every
    stream of every covered agent (the builder enumerates them before signing) and no
    stream of any other agent."""
    groups: dict[str, list[tuple[str, int, int, str]]] = {check_agent_id(a): [] for a in agents}
    for a, k, v, i, h in heads:
        if a not in groups:
            raise ValueError(f"head of {a!r}, an agent the statement does not cover")
        groups[a].append((k, v, i, h))
    lines = [HEADS_HEADER, f"origin {origin}", f"size {size}", f"root {root_b64}"]
    for a in sorted(groups):
        lines.append(f"agent {a} {len(groups[a])}")
        lines += [f"head {a} {k} {v} {i} {h}" for k, v, i, h in sorted(groups[a])]
    return "\n".join(lines) + "\n"


def describe_statement(statement: dict[str, Any], value: Any = None) -> str:
    """``count of alice/pact.outcome where {"result":"violated"} = 0``: everything a claim
    line must name (agent, kind, filter, field, value) so that nothing is hidden."""
    if statement["predicate"] == "mesh_read":
        shown = statement["value"] if value is None else value
        return (
            f"mesh_read of {statement['author']}'s {statement['kind']} {statement['ref']} by "
            f"{statement['agent']} through mesh {statement['mesh']} = {json.dumps(shown)}"
        )
    where = statement.get("where")
    text = f"{statement['predicate']}"
    if statement.get("field") is not None:
        text += f" {statement['field']}"
    text += f" of {statement['agent']}/{statement['kind']}"
    if where:
        text += " where " + json.dumps(where, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    shown = statement["value"] if value is None else value
    return f"{text} = {json.dumps(shown, ensure_ascii=True)}"


# -- helpers -------------------------------------------------------------------------------


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise MalformedError(f"{what} must be base64", check="format")
    return b64decode_strict(value, check="format")


def _hashes(value: object, what: str) -> list[bytes]:
    if not isinstance(value, list) or len(value) > MAX_PROOF_HASHES:
        raise MalformedError(f"{what} is a list of at most {MAX_PROOF_HASHES} base64 hashes", check="format")
    out = [_b64(h, what) for h in value]
    if any(len(h) != HASH_SIZE for h in out):
        raise MalformedError(f"{what} holds a hash that is not {HASH_SIZE} bytes", check="format")
    return out


def _exact(obj: object, required: Set[str], optional: Set[str], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise MalformedError(f"{what} must be an object", check="format")
    missing, extra = required - set(obj), set(obj) - required - optional
    if missing or extra:
        raise MalformedError(f"{what}: missing {sorted(missing)}, unknown {sorted(extra)}", check="format")
    return obj


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
        name = statement["field"]
        values = [b.get(name) for b in bodies]
        ints = [v for v in values if type(v) is int]
        if not values or len(ints) != len(values):
            raise ClaimError(f"no integer {name!r} to average", check="claim.field")
        return mean_quality(ints)
    raise MalformedError(f"unknown predicate {pred!r}", check="format.claim")


def mean_quality(values: Sequence[int]) -> str:
    """The mean of integers as a decimal string with two places, rounded half to even
    (specs/bundle.md "mean"): what bundles, the oracle and clients all state and compare."""
    if not values:
        raise ValueError("the mean of no values")
    return str(
        (Decimal(sum(values)) / Decimal(len(values))).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    )


#: (required, optional) members of the bundle's objects. The producer writes them through
#: engram.protocol.bundle_wire; a test holds these lists (and the TypeScript verifier's) equal
#: to its values' fields.
_BUNDLE_MEMBERS = (
    frozenset({"media_type", "origin", "checkpoint", "stream_heads", "entries", "claim"}),
    frozenset({"consistency", "token", "mesh_indexes"}),
)
_ENTRY_MEMBERS = (frozenset({"index", "leaf", "proof"}), frozenset({"body", "salt", "erased"}))
_CONSISTENCY_MEMBERS = (frozenset({"old_size", "proof"}), frozenset[str]())
_CLAIM_MEMBERS = (frozenset({"statements"}), frozenset[str]())
_STATEMENT_MEMBERS = (frozenset({"predicate", "agent", "kind", "value"}), frozenset({"where", "field"}))
_MESH_READ_MEMBERS = (
    frozenset({"predicate", "agent", "author", "mesh", "kind", "ref", "value"}),
    frozenset[str](),
)


def _claim_statements(claim: object) -> list[dict[str, Any]]:
    c = _exact(claim, *_CLAIM_MEMBERS, "claim")
    stmts = c["statements"]
    if not isinstance(stmts, list) or not 0 < len(stmts) <= MAX_STATEMENTS:
        raise MalformedError(f"a claim holds 1-{MAX_STATEMENTS} statements", check="format.claim")
    out = []
    for raw in stmts:
        if isinstance(raw, dict) and raw.get("predicate") == "mesh_read":
            out.append(_mesh_statement(raw))
            continue
        s = _exact(raw, *_STATEMENT_MEMBERS, "statement")
        if s["predicate"] not in ("count", "mean", "exists"):
            raise MalformedError(f"unknown predicate {s['predicate']!r}", check="format.claim")
        check_agent_id(s["agent"])
        check_kind(s["kind"])
        if "where" in s and (not isinstance(s["where"], dict) or len(s["where"]) > 8):
            raise MalformedError("where is an object of at most 8 members", check="format.claim")
        if s["predicate"] == "mean" and not isinstance(s.get("field"), str):
            raise MalformedError("mean needs a field", check="format.claim")
        if s["predicate"] != "mean" and "field" in s:
            raise MalformedError("only mean takes a field", check="format.claim")
        if any(v is None for v in (s.get("where") or {}).values()):
            raise MalformedError("where values cannot be null", check="format.claim")
        expected = {"count": int, "exists": bool, "mean": str}[s["predicate"]]
        if type(s["value"]) is not expected:
            raise MalformedError(f"a {s['predicate']} value is a {expected.__name__}", check="format.claim")
        out.append(s)
    return out


_REF = re.compile(r"(0|[1-9][0-9]{0,15})\.(0|[1-9][0-9]?)")


def _mesh_statement(raw: dict[str, Any]) -> dict[str, Any]:
    """``mesh_read``: {agent (the reader), author, mesh, kind (the memory's entry kind), ref
    (the memory), value (true)}: the memory was shared with the reader through the mesh under
    grants valid at the checkpoint (verifier.mesh)."""
    s = _exact(raw, *_MESH_READ_MEMBERS, "statement")
    check_agent_id(s["agent"])
    check_agent_id(s["author"])
    if not isinstance(s["mesh"], str) or not MESH_ID.fullmatch(s["mesh"]):
        raise MalformedError("mesh is a mesh id <creator>/<name>", check="format.claim")
    if s["kind"] not in MEMORY_KINDS:
        raise MalformedError(f"a mesh_read names a {' or '.join(MEMORY_KINDS)} entry", check="format.claim")
    if not isinstance(s["ref"], str) or not _REF.fullmatch(s["ref"]):
        raise MalformedError("ref is a memory reference <index>.<n>", check="format.claim")
    if s["value"] is not True:
        raise MalformedError("a mesh_read value is true", check="format.claim")
    return s


# -- the steps -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Bundle:
    """The bundle's members after step 1, and what later steps establish."""

    origin: Any
    checkpoint_note: str
    stream_heads: str
    entries: list[dict[str, Any]]
    statements: list[dict[str, Any]]
    consistency: dict[int, list[bytes]]
    token: str | None
    #: the log's mesh-read index of each mesh_read statement, in statement order
    mesh_indexes: list[str] = field(default_factory=list)
    leaves: list[tuple[Leaf, dict[str, Any]]] = field(default_factory=list)


def _step_format(data: bytes) -> _Bundle:
    """1. Bounded, strict parse; exact members; every optional member validated."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedError("a bundle is bytes", check="format")
    if len(data) > MAX_BUNDLE_BYTES:
        raise LimitExceededError(
            f"bundle of {len(data)} bytes exceeds {MAX_BUNDLE_BYTES}", check="format.size"
        )
    doc = parse_strict(
        bytes(data), max_bytes=MAX_BUNDLE_BYTES, max_containers=MAX_CONTAINERS, max_values=MAX_VALUES
    )
    media_type = doc.get("media_type") if isinstance(doc, dict) else None
    if isinstance(media_type, str) and media_type in RETIRED_MEDIA_TYPES:
        raise MalformedError(RETIRED_MEDIA_TYPES[media_type], check="format.version")
    b = _exact(doc, *_BUNDLE_MEMBERS, "bundle")
    if b["media_type"] != MEDIA_TYPE:
        raise MalformedError(f"unknown media type {str(b['media_type'])[:80]!r}", check="format.version")
    if not isinstance(b["checkpoint"], str) or not isinstance(b["stream_heads"], str):
        raise MalformedError("checkpoint and stream_heads are note texts", check="format")
    entries = b["entries"]
    if not isinstance(entries, list) or not 0 < len(entries) <= MAX_ENTRIES:
        raise MalformedError(f"a bundle holds 1-{MAX_ENTRIES} entries", check="format")
    consistency = _consistency(b["consistency"]) if "consistency" in b else {}
    token = _token(b)
    statements = _claim_statements(b["claim"])
    return _Bundle(
        origin=b["origin"],
        checkpoint_note=b["checkpoint"],
        stream_heads=b["stream_heads"],
        entries=entries,
        statements=statements,
        consistency=consistency,
        token=token,
        mesh_indexes=_mesh_indexes(b, statements),
    )


def _consistency(items: object) -> dict[int, list[bytes]]:
    """``consistency``: 1-8 proofs, each from a distinct size the buyer may trust."""
    if not isinstance(items, list) or not 0 < len(items) <= MAX_CONSISTENCY_PROOFS:
        raise MalformedError(
            f"consistency is a list of 1-{MAX_CONSISTENCY_PROOFS} proofs", check="format.consistency"
        )
    consistency: dict[int, list[bytes]] = {}
    for raw in items:
        c = _exact(raw, *_CONSISTENCY_MEMBERS, "consistency proof")
        old = c["old_size"]
        if type(old) is not int or old < 0 or old in consistency:
            raise MalformedError(
                "consistency old_size values are distinct non-negative integers",
                check="format.consistency",
            )
        consistency[old] = _hashes(c["proof"], "consistency hash")
    return consistency


def _token(b: dict[str, Any]) -> str | None:
    token = b.get("token")
    if "token" in b and (not isinstance(token, str) or not 0 < len(token) <= 16_384):
        raise MalformedError("token is a non-empty string of at most 16 KiB", check="format")
    return token


def _mesh_indexes(b: dict[str, Any], statements: list[dict[str, Any]]) -> list[str]:
    """``mesh_indexes``: one note per ``mesh_read`` statement, in order; only with them, and
    a bundle with them makes no other kind of statement (its entries are exactly what its
    indexes list)."""
    reads = [s for s in statements if s["predicate"] == "mesh_read"]
    if not reads:
        if "mesh_indexes" in b:
            raise MalformedError("mesh_indexes come only with mesh_read statements", check="format")
        return []
    if len(reads) != len(statements):
        raise MalformedError(
            "a bundle with a mesh_read statement makes mesh_read statements only", check="format.claim"
        )
    notes = b.get("mesh_indexes")
    if notes is None:
        raise MalformedError(
            "a mesh_read statement needs the log's mesh-read index (mesh_indexes): bundles made "
            "before it proved memories that were never shared (HOT, replaced, erased) and carried "
            "other meshes' and other memories' bodies, so they are refused; ask for a new proof "
            "(engram mesh prove)",
            check="format.mesh_index",
        )
    if (
        not isinstance(notes, list)
        or len(notes) != len(reads)
        or not all(isinstance(n, str) and 0 < len(n) <= 64 * 1024 for n in notes)
    ):
        raise MalformedError(
            "mesh_indexes is a list of one note text (at most 64 KiB) per mesh_read statement",
            check="format.mesh_index",
        )
    return list(notes)


def _step_trusted(
    bundle: _Bundle, cp: VerifiedCheckpoint, log_key: VerifierKey, anchors: Sequence[bytes], prefix: str
) -> str:
    """4. Each anchor (a checkpoint the buyer trusts or remembers) is extended by ``cp``."""
    for raw in anchors:
        anchor = verify_checkpoint(raw, log_key)
        if anchor.size > cp.size or anchor.size == cp.size:
            require_extends(anchor, cp, None, prefix=prefix)
            continue
        if any(old > cp.size for old in bundle.consistency):
            raise MalformedError(
                "a consistency proof starts beyond the checkpoint", check="format.consistency"
            )
        if anchor.size not in bundle.consistency and anchor.origin == cp.origin:
            raise StateError(
                f"the bundle carries no consistency proof from the size {anchor.size} "
                f"{'remembered' if prefix == 'state' else 'trusted'} to {cp.size}: ask the agent for a bundle "
                f"built for it (engram bundle create ... --trusted-size {anchor.size})",
                check=f"{prefix}.missing",
            )
        require_extends(anchor, cp, bundle.consistency.get(anchor.size), prefix=prefix)
    sizes = ", ".join(str(verify_checkpoint(a, log_key).size) for a in anchors)
    return f"consistent with the {'remembered' if prefix == 'state' else 'trusted'} checkpoint(s) at size {sizes}"


def _step_inclusion(bundle: _Bundle, cp: VerifiedCheckpoint) -> str:
    """5. Every leaf is proven in the checkpoint's tree at its index."""
    seen: set[int] = set()
    for raw_entry in bundle.entries:
        e = _exact(raw_entry, *_ENTRY_MEMBERS, "entry")
        if type(e["index"]) is not int or e["index"] in seen:
            raise MalformedError("entry indices are distinct integers", check="format")
        seen.add(e["index"])
        leaf = Leaf.from_bytes(_b64(e["leaf"], "leaf"), origin=cp.origin)
        if leaf.index != e["index"]:
            raise MalformedError(
                f"entry {e['index']} holds the leaf of index {leaf.index}", check="inclusion.index"
            )
        verify_inclusion(
            leaf_hash=leaf.hash,
            index=leaf.index,
            size=cp.size,
            proof=_hashes(e["proof"], "proof hash"),
            root=cp.root,
        )
        bundle.leaves.append((leaf, e))
    bundle.leaves.sort(key=lambda le: le[0].index)
    return f"{len(bundle.leaves)} leaves proven in the checkpoint's tree"


def _step_timestamps(bundle: _Bundle) -> str:
    """6. The log assigns strictly increasing server timestamps (specs/leaf.md); two proven
    leaves that say otherwise are a fraud proof against the log (e.g. a backdated outcome)."""
    previous: Leaf | None = None
    for leaf, _ in bundle.leaves:
        if previous is not None and leaf.timestamp_us <= previous.timestamp_us:
            raise ProofError(
                f"fraud proof: the log signed entry {leaf.index} with server time {leaf.timestamp_us}, "
                f"not after entry {previous.index} ({previous.timestamp_us}): timestamps must strictly "
                "increase with the index",
                check="timestamps.fraud",
            )
        previous = leaf
    return f"server timestamps strictly increase over {len(bundle.leaves)} entries"


def _parse_heads(note: bytes, key: VerifierKey, cp: VerifiedCheckpoint) -> StreamHeads:
    """7. The stream-head statement: signed, bound to ``cp``, every covered agent named."""
    signed = SignedNote.parse(note)
    signed.verify([key])
    lines = signed.text.rstrip("\n").split("\n")
    if lines[0] != HEADS_HEADER:
        raise MalformedError(
            f"stream-head statement {lines[0][:40]!r} is not {HEADS_HEADER}: older statements do not "
            "name the agents they cover",
            check="heads.version",
        )
    root_b64 = base64.b64encode(cp.root).decode("ascii")
    if lines[1:4] != [f"origin {cp.origin}", f"size {cp.size}", f"root {root_b64}"]:
        raise ProofError("the stream-head statement is not bound to this checkpoint", check="heads.binding")
    covered: list[str] = []
    heads: dict[tuple[str, str], tuple[int, int, str]] = {}
    remaining = 0
    for line in lines[4:]:
        parts = line.split(" ")
        if parts[0] == "agent" and len(parts) == 3:
            agent = _heads_name(check_agent_id, parts[1])
            if remaining or (covered and agent <= covered[-1]):
                raise MalformedError(
                    "agents are listed once, in order, each after all of its counted head lines",
                    check="heads.format",
                )
            covered.append(agent)
            remaining = parse_decimal(parts[2], check="heads.format")
        elif parts[0] == "head" and len(parts) == 6:
            if not covered or parts[1] != covered[-1] or remaining == 0:
                raise MalformedError("a head line outside its agent's group", check="heads.format")
            remaining -= 1
            stream = (parts[1], _heads_name(check_kind, parts[2]))
            version = parse_decimal(parts[3], check="heads.format")
            index = parse_decimal(parts[4], check="heads.format")
            if index >= cp.size or not _HEX_HASH.fullmatch(parts[5]) or stream in heads:
                raise MalformedError(
                    "head index beyond the checkpoint, bad leaf hash, or a stream listed twice",
                    check="heads.format",
                )
            heads[stream] = (version, index, parts[5])
        else:
            raise MalformedError(f"bad line {line[:80]!r}", check="heads.format")
    if remaining:
        raise MalformedError("the last agent has fewer head lines than it counts", check="heads.format")
    return StreamHeads(covered=frozenset(covered), heads=heads)


def _heads_name(check: Callable[[object], str], text: str) -> str:
    try:
        return check(text)
    except MalformedError as e:
        raise MalformedError(f"bad name in the stream-head statement: {e}", check="heads.format") from e


def _step_signatures(bundle: _Bundle) -> KeyHistory:
    """8. Key history replayed in log order; every signature under the key valid then."""
    history = KeyHistory()
    for leaf, _ in bundle.leaves:
        history.check_and_apply(leaf)
    return history


def _needed_streams(bundle: _Bundle, heads: StreamHeads) -> set[tuple[str, str]]:
    """The streams that must be complete: claimed ones, the key streams of the claimed
    agents and of the policy agent, and (with a token) the agent's revocation list."""
    needed = {st for s in bundle.statements for st in statement_streams(s)}
    claim_agents = {a for s in bundle.statements for a in statement_agents(s)}
    if bundle.token is not None:
        if any(s["predicate"] == "mesh_read" for s in bundle.statements):
            raise MalformedError("a bundle with a share token makes no mesh_read claim", check="format.claim")
        if len(claim_agents) != 1:
            raise MalformedError(
                "a bundle with a share token makes claims about one agent", check="format.claim"
            )
        needed |= {(a, "share.revoked") for a in claim_agents if (a, "share.revoked") in heads.heads}
    agents = claim_agents | {POLICY_AGENT}
    return needed | {(a, k) for (a, k) in heads.heads if a in agents and k in KEY_KINDS}


def _step_completeness(bundle: _Bundle, heads: StreamHeads) -> set[tuple[str, str]]:
    """9. Coverage, then every needed stream from version 0 to its attested head."""
    for agent in sorted({a for s in bundle.statements for a in statement_agents(s)} | {POLICY_AGENT}):
        if agent not in heads.covered:
            raise StreamChainError(
                f"the log's stream-head statement does not cover agent {agent!r}, so this bundle "
                f"proves nothing about {agent}'s records (covered: {', '.join(sorted(heads.covered))})",
                check="completeness.coverage",
            )
    needed = _needed_streams(bundle, heads)
    by_stream: dict[tuple[str, str], list[Leaf]] = {}
    for leaf, _ in bundle.leaves:
        by_stream.setdefault(leaf.envelope.stream, []).append(leaf)
    for stream in sorted(needed | set(by_stream)):
        got = sorted(by_stream.get(stream, []), key=lambda lf: lf.envelope.version)
        head = heads.heads.get(stream)
        if head is None:
            if stream in needed and not got:
                continue  # a covered agent's stream with no head line is empty at this checkpoint
            raise StreamChainError(f"stream {stream} has no attested head", check="completeness.head")
        _within_head(stream, got, head[0])
        if stream in needed:
            _whole_stream(stream, got, head)
    return needed


def _within_head(stream: tuple[str, str], got: Sequence[Leaf], version: int) -> None:
    """No proven entry of ``stream`` is beyond the head the log signed (else: a fraud proof)."""
    for lf in got:
        if lf.envelope.version > version:
            raise StreamChainError(
                f"fraud proof: entry {lf.index} is version {lf.envelope.version} of {stream}, "
                f"beyond the head version {version} the log signed",
                check="completeness.fraud",
            )


def _whole_stream(stream: tuple[str, str], got: Sequence[Leaf], head: tuple[int, int, str]) -> None:
    """``got`` (sorted by version) is the whole stream: every version from 0, each linked to
    the one before, the last one the attested head."""
    version, index, leaf_hash_hex = head
    # Counted, never built: the head's version comes from a signed statement, but a log
    # that signs version 2^62 must get a verdict, not exhaust this process's memory.
    if len(got) != version + 1 or any(lf.envelope.version != v for v, lf in enumerate(got)):
        present = {lf.envelope.version for lf in got}
        # the first ten missing versions are among the first len(got) + 10 integers
        missing = [v for v in range(min(version + 1, len(got) + 10)) if v not in present][:10]
        raise StreamChainError(f"stream {stream} lacks versions {missing}", check="completeness.missing")
    prev = None
    for lf in got:
        if lf.envelope.prev != prev:
            raise StreamChainError(
                f"stream {stream} version {lf.envelope.version}: broken prev link",
                check="completeness.prev",
            )
        prev = lf.hash.hex()
    if got[-1].index != index or got[-1].hash.hex() != leaf_hash_hex:
        raise StreamChainError(f"stream {stream} ends before its attested head", check="completeness.head")


def _step_bodies(bundle: _Bundle) -> tuple[dict[int, dict[str, Any] | None], list[int]]:
    """10. Disclosed bodies match their commitments; erasures are proven."""

    def body_of(leaf: Leaf, e: dict[str, Any]) -> dict[str, Any]:
        parsed: dict[str, Any] = verify_body(
            leaf.envelope, _b64(e.get("salt"), "salt"), _b64(e["body"], "body"), max_bytes=1 << 20
        )
        return parsed

    erasures = {
        body["index"]
        for lf, e in bundle.leaves
        if lf.envelope.kind == "memory.erased" and "body" in e
        for body in [body_of(lf, e)]
        if type(body.get("index")) is int
    }
    bodies: dict[int, dict[str, Any] | None] = {}
    erased: list[int] = []
    for leaf, e in bundle.leaves:
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
            bodies[leaf.index] = body_of(leaf, e)
        else:
            if "salt" in e:
                raise MalformedError(f"entry {leaf.index} carries a salt without a body", check="format")
            bodies[leaf.index] = None
    return bodies, erased


def _step_index(
    bundle: _Bundle, bodies: dict[int, dict[str, Any] | None], key: VerifierKey, cp: VerifiedCheckpoint
) -> tuple[list[MeshReadIndex], str]:
    """10b. Each mesh_read statement's index is the log's, for this checkpoint and claim;
    the bundle carries exactly what the indexes list (plus key history), with what must be
    disclosed disclosed and nothing else (verifier.mesh_index)."""
    leaves = {leaf.index: leaf for leaf, _ in bundle.leaves}
    indexes = []
    for s, note in zip(bundle.statements, bundle.mesh_indexes, strict=True):
        idx = parse_index(_utf8(note), key, cp, s)
        check_index(s, idx, leaves, bodies)
        indexes.append(idx)
    allowed_entries(bundle.statements, indexes, leaves, bodies)
    listed = sum(len(i.entries) for i in indexes)
    return indexes, (
        f"{listed} entries listed by the log's mesh-read index for this checkpoint, all carried; "
        "nothing else disclosed"
    )


def _step_token(
    bundle: _Bundle,
    bodies: dict[int, dict[str, Any] | None],
    history: KeyHistory,
    origin: str,
    audience: str | None,
    now: int | None,
) -> str:
    """11. The share token allows every disclosed and claimed kind and is not revoked."""
    token = bundle.token
    assert token is not None
    if audience is None:
        raise TokenError(
            "this bundle carries a share token: give the audience you verify as", check="token.audience"
        )
    (agent,) = {s["agent"] for s in bundle.statements}
    for lf, _ in bundle.leaves:
        if bodies.get(lf.index) is not None and lf.envelope.agent != agent:
            raise TokenError(f"entry {lf.index} of another agent is disclosed", check="token.scope")
    revoked: list[str] = []
    for lf, _ in bundle.leaves:
        if lf.envelope.kind != "share.revoked" or lf.envelope.agent != agent:
            continue
        body = bodies.get(lf.index)
        if body is None:
            raise TokenError("the revocation list is not fully disclosed", check="token.revoked")
        token_id = body.get("token_id")
        if not isinstance(token_id, str) or not _TOKEN_ID.fullmatch(token_id):
            raise TokenError(
                f"share.revoked entry {lf.index} names no valid token id: the revocation list cannot be read",
                check="token.revoked",
            )
        revoked.append(token_id)
    disclosed = {lf.envelope.kind for lf, _ in bundle.leaves if bodies.get(lf.index) is not None}
    scope = (disclosed | {s["kind"] for s in bundle.statements}) - {"share.revoked", "memory.erased"}
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
        f"share token of {agent} allows {', '.join(verified.kinds)} to {audience}; "
        f"not revoked ({len(revoked)} revocations checked)"
    )


def _step_claim(
    bundle: _Bundle, bodies: dict[int, dict[str, Any] | None], indexes: Sequence[MeshReadIndex] = ()
) -> list[ClaimResult]:
    """12. Each statement recomputed from the disclosed bodies equals the claim."""
    by_stream: dict[tuple[str, str], list[Leaf]] = {}
    for leaf, _ in bundle.leaves:
        by_stream.setdefault(leaf.envelope.stream, []).append(leaf)
    leaves = {leaf.index: leaf for leaf, _ in bundle.leaves}
    results = []
    reads = iter(indexes)
    for s in bundle.statements:
        if s["predicate"] == "mesh_read":
            results.append(_mesh_claim(s, next(reads), leaves, bodies))
            continue
        stream = sorted(by_stream.get((s["agent"], s["kind"]), []), key=lambda lf: lf.envelope.version)
        value = _evaluate(s, [bodies[lf.index] for lf in stream])
        holds = _same(value, s["value"])
        results.append(ClaimResult(statement=s, recomputed=value, holds=holds))
        if not holds:
            raise ClaimError(
                f"claim says {describe_statement(s)}; the records say {value!r}", check="claim.value"
            )
    return results


def _withheld(kind: str, body: dict[str, Any] | None, pos: int) -> bool:
    """Whether the memory at ``pos`` of an entry is not disclosed: no body, or a distilled
    body that gives that memory only as its digest."""
    if body is None:
        return True
    entries = body.get("entries") if kind == "memory.distilled" else None
    return isinstance(entries, list) and pos < len(entries) and isinstance(entries[pos], str)


def _mesh_claim(
    s: dict[str, Any], index: MeshReadIndex, leaves: dict[int, Leaf], bodies: dict[int, dict[str, Any] | None]
) -> ClaimResult:
    """A ``mesh_read`` recomputed from what the log's index lists (step 10b proved the list is
    the log's and nothing listed is missing): the memory was active and WARM at the checkpoint
    (verifier.tiers, ``claim.status``), and the mesh folded from its entries shared its
    category with the reader (verifier.mesh, ``claim.mesh``)."""
    ref = str(s["ref"])
    (memory_index,) = index.of("memory")
    memory = leaves[memory_index]
    env, body = memory.envelope, bodies.get(memory_index)
    ours = env.agent == s["author"] and env.kind == s["kind"]
    if ours and _withheld(env.kind, body, int(ref.split(".")[1])):
        raise ClaimError(
            f"claim says {describe_statement(s)}; the memory's body is not disclosed (erased?)",
            check="claim.undisclosed",
        )
    named = [i for role in ("status", "exempt", "use") for i in index.of(role)]
    status = fold_status(
        ref,
        (memory_index, memory.timestamp_us, env.kind, body),
        [(i, leaves[i].timestamp_us, leaves[i].envelope.kind, bodies.get(i)) for i in named],
    )
    if ours and not status.shareable:
        raise ClaimError(
            f"claim says {describe_statement(s)}; the log says memory {ref} was not an active WARM memory "
            f"at the checkpoint ({status.status}, {status.tier}: {status.why})",
            check="claim.status",
        )
    events = [(i, leaves[i].envelope.agent, leaves[i].envelope.kind, bodies.get(i)) for i in index.of("mesh")]
    holds, why = mesh_read(s, events, (env.agent, env.kind, body))
    if not holds:
        raise ClaimError(f"claim says {describe_statement(s)}; the log says no: {why}", check="claim.mesh")
    return ClaimResult(statement=s, recomputed=True, holds=True)


WitnessCheck = Callable[[VerifiedCheckpoint], tuple[str, ...]]


def verify_bundle(
    data: bytes,
    log_key: VerifierKey,
    *,
    trusted_checkpoint: bytes | None = None,
    trusted_checkpoints: Sequence[bytes] = (),
    remembered: bytes | None = None,
    witnesses: WitnessCheck | None = None,
    steps: list[tuple[str, str]] | None = None,
    audience: str | None = None,
    now: int | None = None,
) -> VerifiedBundle:
    """Run checks 1-12 (module docstring); return the verified bundle or raise.

    ``trusted_checkpoint(s)`` are checkpoints the caller trusts; ``remembered`` is the
    newest checkpoint a :class:`verifier.state.CheckpointStore` holds for this log (its
    failures are named ``state.*``). ``witnesses``, if given, checks the checkpoint's
    cosignatures against a witness policy and returns the names that cosigned.
    ``steps``, if given, receives ``(check, detail)`` for each check as it passes, so a
    report can show how far verification got before a failure."""
    steps = [] if steps is None else steps
    # 1. format
    bundle = _step_format(data)
    steps.append(
        ("format", f"{MEDIA_TYPE}, {len(bundle.entries)} entries, {len(bundle.statements)} claim statements")
    )
    # 2. checkpoint
    cp = verify_checkpoint(_utf8(bundle.checkpoint_note), log_key, origin=bundle.origin)
    steps.append(("checkpoint", f"signed by {log_key.name}: size {cp.size}"))
    # 3. witnesses
    cosigned: tuple[str, ...] = ()
    if witnesses is not None:
        cosigned = witnesses(cp)
        steps.append(("witnesses", f"cosigned by {', '.join(cosigned)}: the witness policy's quorum is met"))
    # 4. trusted and remembered checkpoints
    anchors = [*([] if trusted_checkpoint is None else [trusted_checkpoint]), *trusted_checkpoints]
    if anchors:
        steps.append(("trusted", _step_trusted(bundle, cp, log_key, anchors, "trusted")))
    if remembered is not None:
        steps.append(("trusted", _step_trusted(bundle, cp, log_key, [remembered], "state")))
    # 5. inclusion
    steps.append(("inclusion", _step_inclusion(bundle, cp)))
    # 6. timestamps
    steps.append(("timestamps", _step_timestamps(bundle)))
    # 7. stream heads
    heads = _parse_heads(_utf8(bundle.stream_heads), log_key, cp)
    steps.append(
        (
            "heads",
            f"{len(heads.heads)} stream heads of {len(heads.covered)} agents, signed by the log for this checkpoint",
        )
    )
    # 8. signatures
    history = _step_signatures(bundle)
    steps.append(
        (
            "signatures",
            f"every signature valid under the key of its agent at its index ({len(history.keys)} keys)",
        )
    )
    # 9. completeness
    needed = _step_completeness(bundle, heads)
    agents = sorted({a for s in bundle.statements for a in statement_agents(s)})
    steps.append(
        (
            "completeness",
            f"{', '.join(agents)} covered; {len(needed)} streams complete from version 0 to their attested heads",
        )
    )
    # 10. bodies
    bodies, erased = _step_bodies(bundle)
    shown = sum(1 for v in bodies.values() if v is not None)
    steps.append(("bodies", f"{shown} bodies match their commitments; {len(erased)} erased"))
    # 10b. the mesh-read indexes (mesh_read statements only)
    indexes: list[MeshReadIndex] = []
    if bundle.mesh_indexes:
        indexes, detail = _step_index(bundle, bodies, log_key, cp)
        steps.append(("index", detail))
    # 11. share token
    if bundle.token is not None:
        steps.append(("token", _step_token(bundle, bodies, history, cp.origin, audience, now)))
    # 12. claim
    results = _step_claim(bundle, bodies, indexes)
    steps.append(("claim", "; ".join(describe_statement(r.statement, r.recomputed) for r in results)))
    return VerifiedBundle(
        checkpoint=cp,
        entries=len(bundle.leaves),
        streams={s: heads.heads[s][0] for s in needed if s in heads.heads},
        erased=erased,
        claims=results,
        steps=steps,
        covered=heads.covered,
        witnesses=cosigned,
        consistency=bundle.consistency,
    )

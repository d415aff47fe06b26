"""The mesh-read index: the log's signed list of exactly the entries that bear on one
``mesh_read`` statement (specs/bundle.md, "mesh_read").

Trust role: a ``mesh_read`` bundle discloses the memory, the entries that name it and the
entries of that one mesh, and nothing else: not the creator's other meshes, not the
author's other memories. Completeness of what it does disclose cannot come from the stream
heads (a mesh stream holds every mesh of its agent; a status stream every memory), so the
log signs, for the bundle's checkpoint, an index of those entries, as it signs stream heads:

```
engram.mesh-read/v1
origin <origin>
size <checkpoint size>
root <base64 checkpoint root>
claim <reader> <author> <mesh> <kind> <ref>
<role> <index> <hex leaf hash>
...
```

Lines after ``claim`` are in strictly increasing index order, one per entry. Roles:

* ``memory``: the memory's own entry (exactly one, at the ref's index); its body is
  disclosed (a distillation: only this memory, the others as digests);
* ``status``: an entry of the author that names the memory and can change its status or
  tier (verifier.tiers.DISCLOSED_STATUS_KINDS), body disclosed;
* ``exempt``: a ``memory.decay_exempted`` of the author naming it, body withheld;
* ``use``: the author's ``memory.accessed`` naming it, the latest before each ``status``
  entry (what a time-based decision compares with), body withheld;
* ``mesh``: an entry of the mesh in the creator's mesh streams or the author's or reader's
  member streams, body disclosed, or without a body where it was erased (the fold then gives
  it its most restrictive reading, verifier.mesh).

The first line keeps the note from ever parsing as a checkpoint or a stream-head statement.
A log that signs an index leaving out an entry it has included (a bundle carrying an entry
of this mesh or naming this memory that the index does not list) has signed a contradiction:
the verifier reports it as a fraud proof (``index.fraud``), as ``completeness.fraud`` for heads.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verifier.errors import MalformedError, ProofError, VerificationError
from verifier.event import KEY_KINDS, PER_ENTRY, POLICY_AGENT, Leaf
from verifier.mesh import CREATOR_KINDS, MEMBER_KINDS, MESH_KINDS, creator_of
from verifier.note import SignedNote, VerifiedCheckpoint, VerifierKey, parse_decimal
from verifier.tiers import DISCLOSED_STATUS_KINDS, EXEMPT_KIND, USE_KIND, names_memory

__all__ = [
    "INDEX_HEADER",
    "ROLES",
    "MeshIndexError",
    "MeshReadIndex",
    "allowed_entries",
    "check_index",
    "index_text",
    "parse_index",
]

INDEX_HEADER = "engram.mesh-read/v1"
ROLES = ("memory", "status", "exempt", "use", "mesh")
_HEX_HASH = re.compile(r"[0-9a-f]{64}")


class MeshIndexError(VerificationError):
    """The mesh-read index is not the log's, not for this claim, or not what the bundle
    carries."""

    default_check = "index"


def _claim_line(s: Mapping[str, Any]) -> str:
    return f"claim {s['agent']} {s['author']} {s['mesh']} {s['kind']} {s['ref']}"


def index_text(
    origin: str,
    size: int,
    root_b64: str,
    statement: Mapping[str, Any],
    entries: Sequence[tuple[str, int, str]],
) -> str:
    """Note text of a mesh-read index (signed by the log key): ``entries`` are (role,
    index, hex leaf hash), one per index."""
    lines = [INDEX_HEADER, f"origin {origin}", f"size {size}", f"root {root_b64}", _claim_line(statement)]
    seen: set[int] = set()
    for role, index, leaf_hash in sorted(entries, key=lambda e: e[1]):
        if role not in ROLES or index in seen or not _HEX_HASH.fullmatch(leaf_hash):
            raise ValueError(f"bad index line {role} {index}")
        seen.add(index)
        lines.append(f"{role} {index} {leaf_hash}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshReadIndex:
    """A verified mesh-read index: index -> (role, hex leaf hash)."""

    entries: dict[int, tuple[str, str]]

    def of(self, role: str) -> list[int]:
        return sorted(i for i, (r, _) in self.entries.items() if r == role)


def parse_index(
    note: bytes, key: VerifierKey, cp: VerifiedCheckpoint, statement: Mapping[str, Any]
) -> MeshReadIndex:
    """The index for ``statement``: signed by the log key, bound to ``cp``, its claim line
    the statement's, its lines well formed (``index.*``)."""
    signed = SignedNote.parse(note)
    signed.verify([key])
    lines = signed.text.rstrip("\n").split("\n")
    if lines[0] != INDEX_HEADER:
        raise MalformedError(
            f"mesh-read index {lines[0][:40]!r} is not {INDEX_HEADER}", check="index.version"
        )
    root_b64 = base64.b64encode(cp.root).decode("ascii")
    if lines[1:4] != [f"origin {cp.origin}", f"size {cp.size}", f"root {root_b64}"]:
        raise ProofError("the mesh-read index is not bound to this checkpoint", check="index.binding")
    if len(lines) < 5 or lines[4] != _claim_line(statement):
        raise MeshIndexError("the mesh-read index is for another claim", check="index.claim")
    entries: dict[int, tuple[str, str]] = {}
    last = -1
    for line in lines[5:]:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] not in ROLES or not _HEX_HASH.fullmatch(parts[2]):
            raise MalformedError(f"bad index line {line[:80]!r}", check="index.format")
        index = parse_decimal(parts[1], check="index.format")
        if index <= last or index >= cp.size:
            raise MalformedError(
                "index lines are in strictly increasing order, below the checkpoint's size",
                check="index.format",
            )
        last = index
        entries[index] = (parts[0], parts[2])
    memory_index = int(str(statement["ref"]).split(".")[0])
    if [i for i, (r, _) in entries.items() if r == "memory"] != [memory_index]:
        raise MeshIndexError(
            "the index lists the memory's entry once, at its ref's index", check="index.format"
        )
    return MeshReadIndex(entries=entries)


def _agents(s: Mapping[str, Any]) -> tuple[str, str, str]:
    return str(s["agent"]), str(s["author"]), creator_of(str(s["mesh"]))


def _mismatch(index: int, role: str, what: str) -> MeshIndexError:
    return MeshIndexError(
        f"the log listed entry {index} as a {role} entry of this claim, but it is {what}: the index "
        "contradicts the entries it lists",
        check="index.mismatch",
    )


def _in_mesh_stream(s: Mapping[str, Any], leaf: Leaf) -> bool:
    """Whether the entry is in a stream the fold of the claim's mesh reads."""
    reader, author, creator = _agents(s)
    env = leaf.envelope
    return (env.agent == creator and env.kind in CREATOR_KINDS) or (
        env.agent in (reader, author) and env.kind in MEMBER_KINDS
    )


def _check_memory_disclosure(s: Mapping[str, Any], i: int, kind: str, body: Mapping[str, Any] | None) -> None:
    """A distilled memory is disclosed alone: the body in the per-entry form, the memory's
    entry an object, every other entry a digest (``claim.disclosure``; a distillation made
    before that form can only be disclosed whole, so it is never proven to a reader)."""
    if kind != "memory.distilled" or body is None:
        return
    pos = int(str(s["ref"]).split(".")[1])
    entries = body.get("entries")
    if body.get("disclosure") != PER_ENTRY or not isinstance(entries, list):
        raise MeshIndexError(
            f"entry {i} is a distillation without per-entry commitments: disclosing it would hand over "
            "every memory of its session",
            check="claim.disclosure",
        )
    shown = [n for n, e in enumerate(entries) if not isinstance(e, str)]
    if shown != [pos] and shown != []:
        raise MeshIndexError(
            f"entry {i} discloses the session's memories {shown}, not memory {pos} alone",
            check="claim.disclosure",
        )


def check_index(
    s: Mapping[str, Any],
    index: MeshReadIndex,
    leaves: Mapping[int, Leaf],
    bodies: Mapping[int, Mapping[str, Any] | None],
) -> None:
    """Every entry the index lists is carried (its leaf the one the log listed) and is what
    its role says (``index.missing``, ``index.leaf``, ``index.mismatch``); what must be
    disclosed is (``index.undisclosed``) and what must not be is not (``claim.disclosure``)."""
    _, author, _ = _agents(s)
    ref, mesh = str(s["ref"]), str(s["mesh"])
    for i, (role, leaf_hash) in sorted(index.entries.items()):
        leaf = leaves.get(i)
        if leaf is None:
            raise MeshIndexError(
                f"the index lists entry {i}, which the bundle does not carry", check="index.missing"
            )
        if leaf.hash.hex() != leaf_hash:
            raise MeshIndexError(f"entry {i} is not the leaf the index lists", check="index.leaf")
        env, body = leaf.envelope, bodies.get(i)
        what = f"a {env.kind} of {env.agent}"
        if role == "memory":
            _check_memory_disclosure(s, i, env.kind, body)
            continue  # the claim step judges the rest (its author, kind, status)
        if role == "mesh":
            if env.kind not in MESH_KINDS or not _in_mesh_stream(s, leaf):
                raise _mismatch(i, role, what)
            if body is not None and body.get("mesh") != mesh:
                raise _mismatch(i, role, f"{what} of another mesh")
            continue
        if env.agent != author:
            raise _mismatch(i, role, what)
        if role == "status":
            if env.kind not in DISCLOSED_STATUS_KINDS:
                raise _mismatch(i, role, what)
            if body is None:
                raise MeshIndexError(
                    f"entry {i} names the memory; its body is needed and not disclosed",
                    check="index.undisclosed",
                )
            if not names_memory(env.kind, body, ref):
                raise _mismatch(i, role, f"{what} that does not name memory {ref}")
        elif role in ("exempt", "use"):
            if env.kind != (EXEMPT_KIND if role == "exempt" else USE_KIND):
                raise _mismatch(i, role, what)
            if body is not None:
                raise MeshIndexError(
                    f"entry {i} ({env.kind}) is disclosed: its text is not the shared memory's",
                    check="claim.disclosure",
                )


def allowed_entries(
    statements: Sequence[Mapping[str, Any]],
    indexes: Sequence[MeshReadIndex],
    leaves: Mapping[int, Leaf],
    bodies: Mapping[int, Mapping[str, Any] | None],
) -> None:
    """A ``mesh_read`` bundle carries what its indexes list and the key history of the
    agents it names (leaves only), nothing else (``claim.disclosure``). An entry it carries
    that one of its indexes should have listed (of the claim's mesh in a stream its fold
    reads, or naming its memory) is a fraud proof against the log (``index.fraud``)."""
    agents = {POLICY_AGENT} | {a for s in statements for a in _agents(s)}
    listed = {i for idx in indexes for i in idx.entries}
    for i, leaf in sorted(leaves.items()):
        if i in listed:
            continue
        env, body = leaf.envelope, bodies.get(i)
        if env.kind in KEY_KINDS and env.agent in agents:
            if body is not None:
                raise MeshIndexError(f"entry {i}'s key event body is disclosed", check="claim.disclosure")
            continue
        for s, idx in zip(statements, indexes, strict=True):
            if body is None:
                continue  # nothing shows what it bears on
            of_mesh = env.kind in MESH_KINDS and _in_mesh_stream(s, leaf) and body.get("mesh") == s["mesh"]
            names = (
                env.agent == str(s["author"])
                and env.kind in (*DISCLOSED_STATUS_KINDS, EXEMPT_KIND)
                and i > idx.of("memory")[0]
                and names_memory(env.kind, body, str(s["ref"]))
            )
            bears = of_mesh or names
            if bears:
                raise ProofError(
                    f"fraud proof: entry {i} ({env.kind} of {env.agent}) bears on the claim "
                    f"{_claim_line(s)[6:]} and the log's index for it leaves the entry out",
                    check="index.fraud",
                )
        raise MeshIndexError(
            f"entry {i} ({env.kind} of {env.agent}) is not listed by the mesh-read index: a mesh_read "
            "bundle discloses nothing else",
            check="claim.disclosure",
        )

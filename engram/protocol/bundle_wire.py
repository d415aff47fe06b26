"""The attestation bundle's wire shape (specs/bundle.md), written once, on the producing side.

The log builds a bundle only through these values; :meth:`BundleDocument.to_bytes` is the one
place its JSON is written. The verifiers (``verifier/bundle.py`` and the TypeScript one in
``clients/ts``) import nothing of Engram, so they spell their member lists themselves; a test
(tests/unit/test_bundle_wire_shape.py) holds those lists equal to :func:`members` of these
classes, so that a member added here and not there (or there and not here) fails at once.

Each value checks its invariants when it is built (an entry discloses a body with its salt or
not at all, a consistency proof starts at a size no larger than the checkpoint's), so a bundle
the verifier would refuse for its shape is never written.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram.protocol.errors import MalformedError
from verifier.bundle import MEDIA_TYPE
from verifier.note import b64encode

__all__ = [
    "BundleConsistency",
    "BundleDocument",
    "BundleEntry",
    "Claim",
    "MeshReadStatement",
    "Statement",
    "members",
]


def members(cls: type) -> tuple[frozenset[str], frozenset[str]]:
    """(required, optional) wire members of a bundle value: its fields, those with a default
    being optional (written only when they differ from it)."""
    fields = dataclasses.fields(cls)
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING)
    optional = frozenset(f.name for f in fields if f.default is not dataclasses.MISSING)
    return required, optional


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """A ``count``, ``mean`` or ``exists`` statement over one agent's stream of ``kind``
    (specs/bundle.md), optionally over the bodies ``where`` matches, or of one ``field``."""

    predicate: str
    agent: str
    kind: str
    value: Any
    where: Mapping[str, Any] | None = None
    field: str | None = None

    def __post_init__(self) -> None:
        if self.predicate not in ("count", "mean", "exists"):
            raise MalformedError(f"unknown predicate {self.predicate!r}", check="claim")

    def to_json(self) -> dict[str, Any]:
        out = {"predicate": self.predicate, "agent": self.agent, "kind": self.kind, "value": self.value}
        if self.where is not None:
            out["where"] = dict(self.where)
        if self.field is not None:
            out["field"] = self.field
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshReadStatement:
    """Memory ``ref`` (an entry of ``kind`` by ``author``) was shared with ``agent`` through
    ``mesh`` (specs/bundle.md, ``mesh_read``); its value is always true."""

    predicate: str
    agent: str
    author: str
    mesh: str
    kind: str
    ref: str
    value: bool

    def __post_init__(self) -> None:
        if self.predicate != "mesh_read" or self.value is not True:
            raise MalformedError("a mesh_read statement is true", check="claim")

    @classmethod
    def of(cls, *, agent: str, author: str, mesh: str, kind: str, ref: str) -> MeshReadStatement:
        return cls(
            predicate="mesh_read", agent=agent, author=author, mesh=mesh, kind=kind, ref=ref, value=True
        )

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """What a bundle proves: its statements, in order."""

    statements: Sequence[Statement | MeshReadStatement]

    def __post_init__(self) -> None:
        if not self.statements:
            raise MalformedError("a claim holds at least one statement", check="claim")

    def to_json(self) -> dict[str, Any]:
        return {"statements": [s.to_json() for s in self.statements]}


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleEntry:
    """One entry: its leaf, its inclusion proof, and either its disclosed body (``salt`` and
    ``body``), or ``erased`` (the body was erased: the claim is then proven with its erasure),
    or neither (a key event or an entry whose body stays private)."""

    index: int
    leaf: bytes
    proof: Sequence[bytes]
    salt: bytes | None = None
    body: bytes | None = None
    erased: bool = False

    def __post_init__(self) -> None:
        if (self.salt is None) != (self.body is None):
            raise MalformedError("an entry discloses its body with its salt", check="bundle.entry")
        if self.erased and self.body is not None:
            raise MalformedError("an erased entry discloses no body", check="bundle.entry")
        if self.index < 0:
            raise MalformedError("an entry's index is not negative", check="bundle.entry")

    @classmethod
    def disclosing(
        cls, index: int, leaf: bytes, proof: Sequence[bytes], stored: tuple[bytes, bytes] | None
    ) -> BundleEntry:
        """The entry with its stored (salt, body), or marked erased when it has none."""
        if stored is None:
            return cls(index=index, leaf=leaf, proof=proof, erased=True)
        return cls(index=index, leaf=leaf, proof=proof, salt=stored[0], body=stored[1])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "leaf": b64encode(self.leaf),
            "proof": [b64encode(h) for h in self.proof],
        }
        if self.salt is not None and self.body is not None:
            out["salt"], out["body"] = b64encode(self.salt), b64encode(self.body)
        if self.erased:
            out["erased"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleConsistency:
    """A consistency proof from a checkpoint the buyer trusts (``old_size``) to the bundle's."""

    old_size: int
    proof: Sequence[bytes]

    def to_json(self) -> dict[str, Any]:
        return {"old_size": self.old_size, "proof": [b64encode(h) for h in self.proof]}


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleDocument:
    """A whole bundle: the cosigned checkpoint, the signed stream heads, the entries, the claim,
    and optionally consistency proofs, a share token and (for ``mesh_read`` claims only) the
    log's signed mesh-read indexes, one per statement."""

    media_type: str
    origin: str
    checkpoint: str
    stream_heads: str
    entries: Sequence[BundleEntry]
    claim: Mapping[str, Any]
    consistency: Sequence[BundleConsistency] = ()
    token: str | None = None
    mesh_indexes: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.media_type != MEDIA_TYPE:
            raise MalformedError(f"a bundle is {MEDIA_TYPE}", check="bundle.format")
        if not self.entries:
            raise MalformedError("a bundle holds at least one entry", check="bundle.format")
        reads = [s for s in self.claim.get("statements") or [] if s.get("predicate") == "mesh_read"]
        if len(self.mesh_indexes) != len(reads):
            raise MalformedError("one mesh-read index per mesh_read statement", check="bundle.format")

    @classmethod
    def of(cls, **kw: Any) -> BundleDocument:
        """A document of the current media type."""
        return cls(media_type=MEDIA_TYPE, **kw)

    def with_consistency(self, proofs: Sequence[BundleConsistency]) -> BundleDocument:
        return dataclasses.replace(self, consistency=tuple(proofs))

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "media_type": self.media_type,
            "origin": self.origin,
            "checkpoint": self.checkpoint,
            "stream_heads": self.stream_heads,
            "entries": [e.to_json() for e in self.entries],
            "claim": dict(self.claim),
        }
        if self.consistency:
            doc["consistency"] = [c.to_json() for c in self.consistency]
        if self.token is not None:
            doc["token"] = self.token
        if self.mesh_indexes:
            doc["mesh_indexes"] = list(self.mesh_indexes)
        return doc

    def to_bytes(self) -> bytes:
        """The bundle's bytes: sorted members, no whitespace."""
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True).encode()

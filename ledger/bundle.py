"""Building attestation bundles (specs/bundle.md) from the log, for the offline verifier.

A bundle proves a claim about an agent's records: it carries the latest checkpoint (with
the witnesses' cosignatures when the log has witnesses; it is submitted to them first), a
stream-head statement the log signs for that checkpoint (every stream of every agent
involved, so no stream can be left out), every entry of the claimed streams with its
inclusion proof and disclosed body, and the complete key history of the agent and of the
ledger's policy agent, so that signatures verify without trusting any key in the bundle.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from engram.protocol.bundle_wire import (
    BundleConsistency,
    BundleDocument,
    BundleEntry,
    Claim,
    MeshReadStatement,
    Statement,
)
from engram.protocol.errors import MalformedError
from ledger.log import Ledger
from ledger.mesh import MeshReader
from ledger.sharing import verify_share_token
from ledger.storage.store import StoredCheckpoint
from ledger.witnessing import ensure_witnessed
from verifier.bundle import MAX_CONSISTENCY_PROOFS, heads_text, mean_quality, verify_bundle
from verifier.errors import VerificationError
from verifier.event import DISCLOSURE_MEMBER, KEY_KINDS, PER_ENTRY, POLICY_AGENT, Leaf, disclose_entries
from verifier.jcs import canonical_bytes, parse_strict
from verifier.merkle import leaf_hash
from verifier.mesh import statement_agents, statement_streams
from verifier.mesh_index import index_text
from verifier.note import VerifierKey, sign_note

__all__ = ["create_bundle", "mesh_read_claim", "pact_claim"]


def pact_claim(ledger: Ledger, agent: str) -> dict[str, Any]:
    """The standard claim over an agent's pact outcomes: how many, how many fulfilled, mean quality."""

    size = ledger.size()
    bodies = [b for _, b in ledger.stream_bodies(agent, "pact.outcome", size) if b is not None]
    fulfilled = [b for b in bodies if b.get("result") == "fulfilled"]
    count = len(ledger.store.stream_indices(agent, "pact.outcome", size))
    statements = [
        Statement(predicate="count", agent=agent, kind="pact.outcome", value=count),
        Statement(
            predicate="count",
            agent=agent,
            kind="pact.outcome",
            where={"result": "fulfilled"},
            value=len(fulfilled),
        ),
    ]
    if bodies:
        mean = mean_quality([b["quality"] for b in bodies])
        statements.append(
            Statement(predicate="mean", agent=agent, kind="pact.outcome", field="quality", value=str(mean))
        )
    return Claim(statements=statements).to_json()


def create_bundle(
    ledger: Ledger,
    claim: Mapping[str, Any],
    *,
    trusted_size: int | None = None,
    trusted_sizes: Sequence[int] = (),
    token: str | None = None,
    audience: str | None = None,
    disclose_bodies: bool = True,
    at_size: int | None = None,
) -> bytes:
    """Everything the offline verifier needs to check ``claim`` at the latest checkpoint.

    ``trusted_size(s)``: sizes of checkpoints the buyer already holds; the bundle carries a
    consistency proof from each to its own checkpoint.

    ``at_size`` builds it at an earlier signed checkpoint instead (the oracle's evidence is
    built at its verdict's checkpoint). With ``disclose_bodies=False`` no body is included (leaves, proofs and stream heads
    only), so only claims that need no bodies (a ``count`` without ``where``) verify.

    The bundle is verified before it is returned, as its buyer will verify it: a claim the
    verifier would fail (a mean over an erased record, a count that is not the log's, a
    mesh_read that does not hold) is refused with ``bundle.<the failed check>`` (once,
    `engram bundle create` silently wrote a bundle whose own claim failed once a record was
    erased), and nothing is handed out."""
    data = _assemble(
        ledger,
        claim,
        trusted_size=trusted_size,
        trusted_sizes=trusted_sizes,
        token=token,
        audience=audience,
        disclose_bodies=disclose_bodies,
        at_size=at_size,
    )
    try:
        verify_bundle(data, VerifierKey.parse(ledger.vkey), audience=audience)
    except VerificationError as e:
        raise MalformedError(
            f"no bundle made: its verifier would fail it, {e}", check=f"bundle.{e.check}"
        ) from e
    return data


def _assemble(
    ledger: Ledger,
    claim: Mapping[str, Any],
    *,
    trusted_size: int | None,
    trusted_sizes: Sequence[int],
    token: str | None,
    audience: str | None,
    disclose_bodies: bool,
    at_size: int | None,
) -> bytes:
    """The bundle's bytes for ``claim``, as :func:`create_bundle` describes them, unchecked."""
    statements: Sequence[Mapping[str, Any]] = claim.get("statements") or []
    if not statements:
        raise MalformedError("a claim holds at least one statement", check="claim")
    if at_size is None:
        ensure_witnessed(ledger)
    cp = ledger.latest_checkpoint() if at_size is None else ledger.store.checkpoint(at_size)
    if cp is None:
        raise MalformedError(f"no checkpoint was signed at size {at_size}", check="bundle.size")
    if any(s.get("predicate") == "mesh_read" for s in statements):
        if token is not None or not disclose_bodies:
            raise MalformedError(
                "a mesh_read bundle carries no share token and discloses its bodies", check="claim"
            )
        doc = _mesh_read_document(ledger, cp, statements)
    else:
        doc = _claim_document(
            ledger, cp, claim, token=token, audience=audience, disclose_bodies=disclose_bodies
        )
    return _finish(ledger, doc, cp.size, trusted_size, trusted_sizes)


def _claim_document(
    ledger: Ledger,
    cp: StoredCheckpoint,
    claim: Mapping[str, Any],
    *,
    token: str | None,
    audience: str | None,
    disclose_bodies: bool,
) -> BundleDocument:
    """A bundle over whole streams: every entry of the claimed streams (and of the claimed
    agents' erasures, and their revocations under a token), every key event of the agents
    involved, the bodies disclosed where the claim needs them."""
    size = cp.size
    statements: Sequence[Mapping[str, Any]] = claim["statements"]
    claimed = {st for s in statements for st in statement_streams(s)}
    claim_agents = {a for s in statements for a in statement_agents(s)}
    agents = sorted(claim_agents | {POLICY_AGENT})
    heads = [h for a in agents for h in ledger.store.heads_at(a, size)]
    if token is not None:
        _check_token_first(ledger, token, audience, claim_agents, {k for _, k in claimed})
    included = _included_streams(heads, claimed, claim_agents, shared=token is not None)
    disclosed = included if disclose_bodies else set()
    wanted = included | {(h.agent, h.kind) for h in heads if h.kind in KEY_KINDS}
    indices = sorted({i for a, k in wanted for i in ledger.store.stream_indices(a, k, size)})
    proofs = ledger.prove_inclusion_many(indices, size) if indices else []
    return BundleDocument.of(
        origin=ledger.origin,
        checkpoint=ledger.cosigned_note(cp).decode("utf-8"),
        # Every agent the statement names is covered: its streams were all enumerated
        # (heads_at), so a stream of it that the statement does not list is empty.
        stream_heads=_signed_heads(ledger, cp, heads, agents),
        entries=[
            _stream_entry(ledger, i, proof.hashes, claimed, disclosed)
            for i, proof in zip(indices, proofs, strict=True)
        ],
        claim=dict(claim),
        token=token,
    )


def _included_streams(
    heads: Sequence[Any], claimed: set[tuple[str, str]], claim_agents: set[str], *, shared: bool
) -> set[tuple[str, str]]:
    """The streams whose entries a whole-stream bundle carries: the claimed ones, the claimed
    agents' erasures (an erased entry is proven with its erasure) and, under a share token,
    their revocations (the verifier checks the token was not revoked)."""
    own = [(h.agent, h.kind) for h in heads if h.agent in claim_agents]
    erasures = {st for st in own if st[1] == "memory.erased"}
    revocations = {st for st in own if st[1] == "share.revoked"} if shared else set()
    return claimed | erasures | revocations


def _stream_entry(
    ledger: Ledger,
    index: int,
    proof: Sequence[bytes],
    claimed: set[tuple[str, str]],
    disclosed: set[tuple[str, str]],
) -> BundleEntry:
    """Entry ``index`` of a whole-stream bundle, its body disclosed when its stream is."""
    leaf = ledger.store.leaf(index)
    assert leaf is not None
    stream = Leaf.from_bytes(leaf).envelope.stream
    if stream not in disclosed:
        return BundleEntry(index=index, leaf=leaf, proof=proof)  # key history: the leaf proves the key
    stored = ledger.store.body(index)
    if (
        stream[1] == "memory.erased"
        and stream not in claimed
        and not _erases_claimed(ledger, stored, claimed)
    ):
        # an erasure of something the claim does not cover: its reason stays private
        return BundleEntry(index=index, leaf=leaf, proof=proof)
    return BundleEntry.disclosing(index, leaf, proof, stored)


def _signed_heads(ledger: Ledger, cp: StoredCheckpoint, heads: Sequence[Any], agents: Sequence[str]) -> str:
    """The log's signed stream-head statement for ``agents`` at checkpoint ``cp``."""
    root_b64 = base64.b64encode(cp.root).decode("ascii")
    text = heads_text(
        ledger.origin,
        cp.size,
        root_b64,
        [(h.agent, h.kind, h.version, h.index, h.leaf_hash.hex()) for h in heads],
        agents=agents,
    )
    return sign_note(text, ledger.origin, ledger.log_key.private_key).decode("utf-8")


def _finish(
    ledger: Ledger, doc: BundleDocument, size: int, trusted_size: int | None, trusted_sizes: Sequence[int]
) -> bytes:
    """The consistency proofs from the sizes the buyer trusts, and the bundle's bytes."""
    olds = sorted({*trusted_sizes, *([] if trusted_size is None else [trusted_size])})
    if len(olds) > MAX_CONSISTENCY_PROOFS:
        raise MalformedError(
            f"at most {MAX_CONSISTENCY_PROOFS} trusted sizes per bundle", check="bundle.trusted_size"
        )
    consistency = []
    for old in olds:
        if not 0 <= old <= size:
            raise MalformedError(
                f"trusted size {old} is beyond the bundle's checkpoint ({size})", check="bundle.trusted_size"
            )
        consistency.append(BundleConsistency(old_size=old, proof=ledger.prove_consistency(old, size).hashes))
    return doc.with_consistency(consistency).to_bytes()


def _mesh_read_document(
    ledger: Ledger, cp: StoredCheckpoint, statements: Sequence[Mapping[str, Any]]
) -> BundleDocument:
    """A ``mesh_read`` bundle (specs/bundle.md): per statement the log's signed mesh-read
    index and exactly the entries it lists, with the bodies it needs (the memory alone, a
    distillation's other memories as digests; the entries that name it; its mesh's entries),
    and the key history of the agents it names, leaves only. Nothing of the creator's other
    meshes or the author's other memories."""
    if not all(s.get("predicate") == "mesh_read" for s in statements):
        raise MalformedError(
            "a bundle with a mesh_read statement makes mesh_read statements only", check="claim"
        )
    size = cp.size
    agents = sorted({a for s in statements for a in statement_agents(s)} | {POLICY_AGENT})
    heads = [h for a in agents for h in ledger.store.heads_at(a, size)]
    listed = _mesh_read_indexes(ledger, statements, size)
    roles: dict[int, str] = {}
    for index in listed:
        for role, i in index:
            roles.setdefault(i, role)
    keys = {
        i for h in heads if h.kind in KEY_KINDS for i in ledger.store.stream_indices(h.agent, h.kind, size)
    }
    indices = sorted(set(roles) | keys)
    proofs = ledger.prove_inclusion_many(indices, size)
    entries = [
        _mesh_entry(ledger, i, proof.hashes, roles.get(i), statements)
        for i, proof in zip(indices, proofs, strict=True)
    ]
    hashes = {e.index: leaf_hash(e.leaf).hex() for e in entries}
    return BundleDocument.of(
        origin=ledger.origin,
        checkpoint=ledger.cosigned_note(cp).decode("utf-8"),
        stream_heads=_signed_heads(ledger, cp, heads, agents),
        entries=entries,
        claim={"statements": [dict(s) for s in statements]},
        mesh_indexes=[
            _signed_index(ledger, cp, s, index, hashes) for s, index in zip(statements, listed, strict=True)
        ],
    )


def _mesh_read_indexes(
    ledger: Ledger, statements: Sequence[Mapping[str, Any]], size: int
) -> list[list[tuple[str, int]]]:
    """The log's mesh-read index of each statement: (role, entry index) pairs."""
    reader = MeshReader(ledger.store)
    listed = []
    for s in statements:
        if int(str(s["ref"]).split(".")[0]) >= size:
            raise MalformedError("the memory is not in the checkpoint yet", check="bundle.size")
        listed.append(reader.read_index(s, size))
    return listed


def _mesh_entry(
    ledger: Ledger,
    index: int,
    proof: Sequence[bytes],
    role: str | None,
    statements: Sequence[Mapping[str, Any]],
) -> BundleEntry:
    leaf = ledger.store.leaf(index)
    assert leaf is not None
    body = _disclosed(ledger, index, role, statements)
    if body is None:
        return BundleEntry(index=index, leaf=leaf, proof=proof)
    return BundleEntry(index=index, leaf=leaf, proof=proof, salt=body[0], body=body[1])


def _signed_index(
    ledger: Ledger,
    cp: StoredCheckpoint,
    statement: Mapping[str, Any],
    index: Sequence[tuple[str, int]],
    hashes: Mapping[int, str],
) -> str:
    """The log's signed mesh-read index note of one statement."""
    root_b64 = base64.b64encode(cp.root).decode("ascii")
    note = index_text(
        ledger.origin, cp.size, root_b64, statement, [(role, i, hashes[i]) for role, i in index]
    )
    if len(note.encode()) > MAX_INDEX_TEXT:
        raise MalformedError(
            f"the mesh-read index of {statement['ref']} lists {len(index)} entries, more than one note holds",
            check="bundle.index_size",
        )
    return sign_note(note, ledger.origin, ledger.log_key.private_key).decode("utf-8")


#: A signed note is at most 64 KiB (verifier.note); its signature line takes under 200 bytes.
MAX_INDEX_TEXT = 64 * 1024 - 256


def _disclosed(
    ledger: Ledger, index: int, role: str | None, statements: Sequence[Mapping[str, Any]]
) -> tuple[bytes, bytes] | None:
    """The (salt, body) a mesh_read bundle discloses for an entry of ``role``: the memory's
    (a distillation's with its other memories as digests), a status change's, a mesh
    entry's; nothing for a use, an exemption or a key event."""
    if role not in ("memory", "status", "mesh"):
        return None
    stored = ledger.store.body(index)
    if stored is None or role != "memory":
        return stored
    salt, raw = stored
    leaf = ledger.store.leaf(index)
    assert leaf is not None
    if Leaf.from_bytes(leaf).envelope.kind != "memory.distilled":
        return stored
    body = parse_strict(raw, max_bytes=1 << 20)
    positions = {
        int(str(s["ref"]).split(".")[1]) for s in statements if int(str(s["ref"]).split(".")[0]) == index
    }
    if body.get(DISCLOSURE_MEMBER) != PER_ENTRY:
        raise MalformedError(
            f"entry {index} is a distillation made before per-entry commitments: its memories cannot be "
            "disclosed one at a time, and disclosing it whole would hand over the session's other memories",
            check="bundle.disclosure",
        )
    return salt, canonical_bytes(disclose_entries(body, positions))


def _erases_claimed(ledger: Ledger, sb: tuple[bytes, bytes] | None, claimed: set[tuple[str, str]]) -> bool:
    """Whether an erasure (its stored body) erased an entry of a claimed stream: only then
    is its body needed (it proves that entry's ``erased`` mark) and disclosed."""
    if sb is None:
        return False
    target = ledger.store.leaf(int(parse_strict(sb[1], max_bytes=1 << 20)["index"]))
    return target is not None and Leaf.from_bytes(target).envelope.stream in claimed


def _check_token_first(
    ledger: Ledger, token: str, audience: str | None, agents: set[str], kinds: set[str]
) -> None:
    """Nothing is disclosed under a token that does not allow it: verify before building."""
    if audience is None:
        raise MalformedError("a bundle with a share token is built for one audience", check="token.audience")
    if len(agents) != 1:
        raise MalformedError("a bundle with a share token makes claims about one agent", check="claim")
    (agent,) = agents
    verify_share_token(ledger, token, agent=agent, audience=audience, kinds=kinds)


def mesh_read_claim(ledger: Ledger, reader: str, mesh: str, ref: str) -> dict[str, Any]:
    """The claim that memory ``ref`` was shared with ``reader`` through ``mesh``: its author
    and entry kind read from the log (specs/bundle.md, ``mesh_read``)."""
    raw = ledger.store.leaf(int(ref.split(".")[0]))
    if raw is None:
        raise MalformedError(f"there is no entry {ref.split('.')[0]}", check="bundle.ref")
    env = Leaf.from_bytes(raw).envelope
    statement = MeshReadStatement.of(agent=reader, author=env.agent, mesh=mesh, kind=env.kind, ref=ref)
    return Claim(statements=[statement]).to_json()

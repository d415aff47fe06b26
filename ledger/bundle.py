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
import json
from collections.abc import Mapping, Sequence
from typing import Any

from engram.protocol.errors import MalformedError
from ledger.log import Ledger
from ledger.mesh import MeshReader
from ledger.sharing import verify_share_token
from ledger.storage.store import StoredCheckpoint
from ledger.witnessing import ensure_witnessed
from verifier.bundle import MAX_CONSISTENCY_PROOFS, MEDIA_TYPE, heads_text, mean_quality, verify_bundle
from verifier.errors import VerificationError
from verifier.event import DISCLOSURE_MEMBER, KEY_KINDS, PER_ENTRY, POLICY_AGENT, Leaf, disclose_entries
from verifier.jcs import canonical_bytes, parse_strict
from verifier.merkle import leaf_hash
from verifier.mesh import statement_agents, statement_streams
from verifier.mesh_index import index_text
from verifier.note import VerifierKey, b64encode, sign_note

__all__ = ["create_bundle", "mesh_read_claim", "pact_claim"]


def pact_claim(ledger: Ledger, agent: str) -> dict[str, Any]:
    """The standard claim over an agent's pact outcomes: how many, how many fulfilled, mean quality."""

    size = ledger.size()
    bodies = [b for _, b in ledger.stream_bodies(agent, "pact.outcome", size) if b is not None]
    fulfilled = [b for b in bodies if b.get("result") == "fulfilled"]
    statements: list[dict[str, Any]] = [
        {
            "predicate": "count",
            "agent": agent,
            "kind": "pact.outcome",
            "value": len(ledger.store.stream_indices(agent, "pact.outcome", size)),
        },
        {
            "predicate": "count",
            "agent": agent,
            "kind": "pact.outcome",
            "where": {"result": "fulfilled"},
            "value": len(fulfilled),
        },
    ]
    if bodies:
        mean = mean_quality([b["quality"] for b in bodies])
        statements.append(
            {
                "predicate": "mean",
                "agent": agent,
                "kind": "pact.outcome",
                "field": "quality",
                "value": str(mean),
            }
        )
    return {"statements": statements}


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
    mesh_read that does not hold) is refused with ``bundle.<the failed check>`` (issue 40:
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
    size = cp.size
    if any(s.get("predicate") == "mesh_read" for s in statements):
        if token is not None or not disclose_bodies:
            raise MalformedError(
                "a mesh_read bundle carries no share token and discloses its bodies", check="claim"
            )
        mesh_doc = _mesh_read_document(ledger, cp, statements)
        return _finish(ledger, mesh_doc, size, trusted_size, trusted_sizes)
    claimed = {st for s in statements for st in statement_streams(s)}
    claim_agents = {a for s in statements for a in statement_agents(s)}
    agents = sorted(claim_agents | {POLICY_AGENT})
    heads = [h for a in agents for h in ledger.store.heads_at(a, size)]
    # A mesh_read names one memory entry: proven and disclosed, its stream not claimed whole.
    memories = {int(str(s["ref"]).split(".")[0]) for s in statements if s.get("predicate") == "mesh_read"}
    if any(i >= size for i in memories):
        raise MalformedError("the memory is not in the checkpoint yet", check="bundle.size")
    if token is not None:
        _check_token_first(ledger, token, audience, claim_agents, {k for _, k in claimed})
    revocations = {(h.agent, h.kind) for h in heads if h.kind == "share.revoked" and h.agent in claim_agents}
    erasures = {(h.agent, h.kind) for h in heads if h.kind == "memory.erased" and h.agent in claim_agents}
    included = claimed | erasures | (revocations if token is not None else set())
    disclosed = included if disclose_bodies else set()
    wanted = included | {(h.agent, h.kind) for h in heads if h.kind in KEY_KINDS}
    indices = sorted({i for a, k in wanted for i in ledger.store.stream_indices(a, k, size)} | memories)
    proofs = ledger.prove_inclusion_many(indices, size) if indices else []
    entries = []
    for i, proof in zip(indices, proofs, strict=True):
        leaf = ledger.store.leaf(i)
        assert leaf is not None
        entry: dict[str, Any] = {
            "index": i,
            "leaf": b64encode(leaf),
            "proof": [b64encode(h) for h in proof.hashes],
        }
        sb = ledger.store.body(i)
        stream = Leaf.from_bytes(leaf).envelope.stream
        if i in memories and disclose_bodies:
            if sb is None:
                entry["erased"] = True  # fails the claim, proven only with its erasure
            else:
                entry["salt"], entry["body"] = b64encode(sb[0]), b64encode(sb[1])
        elif stream not in disclosed:
            pass  # key history: the leaf proves the key; its body is not disclosed
        elif (
            stream[1] == "memory.erased"
            and stream not in claimed
            and not _erases_claimed(ledger, sb, claimed)
        ):
            pass  # an erasure of something the claim does not cover: its reason stays private
        elif sb is None:
            entry["erased"] = True
        else:
            entry["salt"], entry["body"] = b64encode(sb[0]), b64encode(sb[1])
        entries.append(entry)
    root_b64 = base64.b64encode(cp.root).decode("ascii")
    # Every agent the statement names is covered: its streams were all enumerated above
    # (heads_at), so a stream of it that the statement does not list is empty.
    text = heads_text(
        ledger.origin,
        size,
        root_b64,
        [(h.agent, h.kind, h.version, h.index, h.leaf_hash.hex()) for h in heads],
        agents=agents,
    )
    doc: dict[str, Any] = {
        "media_type": MEDIA_TYPE,
        "origin": ledger.origin,
        "checkpoint": ledger.cosigned_note(cp).decode("utf-8"),
        "stream_heads": sign_note(text, ledger.origin, ledger.log_key.private_key).decode("utf-8"),
        "entries": entries,
        "claim": dict(claim),
    }
    if token is not None:
        doc["token"] = token
    return _finish(ledger, doc, size, trusted_size, trusted_sizes)


def _finish(
    ledger: Ledger, doc: dict[str, Any], size: int, trusted_size: int | None, trusted_sizes: Sequence[int]
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
        cons = ledger.prove_consistency(old, size)
        consistency.append({"old_size": old, "proof": [b64encode(h) for h in cons.hashes]})
    if consistency:
        doc["consistency"] = consistency
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def _mesh_read_document(
    ledger: Ledger, cp: StoredCheckpoint, statements: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
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
    reader = MeshReader(ledger.store)
    agents = sorted({a for s in statements for a in statement_agents(s)} | {POLICY_AGENT})
    heads = [h for a in agents for h in ledger.store.heads_at(a, size)]
    roles: dict[int, str] = {}
    listed: list[list[tuple[str, int]]] = []
    for s in statements:
        memory = int(str(s["ref"]).split(".")[0])
        if memory >= size:
            raise MalformedError("the memory is not in the checkpoint yet", check="bundle.size")
        index = reader.read_index(s, size)
        listed.append(index)
        for role, i in index:
            roles.setdefault(i, role)
    keys = {
        i for h in heads if h.kind in KEY_KINDS for i in ledger.store.stream_indices(h.agent, h.kind, size)
    }
    indices = sorted(set(roles) | keys)
    proofs = ledger.prove_inclusion_many(indices, size)
    hashes: dict[int, str] = {}
    entries = []
    for i, proof in zip(indices, proofs, strict=True):
        leaf = ledger.store.leaf(i)
        assert leaf is not None
        hashes[i] = leaf_hash(leaf).hex()
        entry: dict[str, Any] = {
            "index": i,
            "leaf": b64encode(leaf),
            "proof": [b64encode(h) for h in proof.hashes],
        }
        body = _disclosed(ledger, i, roles.get(i), statements)
        if body is not None:
            entry["salt"], entry["body"] = b64encode(body[0]), b64encode(body[1])
        entries.append(entry)
    root_b64 = base64.b64encode(cp.root).decode("ascii")
    text = heads_text(
        ledger.origin,
        size,
        root_b64,
        [(h.agent, h.kind, h.version, h.index, h.leaf_hash.hex()) for h in heads],
        agents=agents,
    )
    notes = []
    for s, index in zip(statements, listed, strict=True):
        note = index_text(ledger.origin, size, root_b64, s, [(role, i, hashes[i]) for role, i in index])
        if len(note.encode()) > MAX_INDEX_TEXT:
            raise MalformedError(
                f"the mesh-read index of {s['ref']} lists {len(index)} entries, more than one note holds",
                check="bundle.index_size",
            )
        notes.append(sign_note(note, ledger.origin, ledger.log_key.private_key).decode("utf-8"))
    return {
        "media_type": MEDIA_TYPE,
        "origin": ledger.origin,
        "checkpoint": ledger.cosigned_note(cp).decode("utf-8"),
        "stream_heads": sign_note(text, ledger.origin, ledger.log_key.private_key).decode("utf-8"),
        "entries": entries,
        "claim": {"statements": [dict(s) for s in statements]},
        "mesh_indexes": notes,
    }


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
    return {
        "statements": [
            {
                "predicate": "mesh_read",
                "agent": reader,
                "author": env.agent,
                "mesh": mesh,
                "kind": env.kind,
                "ref": ref,
                "value": True,
            }
        ]
    }

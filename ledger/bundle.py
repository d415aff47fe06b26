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
from ledger.sharing import verify_share_token
from ledger.witnessing import ensure_witnessed
from verifier.bundle import MAX_CONSISTENCY_PROOFS, MEDIA_TYPE, heads_text, mean_quality
from verifier.event import KEY_KINDS, POLICY_AGENT, Leaf
from verifier.mesh import statement_agents, statement_streams
from verifier.note import b64encode, sign_note

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
    only), so only claims that need no bodies (a ``count`` without ``where``) verify."""
    statements: Sequence[Mapping[str, Any]] = claim.get("statements") or []
    if not statements:
        raise MalformedError("a claim holds at least one statement", check="claim")
    if at_size is None:
        ensure_witnessed(ledger)
    cp = ledger.latest_checkpoint() if at_size is None else ledger.store.checkpoint(at_size)
    if cp is None:
        raise MalformedError(f"no checkpoint was signed at size {at_size}", check="bundle.size")
    size = cp.size
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


def _erases_claimed(ledger: Ledger, sb: tuple[bytes, bytes] | None, claimed: set[tuple[str, str]]) -> bool:
    """Whether an erasure (its stored body) erased an entry of a claimed stream: only then
    is its body needed (it proves that entry's ``erased`` mark) and disclosed."""
    from verifier.jcs import parse_strict

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

"""An item's proof as an agent (or a share token's audience) reads it: the answer of ``GET
/v1/agents/{agent}/memory/{ref}`` or of the ``item`` query, read into the protocol's
:class:`~engram.protocol.answers.ItemProof` (:func:`item_proof_of`) and verified against
the log key (:func:`verify_item_proof`): nothing a service says about an item is trusted
until its leaf, inclusion proof and signed body agree with it. :mod:`engram.client.http`
re-exports both names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engram.protocol.answers import EntryProof, ItemProof, ItemRow
from engram.protocol.errors import MalformedError, ProofError
from engram.protocol.kinds import kinds_where
from engram.protocol.records import RECORD_KINDS, record_content
from engram.protocol.schemas import parse_ref
from verifier.event import Envelope, Leaf, verify_body
from verifier.merkle import verify_inclusion
from verifier.note import VerifiedCheckpoint, VerifierKey, b64decode_strict, verify_checkpoint

__all__ = ["item_proof_of", "verify_item_proof"]

_RECORDS = kinds_where(group="record")
_TEXT_KINDS = kinds_where(items=("body", "entries"))  # the item's content is the body's


def _unb64(s: str) -> bytes:
    return b64decode_strict(s, check="response.base64")


def item_proof_of(out: Mapping[str, Any]) -> ItemProof:
    """An item answer's JSON (``GET /v1/agents/{agent}/memory/{ref}``) as the protocol's
    value; nothing in it is verified yet (:func:`verify_item_proof`). An answer of the
    wrong shape is a :class:`ProofError` (``item.answer``)."""
    try:
        return _item_proof_of(out)
    except (KeyError, TypeError, ValueError, AttributeError, MalformedError) as e:
        raise ProofError(f"the item answer is malformed: {e}", check="item.answer") from None


def _item_proof_of(out: Mapping[str, Any]) -> ItemProof:
    item, inc = out["item"], out["inclusion"]
    if inc.get("checkpoint") is None:
        raise ProofError("the item comes without a signed checkpoint", check="item.ref")
    return ItemProof(
        item=ItemRow.of(item),
        entry=EntryProof(
            index=int(item["index"]),
            leaf=_unb64(out["leaf"]),
            leaf_hash=bytes.fromhex(inc["leaf_hash"]),
            size=int(inc["size"]),
            root=_unb64(inc["root"]),
            proof=tuple(_unb64(h) for h in inc["proof"]),
            checkpoint=str(inc["checkpoint"]).encode("utf-8"),
        ),
        salt=None if out.get("salt") is None else _unb64(out["salt"]),
        body=None if out.get("body") is None else _unb64(out["body"]),
    )


def verify_item_proof(
    out: ItemProof | Mapping[str, Any], log_key: VerifierKey, *, agent: str, ref: str
) -> tuple[Leaf, VerifiedCheckpoint]:
    """The item ``ref`` of ``agent`` (an :class:`ItemProof`, or the JSON the service
    answers), checked in order:

    1. the answer is the item asked for (``item.ref``);
    2. its leaf is ``agent``'s entry at the ref's index, included in a checkpoint the log key
       signed (``item.index``, ``item.leaf``, the proof);
    3. an erased item is an empty tombstone without a body, over an entry that made items
       (``item.erased``);
    4. otherwise the body is returned, matches the leaf's commitment, and the item's content
       and category are the body's (``item.leaf``, ``item.body``, ``item.ref``,
       ``item.content``)."""
    p = out if isinstance(out, ItemProof) else item_proof_of(out)
    if p.item.ref != ref:  # (1)
        raise ProofError("the answer is not the item asked for, with a signed checkpoint", check="item.ref")
    index, pos = parse_ref(ref)
    leaf, cp = _included_leaf(p, log_key, agent=agent, index=index)  # (2)
    if p.item.status == "erased":  # (3)
        _check_tombstone(p, leaf.envelope.kind)
    else:  # (4)
        _check_signed_text(p, leaf.envelope, pos)
    return leaf, cp


def _included_leaf(
    p: ItemProof, log_key: VerifierKey, *, agent: str, index: int
) -> tuple[Leaf, VerifiedCheckpoint]:
    item, entry = p.item, p.entry
    cp = verify_checkpoint(entry.checkpoint, log_key)
    leaf = Leaf.from_bytes(entry.leaf, origin=cp.origin)
    if leaf.index != index or item.index != index or entry.index != index or entry.size != cp.size:
        raise ProofError("the item's leaf or proof names another entry", check="item.index")
    if leaf.envelope.agent != agent:
        raise ProofError(f"the item's leaf is {leaf.envelope.agent}'s, not {agent}'s", check="item.leaf")
    verify_inclusion(
        leaf_hash=leaf.hash, index=leaf.index, size=cp.size, proof=list(entry.proof), root=cp.root
    )
    return leaf, cp


def _check_tombstone(p: ItemProof, kind: str) -> None:
    """A tombstone claims nothing: empty, no body, over an entry that made items."""
    item = p.item
    if (
        item.source_kind != "memory.erased"
        or item.content != ""
        or p.body is not None
        or kind not in _TEXT_KINDS | _RECORDS
    ):
        raise ProofError("an erased item is an empty tombstone without a body", check="item.erased")


def _check_signed_text(p: ItemProof, env: Envelope, pos: int) -> None:
    item = p.item
    if env.kind != item.source_kind:
        raise ProofError(f"the item's leaf is a {env.kind}, not a {item.source_kind}", check="item.leaf")
    if p.body is None or p.salt is None:
        raise ProofError("the item comes without the body that makes it", check="item.body")
    body = verify_body(env, p.salt, p.body)
    content: Any
    category: Any
    if env.kind in _RECORDS:
        if pos != 0:
            raise ProofError("a single-item entry has only position 0", check="item.ref")
        content, category = record_content(env.kind, body), RECORD_KINDS[env.kind]
    else:
        source = _signed_source(env.kind, body, pos)
        content, category = source.get("content"), source.get("category", item.category)
    if content != item.content or category != item.category:
        raise ProofError("the item's content is not what the agent signed", check="item.content")


def _signed_source(kind: str, body: Mapping[str, Any], pos: int) -> Mapping[str, Any]:
    """The part of a signed body that made item ``pos``: a distillation's entry, else the body."""
    if kind != "memory.distilled":
        if pos != 0:
            raise ProofError("a single-item entry has only position 0", check="item.ref")
        return body
    entries = body.get("entries")
    if not isinstance(entries, list) or not 0 <= pos < len(entries) or not isinstance(entries[pos], dict):
        raise ProofError("the item's position is not an entry of the distillation", check="item.ref")
    source: Mapping[str, Any] = entries[pos]
    return source

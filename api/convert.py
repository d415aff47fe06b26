"""Conversions from ledger values to the API's response models (base64 for bytes)."""

import dataclasses

from api.schemas import InclusionOut, ItemOut, ItemProofOut, RecalledOut, ReceiptOut
from engram.protocol.answers import ItemProof
from ledger.log import InclusionProof, Receipt
from ledger.memory.block import RecallLine
from ledger.memory.state import Item
from verifier.note import b64encode

b64 = b64encode  # bytes in responses: standard base64 (specs/http-api.md)


def receipt(r: Receipt) -> ReceiptOut:
    return ReceiptOut(
        index=r.index,
        timestamp_us=r.timestamp_us,
        leaf_hash=r.leaf_hash.hex(),
        leaf=b64(r.leaf),
        agent=r.agent,
        kind=r.kind,
        version=r.version,
        checkpoint=r.checkpoint.decode("utf-8"),
        proof=[b64(h) for h in r.proof.hashes],
    )


def inclusion(p: InclusionProof) -> InclusionOut:
    return InclusionOut(
        index=p.index,
        size=p.size,
        leaf_hash=p.leaf_hash.hex(),
        root=b64(p.root),
        proof=[b64(h) for h in p.hashes],
        checkpoint=None if p.checkpoint is None else p.checkpoint.decode("utf-8"),
    )


def item(i: Item) -> ItemOut:
    fields = dataclasses.asdict(i)
    return ItemOut.model_validate({k: fields[k] for k in ItemOut.model_fields})


def item_proof(p: ItemProof) -> ItemProofOut:
    e = p.entry
    return ItemProofOut(
        item=ItemOut.model_validate(p.item.to_json()),
        leaf=b64(e.leaf),
        inclusion=InclusionOut(
            index=e.index,
            size=e.size,
            leaf_hash=e.leaf_hash.hex(),
            root=b64(e.root),
            proof=[b64(h) for h in e.proof],
            checkpoint=e.checkpoint.decode("utf-8"),
        ),
        salt=None if p.salt is None else b64(p.salt),
        body=None if p.body is None else b64(p.body),
    )


def recalled(r: RecallLine) -> RecalledOut:
    """The one recall row (ledger.memory.block), as the HTTP answer validates it."""
    return RecalledOut.model_validate(r.to_json())

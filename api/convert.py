"""Conversions from ledger values to the API's response models (base64 for bytes)."""

import base64
import json

from api.schemas import InclusionOut, ItemOut, RecalledOut, ReceiptOut
from ledger.log import InclusionProof, Receipt
from ledger.memory.recall import Recalled
from ledger.memory.state import Item


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


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
    return ItemOut(
        ref=i.ref,
        index=i.index,
        source_kind=i.source_kind,
        tier=i.tier,
        status=i.status,
        category=i.category,
        content=i.content,
        tags=list(i.tags),
        confidence=i.confidence,
        confirmations=i.confirmations,
        access_count=i.access_count,
        last_access_us=i.last_access_us,
        created_us=i.created_us,
        decay_exempt=i.decay_exempt,
        provenance=[dict(p) for p in i.provenance],
        tier_history=json.loads(json.dumps(i.tier_history)),
        session=i.session,
        superseded_by=i.superseded_by,
        supersedes=i.supersedes,
    )


def recalled(r: Recalled) -> RecalledOut:
    return RecalledOut(
        index=r.index,
        ref=r.ref,
        tier=r.tier,
        category=r.category,
        content=r.content,
        tags=list(r.tags),
        confidence=r.confidence,
        age_days=r.age_days,
        score=r.score,
        verify=r.verify,
    )

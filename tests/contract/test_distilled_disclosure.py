"""A distilled session's memories can be disclosed one at a time (issue 40, Deliver 1), on
both backends: the service writes every distillation in the per-entry form, each entry with
its own random nonce, so a body with all but one entry given as digests opens the signed
commitment and says nothing of the others."""

from __future__ import annotations

from collections.abc import Callable

from engram.client.sdk import Agent
from engram.protocol.redact import redact_body
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf
from verifier.event import PER_ENTRY, Leaf, disclose_entries, entry_digest, verify_body
from verifier.jcs import canonical_bytes, parse_strict


def test_a_distillation_commits_to_each_memory_on_its_own(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session()
    ada.turn(sid, "user", "Jo: I started pottery lessons at the community center.")
    ada.turn(sid, "assistant", "Ana: Wow, lovely!")
    ada.turn(sid, "user", "Jo: My home address is 12 Rua Augusta in Lisbon.")
    closed = ada.close_session(sid)
    assert closed.entries == 2 and closed.distilled is not None
    stored = memory.ledger.store.body(closed.distilled)
    leaf = memory.ledger.store.leaf(closed.distilled)
    assert stored is not None and leaf is not None
    salt, raw = stored
    body = parse_strict(raw, max_bytes=1 << 20)
    assert body["disclosure"] == PER_ENTRY
    nonces = [e["nonce"] for e in body["entries"]]
    assert len(set(nonces)) == len(nonces) == 2 and all(len(n) == 32 for n in nonces)
    envelope = Leaf.from_bytes(leaf).envelope
    assert verify_body(envelope, salt, raw) == body  # the whole body, as stored
    one = disclose_entries(body, {0})
    shown = verify_body(envelope, salt, canonical_bytes(one))
    assert shown["entries"][0] == body["entries"][0]
    assert shown["entries"][1] == entry_digest(body["entries"][1])
    assert "Rua Augusta" not in canonical_bytes(one).decode()
    # the projection reads the stored body as before
    texts = [it.content for it in memory.projection.items("ada", status=None) if it.index == closed.distilled]
    assert any("pottery" in t for t in texts) and any("Rua Augusta" in t for t in texts)


def test_redaction_leaves_the_nonces_of_a_distillation_alone() -> None:
    """The signer redacts every string of every body before it commits to it: a nonce must
    pass unchanged, or the entry would lose the randomness that hides it."""
    body = {
        "session": "s",
        "disclosure": PER_ENTRY,
        "entries": [
            {"category": "LEARNING", "content": "x", "confidence": 1, "nonce": n}
            for n in ("0123456789abcdef0123456789abcdef", "f" * 32, "9a" * 16)
        ],
    }
    assert redact_body(body) == body

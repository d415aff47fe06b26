"""Issue 43 (Deliver 4): the agents of one process verify the checkpoint note a batch's
receipts share once; a note that does not verify is refused every time."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from engram.client import sdk
from engram.client.sdk import Agent
from engram.protocol.errors import SignatureError
from ledger.log import Ledger
from tests.contract.conftest import signed_commitment
from verifier.note import verify_checkpoint


def test_agents_of_one_process_verify_a_batchs_checkpoint_note_once(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two agents answered by one batch carry one checkpoint note: it is verified once in
    the process; a note that does not verify is refused every time (never remembered)."""
    ann, bob = make_agent("ann"), make_agent("bob")
    subs = [signed_commitment(ann, "ann's promise"), signed_commitment(bob, "bob's promise")]
    receipts = ledger.append(subs)
    assert receipts[0].checkpoint == receipts[1].checkpoint
    calls: list[bytes] = []
    real = verify_checkpoint

    def counting(note: bytes, key: Any, **kw: Any) -> Any:
        calls.append(note)
        return real(note, key, **kw)

    monkeypatch.setattr(sdk, "verify_checkpoint", counting)
    sdk._verified.clear()
    ann._check_receipt(subs[0], receipts[0])
    bob._check_receipt(subs[1], receipts[1])
    assert calls == [receipts[0].checkpoint]
    head, _, line = receipts[0].checkpoint.rstrip(b"\n").rpartition(b"\n")
    dash, name, sig = line.split(b" ")
    raw = bytearray(base64.b64decode(sig))
    raw[-1] ^= 1  # the signature's last byte: a note that parses and does not verify
    forged = b"\n".join([head, b" ".join([dash, name, base64.b64encode(bytes(raw))])]) + b"\n"
    bad = dataclasses.replace(receipts[0], checkpoint=forged)
    for _ in range(2):
        with pytest.raises(SignatureError):
            ann._check_receipt(subs[0], bad)
    assert calls.count(forged) == 2

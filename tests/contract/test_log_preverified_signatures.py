"""Issue 28: a signature fair admission verified is not verified again by the append
(Ledger.verified), and that memo never lets through bytes or a key it was not told of."""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

import pytest

from engram.client.sdk import Agent
from engram.protocol.errors import SignatureError
from engram.protocol.wire import Submission
from ledger.log import Ledger


def test_a_preverified_signature_is_not_verified_again_and_binds_its_bytes(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    sub = alice.signer.event(
        "commitment", {"promise": "p"}, version=0, prev=None, client_time_us=alice.clock()
    )
    ledger.verified(sub.signature, sub.envelope, alice.signer.public_key)
    with (
        mock.patch("ledger.edge.verify_event_signature") as at_edge,
        mock.patch("ledger.append.verify_event_signature") as under_lock,
    ):
        [receipt] = ledger.append([ledger.prepare(sub)])
    assert at_edge.call_count == 0 and under_lock.call_count == 0  # neither at the edge nor under the lock
    assert ledger.leaf(receipt.index) is not None
    # A memo for other bytes, or under another key, is no memo: a forged signature fails.
    forged = Submission(
        envelope=alice.signer.event(
            "commitment",
            {"promise": "q"},
            version=1,
            prev=receipt.leaf_hash.hex(),
            client_time_us=alice.clock(),
        ).envelope,
        signature=sub.signature,
        body=sub.body,
        salt=sub.salt,
    )
    ledger.verified(sub.signature, sub.envelope, alice.signer.public_key)
    with pytest.raises(SignatureError):
        ledger.append([forged])
    size = ledger.size()
    other = make_agent("other")
    ledger.verified(forged.signature, forged.envelope, other.signer.public_key)
    with pytest.raises(SignatureError):
        ledger.append([forged])
    assert ledger.size() == size + 1  # only other's registration

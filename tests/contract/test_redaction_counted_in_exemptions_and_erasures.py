"""``redacted: N`` in every write answer (issue 40, finding 6, attacked from outside after the
fix): a secret pasted into the reason of a decay exemption or an erasure was redacted before
signing, but the answer said ``redacted: 0`` (an exemption) or nothing at all (an erasure), so
the user was never told the reason they gave was changed. Both now count it, on every backend."""

from __future__ import annotations

from collections.abc import Callable

from engram.client.sdk import Agent
from ledger.log import Ledger
from tests.contract.conftest import MemoryOf

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"


def test_an_exemption_and_an_erasure_count_the_secret_redacted_from_their_reason(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    mem = memory_of(make_agent("ada"))
    kept = mem.write(category="PREFERENCE", content="The user prefers tea over coffee.", tier="WARM")
    gone = mem.write(category="CONTEXT", content="The build host is b-3.internal.", tier="WARM")
    exempt = mem.exempt(kept.ref, reason=f"the user asked; CI token {TOKEN} is in the ticket")
    assert exempt.redacted == 1
    body = ledger.store.body(exempt.index)
    assert body is not None and TOKEN.encode() not in body[1]
    erased = mem.erase(gone.index, reason=f"moved to the vault with {TOKEN}")
    assert erased.redacted == 1 and erased.to_json()["redacted"] == 1
    body = ledger.store.body(erased.index)
    assert body is not None and TOKEN.encode() not in body[1]
    # a reason without a secret says 0
    assert mem.exempt(kept.ref, reason="the user asked twice").redacted == 0

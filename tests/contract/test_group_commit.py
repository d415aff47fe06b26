"""Issue 28: the group commit answers a caller only once its batch is committed and the
signer's record names that checkpoint, though the record is written outside the leadership
(the next batch commits meanwhile); a bad event in a batch is refused alone."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol.errors import EngramError
from engram.protocol.wire import Receipt
from ledger.log import Ledger
from ledger.signed_head import SignedHeadRecord


def test_every_answer_follows_its_commit_and_the_signers_record(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    assert ledger.signed_head is not None and ledger.group_commit is not None
    path = ledger.signed_head.path
    agents = [make_agent(f"pipe-{i}") for i in range(24)]
    seen: list[tuple[Receipt, int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(len(agents))

    def run(agent: Agent) -> None:
        try:
            start.wait()
            for n in range(4):
                r = agent.append("commitment", {"promise": f"promise {n} of {agent.agent_id}"})
                recorded = SignedHeadRecord(path, ledger.origin).read()
                assert recorded is not None
                with lock:
                    seen.append((r, recorded.size))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[0]
    assert len(seen) == 96
    for receipt, recorded in seen:
        assert ledger.leaf(receipt.index) == receipt.leaf  # committed before the answer
        assert recorded >= receipt.proof.size  # and the signer's record reached its checkpoint
    record = SignedHeadRecord(path, ledger.origin).read()
    assert record is not None and record.size == ledger.size()


def test_a_bad_event_in_a_grouped_batch_is_refused_alone(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    good = [make_agent(f"good-{i}") for i in range(8)]
    bad = make_agent("bad")
    outcomes: dict[str, object] = {}
    start = threading.Barrier(len(good) + 1)

    def run(agent: Agent, forge: bool) -> None:
        start.wait()
        try:
            if forge:
                sub = agent.signer.event(
                    "commitment", {"promise": "forged"}, version=0, prev=None, client_time_us=0
                )
                sub = type(sub)(envelope=sub.envelope, signature=bytes(64), body=sub.body, salt=sub.salt)
                outcomes[agent.agent_id] = ledger.append([sub])[0]
            else:
                outcomes[agent.agent_id] = agent.append("commitment", {"promise": "kept"})
        except EngramError as e:
            outcomes[agent.agent_id] = e

    threads = [threading.Thread(target=run, args=(a, False)) for a in good]
    threads.append(threading.Thread(target=run, args=(bad, True)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert isinstance(outcomes["bad"], EngramError)
    assert outcomes["bad"].check == "event.signature"  # type: ignore[attr-defined]
    for a in good:
        r = outcomes[a.agent_id]
        assert isinstance(r, Receipt), r
        assert ledger.leaf(r.index) == r.leaf


@pytest.fixture(autouse=True)
def _grouped(ledger: Ledger) -> None:
    assert ledger.group_commit is not None  # the path under test

"""Fair admission (api/fairness.py, issue 15 Deliver 6): a bounded number of requests at
once, the waiting ones admitted round-robin across identities, every slot given back."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from api.fairness import FairAdmission, FairScheduler, identity_of


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_burst_from_one_identity_does_not_delay_another_beyond_one_turn() -> None:
    async def main() -> list[str]:
        sched = FairScheduler(2)
        order: list[str] = []
        await sched.acquire("a")
        await sched.acquire("a")  # both slots held by a's burst
        waiters = [asyncio.create_task(_take(sched, "a", i, order)) for i in range(20)]
        await asyncio.sleep(0)
        late = asyncio.create_task(_take(sched, "b", 0, order))
        await asyncio.sleep(0)
        for i in range(22):
            sched.release("a" if i < 2 else order[i - 2][0])
            await asyncio.sleep(0)
        await asyncio.gather(*waiters, late)
        return order

    order = _run(main())
    # b arrived after 20 waiters of a, and is admitted second: a's first waiter had the turn
    assert order[:3] == ["a0", "b0", "a1"], order
    assert sorted(order) == sorted([f"a{i}" for i in range(20)] + ["b0"])


async def _take(sched: FairScheduler, who: str, i: int, order: list[str]) -> None:
    await sched.acquire(who)
    order.append(f"{who}{i}")


def test_turns_alternate_between_identities_and_slots_are_all_given_back() -> None:
    async def main() -> tuple[list[str], int]:
        sched = FairScheduler(1)
        order: list[str] = []
        await sched.acquire("x")
        tasks = [asyncio.create_task(_take(sched, w, i, order)) for w in "abc" for i in range(3)]
        await asyncio.sleep(0)
        sched.release("x")
        await asyncio.sleep(0)
        for i in range(8):
            sched.release(order[i][0])
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        sched.release(order[-1][0])
        return order, sched.active

    order, active = _run(main())
    assert order == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]
    assert active == 0


def test_a_cancelled_waiter_leaves_its_queue_and_a_handed_slot_is_passed_on() -> None:
    async def main() -> tuple[int, int, bool]:
        sched = FairScheduler(1)
        await sched.acquire("a")
        gone = asyncio.create_task(sched.acquire("b"))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert sched.waiting == 0
        # handed the slot, then cancelled before it resumed: the slot goes to the next one
        handed = asyncio.create_task(sched.acquire("c"))
        after = asyncio.create_task(sched.acquire("d"))
        await asyncio.sleep(0)
        sched.release("a")  # c's future is resolved ...
        handed.cancel()  # ... but c is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await handed
        await asyncio.wait_for(after, 1)
        sched.release("d")
        return sched.active, sched.waiting, after.done()

    assert _run(main()) == (0, 0, True)


def test_one_identity_never_holds_more_than_its_share_and_others_go_straight_in() -> None:
    async def main() -> tuple[int, int, int, int]:
        sched = FairScheduler(8, per_identity=2)
        burst = [asyncio.create_task(sched.acquire("a")) for _ in range(10)]
        await asyncio.sleep(0)
        held_a, waiting_a = sched.held_by("a"), sched.waiting
        await asyncio.wait_for(sched.acquire("b"), 1)  # 6 slots free: b does not wait behind a
        await asyncio.wait_for(sched.acquire("b"), 1)
        third = asyncio.create_task(sched.acquire("b"))  # b's share is used up
        await asyncio.sleep(0)
        assert not third.done()
        sched.release("b")
        await asyncio.wait_for(third, 1)
        for _ in range(8):
            sched.release("a")
            await asyncio.sleep(0)
        await asyncio.gather(*burst)
        for _ in range(2):
            sched.release("a")
        sched.release("b")
        sched.release("b")
        return held_a, waiting_a, sched.active, sched.waiting

    assert _run(main()) == (2, 8, 0, 0)


def _scope(
    path: str, headers: list[tuple[bytes, bytes]] | None = None, method: str = "GET"
) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "headers": headers or [],
        "client": ("10.0.0.7", 5555),
    }


def test_identity_is_the_claimed_signer_path_agent_or_event_agent_with_the_address() -> None:
    assert identity_of(_scope("/checkpoint"), b"") == "anonymous@10.0.0.7"
    assert identity_of(_scope("/v1/agents/ann/memory"), b"") == "agent:ann@10.0.0.7"
    signed = _scope("/v1/agents/ann/memory", [(b"engram-signer", b"ed25519:" + b"ab" * 32)])
    assert identity_of(signed, b"") == "ed25519:" + "ab" * 32 + "@10.0.0.7"
    envelope = base64.b64encode(json.dumps({"agent": "bob", "kind": "commitment"}).encode()).decode()
    body = json.dumps({"events": [{"envelope": envelope}]}).encode()
    assert identity_of(_scope("/v1/events", method="POST"), body) == "agent:bob@10.0.0.7"
    # anything malformed is only anonymous here (the route refuses it with its own error)
    for bad in (b"", b"{", b'{"events": []}', b'{"events": [{"envelope": "%%%"}]}', b"[" * 100_000):
        assert identity_of(_scope("/v1/events", method="POST"), bad) == "anonymous@10.0.0.7"
    huge = _scope("/x", [(b"engram-signer", b"a" * 100_000)])
    assert len(identity_of(huge, b"")) < 200


def test_the_middleware_holds_a_slot_until_the_response_starts_and_on_errors_gives_it_back() -> None:
    seen: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(len(message["body"]))
        if scope["path"] == "/boom":
            raise RuntimeError("boom")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        seen.append(mw.scheduler.active)  # released as the response started
        await send({"type": "http.response.body", "body": b"ok"})

    mw = FairAdmission(app, slots=1, per_identity=1)

    async def main() -> int:
        parts = [
            {"type": "http.request", "body": b"ab", "more_body": True},
            {"type": "http.request", "body": b"cd", "more_body": False},
        ]

        async def receive() -> dict[str, Any]:
            return parts.pop(0)

        async def send(message: Any) -> None:
            return None

        await mw(_scope("/ok", method="POST"), receive, send)
        with pytest.raises(RuntimeError):
            await mw(_scope("/boom"), _once(b""), send)
        return mw.scheduler.active

    assert _run(main()) == 0
    assert seen == [4, 0, 0]


def _once(body: bytes) -> Any:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return receive

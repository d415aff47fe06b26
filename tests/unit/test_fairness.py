"""Fair admission (api/fairness.py, issue 15 Deliver 6): a bounded number of requests at
once, the waiting ones admitted round-robin across identities, every slot given back."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from api.fairness import FairAdmission, FairScheduler, KnownKeys, identity_of
from engram.protocol.httpsign import request_signing_input
from engram.protocol.signer import AgentSigner


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


ORIGIN = "fair.example/log"
ANN = Ed25519PrivateKey.generate()


def _signed(path: str, key: Ed25519PrivateKey, signer: str, *, ts: int, body: bytes = b"") -> dict[str, Any]:
    nonce = "n" * 20
    msg = request_signing_input(
        origin=ORIGIN, method="GET", target=path, signer=signer, timestamp=ts, nonce=nonce, body=body
    )
    return _scope(
        path,
        [
            (b"engram-signer", signer.encode()),
            (b"engram-timestamp", str(ts).encode()),
            (b"engram-nonce", nonce.encode()),
            (b"engram-signature", base64.b64encode(key.sign(msg))),
        ],
    )


def _known() -> KnownKeys:
    known = KnownKeys()
    known.origin = ORIGIN
    known.learn("ann", ANN.public_key().public_bytes_raw())
    return known


def test_identity_is_the_verified_agent_or_the_anonymous_address() -> None:
    known, now = _known(), 1_800_000_000
    assert identity_of(_scope("/checkpoint"), b"", known, now_s=now) == "anonymous@10.0.0.7"
    # a path names an agent, but nothing verified it
    assert identity_of(_scope("/v1/agents/ann/memory"), b"", known, now_s=now) == "anonymous@10.0.0.7"
    good = _signed("/v1/agents/ann/memory", ANN, "agent:ann", ts=now)
    assert identity_of(good, b"", known, now_s=now) == "agent:ann@10.0.0.7"
    assert identity_of(good, b"", None, now_s=now) == "anonymous@10.0.0.7"  # no known keys: anonymous
    assert identity_of(good, b"x", known, now_s=now) == "anonymous@10.0.0.7"  # another body
    assert identity_of(good, b"", known, now_s=now + 301) == "anonymous@10.0.0.7"  # outside the window
    forged = _signed("/v1/agents/ann/memory", Ed25519PrivateKey.generate(), "agent:ann", ts=now)
    assert identity_of(forged, b"", known, now_s=now) == "anonymous@10.0.0.7"
    bare = _signed("/v1/agents/ann/memory", ANN, "ed25519:" + "ab" * 32, ts=now)
    assert identity_of(bare, b"", known, now_s=now) == "anonymous@10.0.0.7"
    huge = _scope("/x", [(b"engram-signer", b"a" * 100_000)])
    assert identity_of(huge, b"", known, now_s=now) == "anonymous@10.0.0.7"


def test_an_events_batch_queues_as_its_first_events_verified_agent() -> None:
    known = _known()
    signer = AgentSigner("ann", ANN, origin=ORIGIN)
    sub = signer.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1)
    ev = {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}
    body = json.dumps({"events": [ev]}).encode()
    assert identity_of(_scope("/v1/events", method="POST"), body, known) == "agent:ann@10.0.0.7"
    mallory = AgentSigner("ann", Ed25519PrivateKey.generate(), origin=ORIGIN)  # claims ann, other key
    sub2 = mallory.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1)
    ev2 = {k: base64.b64encode(getattr(sub2, k)).decode() for k in ("envelope", "signature", "body", "salt")}
    body2 = json.dumps({"events": [ev2]}).encode()
    assert identity_of(_scope("/v1/events", method="POST"), body2, known) == "anonymous@10.0.0.7"
    # anything malformed is only anonymous here (the route refuses it with its own error)
    for bad in (b"", b"{", b'{"events": []}', b'{"events": [{"envelope": "%%%"}]}', b"[" * 100_000):
        assert identity_of(_scope("/v1/events", method="POST"), bad, known) == "anonymous@10.0.0.7"


def test_fake_signers_share_one_queue() -> None:
    """Regression (issue 25, finding 6): 40 anonymous requests from one address, each with a
    made-up Engram-Signer, took 40 queues and moved another client's median from ~20 ms to
    seconds. Now they are one anonymous queue holding at most its share of the slots, and the
    other client is admitted at once."""
    known, now = _known(), 1_800_000_000
    ids = {
        identity_of(
            _signed("/v1/agents/x/memory", Ed25519PrivateKey.generate(), f"agent:fake{i}", ts=now),
            b"",
            known,
            now_s=now,
        )
        for i in range(40)
    }
    assert ids == {"anonymous@10.0.0.7"}

    async def main() -> tuple[int, int, bool]:
        sched = FairScheduler(32, 2)
        flood = [asyncio.create_task(sched.acquire(next(iter(ids)))) for _ in range(40)]
        await asyncio.sleep(0)
        victim = asyncio.create_task(sched.acquire("agent:ann@10.0.0.8"))
        await asyncio.sleep(0)
        admitted = victim.done()
        held = sched.held_by("anonymous@10.0.0.7")
        for t in flood:
            t.cancel()
        return held, sched.waiting, admitted

    held, _waiting, admitted = _run(main())
    assert held == 2 and admitted


def test_known_keys_expire_and_stay_bounded() -> None:
    t = [0.0]
    known = KnownKeys(max_agents=3, ttl_s=10, clock=lambda: t[0])
    for i in range(5):
        known.learn(f"a{i}", bytes([i]) * 32)
    assert known.keys_of("a0") == () and known.keys_of("a4") == (bytes([4]) * 32,)
    t[0] = 11
    assert known.keys_of("a4") == ()


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


def test_a_signed_event_on_an_agent_route_queues_as_its_agent_via_the_registry() -> None:
    """Regression (issue 28): a record or memory posted by an agent this worker had not seen
    yet (its first write here, or registered through the other worker) queued as the
    anonymous client of its address, so 64 agents on one host shared 2 slots per worker and
    the group commit appended batches of one. The event's key is now looked up in the log's
    registry (off the event loop) and learned once its signature verifies."""
    from engram.protocol.errors import StorageError

    bob = Ed25519PrivateKey.generate()
    signer = AgentSigner("bob", bob, origin=ORIGIN)
    sub = signer.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1)
    body = json.dumps(
        {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}
    ).encode()
    env_key = signer.key_id
    route = _scope("/v1/agents/bob/records", method="POST")
    known = KnownKeys()
    assert identity_of(route, body, known) == "anonymous@10.0.0.7"  # the event loop never reads the registry
    asked: list[str] = []
    known.lookup = lambda key_id: (asked.append(key_id), ("bob", bob.public_key().public_bytes_raw()))[1]
    assert identity_of(route, body, known, lookup=True) == "agent:bob@10.0.0.7"
    assert asked == [env_key]
    assert identity_of(route, body, known) == "agent:bob@10.0.0.7"  # learned: no lookup now
    # a key the registry gives another agent, an unknown key, a failing registry: anonymous
    for answer in (("mallory", bob.public_key().public_bytes_raw()), None):
        other = KnownKeys()
        other.lookup = lambda key_id, a=answer: a
        assert identity_of(route, body, other, lookup=True) == "anonymous@10.0.0.7"

    def down(key_id: str) -> tuple[str, bytes]:
        raise StorageError("database down")

    failing = KnownKeys()
    failing.lookup = down
    assert identity_of(route, body, failing, lookup=True) == "anonymous@10.0.0.7"
    # a registry key that does not verify this event's signature: anonymous
    wrong = KnownKeys()
    wrong.lookup = lambda key_id: ("bob", Ed25519PrivateKey.generate().public_key().public_bytes_raw())
    assert identity_of(route, body, wrong, lookup=True) == "anonymous@10.0.0.7"
    # a GET, or a path outside the agent routes, is never read for an event
    assert identity_of(_scope("/v1/agents/bob/records"), body, known) == "anonymous@10.0.0.7"
    assert identity_of(_scope("/healthz", method="POST"), body, known) == "anonymous@10.0.0.7"


def test_fair_admission_reports_only_the_signatures_it_verified() -> None:
    """Fair admission verifies an event to know whose it is; it tells the log exactly what
    verified (signature, envelope bytes, key) so the append need not verify it again, and
    nothing for a key that does not verify the event (issue 28)."""
    bob = Ed25519PrivateKey.generate()
    bob_pk = bob.public_key().public_bytes_raw()
    signer = AgentSigner("bob", bob, origin=ORIGIN)
    sub = signer.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1)
    body = json.dumps(
        {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}
    ).encode()
    route = _scope("/v1/agents/bob/records", method="POST")
    for key, expected in (
        (bob_pk, [(sub.signature, sub.envelope, bob_pk)]),
        (Ed25519PrivateKey.generate().public_key().public_bytes_raw(), []),
    ):
        told: list[tuple[bytes, bytes, bytes]] = []
        known = KnownKeys()
        known.lookup = lambda key_id, k=key: ("bob", k)
        known.verified = lambda s, e, k, t=told: t.append((s, e, k))
        identity_of(route, body, known, lookup=True)
        assert told == expected


def test_fair_admission_parses_the_envelope_the_route_takes_up_again_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43 (Deliver 5): fair admission parses the first event's envelope to know whose
    it is; the route's prepare edge (``ledger.envelopes.parse_envelope``) takes that parse up
    again for the same bytes instead of parsing the envelope a second time."""
    from ledger import envelopes
    from verifier.event import Envelope

    calls: list[bytes] = []
    real = Envelope.from_bytes

    def counting(data: bytes, *args: Any, **kw: Any) -> Envelope:
        calls.append(data)
        return real(data, *args, **kw)

    monkeypatch.setattr(Envelope, "from_bytes", staticmethod(counting))
    bob = Ed25519PrivateKey.generate()
    signer = AgentSigner("bob", bob, origin=ORIGIN)
    sub = signer.event("commitment", {"promise": "parsed once"}, version=0, prev=None, client_time_us=7)
    body = json.dumps(
        {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}
    ).encode()
    known = KnownKeys()
    known.learn("bob", bob.public_key().public_bytes_raw())
    route = _scope("/v1/agents/bob/records", method="POST")
    calls.clear()  # the signer parsed what it signed
    assert identity_of(route, body, known) == "agent:bob@10.0.0.7"
    assert envelopes.parse_envelope(sub.envelope).agent == "bob"  # what prepare calls
    assert calls == [sub.envelope]

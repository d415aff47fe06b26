"""The host sequencer's wire (ledger.sequencer): requests and answers round-trip, every
malformed or oversized frame is refused with ``sequencer.frame`` before anything is
appended, errors cross as the same class with the same message, check and stream head, and
only a peer of the sequencer's own uid is served (issue 43, Deliver 1)."""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.protocol import errors as E
from engram.protocol.wire import InclusionProof, Outcome, Receipt, Submission
from ledger.sequencer import (
    MAX_FRAME,
    check_peer,
    decode_request,
    decode_response,
    encode_error,
    encode_receipt,
    encode_request,
    host_paths,
    read_frame,
)
from ledger.signed_head import ForkRefusedError


def _payload(frame: bytes) -> tuple[int, bytes]:
    """(kind, payload) of an encoded frame, checked as read_frame checks it."""
    a, b = socket.socketpair()
    with a, b:
        a.sendall(frame)
        return read_frame(b, first_timeout=5)


def _refused(why: str = "") -> pytest.RaisesContext[E.MalformedError]:
    return pytest.raises(E.MalformedError, match=r"\[sequencer\.frame\].*" + why)


_bytes = st.binary(max_size=300)


@settings(deadline=None)  # a socket pair per example: no timing asserted
@given(
    env=_bytes,
    sig=_bytes,
    body=_bytes,
    salt=_bytes,
    operator=st.booleans(),
    system=st.booleans(),
    key=st.none() | st.binary(min_size=32, max_size=32),
)
def test_a_request_round_trips(
    env: bytes, sig: bytes, body: bytes, salt: bytes, operator: bool, system: bool, key: bytes | None
) -> None:
    sub = Submission(envelope=env, signature=sig, body=body, salt=salt)
    _, payload = _payload(encode_request(sub, operator=operator, system=system, verified_with=key))
    assert decode_request(payload) == (sub, operator, system, key)


def _request() -> bytes:
    sub = Submission(envelope=b"{}", signature=bytes(64), body=b"{}", salt=bytes(16))
    return _payload(encode_request(sub, operator=False, system=False))[1]


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda p: b"", "empty"),
        (lambda p: bytes((p[0] | 8,)) + p[1:], "flag"),
        (lambda p: bytes((p[0] | 4,)) + p[1:] + bytes(31), "verifying key"),
        (lambda p: bytes((p[0] | 4,)) + p[1:] + bytes(33), "after the last field"),
        (lambda p: p[:3], "truncated"),
        (lambda p: p[:-1], "salt length"),
        (lambda p: p + b"x", "after the last field"),
        (lambda p: p[:1] + struct.pack(">I", 70_000) + p[5:], "envelope length"),
        (lambda p: p[:1] + struct.pack(">I", 2**32 - 1) + p[5:], "envelope length"),
    ],
)
def test_a_malformed_request_is_refused(mutate: object, why: str) -> None:
    with _refused(why):
        decode_request(mutate(_request()))  # type: ignore[operator]


@settings(deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_are_refused_with_the_frame_check(data: bytes) -> None:
    check = "sequencer.frame"  # decoded: a request of well-bounded fields
    try:
        decode_request(data)
    except E.MalformedError as e:
        check = e.check
    assert check == "sequencer.frame"


def test_a_frame_over_the_bound_is_refused_before_its_bytes_are_read() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack(">I", MAX_FRAME + 1))  # no payload follows: it is never awaited
        with _refused("length"):
            read_frame(b, first_timeout=5)
        a.sendall(struct.pack(">I", 0))
        with _refused("length"):
            read_frame(b, first_timeout=5)


def test_a_frame_of_another_version_or_cut_short_is_refused() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack(">I", 3) + b"\x09\x02x")
        with _refused("version"):
            read_frame(b, first_timeout=5)
        a.sendall(struct.pack(">I", 10) + b"\x01\x02")
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            read_frame(b, first_timeout=5)


def test_an_oversized_field_is_not_sent() -> None:
    sub = Submission(envelope=bytes(70_000), signature=bytes(64), body=b"{}", salt=b"")
    with pytest.raises(E.LimitExceededError, match=r"sequencer\.frame"):
        encode_request(sub, operator=False, system=False)


def _receipt(index: int = 7, answer: Outcome | None = None) -> Receipt:
    proof = InclusionProof(
        index=index,
        size=9,
        leaf_hash=b"\x01" * 32,
        root=b"\x02" * 32,
        hashes=(b"\x03" * 32,),
        checkpoint=b"note",
    )
    return Receipt(
        index=index,
        timestamp_us=123,
        leaf_hash=b"\x01" * 32,
        leaf=b"leaf bytes",
        agent="alice",
        kind="commitment",
        version=3,
        checkpoint=b"note",
        proof=proof,
        answer=answer,
    )


def test_a_receipt_round_trips_with_its_outcome() -> None:
    answer = Outcome(
        named=True,
        ref="m1",
        distilled=_receipt(8),
        entries=2,
        decisions=(_receipt(9),),
        current=(("a", None),),
    )
    r = _receipt(answer=answer)
    got = decode_response(*_payload(encode_receipt(r)))
    assert got == r and isinstance(got, Receipt) and got.answer == answer


@pytest.mark.parametrize(
    "error",
    [
        E.VersionConflictError(
            "stream a/b taken", agent="a", kind="b", head_version=4, head_leaf_hash="ab" * 32
        ),
        E.VersionGapError("gap", agent="a", kind="b", head_version=None, head_leaf_hash=None),
        E.PrevMismatchError("prev", agent="a", kind="b", head_version=0, head_leaf_hash="cd" * 32),
        E.SignatureError("bad signature", check="event.signature"),
        E.RejectedEventError("reserved agent"),
        E.LimitExceededError("too big", check="event.body_size"),
        E.StorageError("database down"),
        E.LogIntegrityError("differs", check="state.agent_keys"),
        E.RateLimitedError("slow down", retry_after_s=3),
        E.ConfigError("not set up"),
    ],
)
def test_an_error_crosses_as_the_same_class_message_check_and_head(error: E.EngramError) -> None:
    got = decode_response(*_payload(encode_error(error)))
    assert type(got) is type(error) and str(got) == str(error)
    for attr in ("check", "agent", "kind", "head_version", "head_leaf_hash", "retry_after_s"):
        assert getattr(got, attr, None) == getattr(error, attr, None)


def test_an_error_outside_the_protocol_crosses_as_the_nearest_protocol_class() -> None:
    fork = decode_response(*_payload(encode_error(ForkRefusedError("forked"))))
    assert type(fork) is E.LogIntegrityError and fork.check == "signer.fork" and "forked" in str(fork)
    crash = decode_response(*_payload(encode_error(RuntimeError("secret detail"))))
    assert type(crash) is E.StorageError and "sequencer.failed" in str(crash) and "secret" not in str(crash)


@pytest.mark.parametrize(
    ("kind", "payload", "why"),
    [
        (1, b"not json", "JSON"),
        (9, b"{}", "kind"),
        (2, json.dumps({"type": "SystemExit", "message": "x"}).encode(), "unknown error type"),
        (2, json.dumps({"type": "SignatureError", "message": "x"}).encode(), "check"),
        (2, json.dumps({"type": "VersionConflictError", "message": "x", "agent": "a", "kind": "b",
                        "head_version": True, "head_leaf_hash": None}).encode(), "head"),
        (1, json.dumps({"index": 1}).encode(), "proof"),
    ],
)  # fmt: skip
def test_a_malformed_answer_is_refused(kind: int, payload: bytes, why: str) -> None:
    with _refused(why):
        decode_response(kind, payload)


def test_an_answer_with_a_mistyped_field_is_refused() -> None:
    good = json.loads(_payload(encode_receipt(_receipt()))[1])
    for field, bad in (("index", "7"), ("index", True), ("leaf", "zz"), ("agent", 1)):
        with _refused(field):
            decode_response(1, json.dumps({**good, field: bad}).encode())


def test_only_a_peer_of_the_sequencers_own_uid_is_served() -> None:
    assert check_peer(struct.pack("3i", 4242, 1000, 1000), 1000) == 1000
    with pytest.raises(E.AuthError, match=r"\[sequencer\.peer_uid\].*uid 0"):
        check_peer(struct.pack("3i", 1, 0, 0), 1000)
    with pytest.raises(E.AuthError, match=r"sequencer\.peer_uid"):
        check_peer(b"\x00" * 4, 1000)


def test_a_live_socket_reports_this_process_uid(tmp_path: Path) -> None:
    """What the sequencer reads off a connection (SO_PEERCRED) passes the check for our uid."""
    import os

    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        creds = b.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        assert check_peer(creds, os.getuid()) == os.getuid()


def test_the_lock_and_socket_sit_beside_sqlite_and_under_the_home_for_postgres(tmp_path: Path) -> None:
    lite = host_paths(f"sqlite:///{tmp_path / 'engram.db'}", tmp_path / "home")
    assert lite.lock == tmp_path / "engram.db-sequencer.lock"
    assert lite.socket == tmp_path / "engram.db-sequencer.d" / "s"
    url = "postgresql+psycopg://u:secret@db.example:5432/engram"
    pg = host_paths(url, tmp_path / "home")
    assert (
        pg.lock.parent == tmp_path / "home"
        and "secret" not in str(pg.lock)
        and "secret" not in str(pg.socket)
    )
    assert pg.lock != host_paths(url.replace("/engram", "/other"), tmp_path / "home").lock
    deep = tmp_path / ("d" * 120)
    long = host_paths(f"sqlite:///{deep / 'engram.db'}", tmp_path)
    assert len(str(long.socket)) <= 100 and long.lock.parent == deep  # the socket moves, the lock stays


class _Trickle:
    """A peer that sends a frame a byte per ``recv``, each taking ``step`` seconds of a fake
    clock (no real waiting)."""

    def __init__(self, frame: bytes, clock: list[float], step: float) -> None:
        self.data = frame
        self.clock = clock
        self.step = step
        self.timeouts: list[float | None] = []

    def settimeout(self, t: float | None) -> None:
        self.timeouts.append(t)

    def recv(self, n: int) -> bytes:
        self.clock[0] += self.step
        if self.timeouts[-1] is not None and self.step > self.timeouts[-1]:
            raise TimeoutError("timed out")  # what a socket would do
        out, self.data = self.data[:1], self.data[1:]
        return out


@pytest.mark.parametrize("first_timeout", [None, 30.0])
def test_a_peer_sending_a_frame_a_byte_at_a_time_is_cut_off_at_the_frames_deadline(
    first_timeout: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rest of a frame must arrive within FRAME_TIMEOUT_S (or the read's own timeout) in
    all, not per ``recv``: a peer trickling a byte every 9 s (under the 10 s of one recv)
    would otherwise hold a sequencer connection, and its thread, open forever."""
    import ledger.sequencer as seq_module

    clock = [0.0]
    monkeypatch.setattr(seq_module.time, "monotonic", lambda: clock[0])
    frame = encode_request(
        Submission(envelope=b"e" * 200, signature=b"s", body=b"b", salt=b"x"), operator=False, system=False
    )
    peer = _Trickle(frame, clock, step=seq_module.FRAME_TIMEOUT_S * 0.9)
    with pytest.raises(TimeoutError):
        read_frame(peer, first_timeout=first_timeout)  # type: ignore[arg-type]
    assert len(peer.data) > len(frame) - 10  # cut off after a few bytes, not read whole


def test_an_idle_connection_taken_again_keeps_a_send_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forwarder reuses an idle connection after checking it is open: the check must not
    leave it blocking without a timeout, or a request larger than the socket's buffer sent
    to a sequencer that stopped reading would wait forever. Here the peer never reads: the
    send ends in a timeout (an OSError: the forwarder then appends locally)."""
    import ledger.sequencer as seq_module

    monkeypatch.setattr(seq_module, "FRAME_TIMEOUT_S", 0.05)
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(5)
        assert seq_module._alive(a)
        assert a.gettimeout() == 0.05
        with pytest.raises(TimeoutError):
            a.sendall(bytes(64 * 1024 * 1024))


@pytest.mark.parametrize("uid", [0, 1000, 2**31, 2**32 - 2])
def test_a_peer_of_the_same_uid_is_served_whatever_the_uid(uid: int) -> None:
    """uid_t is unsigned: a uid at or above 2**31 (user namespaces, some container hosts map
    uids there) is read as itself, not as a negative number unequal to ``os.getuid()``; and
    a peer one uid off is refused."""
    assert check_peer(struct.pack("iII", 77, uid, 5), uid) == uid
    with pytest.raises(E.AuthError):
        check_peer(struct.pack("iII", 77, uid ^ 1, 5), uid)

"""Attacks on the host sequencer (ledger.sequencer) from beside it: a process that answers at
the socket path, or plants the lock or the socket's directory, can neither make a forwarder
acknowledge an event that was not logged nor stop the host's appends (issue 43, Deliver 1)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.sdk import Agent
from engram.protocol.errors import ProofError
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt
from ledger.compose import memory_rules
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.sequencer import HostSequencer, _hello, attach, encode_receipt, read_frame
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.conftest import StepClock


def _seq(ledger: Ledger) -> HostSequencer:
    assert isinstance(ledger.sequencer, HostSequencer)
    return ledger.sequencer


@pytest.fixture
def forwarder(
    ledger: Ledger, db_url: str, tmp_path: Path, log_key: LogKey, clock: StepClock
) -> Iterator[Ledger]:
    """A second ledger of the same log on the same database, under ENGRAM_SEQUENCER=host,
    with no sequencer of its own yet (``ledger`` appends directly)."""
    home = tmp_path / "home"
    home.mkdir()
    other = Ledger(SqlStore(make_engine(db_url)), log_key, clock=clock, rules=memory_rules())
    seq = attach(other, db_url, home)
    Agent.generate(
        "first", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True), clock=clock
    ).register()
    yield other
    seq.close()
    other.store.engine.dispose()


def _make_dir(d: Path, mode: int) -> None:
    """``d`` with ``mode``; its parent (``home``, or the shared one under the temporary
    directory when the socket path is long) made 0700 if missing, as the sequencer makes it,
    so that no other test's sequencer finds it open."""
    d.parent.mkdir(mode=0o700, exist_ok=True)
    d.mkdir()
    d.chmod(mode)


@pytest.fixture
def cleanup() -> Iterator[list[Path]]:
    """Paths to remove after the test (a socket directory may be under the shared temporary
    directory)."""
    made: list[Path] = []
    yield made
    for d in made:
        for f in d.iterdir():
            f.unlink()
        d.rmdir()


class _Impostor:
    """Listens at the forwarder's socket path (as a process that got there first would),
    echoes the hello, and answers every request with one genuine receipt of another event."""

    def __init__(self, path: Path, answer: Receipt) -> None:
        _make_dir(path.parent, 0o700)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(4)
        self.answer = answer
        self.requests = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with self.listener:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                try:
                    _, vkey = read_frame(conn, first_timeout=30)
                    conn.sendall(_hello(vkey.decode()))
                    while True:
                        read_frame(conn, first_timeout=30)
                        self.requests += 1
                        conn.sendall(encode_receipt(self.answer))
                except (EOFError, OSError):
                    return

    def close(self) -> None:
        self.listener.close()


def test_a_forwarder_never_acknowledges_a_receipt_for_another_event(
    ledger: Ledger, forwarder: Ledger, clock: StepClock, cleanup: list[Path]
) -> None:
    """Whoever answers at the socket path may hand back a genuine receipt (its checkpoint
    signed by the log, its proof valid) of some other entry of the log: the forwarder must
    not return it as the receipt of its own event, which was never appended."""
    erin = AgentSigner("erin", Ed25519PrivateKey.generate(), origin=ledger.origin)
    old = ledger.append([erin.registration(client_time_us=clock())], operator=True)[0]
    cleanup.append(_seq(forwarder).paths.socket_dir)
    impostor = _Impostor(_seq(forwarder).paths.socket, old)
    try:
        event = erin.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=clock())
        size = ledger.size()
        with pytest.raises(ProofError) as refused:
            forwarder.append([event])
        assert refused.value.check == "sequencer.receipt"
        assert impostor.requests == 1 and ledger.size() == size
    finally:
        impostor.close()


def test_a_forwarder_sends_nothing_to_a_sequencer_of_another_uid(
    ledger: Ledger, forwarder: Ledger, db_url: str, tmp_path: Path, clock: StepClock
) -> None:
    """The sequencer serves only its own uid; the forwarder likewise forwards only to its own
    uid (SO_PEERCRED of the listening process): a process of another uid at the socket path
    would be sent every event's body and could answer in the log's name. Here the sequencer
    is genuine but the forwarder is told it runs as another uid: it appends locally."""
    leader = attach(ledger, db_url, tmp_path / "home")
    try:
        frank = AgentSigner("frank", Ed25519PrivateKey.generate(), origin=ledger.origin)
        ledger.append([frank.registration(client_time_us=clock())], operator=True)
        assert leader.is_sequencer and leader.server is not None
        fwd = _seq(forwarder)
        fwd.uid = os.getuid() + 1
        r = forwarder.append(
            [frank.event("commitment", {"promise": "f"}, version=0, prev=None, client_time_us=clock())]
        )[0]
        assert fwd.forwarded == 0 and fwd.local == 1 and leader.server.forwarded == 0
        assert ledger.store.leaf(r.index) == r.leaf
    finally:
        leader.close()


def test_a_symlink_planted_at_the_lock_path_is_not_followed_and_appends_go_on(
    forwarder: Ledger, tmp_path: Path, clock: StepClock
) -> None:
    """Whoever can create a file beside the database may plant a symlink at the sequencer's
    lock path: opening it must not create (or lock) the file it points to, and the append
    is made locally instead of failing."""
    paths = _seq(forwarder).paths
    target = tmp_path / "elsewhere" / "created-by-the-service"
    target.parent.mkdir()
    paths.lock.symlink_to(target)
    gina = AgentSigner("gina", Ed25519PrivateKey.generate(), origin=forwarder.origin)
    r = forwarder.append([gina.registration(client_time_us=clock())], operator=True)[0]
    assert not target.exists() and paths.lock.is_symlink()
    assert not _seq(forwarder).is_sequencer and _seq(forwarder).local == 1
    assert forwarder.store.leaf(r.index) == r.leaf


def test_a_socket_directory_planted_open_makes_appends_local_not_failed(
    forwarder: Ledger, clock: StepClock, cleanup: list[Path]
) -> None:
    """The socket's directory (under the system's temporary directory when the path is
    long) may be created first by someone else, or left open: the process refuses to serve
    from it, and its appends are made locally rather than refused."""
    paths = _seq(forwarder).paths
    cleanup.append(paths.socket_dir)
    _make_dir(paths.socket_dir, 0o755)  # not private: as another user's planted one is not ours
    hana = AgentSigner("hana", Ed25519PrivateKey.generate(), origin=forwarder.origin)
    r = forwarder.append([hana.registration(client_time_us=clock())], operator=True)[0]
    assert not _seq(forwarder).is_sequencer and _seq(forwarder).local == 1
    assert forwarder.store.leaf(r.index) == r.leaf
    assert not paths.socket.exists()

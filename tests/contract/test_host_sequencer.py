"""One sequencer per host (ledger.sequencer), on both backends: processes that forward their
single appends to the host's sequencer share its batches; killing the sequencer or a
forwarder mid-batch loses no acknowledged entry, leaves the audit clean, and the processes
left go on appending (issue 43, Deliver 1)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.sdk import Agent
from engram.protocol.errors import KeyStateError, MalformedError, SignatureError, VersionConflictError
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from ledger.audit import audit
from ledger.compose import memory_rules
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.sequencer import HostSequencer, _frame, attach, decode_response, encode_request, read_frame
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.conftest import StepClock
from verifier.event import Leaf
from verifier.merkle import leaf_hash

ROOT = Path(__file__).resolve().parents[2]


class _Worker:
    """A tests.contract.worker process through the host sequencer, its output read as it comes."""

    def __init__(self, db_url: str, home: Path, name: str, count: int, *extra: str) -> None:
        args = [sys.executable, "-m", "tests.contract.worker", db_url, name, str(count), "--register"]
        self.proc = subprocess.Popen(
            [*args, "--threads", "4", "--sequencer", str(home), *extra],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.acks: list[tuple[int, str]] = []
        self.lost = 0
        self.stats: tuple[int, int, int] | None = None
        self.ready = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            with self._cond:
                if parts[:1] == ["ack"]:
                    self.acks.append((int(parts[1]), parts[2]))
                elif parts[:1] == ["ready"]:
                    self.ready = True
                elif parts[:1] == ["lost"]:
                    self.lost += 1
                elif parts[:1] == ["stats"]:
                    self.stats = (int(parts[1]), int(parts[2]), int(parts[3]))
                self._cond.notify_all()

    def wait_acks(self, n: int, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.acks) < n and self.proc.poll() is None and time.monotonic() < deadline:
                self._cond.wait(1)
        assert len(self.acks) >= n, f"{len(self.acks)} acks of {n}; {self._stderr()}"

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.ready and self.proc.poll() is None and time.monotonic() < deadline:
                self._cond.wait(1)
        assert self.ready, f"not ready; {self._stderr()}"

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "(running)"
        return self.proc.stderr.read()[-3000:]

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        self._reader.join(60)

    def finish(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # ends --linger
        assert self.proc.wait(timeout=300) == 0, self._stderr()
        self._reader.join(60)


def _check_log(ledger: Ledger, acks: list[tuple[int, str]]) -> None:
    """Every acknowledged entry at its index with its hash; dense indices; audit clean."""
    assert acks
    assert len({i for i, _ in acks}) == len(acks)
    for index, h in acks:
        raw = ledger.store.leaf(index)
        assert raw is not None, f"acknowledged entry {index} is missing"
        assert leaf_hash(raw).hex() == h
    state = ledger.store.state()
    assert state is not None
    assert state.size == ledger.store.latest_checkpoint().size == ledger.store.counts()["leaves"]
    report = audit(ledger.store, ledger.verifier_key)
    assert report.findings == []


def _batches_by_process(ledger: Ledger) -> list[set[str]]:
    """For each checkpoint (one per batch), the worker processes whose events it holds (an
    agent ``p-3`` belongs to process ``p``)."""
    sizes = sorted(ledger.store.checkpoint_sizes())
    out = []
    for lo, hi in itertools.pairwise(sizes):
        agents = {Leaf.from_bytes(raw).envelope.agent for raw in ledger.store.leaves(lo, hi)}
        out.append({a.rsplit("-", 1)[0] for a in agents if "-" in a})
    return out


@pytest.mark.slow
def test_processes_append_through_one_host_sequencer_into_shared_batches(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    """Three processes of four threads each: the first takes the host's lock and serves, the
    other two forward every append to it. Their events meet in the sequencer's batches (some
    checkpoint covers events of both forwarders), every receipt verified (the SDK checks each
    one; the forwarder checks it first), every entry is in the log, and the audit is clean."""
    home = tmp_path / "home"
    home.mkdir()
    seq = _Worker(db_url, home, "seq", 5, "--linger")
    seq.wait_acks(5)  # it appended, so it took the lock: it is the host's sequencer
    # Both forwarders start appending together (a process's start-up takes longer than its
    # appends under load: one could finish before the other began, and no batch could mix).
    forwarders = [_Worker(db_url, home, f"fw{i}", 15, "--wait-go") for i in range(2)]
    for w in forwarders:
        w.wait_ready()
    for w in forwarders:
        w.go()
    for w in forwarders:
        w.finish()
    seq.finish()
    assert seq.stats is not None and seq.stats[2] == 128  # served every forwarded append
    for w in forwarders:
        assert w.stats == (64, 0, 0)  # forwarded all (4 registrations + 4 x 15), none local
    _check_log(ledger, seq.acks + forwarders[0].acks + forwarders[1].acks)
    assert ledger.size() == 1 + 3 * 4 + 20 + 2 * 60
    assert any({"fw0", "fw1"} <= procs for procs in _batches_by_process(ledger))


def _kill_mid_batch(ledger: Ledger, db_url: str, tmp_path: Path, *, victim: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    workers = [_Worker(db_url, home, "p0", 100_000, "--retry-lost")]
    workers[0].wait_acks(8)  # p0 is the sequencer
    workers += [_Worker(db_url, home, f"p{i}", 100_000, "--retry-lost") for i in (1, 2)]
    for w in workers:
        w.wait_acks(30)
    killed = workers[victim]
    killed.kill()  # SIGKILL while batches of every process are in flight
    rest = [w for i, w in enumerate(workers) if i != victim]
    for w in rest:  # the others go on appending (one of them the new sequencer, if needed)
        w.wait_acks(len(w.acks) + 40)
    for w in rest:
        w.kill()
    _check_log(ledger, [a for w in workers for a in w.acks])
    # And the log goes on after every process died.
    again = _Worker(db_url, home, "after", 3)
    again.finish()
    _check_log(ledger, again.acks)


@pytest.mark.slow
def test_killing_the_host_sequencer_mid_batch_loses_no_acknowledged_entry(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    """SIGKILL of the sequencer: its forwarders' in-flight appends fail (retryable, never a
    receipt of an uncommitted entry), one of them takes the lock, and both go on."""
    _kill_mid_batch(ledger, db_url, tmp_path, victim=0)


@pytest.mark.slow
def test_killing_a_forwarding_process_mid_batch_loses_no_acknowledged_entry(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    """SIGKILL of a forwarder: the sequencer and the other forwarder go on."""
    _kill_mid_batch(ledger, db_url, tmp_path, victim=1)


# -- in one process: two ledgers on one database, one of them the host's sequencer ---------


@pytest.fixture
def pair(
    ledger: Ledger, db_url: str, tmp_path: Path, log_key: LogKey, clock: StepClock
) -> Iterator[tuple[Ledger, Ledger]]:
    """``ledger`` made the host's sequencer (its first append takes the lock), and a second
    ledger of the same log on the same database that forwards to it."""
    home = tmp_path / "home"
    home.mkdir()
    a = attach(ledger, db_url, home)
    other = Ledger(SqlStore(make_engine(db_url)), log_key, clock=clock, rules=memory_rules())
    b = attach(other, db_url, home)
    Agent.generate(
        "first", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True), clock=clock
    ).register()
    assert a.is_sequencer
    yield ledger, other
    b.close()
    a.close()
    other.store.engine.dispose()


def _seq(ledger: Ledger) -> HostSequencer:
    assert isinstance(ledger.sequencer, HostSequencer)
    return ledger.sequencer


def test_a_forwarded_append_is_answered_as_in_process(pair: tuple[Ledger, Ledger], clock: StepClock) -> None:
    """A forwarder gets its receipt (verified), or exactly the typed error the sequencer's
    process would get for the same submission (class, message, check, stream head); a bad
    signature is refused in the forwarder, before anything is sent."""
    seq, fwd = pair
    alice = AgentSigner("alice", Ed25519PrivateKey.generate(), origin=fwd.origin)
    reg = fwd.append([alice.registration(client_time_us=clock())], operator=True)[0]
    served = _seq(seq).server
    assert _seq(fwd).forwarded == 1 and served is not None and served.forwarded == 1
    assert seq.store.leaf(reg.index) == reg.leaf
    good = alice.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=clock())
    forged = dataclasses.replace(good, signature=bytes(64))
    size = seq.size()
    with pytest.raises(SignatureError):
        fwd.append([forged])
    assert _seq(fwd).forwarded == 1 and seq.size() == size  # refused before it was sent
    r = fwd.append([good])[0]
    assert r.index == size and _seq(fwd).forwarded == 2
    dup = alice.event("commitment", {"promise": "q"}, version=0, prev=None, client_time_us=clock())
    with pytest.raises(VersionConflictError) as there:
        fwd.append([dup])
    with pytest.raises(VersionConflictError) as here:
        seq.append([dup])
    assert str(there.value) == str(here.value)
    for e in (there.value, here.value):
        assert (e.agent, e.kind, e.head_version, e.head_leaf_hash) == (
            "alice",
            "commitment",
            0,
            r.leaf_hash.hex(),
        )
    with pytest.raises(KeyStateError) as twice:  # a verification error keeps its check
        fwd.append([alice.registration(client_time_us=clock())], operator=True)
    assert twice.value.check == "key.registered" and seq.size() == size + 1


def _raw(seq: Ledger) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(_seq(seq).paths.socket))
    return s


def test_a_stranger_hello_or_a_malformed_frame_appends_nothing(pair: tuple[Ledger, Ledger]) -> None:
    seq, _ = pair
    size = seq.size()
    paths = _seq(seq).paths
    assert stat.S_IMODE(paths.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.socket_dir.stat().st_mode) == 0o700
    with _raw(seq) as s:  # another log's key
        s.sendall(_frame(1, b"other.example/log+00000000+AAAA"))
        kind, payload = read_frame(s, first_timeout=30)
        assert isinstance(err := decode_response(kind, payload), MalformedError)
        assert err.check == "sequencer.frame"
        with pytest.raises(EOFError):
            read_frame(s, first_timeout=30)
    for bad in (b"\xff" + bytes(16), b"\x00\x00\x00", b""):
        with _raw(seq) as s:
            s.sendall(_frame(1, seq.vkey.encode()))
            assert read_frame(s, first_timeout=30) == (1, seq.vkey.encode())
            s.sendall(_frame(2, bad))
            kind, payload = read_frame(s, first_timeout=30)
            assert isinstance(decode_response(kind, payload), MalformedError)
            with pytest.raises(EOFError):
                read_frame(s, first_timeout=30)
    assert seq.size() == size


def test_when_the_sequencer_goes_the_next_append_takes_its_place(
    pair: tuple[Ledger, Ledger], clock: StepClock
) -> None:
    """The sequencer closes (as a dying one does): the forwarder's idle connection is seen
    closed, nothing was in flight, so its next append takes the lock and is appended there;
    the old sequencer's process then forwards to the new one."""
    seq, fwd = pair
    bob = AgentSigner("bob", Ed25519PrivateKey.generate(), origin=fwd.origin)
    fwd.append([bob.registration(client_time_us=clock())], operator=True)
    assert _seq(fwd).forwarded == 1
    _seq(seq).close()
    head = fwd.append(
        [bob.event("commitment", {"promise": "1"}, version=0, prev=None, client_time_us=clock())]
    )[0]
    assert _seq(fwd).is_sequencer and not _seq(seq).is_sequencer
    r = seq.append(
        [
            bob.event(
                "commitment", {"promise": "2"}, version=1, prev=head.leaf_hash.hex(), client_time_us=clock()
            )
        ]
    )[0]
    assert _seq(seq).forwarded == 1 and r.index == head.index + 1
    _check_log(seq, [(head.index, head.leaf_hash.hex()), (r.index, r.leaf_hash.hex())])


def test_a_thread_leading_a_local_batch_appends_locally(
    pair: tuple[Ledger, Ledger], clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forwarder's thread that leads a local batch holds the writer lock: an append it makes
    then is appended in its own batch, never forwarded to a sequencer that would wait for
    that lock (a deadlock)."""
    seq, fwd = pair
    carol = AgentSigner("carol", Ed25519PrivateKey.generate(), origin=fwd.origin)
    fwd.append([carol.registration(client_time_us=clock())], operator=True)
    assert _seq(fwd).forwarded == 1
    gc = fwd.group_commit
    assert gc is not None
    monkeypatch.setattr(gc, "leading", lambda: True)
    r = fwd.append(
        [carol.event("commitment", {"promise": "x"}, version=0, prev=None, client_time_us=clock())]
    )[0]
    assert _seq(fwd).forwarded == 1 and _seq(fwd).local == 1
    assert seq.store.leaf(r.index) == r.leaf


def test_a_vouched_key_that_is_not_the_logs_does_not_pass_a_bad_signature(
    pair: tuple[Ledger, Ledger], clock: StepClock
) -> None:
    """A forwarder may say it verified an event's signature with a key; the sequencer takes
    that only for the key the log names for the envelope. A frame vouching for another key
    over a forged signature is checked in full and refused, and nothing is appended."""
    seq, fwd = pair
    dave = AgentSigner("dave", Ed25519PrivateKey.generate(), origin=fwd.origin)
    fwd.append([dave.registration(client_time_us=clock())], operator=True)
    good = dave.event("commitment", {"promise": "d"}, version=0, prev=None, client_time_us=clock())
    forged = dataclasses.replace(good, signature=bytes(64))
    size = seq.size()
    with _raw(seq) as s:
        s.sendall(_frame(1, seq.vkey.encode()))
        assert read_frame(s, first_timeout=30) == (1, seq.vkey.encode())
        s.sendall(encode_request(forged, operator=False, system=False, verified_with=bytes(32)))
        answer = decode_response(*read_frame(s, first_timeout=30))
    assert isinstance(answer, SignatureError)
    assert seq.size() == size

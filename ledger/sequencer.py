"""One sequencer per host: every process's single appends meet in one group commit.

``engram serve --workers N`` runs N processes, each with its own :class:`~ledger.log.Ledger`
and its own :class:`~ledger.groupcommit.GroupCommit`; without this module their batches take
turns at the host's writer lock, so N workers make N batches of 1/N the size. With
``ENGRAM_SEQUENCER=host`` (the default of ``engram serve`` with more than one worker) the
first process to take an exclusive lock file beside the database becomes the host's
*sequencer*: it listens on a unix socket and appends what the others forward to it through its
own group commit, so that one batch (one transaction, one checkpoint signature, one fsync)
holds the events of every worker and thread of the host. The others are *forwarders*.

Where things live (:func:`host_paths`): SQLite, ``<db>-sequencer.lock`` and the directory
``<db>-sequencer.d`` beside the database file; PostgreSQL, the same names under
``ENGRAM_HOME`` keyed by a hash of the database URL (one sequencer per host and database;
several hosts each run their own and meet at the database's lock).

Why this is correct:

* **Correctness never depends on the sequencer.** Every batch, wherever it is appended,
  goes through ``Ledger.append_batch`` under the store's writer lock (SQLite: the flock file
  and ``BEGIN IMMEDIATE``; PostgreSQL: ``log_state FOR UPDATE``), exactly as before. The
  sequencer only changes *which process* appends an event; a forwarder that reaches no
  sequencer appends locally, and local appends interleave with the sequencer's batches
  through that same lock. Several hosts on one PostgreSQL database are several sequencers,
  ordered by the database's lock.
* **Crashes.** An event is acknowledged only with the receipt of a committed batch
  (:mod:`ledger.groupcommit`); the forwarder hands on exactly what the sequencer sent. If the
  sequencer dies (SIGKILL) its uncommitted batch rolls back with its transaction and its
  socket closes: every forwarder with a request in flight reads EOF and raises
  :class:`StorageError` (``check`` in the message: ``sequencer.lost``; HTTP 503), never a
  receipt. Such an event may or may not have committed (as for any client whose server died
  mid-request); a retry learns which from its stream's head (a version conflict). If a
  forwarder dies, its socket closes; the sequencer's answer is then written to nobody, and
  the entry stays in the log: unacknowledged, which is allowed, never lost once acknowledged.
* **Failover.** The lock file is held by the sequencer's open descriptor: the kernel drops it
  when the process dies, however it dies. A forwarder's next append, finding no one at the
  socket, tries the lock: it becomes the sequencer (removing the dead one's socket file, which
  only the lock holder may) or connects to whoever did. A forwarder that cannot reach one at
  that moment appends locally.
* **Send failed, nothing appended.** A request whose bytes could not all be sent never
  reached the sequencer as a whole frame, and a partial frame is refused: such a request is
  appended locally instead. Only a request sent in full and not answered is unknown, and it
  is answered with the retryable error above.
* **One bad event refused alone.** The forwarder runs the stateless checks in its caller's
  thread before forwarding (``Ledger.append`` prepares the event), so a malformed or
  badly signed event is refused there, alone, before it is queued anywhere; the sequencer
  prepares what it receives again (it trusts no bytes it did not check) and hands it to its
  group commit, which refuses a failing event alone (:mod:`ledger.groupcommit`). Its typed
  error comes back as the same class with the same message, check name and stream head.
* **Ordering.** The sequencer's group commit keeps its queue order and at most one event per
  stream per batch; a forwarder's caller waits for its answer before its next append of the
  same stream, so per-stream order is the order callers were answered in, as in process.
* **No deadlock.** The sequencer never waits on a forwarder (it only answers), and a forwarder
  never forwards while it holds the writer lock: a thread leading a local batch appends what
  it appends itself (``GroupCommit.leading``). A sequencer that hangs is given up after
  ``ANSWER_TIMEOUT_S`` with the same retryable error.
* **The socket's trust boundary.** The socket sits in a directory of mode 0700 and is itself
  0600, and the sequencer reads each peer's uid (``SO_PEERCRED``) and refuses any but its
  own (:func:`check_peer`); a forwarder likewise sends only to a listener of its own uid.
  A peer of the same uid can read the log's key and open the
  database, so trusting what it vouches for grants nothing it lacks: its ``operator``/``system``
  flags, and that it verified an event's signature with a given public key (the forwarder's
  prepare did; the sequencer then skips that one Ed25519 check, about half a millisecond a
  forwarded event on these cores, but only when that key is the very key this log names for
  the envelope, ``Ledger.verified``). Everything else the sequencer prepares and checks
  itself, and under the writer lock it authorizes the key at the entry's index as always. A hello frame names the log's
  verifier key: a process of another log (misconfigured to the same database) is refused.
  Frames are length-prefixed and bounded, and parsed strictly (:func:`decode_request`,
  :func:`decode_response`): a malformed frame is refused and closes the connection, and
  nothing of it is appended.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import socket
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from engram.protocol import errors as E
from engram.protocol.wire import InclusionProof, Outcome, Receipt, Submission
from ledger.envelopes import Prepared
from verifier.merkle import verify_inclusion
from verifier.note import VerifierKey, verify_checkpoint

if TYPE_CHECKING:
    from ledger.log import Ledger

__all__ = [
    "MAX_FRAME",
    "HostPaths",
    "HostSequencer",
    "attach",
    "check_peer",
    "decode_request",
    "decode_response",
    "encode_error",
    "encode_receipt",
    "encode_request",
    "host_paths",
]

_log = logging.getLogger("engram.log")

#: A frame's payload is at most this many bytes (a request: an event within the ledger's
#: largest body bound; an answer: a receipt with its proof and outcome).
MAX_FRAME = 17 * 1024 * 1024
#: Bounds of a request's fields (the ledger bounds them further when it prepares).
_MAX_FIELD = {"envelope": 65_536, "signature": 1024, "body": 16 * 1024 * 1024 + 1024, "salt": 1024}
_HEADER = struct.Struct(">I")
_VERSION = 1
_HELLO, _APPEND = 1, 2
_OK, _ERR = 1, 2
#: Connections one sequencer serves at once (a forwarder beyond appends locally).
MAX_CONNECTIONS = 256
#: How long a forwarder waits for the answer to a request it sent (then: StorageError).
ANSWER_TIMEOUT_S = 120.0
#: How long the rest of a frame may take once its length arrived.
FRAME_TIMEOUT_S = 10.0
#: Longest unix socket path (sun_path is 108 bytes with its NUL).
_MAX_SOCKET_PATH = 100


def _refuse(why: str) -> E.MalformedError:
    return E.MalformedError(f"sequencer frame refused: {why}", check="sequencer.frame")


# -- paths ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPaths:
    """Where a host's sequencer of one database keeps its lock and its socket."""

    lock: Path
    socket_dir: Path

    @property
    def socket(self) -> Path:
        return self.socket_dir / "s"


def host_paths(database_url: str, home: Path) -> HostPaths:
    """SQLite: beside the database file; PostgreSQL (or another server): under ``home``,
    named by a hash of the URL (the URL may hold a password: only its hash is written).
    A socket path too long for ``sun_path`` moves into a 0700 directory of this uid under
    the system's temporary directory, named by the lock's hash."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        db = Path(url.database).resolve()
        base = db.with_name(db.name + "-sequencer")
    else:
        digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
        base = home.resolve() / f"sequencer-{digest}"
    lock = base.with_name(base.name + ".lock")
    socket_dir = base.with_name(base.name + ".d")
    if len(str(socket_dir / "s")) > _MAX_SOCKET_PATH:
        tag = hashlib.sha256(str(lock).encode()).hexdigest()[:24]
        socket_dir = Path(tempfile.gettempdir()) / f"engram-seq-{os.getuid()}" / tag
    return HostPaths(lock=lock, socket_dir=socket_dir)


def _private_dir(path: Path) -> None:
    """Create ``path`` (and a missing parent under the temporary directory) mode 0700, and
    refuse one that is a symlink, not ours, or open to others."""
    for d in (path.parent, path) if path.parent.name.startswith("engram-seq-") else (path,):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)
        st = d.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise E.StorageError(
                f"[sequencer.socket_dir] {d} is not a directory of mode 0700 owned by uid {os.getuid()}"
            )


# -- the peer check ------------------------------------------------------------------------

_CRED = struct.Struct("iII")  # struct ucred: pid (pid_t), uid and gid (uid_t, gid_t: unsigned)


def check_peer(creds: bytes, own_uid: int) -> int:
    """The peer's uid from ``SO_PEERCRED``'s bytes when it is ``own_uid``; else raises
    :class:`AuthError` ``sequencer.peer_uid`` (another user's process may not append)."""
    if len(creds) != _CRED.size:
        raise E.AuthError("the peer's credentials could not be read", check="sequencer.peer_uid")
    uid: int = _CRED.unpack(creds)[1]
    if uid != own_uid:
        raise E.AuthError(
            f"a process of uid {uid} may not use uid {own_uid}'s sequencer", check="sequencer.peer_uid"
        )
    return uid


# -- framing -------------------------------------------------------------------------------


def _frame(kind: int, payload: bytes) -> bytes:
    body = bytes((_VERSION, kind)) + payload
    if len(body) > MAX_FRAME:
        raise E.LimitExceededError(
            f"a frame of {len(body)} bytes is over {MAX_FRAME}", check="sequencer.frame"
        )
    return _HEADER.pack(len(body)) + body


def _read_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    """``n`` bytes, all by ``deadline`` (``time.monotonic``; None: no bound): a timeout on
    each ``recv`` alone would let a peer sending a byte at a time hold a frame open forever."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{n - len(buf)} bytes of a frame still missing at its deadline")
            sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket, *, first_timeout: float | None) -> tuple[int, bytes]:
    """One frame: (kind, payload). Its length within ``first_timeout`` (None: waits), the
    rest within :data:`FRAME_TIMEOUT_S` of it (or ``first_timeout``, when given), in all:
    else TimeoutError. EOFError when the peer closed before or within it; MalformedError
    when its length or version is out of bounds (its bytes are not read)."""
    sock.settimeout(None)
    start = None if first_timeout is None else time.monotonic() + first_timeout
    (n,) = _HEADER.unpack(_read_exact(sock, _HEADER.size, start))
    if not 2 <= n <= MAX_FRAME:
        raise _refuse(f"length {n} is outside [2, {MAX_FRAME}]")
    rest = FRAME_TIMEOUT_S if first_timeout is None else first_timeout
    data = _read_exact(sock, n, time.monotonic() + rest)
    sock.settimeout(rest)  # what the answer's send may take
    if data[0] != _VERSION:
        raise _refuse(f"version {data[0]} is not {_VERSION}")
    return data[1], data[2:]


def encode_request(
    sub: Submission, *, operator: bool, system: bool, verified_with: bytes | None = None
) -> bytes:
    """An append's frame: flags, then envelope, signature, body and salt, each u32-prefixed,
    then (flag bit 2) the 32-byte public key the forwarder verified the signature with."""
    if verified_with is not None and len(verified_with) != 32:
        raise E.MalformedError("a verifying key is 32 bytes", check="sequencer.frame")
    flags = int(operator) | int(system) << 1 | int(verified_with is not None) << 2
    parts = [bytes((flags,))]
    for name in ("envelope", "signature", "body", "salt"):
        value: bytes = getattr(sub, name)
        if len(value) > _MAX_FIELD[name]:
            raise E.LimitExceededError(
                f"{name} of {len(value)} bytes is too large to forward", check="sequencer.frame"
            )
        parts += [_HEADER.pack(len(value)), value]
    if verified_with is not None:
        parts.append(verified_with)
    return _frame(_APPEND, b"".join(parts))


def decode_request(payload: bytes) -> tuple[Submission, bool, bool, bytes | None]:
    """The inverse of :func:`encode_request` on an append frame's payload: (submission,
    operator, system, verifying key or None). Strict: unknown flag bits, a field over its
    bound, a short or over-long payload are refused."""
    if not payload:
        raise _refuse("empty append")
    flags = payload[0]
    if flags & ~0b111:
        raise _refuse(f"unknown flag bits {flags:#x}")
    pos, fields = 1, {}
    for name in ("envelope", "signature", "body", "salt"):
        if pos + _HEADER.size > len(payload):
            raise _refuse(f"truncated before {name}")
        (n,) = _HEADER.unpack_from(payload, pos)
        pos += _HEADER.size
        if n > _MAX_FIELD[name] or pos + n > len(payload):
            raise _refuse(f"{name} length {n} is out of bounds")
        fields[name] = payload[pos : pos + n]
        pos += n
    key = None
    if flags & 4:
        key = payload[pos : pos + 32]
        if len(key) != 32:
            raise _refuse("the verifying key is cut short")
        pos += 32
    if pos != len(payload):
        raise _refuse(f"{len(payload) - pos} bytes after the last field")
    return Submission(**fields), bool(flags & 1), bool(flags & 2), key


def _hello(vkey: str) -> bytes:
    return _frame(_HELLO, vkey.encode())


# Answers are JSON: small, and parsed with explicit types below.


def _receipt_json(r: Receipt, depth: int = 0) -> dict[str, Any]:
    p = r.proof
    out: dict[str, Any] = {
        "index": r.index,
        "timestamp_us": r.timestamp_us,
        "leaf_hash": r.leaf_hash.hex(),
        "leaf": r.leaf.hex(),
        "agent": r.agent,
        "kind": r.kind,
        "version": r.version,
        "checkpoint": r.checkpoint.hex(),
        "proof": {
            "index": p.index,
            "size": p.size,
            "leaf_hash": p.leaf_hash.hex(),
            "root": p.root.hex(),
            "hashes": [h.hex() for h in p.hashes],
            "checkpoint": None if p.checkpoint is None else p.checkpoint.hex(),
        },
        "answer": None,
    }
    a = r.answer
    if a is not None and depth < 2:
        out["answer"] = {
            "named": a.named,
            "ref": a.ref,
            "distilled": None if a.distilled is None else _receipt_json(a.distilled, depth + 1),
            "entries": a.entries,
            "decisions": [_receipt_json(d, depth + 1) for d in a.decisions],
            "current": [list(c) for c in a.current],
        }
    return out


def encode_receipt(r: Receipt) -> bytes:
    return _frame(_OK, json.dumps(_receipt_json(r), separators=(",", ":")).encode())


#: The error classes an answer may name (the protocol's tree); any other error is sent as the
#: nearest of these it derives from.
_ERRORS: dict[str, type[E.EngramError]] = {
    name: cls
    for name in E.__all__
    if isinstance(cls := getattr(E, name), type) and issubclass(cls, E.EngramError)
}


def encode_error(e: BaseException) -> bytes:
    """The typed error the caller would have had in process: its class (or the nearest
    protocol class it derives from), message, check and a conflict's stream head."""
    name = next((c.__name__ for c in type(e).__mro__ if _ERRORS.get(c.__name__) is c), None)
    if name is None:  # not an Engram error: an operational failure of the sequencer
        name, message = "StorageError", f"[sequencer.failed] the host sequencer failed: {type(e).__name__}"
    else:
        message = str(e)
    out: dict[str, Any] = {"type": name, "message": message}
    for attr in ("check", "agent", "kind", "head_version", "head_leaf_hash", "retry_after_s"):
        if hasattr(e, attr):
            out[attr] = getattr(e, attr)
    return _frame(_ERR, json.dumps(out, separators=(",", ":")).encode())


def _get(d: Mapping[str, Any], key: str, typ: type) -> Any:
    v = d.get(key)
    if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
        raise _refuse(f"{key} is not {typ.__name__}")
    return v


def _hex(d: Mapping[str, Any], key: str) -> bytes:
    try:
        return bytes.fromhex(_get(d, key, str))
    except ValueError:
        raise _refuse(f"{key} is not hex") from None


def _opt_hex(d: Mapping[str, Any], key: str) -> bytes | None:
    return None if d.get(key) is None else _hex(d, key)


def _receipt(d: Any, depth: int = 0) -> Receipt:
    if not isinstance(d, dict) or depth > 2:
        raise _refuse("a receipt is not an object")
    p = _get(d, "proof", dict)
    hashes = _get(p, "hashes", list)
    if len(hashes) > 64 or not all(isinstance(h, str) for h in hashes):
        raise _refuse("proof hashes")
    try:
        proof_hashes = tuple(bytes.fromhex(h) for h in hashes)
    except ValueError:
        raise _refuse("proof hashes are not hex") from None
    answer = None
    if (a := d.get("answer")) is not None:
        if not isinstance(a, dict):
            raise _refuse("answer is not an object")
        decisions = _get(a, "decisions", list)
        current = _get(a, "current", list)
        if len(decisions) > 1024 or len(current) > 1024:
            raise _refuse("answer too large")
        pairs = []
        for c in current:
            if not (
                isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], str | None)
            ):
                raise _refuse("answer.current")
            pairs.append((c[0], c[1]))
        ref = a.get("ref")
        if not isinstance(ref, str | None):
            raise _refuse("answer.ref")
        answer = Outcome(
            named=_get(a, "named", bool),
            ref=ref,
            distilled=None if a.get("distilled") is None else _receipt(a["distilled"], depth + 1),
            entries=_get(a, "entries", int),
            decisions=tuple(_receipt(x, depth + 1) for x in decisions),
            current=tuple(pairs),
        )
    return Receipt(
        index=_get(d, "index", int),
        timestamp_us=_get(d, "timestamp_us", int),
        leaf_hash=_hex(d, "leaf_hash"),
        leaf=_hex(d, "leaf"),
        agent=_get(d, "agent", str),
        kind=_get(d, "kind", str),
        version=_get(d, "version", int),
        checkpoint=_hex(d, "checkpoint"),
        proof=InclusionProof(
            index=_get(p, "index", int),
            size=_get(p, "size", int),
            leaf_hash=_hex(p, "leaf_hash"),
            root=_hex(p, "root"),
            hashes=proof_hashes,
            checkpoint=_opt_hex(p, "checkpoint"),
        ),
        answer=answer,
    )


def _error(d: Any) -> E.EngramError:
    if not isinstance(d, dict):
        raise _refuse("an error is not an object")
    cls = _ERRORS.get(_get(d, "type", str))
    if cls is None:
        raise _refuse(f"unknown error type {d['type']!r}")
    message = _get(d, "message", str)
    if issubclass(cls, E.ConflictError):
        hv, hh = d.get("head_version"), d.get("head_leaf_hash")
        if not (isinstance(hv, int | None) and not isinstance(hv, bool) and isinstance(hh, str | None)):
            raise _refuse("a conflict's head")
        return cls(
            message,
            agent=_get(d, "agent", str),
            kind=_get(d, "kind", str),
            head_version=hv,
            head_leaf_hash=hh,
        )
    if issubclass(cls, E.VerificationError | E.LogIntegrityError):
        return cls(message, check=_get(d, "check", str))
    if issubclass(cls, E.RateLimitedError):
        return cls(message, retry_after_s=_get(d, "retry_after_s", int))
    return cls(message)


def decode_response(kind: int, payload: bytes) -> Receipt | E.EngramError:
    """An answer frame: the receipt, or the typed error to raise. Strict: an unknown kind,
    bad JSON, a missing or mistyped field is refused (``sequencer.frame``)."""
    if kind not in (_OK, _ERR):
        raise _refuse(f"unknown answer kind {kind}")
    try:
        d = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise _refuse("an answer is not JSON") from None
    return _receipt(d) if kind == _OK else _error(d)


def _check_receipt(
    r: Receipt, key: VerifierKey, notes: dict[bytes, tuple[int, bytes]], sub: Submission
) -> None:
    """A forwarded receipt is checked as the ledger checks its own before returning it: the
    checkpoint note's signature (``notes``: notes already verified, with their size and
    root; this one is added), that the proof is to that note's size and root, that the leaf
    hashes to the receipt's leaf hash, and the inclusion proof; and that it is the receipt
    of ``sub``, the event forwarded: a genuine receipt of another entry (anyone can read
    one from the log) is no answer (the leaf holds the event's signature, which the log
    verified over its envelope, and the receipt names the leaf's stream and version)."""
    from verifier.event import Leaf
    from verifier.merkle import leaf_hash

    try:
        leaf = Leaf.from_bytes(r.leaf)
    except E.EngramError:
        raise E.ProofError("a forwarded receipt's leaf does not parse", check="sequencer.receipt") from None
    env = leaf.envelope
    if leaf.signature != sub.signature or (r.index, r.agent, r.kind, r.version) != (
        leaf.index,
        env.agent,
        env.kind,
        env.version,
    ):
        raise E.ProofError(
            "a forwarded receipt is not the receipt of the event forwarded", check="sequencer.receipt"
        )
    tree = notes.get(r.checkpoint)
    if tree is None:
        cp = verify_checkpoint(r.checkpoint, key)
        tree = notes[r.checkpoint] = (cp.size, cp.root)
    if (r.proof.size, r.proof.root) != tree:
        raise E.ProofError("a forwarded receipt's proof is not to its checkpoint", check="sequencer.receipt")
    if leaf_hash(r.leaf) != r.leaf_hash or r.proof.leaf_hash != r.leaf_hash or r.proof.index != r.index:
        raise E.ProofError("a forwarded receipt's leaf does not match its hash", check="sequencer.receipt")
    verify_inclusion(
        leaf_hash=r.leaf_hash, index=r.index, size=r.proof.size, proof=r.proof.hashes, root=r.proof.root
    )


# -- the sequencer's side ------------------------------------------------------------------


class _Server:
    """The sequencer: accepts same-uid forwarders and appends their events through the
    process's group commit, one thread per connection (bounded)."""

    def __init__(self, ledger: Ledger, listener: socket.socket) -> None:
        self.ledger = ledger
        self.listener = listener
        self.uid = os.getuid()
        self.vkey = ledger.vkey
        self._live = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        #: appends served for forwarders (for the tests and the benchmarks)
        self.forwarded = 0
        self._thread = threading.Thread(target=self._accept, name="engram-sequencer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving: the listener and every connection close (a forwarder's request in
        flight is answered ``sequencer.lost`` by its forwarder, as if this process died)."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            if not self._live.acquire(blocking=False):
                conn.close()  # full: that forwarder appends locally
                continue
            threading.Thread(
                target=self._serve, args=(conn,), name="engram-sequencer-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        with self._conns_lock:
            self._conns.add(conn)
        try:
            if self._closed.is_set():  # accepted as it closed: the forwarder finds another
                return
            check_peer(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size), self.uid)
            kind, payload = read_frame(conn, first_timeout=FRAME_TIMEOUT_S)
            if kind != _HELLO or payload != self.vkey.encode():
                raise _refuse("the hello does not name this log's key")
            conn.sendall(_hello(self.vkey))
            while True:
                kind, payload = read_frame(conn, first_timeout=None)
                if kind != _APPEND:
                    raise _refuse(f"unknown request kind {kind}")
                conn.sendall(self._answer(payload))
        except (EOFError, OSError):
            pass  # the forwarder went away (or died): nothing more to answer
        except E.EngramError as e:  # a refused peer or frame: say why, then close
            _log.warning("sequencer: refused a connection: %s", e)
            with contextlib.suppress(OSError):
                conn.sendall(encode_error(e))
        finally:
            with self._conns_lock:
                self._conns.discard(conn)
            conn.close()
            self._live.release()

    def _answer(self, payload: bytes) -> bytes:
        sub, operator, system, verified_with = decode_request(payload)  # a bad frame ends the connection
        try:
            if verified_with is not None:
                # The forwarder (same uid, see the module docstring) verified the signature of
                # exactly these bytes with this key; prepare still requires that key to be
                # the one this log names for the envelope, and checks everything else.
                self.ledger.verified(sub.signature, sub.envelope, verified_with)
            prepared = self.ledger.prepare(sub, operator=operator, system=system)
            gc = self.ledger.group_commit
            if gc is None:
                (receipt,) = self.ledger.append_batch([prepared], operator=operator, system=system)
            else:
                receipt = gc.append(prepared, operator=operator, system=system)
        except Exception as e:  # the caller's own answer, as in process
            return encode_error(e)
        with self._conns_lock:
            self.forwarded += 1
        return encode_receipt(receipt)


# -- the forwarder's side ------------------------------------------------------------------


def _alive(conn: socket.socket) -> bool:
    """An idle connection still open at the other end (no EOF, no stray bytes, no error).
    It is left with a send timeout of :data:`FRAME_TIMEOUT_S`, as a new connection has:
    blocking without one, a request larger than the socket's buffer sent to a sequencer that
    hangs (stopped, or stuck) would wait forever instead of being appended locally."""
    try:
        conn.setblocking(False)
        try:
            conn.recv(1, socket.MSG_PEEK)  # returns: b"" (closed) or bytes out of turn
            return False
        finally:
            conn.settimeout(FRAME_TIMEOUT_S)
    except BlockingIOError:
        return True
    except OSError:
        return False


class HostSequencer:
    """What ``Ledger.append`` hands a single event to under ``ENGRAM_SEQUENCER=host`` (see
    the module docstring): the process's own group commit while it is the host's sequencer,
    else a forwarded request, else (no sequencer reachable) the local group commit."""

    def __init__(self, ledger: Ledger, paths: HostPaths) -> None:
        self.ledger = ledger
        self.paths = paths
        #: the uid a sequencer this process forwards to must run as (its own)
        self.uid = os.getuid()
        self._mutex = threading.Lock()
        self._idle: list[socket.socket] = []  # connected, hello done, no request in flight
        #: checkpoint notes whose signature verified -> (size, root)
        self._notes: dict[bytes, tuple[int, bytes]] = {}
        self._lock_fd: int | None = None
        self.server: _Server | None = None
        self._warned = False  # _cannot_lead said why
        #: appends this process forwarded, and appended locally while no sequencer answered
        self.forwarded = 0
        self.local = 0

    @property
    def is_sequencer(self) -> bool:
        return self.server is not None

    def append(self, sub: Submission | Prepared, *, operator: bool = False, system: bool = False) -> Receipt:
        gc = self.ledger.group_commit
        # A thread leading a local batch holds the writer lock: forwarding from it would wait
        # for a sequencer that waits for that lock.
        if self.server is None and not (gc is not None and gc.leading()):
            conn = self._connection()
            if conn is not None:
                return self._forward(conn, sub, operator=operator, system=system)
        return self._local(sub, operator=operator, system=system)

    def close(self) -> None:
        """Stop serving (forwarders fail over) and release the lock."""
        with self._mutex:
            idle, self._idle = self._idle, []
            server, self.server = self.server, None
            fd, self._lock_fd = self._lock_fd, None
        for c in idle:
            c.close()
        if server is not None:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                self.paths.socket.unlink()
        if fd is not None:
            os.close(fd)  # releases the lock

    def _local(self, sub: Submission | Prepared, *, operator: bool, system: bool) -> Receipt:
        gc = self.ledger.group_commit
        if self.server is None:
            with self._mutex:
                self.local += 1
        if gc is None:
            (r,) = self.ledger.append_batch([sub], operator=operator, system=system)
            return r
        return gc.append(sub, operator=operator, system=system)

    def _forward(
        self, conn: socket.socket, sub: Submission | Prepared, *, operator: bool, system: bool
    ) -> Receipt:
        raw, key = (sub.sub, sub.verified_with) if isinstance(sub, Prepared) else (sub, None)
        frame = encode_request(raw, operator=operator, system=system, verified_with=key)
        try:
            conn.sendall(frame)
        except OSError:
            # Not sent whole: the sequencer holds no complete request, so nothing of it can
            # be appended there. Append it here instead.
            conn.close()
            return self._local(sub, operator=operator, system=system)
        try:
            kind, payload = read_frame(conn, first_timeout=ANSWER_TIMEOUT_S)
            answer = decode_response(kind, payload)
        except (EOFError, OSError, E.MalformedError) as e:
            conn.close()
            raise E.StorageError(
                f"[sequencer.lost] the host sequencer did not answer ({type(e).__name__}); the event "
                "may or may not be logged: read the stream's head before retrying"
            ) from None
        if isinstance(answer, E.EngramError):
            self._release(conn)
            raise answer
        try:
            self._check(answer, raw)
        except E.VerificationError:
            conn.close()
            raise
        self._release(conn)
        with self._mutex:
            self.forwarded += 1
        return answer

    def _check(self, r: Receipt, sub: Submission) -> None:
        """:func:`_check_receipt`, each checkpoint note's signature once: a batch's receipts
        share one note, and checking exact bytes under one key is a pure function (the
        latest 64 notes checked are remembered)."""
        with self._mutex:
            notes = dict(self._notes)
        _check_receipt(r, self.ledger.verifier_key, notes, sub)
        if r.checkpoint not in self._notes:
            with self._mutex:
                self._notes[r.checkpoint] = notes[r.checkpoint]
                while len(self._notes) > 64:
                    self._notes.pop(next(iter(self._notes)))

    def _release(self, conn: socket.socket) -> None:
        with self._mutex:
            if len(self._idle) < 64:
                self._idle.append(conn)
                return
        conn.close()

    def _connection(self) -> socket.socket | None:
        """An idle connection to the sequencer, a new one, or None when this process became
        the sequencer or none answers (the caller then appends locally)."""
        while True:
            with self._mutex:
                if not self._idle:
                    break
                idle = self._idle.pop()
            if _alive(idle):
                return idle
            idle.close()  # the sequencer went away while it was idle: nothing was in flight
        conn = self._connect()
        if conn is not None and self.server is not None:  # another thread made this process it
            conn.close()
            return None
        if conn is not None:
            return conn
        self._try_to_lead()
        return None

    def _connect(self) -> socket.socket | None:
        path = str(self.paths.socket)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(FRAME_TIMEOUT_S)
            s.connect(path)
            # Whoever listens there must be of this uid, as the sequencer requires of its
            # peers: a process of another uid that bound the path first (a planted directory)
            # would otherwise be sent every forwarded event and could answer for the log.
            check_peer(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size), self.uid)
            s.sendall(_hello(self.ledger.vkey))
            kind, payload = read_frame(s, first_timeout=FRAME_TIMEOUT_S)
            if kind != _HELLO or payload != self.ledger.vkey.encode():
                raise _refuse("the sequencer's hello names another log")
        except (OSError, EOFError, E.EngramError):
            s.close()
            return None
        return s

    def _try_to_lead(self) -> None:
        """Take the host's sequencer lock if nobody holds it, and serve."""
        with self._mutex:
            if self.server is not None:
                return
            try:
                # O_NOFOLLOW: a symlink planted at the lock's path would have this process
                # create (and lock) a file wherever it points, with its privileges.
                fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            except OSError as e:
                self._cannot_lead(f"its lock {self.paths.lock} cannot be opened ({e.strerror})")
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return  # another process leads (or is starting to)
                raise
            try:
                listener = self._listen()
            except (E.StorageError, OSError) as e:
                os.close(fd)  # releases the lock: another process may serve
                self._cannot_lead(str(e))
                return
            except BaseException:
                os.close(fd)
                raise
            self._lock_fd = fd
            self.server = _Server(self.ledger, listener)
            _log.info("this process is the host's sequencer (%s)", self.paths.socket)

    def _cannot_lead(self, why: str) -> None:
        """This process cannot serve (its lock or socket directory is not safely its own,
        e.g. planted by another user in a shared directory): it appends locally, as when no
        sequencer answers, and says so once. Refusing the append instead would let whoever
        can create a file beside the database stop every write of the host."""
        if not self._warned:
            self._warned = True
            _log.warning("this process cannot be the host's sequencer, it appends locally: %s", why)

    def _listen(self) -> socket.socket:
        _private_dir(self.paths.socket_dir)
        path = self.paths.socket
        # Only the lock's holder gets here: a socket file left is a dead sequencer's.
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(str(path))  # inside the 0700 directory: no one else reaches it meanwhile
            os.chmod(path, 0o600)
        except BaseException:
            s.close()
            raise
        s.listen(128)
        return s


def attach(ledger: Ledger, database_url: str, home: Path) -> HostSequencer:
    """Route ``ledger``'s single appends through the host's sequencer (``ENGRAM_SEQUENCER=host``)."""
    seq = HostSequencer(ledger, host_paths(database_url, home))
    ledger.sequencer = seq
    return seq

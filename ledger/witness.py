"""``engram witness``: a small c2sp.org/tlog-witness witness, and the log's side of witnessing.

A witness holds its own Ed25519 cosigner key and, per log origin it is told to trust, the
newest checkpoint it cosigned. It cosigns a submitted checkpoint only if the log's key
signed it and a consistency proof shows that it extends that checkpoint; so a log that
shows two different trees to two parties cannot gather cosignatures for both.

Witness directory layout::

    <dir>/witness.key                    PRIVATE+KEY+<name>+<id>+base64(0x04 || seed), 0600
    <dir>/logs                           one trusted log verifier key per line
    <dir>/state/<hex SHA-256(origin)>    the newest cosigned checkpoint of that log, verbatim

HTTP (tlog-witness v1): ``POST /add-checkpoint`` answers 200 with the cosignature line, 400
malformed or old size beyond the checkpoint, 403 no trusted log signature, 404 unknown
origin, 409 old size not the size last cosigned (body ``<size>\\n``, ``text/x.tlog.size``)
or same size with another root, 413 body too large, 422 consistency proof fails.
``GET /<hex SHA-256(origin)>/checkpoint`` returns the newest cosigned checkpoint.

The check of the old size and the write of the new state happen under one lock (a thread
lock and an ``flock`` on the state directory), so two racing submissions cannot roll the
witness's state back; the state file is written to a temporary name, fsynced and renamed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import ConfigError
from engram.protocol.keyfiles import fsync_dir, write_private_file
from ledger.outbound import OutboundError, post
from verifier.errors import MalformedError, ProofError, SignatureError, UnknownKeyError, VerificationError
from verifier.merkle import EMPTY_ROOT, HASH_SIZE, verify_consistency
from verifier.note import SignedNote, VerifierKey, b64decode_strict, parse_decimal
from verifier.witness import (
    ALG_COSIGNATURE_V1,
    MAX_POLICY_BYTES,
    MAX_REQUEST_BYTES,
    WitnessError,
    WitnessKey,
    WitnessPolicy,
    check_witness_name,
    cosign,
    cosigner_key_id,
    format_add_checkpoint,
    parse_add_checkpoint,
    verify_cosignatures,
)

__all__ = [
    "Reply",
    "Witness",
    "WitnessRound",
    "WitnessSubmitter",
    "add_log",
    "init_witness",
    "load_submitter",
    "load_witness",
    "serve_witness",
]

SIZE_TYPE = "text/x.tlog.size"


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"


def _format_signer_key(name: str, key: Ed25519PrivateKey) -> str:
    pub = key.public_key().public_bytes_raw()
    blob = base64.b64encode(bytes([ALG_COSIGNATURE_V1]) + key.private_bytes_raw()).decode("ascii")
    return f"PRIVATE+KEY+{name}+{cosigner_key_id(name, pub).hex()}+{blob}"


def _parse_signer_key(text: str) -> tuple[str, Ed25519PrivateKey]:
    parts = text.strip().split("+", 4)
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise ConfigError("witness key file is not a PRIVATE+KEY+name+id+key signer key")
    _, _, name, kid, blob = parts
    try:
        raw = b64decode_strict(blob, check="witness.key")
    except VerificationError as e:
        raise ConfigError("witness key file holds invalid base64") from e
    if len(raw) != 33 or raw[0] != ALG_COSIGNATURE_V1:
        raise ConfigError("witness key file does not hold a cosignature/v1 Ed25519 seed")
    key = Ed25519PrivateKey.from_private_bytes(raw[1:])
    if cosigner_key_id(name, key.public_key().public_bytes_raw()).hex() != kid:
        raise ConfigError("witness key file's key id does not match its key")
    return name, key


def _checkpoint_fields(text: str) -> tuple[str, int, bytes]:
    """Origin, size and root of checkpoint note text (extension lines are allowed)."""
    lines = text.split("\n")
    if len(lines) < 4:
        raise MalformedError("checkpoint needs origin, size and root lines", check="checkpoint.format")
    origin, size_text, root_text = lines[:3]
    if not origin:
        raise MalformedError("checkpoint origin is empty", check="checkpoint.origin")
    size = parse_decimal(size_text, check="checkpoint.size")
    root = b64decode_strict(root_text, check="checkpoint.root")
    if len(root) != HASH_SIZE:
        raise MalformedError("checkpoint root is not 32 bytes", check="checkpoint.root")
    return origin, size, root


class Witness:
    """The witness's checks and state; :func:`serve_witness` puts HTTP in front of it."""

    def __init__(
        self,
        directory: Path,
        *,
        name: str,
        key: Ed25519PrivateKey,
        logs: Sequence[VerifierKey],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = directory
        self.name = name
        self.key = key
        self.vkey = WitnessKey.from_public_key(name, key.public_key().public_bytes_raw())
        self.logs: dict[str, list[VerifierKey]] = {}
        for log in logs:
            self.logs.setdefault(log.name, []).append(log)
        self.clock = clock
        self.state_dir = directory / "state"
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._last_ts = 0

    def _path(self, origin: str) -> Path:
        return self.state_dir / hashlib.sha256(origin.encode("utf-8")).hexdigest()

    def latest(self, origin: str) -> bytes | None:
        """The newest checkpoint this witness cosigned for ``origin`` (with its cosignature)."""
        try:
            return self._path(origin).read_bytes()
        except FileNotFoundError:
            return None

    def latest_by_hash(self, origin_hash: str) -> bytes | None:
        for origin in self.logs:
            if hashlib.sha256(origin.encode("utf-8")).hexdigest() == origin_hash:
                return self.latest(origin)
        return None

    def add_checkpoint(self, body: bytes) -> Reply:
        """Handle one add-checkpoint request body (tlog-witness v1 semantics)."""
        try:
            req = parse_add_checkpoint(body)
            note = SignedNote.parse(req.checkpoint)
            origin, size, root = _checkpoint_fields(note.text)
        except VerificationError as e:
            return Reply(400, f"{e}\n".encode())
        keys = self.logs.get(origin)
        if keys is None:
            return Reply(404, b"unknown log origin\n")
        try:
            note.verify(keys)
        except (SignatureError, UnknownKeyError) as e:
            return Reply(403, f"{e}\n".encode())
        if req.old_size > size:
            return Reply(400, b"old size is beyond the checkpoint size\n")
        if size == 0 and root != EMPTY_ROOT:
            return Reply(422, b"an empty tree's root is SHA-256 of nothing\n")
        with self._lock, self._flock():
            stored = self.latest(origin)
            stored_size, stored_root = 0, EMPTY_ROOT
            if stored is not None:
                _, stored_size, stored_root = _checkpoint_fields(SignedNote.parse(stored).text)
            if req.old_size != stored_size:
                return Reply(409, f"{stored_size}\n".encode(), SIZE_TYPE)
            if req.old_size == 0 and req.proof:
                return Reply(422, b"old size 0 takes an empty consistency proof\n")
            if size == stored_size and root != stored_root:
                return Reply(409, f"{stored_size}\n".encode(), SIZE_TYPE)
            if req.old_size > 0 or size == 0:
                try:
                    verify_consistency(
                        old_size=stored_size,
                        new_size=size,
                        old_root=stored_root,
                        new_root=root,
                        proof=list(req.proof),
                    )
                except (ProofError, MalformedError) as e:
                    return Reply(422, f"{e}\n".encode())
            ts = max(int(self.clock()), self._last_ts, 1)
            self._last_ts = ts
            line = cosign(note.text, self.name, self.key, ts)
            # Keep the log's signature(s) and this witness's cosignature: the stored note is
            # proof of what the log showed, and what the witness answered.
            mine = (
                note.text
                + "\n"
                + "".join(
                    f"\u2014 {s.name} {base64.b64encode(s.key_id + s.signature).decode('ascii')}\n"
                    for s in note.signatures
                    if any(s.name == k.name and s.key_id == k.key_id for k in keys)
                )
                + line
            )
            self._persist(origin, mine.encode("utf-8"))
        return Reply(200, line.encode("utf-8"))

    def _flock(self) -> _FileLock:
        return _FileLock(self.state_dir / ".lock")

    def _persist(self, origin: str, data: bytes) -> None:
        path = self._path(origin)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(self.state_dir)


class _FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def init_witness(directory: Path, name: str) -> WitnessKey:
    """Create a witness directory with a fresh key; returns its cosigner verifier key."""
    try:
        check_witness_name(name)
    except WitnessError as e:
        raise ConfigError(str(e)) from e
    key = Ed25519PrivateKey.generate()
    write_private_file(directory / "witness.key", _format_signer_key(name, key))
    (directory / "logs").touch(mode=0o600, exist_ok=True)
    return WitnessKey.from_public_key(name, key.public_key().public_bytes_raw())


def add_log(directory: Path, vkey: str) -> VerifierKey:
    """Trust a log's verifier key (appends it to ``<dir>/logs``)."""
    try:
        key = VerifierKey.parse(vkey.strip())
    except MalformedError as e:
        raise ConfigError(f"not a log verifier key: {e}") from e
    path = directory / "logs"
    if not (directory / "witness.key").exists():
        raise ConfigError(f"{directory} is not a witness directory; run `engram witness init`")
    existing = path.read_text(encoding="utf-8").split() if path.exists() else []
    if str(key) not in existing:
        with path.open("a", encoding="utf-8") as f:
            f.write(f"{key}\n")
            f.flush()
            os.fsync(f.fileno())
    return key


def load_witness(directory: Path, *, clock: Callable[[], float] = time.time) -> Witness:
    path = directory / "witness.key"
    try:
        name, key = _parse_signer_key(path.read_text(encoding="ascii"))
    except FileNotFoundError as e:
        raise ConfigError(f"{path} does not exist; run `engram witness init`") from e
    logs_path = directory / "logs"
    logs: list[VerifierKey] = []
    if logs_path.exists():
        for n, line in enumerate(logs_path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                try:
                    logs.append(VerifierKey.parse(line.strip()))
                except MalformedError as e:
                    raise ConfigError(f"{logs_path}:{n}: {e}") from e
    return Witness(directory, name=name, key=key, logs=logs, clock=clock)


#: The witness server's bounds (~130 idle half-sent requests stopped it
#: answering): connections served at once (more are closed at once), and the time one
#: connection may take, head and body of every request on it included.
MAX_CONNECTIONS = 64
CONNECTION_DEADLINE_S = 10.0


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once; every connection is
    shut down ``deadline_s`` after it was accepted, however slowly it sends."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        max_connections: int,
        deadline_s: float,
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self.deadline_s = deadline_s

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: refuse at once rather than queue
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        watchdog = threading.Timer(self.deadline_s, _shut, args=(request,))
        watchdog.daemon = True
        watchdog.start()
        try:
            super().process_request_thread(request, client_address)
        finally:
            watchdog.cancel()
            self._slots.release()


def _shut(sock: Any) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def serve_witness(
    witness: Witness,
    host: str,
    port: int,
    *,
    max_connections: int = MAX_CONNECTIONS,
    deadline_s: float = CONNECTION_DEADLINE_S,
) -> ThreadingHTTPServer:
    """An HTTP server for ``witness`` (call ``serve_forever`` on it), bounded in connections
    and in the time each may take (:data:`MAX_CONNECTIONS`, :data:`CONNECTION_DEADLINE_S`)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = deadline_s  # each read; the server's watchdog bounds the whole connection

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def do_POST(self) -> None:
            if self.path != "/add-checkpoint":
                self._send(Reply(404, b"not found\n"))
                return
            length_text = self.headers.get("Content-Length")
            if length_text is None or not length_text.isdigit():
                self.close_connection = True
                self._send(Reply(411, b"Content-Length required\n"))
                return
            length = int(length_text)
            if length > MAX_REQUEST_BYTES:
                self.close_connection = True
                self._send(Reply(413, b"request too large\n"))
                return
            self._send(witness.add_checkpoint(self.rfile.read(length)))

        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            note = None
            if len(parts) == 2 and parts[1] == "checkpoint" and len(parts[0]) == 64:
                note = witness.latest_by_hash(parts[0])
            if note is None:
                self._send(Reply(404, b"not found\n"))
            else:
                self._send(Reply(200, note))

    return _BoundedServer((host, port), Handler, max_connections=max_connections, deadline_s=deadline_s)


# -- the log's side ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """The outcome of submitting one checkpoint to one witness."""

    witness: str
    cosignature: str | None
    error: str | None = None


#: A witness's reply: a cosignature line or a size; nothing legitimate comes near this.
MAX_REPLY_BYTES = 64 * 1024


class WitnessSubmitter:
    """Submits checkpoints to the witnesses of a policy that have URLs (tlog-witness client).

    ``prove(old, new)`` gives the consistency proof hashes between two sizes of the log."""

    def __init__(self, policy: WitnessPolicy, *, timeout_s: float = 5.0) -> None:
        """``timeout_s`` bounds each submission as a whole (connect, send, reply), not each
        read (ledger.outbound)."""
        self.policy = policy
        self.targets = [w for w in policy.witnesses if w.url]
        if not self.targets:
            raise ConfigError("the witness policy names no witness URL to submit checkpoints to")
        self.timeout_s = timeout_s

    def submit(
        self,
        checkpoint: bytes,
        size: int,
        known_sizes: dict[str, int],
        prove: Callable[[int, int], Sequence[bytes]],
    ) -> list[Submitted]:
        """Submit to every witness; ``known_sizes`` maps witness name to the size it last
        cosigned for this log (0 if none), and is updated. Never raises for one witness's
        failure: each result says what happened."""
        out = []
        for w in self.targets:
            out.append(self._one(w.name, w.key, w.url or "", checkpoint, size, known_sizes, prove))
        return out

    def _one(
        self,
        name: str,
        key: WitnessKey,
        url: str,
        checkpoint: bytes,
        size: int,
        known: dict[str, int],
        prove: Callable[[int, int], Sequence[bytes]],
    ) -> Submitted:
        old = known.get(name, 0)
        for _attempt in range(2):
            if old > size:
                return Submitted(witness=name, cosignature=None, error=f"witness holds size {old} > {size}")
            proof = prove(old, size) if 0 < old < size else []
            body = format_add_checkpoint(old, proof, checkpoint)
            try:
                resp = post(
                    url.rstrip("/") + "/add-checkpoint",
                    body,
                    {"Content-Type": "text/plain; charset=utf-8"},
                    deadline_s=self.timeout_s,
                    max_bytes=MAX_REPLY_BYTES,
                )
            except OutboundError as e:
                return Submitted(witness=name, cosignature=None, error=f"unreachable: {e}")
            text = resp.body.decode("utf-8", "replace")
            if resp.status == 409 and resp.content_type.startswith(SIZE_TYPE):
                try:
                    old = parse_decimal(text.removesuffix("\n"), check="witness.size")
                except MalformedError:
                    return Submitted(witness=name, cosignature=None, error="malformed 409 body")
                known[name] = old
                continue
            if resp.status != 200:
                return Submitted(
                    witness=name,
                    cosignature=None,
                    error=f"HTTP {resp.status}: {text[:200].strip()}",
                )
            lines = [ln + "\n" for ln in text.split("\n") if ln]
            cosigned = checkpoint + "".join(lines).encode("utf-8")
            try:
                verified = verify_cosignatures(cosigned, [key])
            except VerificationError as e:
                return Submitted(witness=name, cosignature=None, error=f"bad cosignature: {e}")
            if key not in verified:
                return Submitted(witness=name, cosignature=None, error="no cosignature by the witness's key")
            mine = [ln for ln in lines if _line_key_id(ln, key.name) == key.key_id]
            known[name] = size
            return Submitted(witness=name, cosignature=mine[0])
        return Submitted(witness=name, cosignature=None, error="witness state keeps moving")


def _line_key_id(line: str, name: str) -> bytes | None:
    prefix = f"\u2014 {name} "
    if not line.startswith(prefix):
        return None
    try:
        return base64.b64decode(line[len(prefix) :].strip(), validate=True)[:4]
    except ValueError:
        return None


def load_submitter(path: Path, *, timeout_s: float = 5.0) -> WitnessSubmitter:
    """The submitter of the tlog-policy file at ``path`` (``ENGRAM_WITNESS_POLICY``)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_POLICY_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"ENGRAM_WITNESS_POLICY: cannot read {path}: {e}") from e
    try:
        policy = WitnessPolicy.parse(data)
    except VerificationError as e:
        raise ConfigError(f"ENGRAM_WITNESS_POLICY {path}: {e}") from e
    return WitnessSubmitter(policy, timeout_s=timeout_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessRound:
    """One submission of a checkpoint to every witness: the results, and whether the
    cosignatures now stored for it meet the policy's quorum."""

    size: int
    results: tuple[Submitted, ...]
    quorum: bool
    note: bytes

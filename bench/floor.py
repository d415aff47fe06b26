"""The floor of the write path (issue 28, Deliver 1): the least a signed durable log must do,
on the same stack, and one load generator shared by it and Engram.

The floor server (``uvicorn bench.floor:app_factory --factory --workers 2 --http httptools``,
Starlette, no SQLAlchemy; ``--http h11`` beside it for the parser comparison) answers ``POST /append`` with a signed event in Engram's wire form (base64
``envelope``, ``signature``, ``body``, ``salt``):

1. parse the JSON request and the envelope (``verifier.event.Envelope.from_bytes``, the
   strict JCS parse Engram runs too);
2. verify the Ed25519 signature with the key the envelope names (from the keys file the load
   generator wrote; the floor has no key history);
3. hand it to this worker's group commit: one thread takes everything queued, takes the next
   index under a lock every worker shares (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an
   advisory transaction lock), builds each leaf (index, timestamp, envelope, signature) and
   its RFC 9162 leaf hash, inserts leaves and bodies with ``executemany`` and commits
   (SQLite WAL with ``synchronous=FULL``; PostgreSQL's default durable commit);
4. answer ``{"index": n}`` once the commit returned.

No checkpoint, no proof, no stream or key-state check, no gate: what Engram adds to this is
per batch or cheap per event, so the gap between the two is overhead (the issue's premise).

The load generator (:func:`load`) posts pre-signed events from separate processes with a
fixed number of requests in flight (one keep-alive connection per in-flight slot), and
reports events/s over the wall time and p50/p99 of each request. Engram gets the same wire
bytes on its record route (``POST /v1/agents/{agent}/records``), answered with its full
receipt; every event is the first of its own stream, so pre-signing needs no server state.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import queue
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.common import run_procs
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Submission
from verifier.event import Envelope, verify_event_signature
from verifier.merkle import leaf_hash

__all__ = ["EventSet", "FloorServer", "app_factory", "load", "presign"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS leaves (idx BIGINT PRIMARY KEY, leaf_hash BYTEA NOT NULL, leaf BYTEA NOT NULL)",
    "CREATE TABLE IF NOT EXISTS bodies (idx BIGINT PRIMARY KEY, salt BYTEA NOT NULL, body BYTEA NOT NULL)",
)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


# -- the pre-signed events -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventSet:
    """``n`` agents, each with its registration and one signed record (the first of its
    stream), as request bodies; and each key id's public key (hex) for the floor."""

    agents: list[str]
    registrations: list[dict[str, str]]
    records: list[bytes]  # the JSON request body of each record
    keys: dict[str, str]


def _wire(sub: Submission) -> dict[str, str]:
    return {
        "envelope": _b64(sub.envelope),
        "signature": _b64(sub.signature),
        "body": _b64(sub.body),
        "salt": _b64(sub.salt),
    }


def presign(origin: str, n: int, tag: str) -> EventSet:
    """``n`` fresh agents of log ``origin`` with a ~250-byte commitment each."""
    now = time.time_ns() // 1000
    agents, regs, records, keys = [], [], [], {}
    for i in range(n):
        signer = AgentSigner(f"floor-{tag}-{i}", Ed25519PrivateKey.generate(), origin=origin)
        agents.append(signer.agent)
        regs.append(_wire(signer.registration(client_time_us=now)))
        sub = signer.event(
            "commitment", {"promise": f"promise {i}: " + "h" * 220}, version=0, prev=None, client_time_us=now
        )
        records.append(json.dumps(_wire(sub), separators=(",", ":")).encode())
        keys[signer.key_id] = signer.public_key.hex()
    return EventSet(agents=agents, registrations=regs, records=records, keys=keys)


# -- the load generator ----------------------------------------------------------------------


def _load_proc(
    url: str, jobs: Sequence[tuple[str, bytes]], slots: int, ready: Any, go: Any, results: Any
) -> None:
    """``slots`` threads, each with one keep-alive connection, posting its share of ``jobs``."""
    host, port = url.removeprefix("http://").split(":")
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    shares = [jobs[i::slots] for i in range(slots)]

    def work(share: Sequence[tuple[str, bytes]]) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        mine: list[float] = []
        try:
            for path, body in share:
                t = time.perf_counter()
                conn.request("POST", path, body=body, headers={"content-type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                mine.append(time.perf_counter() - t)
                if r.status not in (200, 201):
                    with lock:
                        errors.append(f"{r.status}: {data[:200]!r}")
                    return
        except Exception as e:
            with lock:
                errors.append(f"{type(e).__name__}: {e}")
        finally:
            conn.close()
            with lock:
                lat.extend(mine)

    threads = [threading.Thread(target=work, args=(s,)) for s in shares if s]
    ready.put(len(threads))
    go.wait()
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put({"lat": lat, "errors": errors, "start": t0, "end": time.monotonic()})


@dataclass(frozen=True, slots=True)
class Load:
    rate: float  # events/s over the wall time
    p50_ms: float
    p99_ms: float
    events: int


def load(url: str, jobs: Sequence[tuple[str, bytes]], *, inflight: int = 64, procs: int = 4) -> Load:
    """Post every ``(path, body)`` of ``jobs`` with ``inflight`` requests in flight from
    ``procs`` processes; every answer must be a 200 or 201."""
    procs = max(1, min(procs, inflight))
    parts = [list(jobs[i::procs]) for i in range(procs)]
    slots = [inflight // procs + (1 if i < inflight % procs else 0) for i in range(procs)]
    got = run_procs(_load_proc, [(url, part, n) for part, n in zip(parts, slots, strict=True)])
    errors = [e for g in got for e in g["errors"]]
    if errors:
        raise RuntimeError(f"{len(errors)} load threads failed, first: {errors[0]}")
    lat = sorted(x for g in got for x in g["lat"])
    wall = max(g["end"] for g in got) - min(g["start"] for g in got)
    return Load(
        rate=len(lat) / wall,
        p50_ms=lat[len(lat) // 2] * 1000,
        p99_ms=lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000,
        events=len(lat),
    )


# -- the floor server ------------------------------------------------------------------------


class _Store:
    """One worker's connection and group commit."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pg = url.startswith("postgresql")
        self.queue: queue.Queue[tuple[bytes, bytes, bytes, bytes, list[Any], threading.Event]] = queue.Queue()
        threading.Thread(target=self._run, name="floor-commit", daemon=True).start()

    def _connect(self) -> Any:
        if self.pg:
            import psycopg

            return psycopg.connect(self.url, autocommit=True)
        conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), isolation_level=None, timeout=60)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def append(self, envelope: bytes, signature: bytes, body: bytes, salt: bytes) -> int:
        out: list[Any] = []
        done = threading.Event()
        self.queue.put((envelope, signature, body, salt, out, done))
        done.wait()
        if isinstance(out[0], BaseException):
            raise out[0]
        return int(out[0])

    def _run(self) -> None:
        conn = self._connect()
        while True:
            batch = [self.queue.get()]
            while True:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            try:
                first = self._commit(conn, batch)
                for i, item in enumerate(batch):
                    item[4].append(first + i)
            except BaseException as e:  # every waiter hears of it
                for item in batch:
                    item[4].append(e)
            for item in batch:
                item[5].set()

    def _commit(self, conn: Any, batch: Sequence[tuple[bytes, bytes, bytes, bytes, Any, Any]]) -> int:
        ts = time.time_ns() // 1000
        if self.pg:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(28)")  # the lock every worker shares
                cur.execute("SELECT coalesce(max(idx) + 1, 0) FROM leaves")
                first = int(cur.fetchone()[0])
                leaves, bodies = self._rows(first, ts, batch)
                cur.executemany("INSERT INTO leaves VALUES (%s, %s, %s)", leaves)
                cur.executemany("INSERT INTO bodies VALUES (%s, %s, %s)", bodies)
            return first
        conn.execute("BEGIN IMMEDIATE")  # the database's write lock, shared by the workers
        try:
            first = int(conn.execute("SELECT coalesce(max(idx) + 1, 0) FROM leaves").fetchone()[0])
            leaves, bodies = self._rows(first, ts, batch)
            conn.executemany("INSERT INTO leaves VALUES (?, ?, ?)", leaves)
            conn.executemany("INSERT INTO bodies VALUES (?, ?, ?)", bodies)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return first

    @staticmethod
    def _rows(
        first: int, ts: int, batch: Sequence[tuple[bytes, bytes, bytes, bytes, Any, Any]]
    ) -> tuple[list[tuple[int, bytes, bytes]], list[tuple[int, bytes, bytes]]]:
        leaves, bodies = [], []
        for i, (envelope, signature, body, salt, _, _) in enumerate(batch):
            idx = first + i
            leaf = idx.to_bytes(8, "big") + (ts + i).to_bytes(8, "big") + envelope + signature
            leaves.append((idx, leaf_hash(leaf), leaf))
            bodies.append((idx, salt, body))
        return leaves, bodies


def app_factory() -> Any:
    """The floor's ASGI app (``FLOOR_DB``: a SQLite or libpq URL; ``FLOOR_KEYS``: the keys file)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    keys = {k: bytes.fromhex(v) for k, v in json.loads(Path(os.environ["FLOOR_KEYS"]).read_text()).items()}
    store = _Store(os.environ["FLOOR_DB"])

    def append(request_body: bytes) -> Response:
        try:
            ev = json.loads(request_body)
            envelope = base64.b64decode(ev["envelope"], validate=True)
            signature = base64.b64decode(ev["signature"], validate=True)
            body = base64.b64decode(ev["body"], validate=True)
            salt = base64.b64decode(ev["salt"], validate=True)
            env = Envelope.from_bytes(envelope)
            pk = keys.get(env.key_id)
            if pk is None:
                return JSONResponse({"error": "unknown key"}, status_code=422)
            verify_event_signature(env, signature, pk, envelope_jcs=envelope)
        except Exception as e:
            return JSONResponse({"error": f"{type(e).__name__}: {e}"}, status_code=422)
        return JSONResponse({"index": store.append(envelope, signature, body, salt)}, status_code=201)

    async def route(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        return await run_in_threadpool(append, await request.body())

    return Starlette(routes=[Route("/append", route, methods=["POST"])])


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FloorServer:
    """The floor on loopback: ``workers`` uvicorn processes over one database."""

    def __init__(
        self, db_url: str, keys: dict[str, str], workdir: Path, workers: int = 2, *, parser: str = "httptools"
    ) -> None:
        """``parser``: uvicorn's HTTP parser, ``httptools`` (what ``engram serve`` runs by default) or
        ``h11`` (its ``ENGRAM_HTTP_PARSER=h11``)."""
        workdir.mkdir(parents=True, exist_ok=True)
        keys_file = workdir / "floor-keys.json"
        keys_file.write_text(json.dumps(keys))
        if db_url.startswith("postgresql"):
            import psycopg

            with psycopg.connect(db_url, autocommit=True) as c:
                for stmt in _SCHEMA:
                    c.execute(stmt)
        else:
            with sqlite3.connect(db_url.removeprefix("sqlite:///")) as c:
                c.execute("PRAGMA journal_mode=WAL")
                for stmt in _SCHEMA:
                    c.execute(stmt.replace("BYTEA", "BLOB"))
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "FLOOR_DB": db_url, "FLOOR_KEYS": str(keys_file)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "bench.floor:app_factory",
                "--factory",
                "--workers",
                str(workers),
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--no-access-log",
                "--http",
                parser,
            ],
            env=env,
            cwd=str(Path(__file__).resolve().parents[1]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(300):
            if self.proc.poll() is not None:
                raise RuntimeError("the floor server exited; run uvicorn bench.floor:app_factory by hand")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("POST", "/append", body=b"{}")
                c.getresponse().read()
                c.close()
                break
            except OSError:
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

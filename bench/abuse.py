"""Others' latency while someone abuses the service (issue 15, Deliver 6).

A real ``engram serve --workers 2`` on loopback. One *victim* agent appends events one at a
time through the shipped client (signed, receipt and proof verified), and its latency is
measured in three situations, each figure from the same run:

* ``alone``: nobody else is using the service.
* ``burst``: one other agent, within its own rate limit (the limits are set out of reach),
  sends signed recall requests from ``burst_threads`` threads in 4 processes without pause.
  Measured twice, on two servers that differ only in fair admission (api/fairness.py):
  ``fair`` (the defaults: 32 requests at once per worker, at most 2 of one identity, the
  waiting ones admitted round-robin across identities) and ``unfair``
  (``ENGRAM_MAX_ACTIVE_REQUESTS`` and ``ENGRAM_MAX_ACTIVE_PER_IDENTITY`` 1024: every request
  admitted at once, as before). The burst's own recall rate is reported too.
* ``flood``: one client address (127.0.0.2, so not the victim's 127.0.0.1) sends anonymous
  ``GET /checkpoint`` as fast as 4 processes with keep-alive connections can, under the
  default per-address limit; the share of its requests refused with 429 is reported.

Nothing is asserted on times; ``--smoke`` only checks that each figure exists.
"""

from __future__ import annotations

import http.client
import multiprocessing as mp
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.bench_http import TOKEN, Server
from bench.common import database, fig, median, pct, plain_pg
from bench.plan import Config
from bench.report import Figure

_PROCS = 4


def _burst_proc(url: str, vkey: str, key_pem: bytes, threads: int, ready: Any, stop: Any, out: Any) -> None:
    """One process of the bursting agent: ``threads`` threads of signed recalls until ``stop``."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    from engram.client import AgentMemory
    from engram.client.http import HttpTransport
    from engram.client.sdk import Agent
    from engram.protocol.signer import AgentSigner

    key = load_pem_private_key(key_pem, None)
    done = [0]
    errors: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        transport = HttpTransport(url, operator_token=TOKEN)
        signer = AgentSigner("burst", key, origin=vkey.split("+")[0])  # type: ignore[arg-type]
        memory = AgentMemory(Agent(signer, log_vkey=vkey, transport=transport, state_dir=None), transport)
        while not stop.is_set():
            try:
                memory.recall("what did I promise about the deadline", limit=5)
            except Exception as e:  # counted; a burst may overload a service without fairness
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            with lock:
                done[0] += 1

    pool = [threading.Thread(target=work) for _ in range(threads)]
    ready.put(1)
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put((done[0], errors))


def _flood_proc(url: str, ready: Any, stop: Any, out: Any) -> None:
    """One process of the flooding address: keep-alive GET /checkpoint from 127.0.0.2."""
    port = int(url.rsplit(":", 1)[1])
    statuses: dict[int, int] = {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0))
    ready.put(1)
    try:
        while not stop.is_set():
            conn.request("GET", "/checkpoint")
            r = conn.getresponse()
            r.read()
            statuses[r.status] = statuses.get(r.status, 0) + 1
            if r.getheader("connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection(
                    "127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0)
                )
    except Exception as e:
        statuses[-1] = statuses.get(-1, 0) + 1
        out.put((statuses, f"{type(e).__name__}: {e}"))
        return
    finally:
        conn.close()
    out.put((statuses, None))


def _victim_agent(server: Server, tag: str) -> Any:
    """The measured agent, registered (and one event appended) before any load starts."""
    from engram.client.http import HttpTransport
    from engram.client.sdk import Agent

    agent = Agent.generate(
        f"victim-{tag}",
        log_vkey=server.vkey,
        transport=HttpTransport(server.url, operator_token=TOKEN),
        state_dir=None,
    )
    agent.register()
    agent.append("commitment", {"promise": "warm up"})
    return agent


def _victim(agent: Any, n: int) -> tuple[list[float], int]:
    """Latencies of ``n`` sequential appends, and how many failed (a failed append counts
    with the time it took to fail: the client's 60 s timeout, say)."""
    lat, failed = [], 0
    for i in range(n):
        t = time.perf_counter()
        try:
            agent.append("commitment", {"promise": f"victim promise {i}: " + "v" * 200})
        except Exception:
            failed += 1
        lat.append(time.perf_counter() - t)
    return lat, failed


def _with_load(target: Any, args_of: Any, run: Any) -> tuple[Any, list[Any]]:
    """Start ``_PROCS`` load processes, wait until they are ready, ``run()``, stop them."""
    ctx = mp.get_context("spawn")
    ready, stop, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_of(i), ready, stop, out)) for i in range(_PROCS)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=300)
        time.sleep(1.0)  # the load is running
        result = run()
    finally:
        stop.set()
        got = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    return result, got


def _register_burst(server: Server) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    from engram.client import AgentMemory
    from engram.client.http import HttpTransport
    from engram.client.sdk import Agent
    from engram.protocol.signer import AgentSigner

    key = Ed25519PrivateKey.generate()
    transport = HttpTransport(server.url, operator_token=TOKEN)
    agent = Agent(
        AgentSigner("burst", key, origin=server.vkey.split("+")[0]),
        log_vkey=server.vkey,
        transport=transport,
        state_dir=None,
    )
    agent.register()
    memory = AgentMemory(agent, transport)
    for i in range(20):
        memory.write(
            content=f"the deadline for report {i} is Friday; I promised to send it", category="COMMITMENT"
        )
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


@contextmanager
def _server(cfg: Config, backend: str, tag: str, **kw: Any) -> Iterator[Server]:
    """``engram serve`` on its own new home and database (a log belongs to one key)."""
    with database(backend, cfg.pg_url, cfg.workdir, f"abuse-{tag}") as url:
        home = Path(cfg.workdir) / f"abuse-{backend}-{tag}"
        server = Server(home, None if backend == "sqlite" else plain_pg(url), cfg.sizes.http_workers, **kw)
        try:
            yield server
        finally:
            server.stop()


def _burst(cfg: Config, backend: str, env: dict[str, str], tag: str) -> tuple[list[float], int, float]:
    s = cfg.sizes
    with _server(cfg, backend, tag, env=env) as server:
        key_pem = _register_burst(server)
        victim = _victim_agent(server, tag)
        threads = max(1, s.burst_threads // _PROCS)
        t0 = time.monotonic()
        (lat, failed), got = _with_load(
            _burst_proc,
            lambda i: (server.url, server.vkey, key_pem, threads),
            lambda: _victim(victim, s.victim_events),
        )
        wall = time.monotonic() - t0
    errors = [e for _, errs in got for e in errs]
    done = sum(n for n, _ in got)
    if not done:
        raise RuntimeError(f"no recall of the burst succeeded; first error: {errors[:1]}")
    return lat, failed + len(errors), done / wall


def run(cfg: Config, out: list[Figure], backend: str) -> None:
    s = cfg.sizes
    name = "SQLite" if backend == "sqlite" else "PostgreSQL"
    key = f"abuse.{backend}"
    n = f"{s.victim_events} sequential signed appends, {s.http_workers} workers, {name}"

    # alone, then a flood from another address, on one server with the default limits
    with _server(cfg, backend, "limits", limits="default") as server:
        victim = _victim_agent(server, "alone")
        alone, failed_alone = _victim(victim, s.victim_events)
        (flood, failed_flood), got = _with_load(
            _flood_proc, lambda i: (server.url,), lambda: _victim(victim, s.victim_events)
        )
    if failed_alone:
        raise RuntimeError(f"{failed_alone} of the victim's appends failed with nobody else on the service")
    crashed = [e for _, e in got if e]
    if crashed:
        raise RuntimeError(f"a flood process failed: {crashed[0]}")
    statuses: dict[int, int] = {}
    for st, _ in got:
        for code, count in st.items():
            statuses[code] = statuses.get(code, 0) + count
    if set(statuses) - {200, 429}:
        raise RuntimeError(f"the flood was answered {statuses}, not only 200 and 429")
    total = sum(statuses.values())
    out.append(
        fig(f"{key}.alone.p50", f"victim appends alone, p50, {name}", median(alone) * 1000, "ms", note=n)
    )
    out.append(
        fig(f"{key}.alone.p95", f"victim appends alone, p95, {name}", pct(alone, 0.95) * 1000, "ms", note=n)
    )
    out.append(
        fig(
            f"{key}.flood.p95",
            f"victim p95, one address flooding GET /checkpoint, {name}",
            pct(flood, 0.95) * 1000,
            "ms",
            note=f"{n}; {failed_flood} failed",
        )
    )
    out.append(
        fig(
            f"{key}.flood.refused",
            f"the flooding address's requests refused (429), {name}",
            100.0 * statuses.get(429, 0) / max(1, total),
            "%",
            note=f"{total} requests from {_PROCS} processes, default per-address limit",
        )
    )
    off = {"ENGRAM_MAX_ACTIVE_REQUESTS": "1024", "ENGRAM_MAX_ACTIVE_PER_IDENTITY": "1024"}
    for env, tag, how in (({}, "fair", "fair admission"), (off, "unfair", "no fair admission")):
        lat, failed, rate = _burst(cfg, backend, env, tag)
        what = f"one agent bursting signed recalls ({s.burst_threads} threads), {how}"
        note = f"{n}; {failed} requests failed, the victim's counted with the time they took to fail"
        out.append(
            fig(
                f"{key}.burst.{tag}.p95",
                f"victim p95, {what}, {name}",
                pct(lat, 0.95) * 1000,
                "ms",
                note=note,
            )
        )
        out.append(
            fig(f"{key}.burst.{tag}.rate", f"the burst's recalls/s, {what}, {name}", rate, "requests/s")
        )

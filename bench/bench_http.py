"""Benchmark harness for the HTTP service: prints figures and ratios; asserts no timings.

    python bench/bench_http.py            # full run
    python bench/bench_http.py --smoke    # CI smoke run
    python bench/bench_http.py --no-pg    # SQLite only

A real ``engram serve`` (uvicorn) on loopback, 1 and 2 workers, driven by the shipped
client (``engram.client.http``): every write is signed, durable, and its receipt's checkpoint
signature and inclusion proof are verified by the client before the next one; every read
is a signed request with a fresh nonce (so it also writes the nonce row). Concurrency: one
client thread per agent. Figures: signed writes/s, p50/p95 write latency, signed tier-view
and recall latency, unauthenticated checkpoint reads/s, and the ratio of HTTP writes to the
in-process SDK path.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_log import pg_database
from engram.client import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent

TOKEN = "E2Y0l8a3vkoRKoUWuZzfwZ0KWPacqDGAg_OQAbLN"
ENGRAM = str(Path(sys.executable).parent / "engram")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


class Server:
    def __init__(
        self,
        home: Path,
        db_url: str | None,
        workers: int,
        *,
        env: dict[str, str] | None = None,
        limits: str = "off",
    ) -> None:
        self.env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_OPERATOR_TOKEN": TOKEN}
        for name in [n for n in self.env if n.startswith(("ENGRAM_RATE_LIMIT_", "ENGRAM_MAX_ACTIVE"))]:
            del self.env[name]
        if limits == "off":
            # A benchmark measures the service, not its limits (the largest values the settings
            # take): every load client is on loopback, one address.
            self.env |= {
                "ENGRAM_RATE_LIMIT_PER_MINUTE": "1000000",
                "ENGRAM_RATE_LIMIT_BURST": "1000000",
                "ENGRAM_RATE_LIMIT_PER_CLIENT_PER_MINUTE": "10000000",
                "ENGRAM_RATE_LIMIT_PER_CLIENT_BURST": "10000000",
            }
        self.env |= env or {}
        self.env.pop("ENGRAM_DATABASE_URL", None)
        if db_url:
            self.env["ENGRAM_DATABASE_URL"] = db_url
        if not (home / "log.key").exists():
            subprocess.run(
                [ENGRAM, "init", "--origin", "bench.example/http"],
                env=self.env,
                check=True,
                capture_output=True,
            )
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [ENGRAM, "serve", "--port", str(self.port), "--workers", str(workers)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(300):
            if self.proc.poll() is not None:
                raise RuntimeError("engram serve exited; run it by hand to see why")
            try:
                if httpx.get(self.url + "/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        self.vkey = subprocess.run(
            [ENGRAM, "log", "key"], env=self.env, check=True, capture_output=True, text=True
        ).stdout.strip()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _agent_work(
    url: str,
    vkey: str,
    name: str,
    n: int,
    lat: list[float],
    reads: list[float],
    recalls: list[float],
    errors: list[BaseException],
) -> None:
    try:
        _agent_loop(url, vkey, name, n, lat, reads, recalls)
    except BaseException as e:  # reported by the main thread
        errors.append(e)


def _agent_loop(
    url: str, vkey: str, name: str, n: int, lat: list[float], reads: list[float], recalls: list[float]
) -> None:
    http = HttpTransport(url, operator_token=TOKEN)
    mem = AgentMemory(Agent.generate(name, log_vkey=vkey, transport=http), http)
    mem.agent.register()
    for i in range(n):
        t = time.perf_counter()
        mem.agent.append(
            "memory.written",
            {
                "category": "LEARNING",
                "content": f"queue {name} observation {i}: retries need idempotency keys",
                "tags": ["bench"],
                "confidence": 70,
                "provenance": [],
                "tier": "WARM",
            },
        )
        lat.append(time.perf_counter() - t)
    for _ in range(max(3, n // 10)):
        t = time.perf_counter()
        mem.items(tier="WARM")
        reads.append(time.perf_counter() - t)
        t = time.perf_counter()
        mem.recall("idempotency retries", limit=5)
        recalls.append(time.perf_counter() - t)


def run(label: str, server: Server, agents: int, n: int) -> float:
    lat: list[float] = []
    reads: list[float] = []
    recalls: list[float] = []
    errors: list[BaseException] = []
    threads = [
        threading.Thread(
            target=_agent_work,
            args=(
                server.url,
                server.vkey,
                f"bench-{k}-{time.time_ns() % 10**9}",
                n,
                lat,
                reads,
                recalls,
                errors,
            ),
        )
        for k in range(agents)
    ]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    writes = agents * n
    write_time = sum(lat) / max(1, agents)
    rate = writes / write_time
    with httpx.Client() as c:
        t = time.perf_counter()
        k = 200
        for _ in range(k):
            c.get(server.url + "/checkpoint")
        cp_rate = k / (time.perf_counter() - t)
    print(
        f"  {label}: {writes} signed writes by {agents} agents: {rate:,.0f}/s "
        f"(p50 {statistics.median(lat) * 1e3:.1f} ms, p95 {_pct(lat, 0.95) * 1e3:.1f} ms); "
        f"signed tier view p50 {statistics.median(reads) * 1e3:.1f} ms; recall p50 {statistics.median(recalls) * 1e3:.1f} ms; "
        f"GET /checkpoint {cp_rate:,.0f}/s; wall {wall:.1f} s"
    )
    return rate


def bench_backend(label: str, db_url: str | None, agents: int, n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        for workers in (1, 2):
            server = Server(Path(d) / "home", db_url, workers)
            try:
                run(f"{label}, {workers} worker{'s' if workers > 1 else ''}", server, agents, n)
            finally:
                server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument(
        "--pg", default=os.environ.get("ENGRAM_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    args = ap.parse_args()
    agents, n = (2, 10) if args.smoke else (4, 250)
    print(
        f"Engram HTTP benchmark ({'smoke' if args.smoke else 'full'}), Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, loopback"
    )
    bench_backend("SQLite", None, agents, n)
    if not args.no_pg:
        pg = pg_database(args.pg)
        if pg is not None:
            url, drop = pg
            try:
                bench_backend(
                    "PostgreSQL", url.replace("postgresql+psycopg://", "postgresql://", 1), agents, n
                )
            finally:
                drop()


if __name__ == "__main__":
    main()

"""Benchmark harness for the memory tiers: prints figures; asserts no timings.

    python bench/bench_memory.py            # full run
    python bench/bench_memory.py --smoke    # CI smoke run
    python bench/bench_memory.py --no-pg    # SQLite only

Figures: memory writes/s through the gate and the SDK (each durable), session close
(distil + compact) latency, recall latency (HOT + rank fusion over WARM/COLD with
full-text search) at the final size, and projection rebuild throughput (events/s replayed).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_log import pg_database
from engram.client import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger, memory_service
from ledger.config import Settings
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine

WORDS = [
    "billing",
    "cache",
    "retry",
    "deploy",
    "invoice",
    "refund",
    "latency",
    "queue",
    "schema",
    "index",
    "token",
    "quota",
    "export",
    "backup",
]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(8)) + f" #{rng.randrange(10**6)}"


def bench(label: str, url: str, n_writes: int, n_sessions: int, n_recalls: int) -> None:
    rng = random.Random(1)
    ledger = create_ledger(
        make_engine(url),
        LogKey("bench.example/mem", Ed25519PrivateKey.generate()),
        policy_key=Ed25519PrivateKey.generate(),
    )
    memory = memory_service(ledger, Settings.from_env())  # the policy and distiller settings apply
    agent = Agent.generate("bench-agent", log_vkey=ledger.vkey, transport=InProcessMemory(memory))
    agent.register()
    mem = AgentMemory(agent)  # the agent's side, through the memory service's door

    t0 = time.perf_counter()
    for _ in range(n_writes):
        mem.write(
            category=rng.choice(["LEARNING", "FAILURE", "CONTEXT"]),
            content=sentence(rng),
            confidence=rng.randint(0, 100),
        )
    dt = time.perf_counter() - t0
    print(f"  {label}: memory writes (gate + sign + append + project)  {n_writes / dt:,.0f}/s")

    closes = []
    for _ in range(n_sessions):
        sid = mem.open_session()
        for t in range(6):
            mem.turn(
                sid,
                "user" if t % 2 == 0 else "assistant",
                rng.choice(
                    [
                        "I prefer short answers.",
                        "Turns out the root cause was the cache.",
                        "We are blocked on finance.",
                        "ok",
                    ]
                ),
            )
        s = time.perf_counter()
        mem.close_session(sid)
        closes.append(time.perf_counter() - s)
    print(f"  {label}: session close (distil + file in tiers), p50 {statistics.median(closes) * 1000:.1f} ms")

    lat = []
    for _ in range(n_recalls):
        q = " ".join(rng.sample(WORDS, 2))
        s = time.perf_counter()
        memory.recall("bench-agent", q, include_cold=True, record_access=False)
        lat.append(time.perf_counter() - s)
    lat.sort()
    items = memory.projection.count()
    print(
        f"  {label}: recall over {items:,} items: p50 {statistics.median(lat) * 1000:.1f} ms, "
        f"p95 {lat[int(len(lat) * 0.95) - 1] * 1000:.1f} ms"
    )
    size = ledger.size()
    s = time.perf_counter()
    memory.rebuild()
    dt = time.perf_counter() - s
    print(f"  {label}: projection rebuild of {size:,} entries: {size / dt:,.0f} events/s ({dt:.2f} s)")
    ledger.store.engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument(
        "--pg", default=os.environ.get("ENGRAM_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    args = ap.parse_args()
    n_writes, n_sessions, n_recalls = (40, 3, 20) if args.smoke else (2000, 50, 200)
    print(
        f"Engram memory benchmark ({'smoke' if args.smoke else 'full'}), Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory() as d:
        bench("SQLite", f"sqlite:///{d}/mem.db", n_writes, n_sessions, n_recalls)
    if not args.no_pg:
        pg = pg_database(args.pg)
        if pg is not None:
            url, drop = pg
            try:
                bench("PostgreSQL", url, n_writes, n_sessions, n_recalls)
            finally:
                drop()


if __name__ == "__main__":
    main()

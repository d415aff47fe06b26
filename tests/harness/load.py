"""Load harness (issue 15, Deliver 7): a sustained mixed load on ``engram serve`` over
loopback for a bounded time, then proof that nothing acknowledged was lost.

    python -m tests.harness.load                          # 60 s on SQLite and on PostgreSQL
    python -m tests.harness.load --seconds 300 --procs 4 --threads 4 --json load.json
    python -m tests.harness.load --seconds 5 --backends sqlite   # the CI size

Each backend gets a fresh ``engram init`` home (PostgreSQL: a new database) and ``engram
serve --workers 2``. ``--procs`` client processes of ``--threads`` threads each run for
``--seconds``; every thread is its own agent (registered with the operator token) and picks,
at random, one operation at a time through the shipped client (``engram.client``):

* ``append`` (35%): a signed ``commitment``; the receipt's checkpoint signature and inclusion
  proof are verified by the client;
* ``memory`` (15%): a signed ``memory.written`` through the write gate;
* ``recall`` (20%): a signed recall of the agent's memory;
* ``proof`` (20%): ``GET /v1/proofs/inclusion`` of one of the thread's acknowledged entries,
  checked against the leaf hash the receipt gave;
* ``bundle`` (10%): a buyer (its own audience key, holding a share token the agent minted)
  fetches the agent's ``pact.outcome`` bundle and verifies it offline.

The service's rate limits are set out of reach (every client shares one loopback address;
the limits are exercised by tests/e2e/test_limits_across_workers.py and bench's abuse
section). Afterwards the server is stopped and, on the database as the load left it: every
acknowledged entry is at its index with its timestamp and leaf hash, ``engram audit`` is
clean and the caught-up memory projection equals a rebuild (the crash harness's checks).

Prints requests, errors, and p50/p95/p99 latency per operation; ``--json`` writes them. Exit
code 1 if any request failed or any check did.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.harness.crash import (
    _check,
    _drop_pg_database,
    _env,
    _new_pg_database,
    _start_server,
    _stop_group,
    add_backend_arguments,
    chosen_backends,
)

OPS = (("append", 35), ("memory", 15), ("recall", 20), ("proof", 20), ("bundle", 10))
LIMITS_OUT_OF_REACH = {
    "ENGRAM_RATE_LIMIT_PER_MINUTE": "1000000",
    "ENGRAM_RATE_LIMIT_BURST": "1000000",
    "ENGRAM_RATE_LIMIT_PER_CLIENT_PER_MINUTE": "10000000",
    "ENGRAM_RATE_LIMIT_PER_CLIENT_BURST": "10000000",
}


def _client(
    url: str, vkey: str, token: str, proc: int, threads: int, seconds: float, seed: int, out: Any
) -> None:
    """One client process: ``threads`` agents, each a random mix of operations until the deadline."""
    import httpx
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from engram.client import AgentMemory
    from engram.client.http import Buyer, HttpTransport
    from engram.client.sdk import Agent
    from engram.protocol.bodies import written_body

    lock = threading.Lock()
    lat: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    first_errors: list[str] = []
    acks: list[tuple[int, int, str]] = []
    names = [name for name, _ in OPS]
    weights = [w for _, w in OPS]

    def run(t: int) -> None:
        rng = random.Random(seed * 1000 + proc * 100 + t)
        transport = HttpTransport(url, operator_token=token)
        agent = Agent.generate(f"load-{seed}-{proc}-{t}", log_vkey=vkey, transport=transport, state_dir=None)
        agent.register()
        memory = AgentMemory(agent, transport)
        memory.write(category="LEARNING", content=f"Agent {proc}-{t} learned the release runs on Fridays.")
        agent.append(
            "pact.outcome", {"pact": f"p{proc}-{t}", "result": "fulfilled", "quality": 90, "evidence": "ci"}
        )
        buyer_dir = tempfile.mkdtemp(prefix="load-buyer-")
        buyer = Buyer(
            HttpTransport(url),
            log_vkey=vkey,
            audience_key=Ed25519PrivateKey.generate(),
            state_dir=Path(buyer_dir),
        )
        share = memory.mint_token(
            audience=buyer.audience, kinds=["pact.outcome"], expires=int(time.time()) + 3600
        )
        mine: list[tuple[int, str]] = []
        http = httpx.Client(base_url=url, timeout=60)
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            op = rng.choices(names, weights)[0]
            if op == "proof" and not mine:
                op = "append"
            t0 = time.perf_counter()
            try:
                if op == "append":
                    r = agent.append("commitment", {"promise": f"load promise {i} of {proc}-{t}"})
                    mine.append((r.index, r.leaf_hash.hex()))
                    with lock:
                        acks.append((r.index, r.timestamp_us, r.leaf_hash.hex()))
                elif op == "memory":
                    # what memory.write signs (through its write gate), appended by the agent
                    # itself to keep the receipt's timestamp and leaf hash for the check
                    body = written_body(
                        memory.gate,
                        category="LEARNING",
                        content=f"Load note {i} from {proc}-{t}: deploys wait.",
                    )
                    r = agent.append("memory.written", body)
                    with lock:
                        acks.append((r.index, r.timestamp_us, r.leaf_hash.hex()))
                elif op == "recall":
                    memory.recall("when does the release run", limit=5)
                elif op == "proof":
                    index, lh = rng.choice(mine)
                    got = http.get("/v1/proofs/inclusion", params={"index": index})
                    if got.status_code != 200 or got.json()["leaf_hash"] not in (lh, _b64(lh)):
                        raise RuntimeError(f"proof of {index}: {got.status_code} {got.text[:200]}")
                else:
                    verified = buyer.verify(buyer.bundle(share, agent=agent.agent_id, kinds=["pact.outcome"]))
                    if not all(c.holds for c in verified.claims):
                        raise RuntimeError("a bundle's claims do not hold")
            except Exception as e:
                with lock:
                    errors[op] += 1
                    if len(first_errors) < 5:
                        first_errors.append(f"{op}: {type(e).__name__}: {e}")
                continue
            finally:
                i += 1
            with lock:
                lat[op].append(time.perf_counter() - t0)

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    t0 = time.monotonic()
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    out.put(
        {
            "lat": dict(lat),
            "errors": dict(errors),
            "first_errors": first_errors,
            "acks": acks,
            "wall": time.monotonic() - t0,
        }
    )


def _b64(hex_hash: str) -> str:
    import base64

    return base64.b64encode(bytes.fromhex(hex_hash)).decode()


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000 if xs else float("nan")


def run_backend(backend: str, args: argparse.Namespace, seed: int, workdir: Path) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix=f"load-{backend}-", dir=workdir))
    db_name, db_url = _new_pg_database(args.pg) if backend == "postgres" else (None, None)
    env = _env(home, db_url) | LIMITS_OUT_OF_REACH | {"ENGRAM_VERIFIER_STATE": "off"}
    try:
        subprocess.run(
            [_engram(), "init", "--origin", "load.example/log"], env=env, check=True, capture_output=True
        )
        vkey = subprocess.run(
            [_engram(), "log", "key"], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        server, url = _start_server(env)
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        try:
            procs = [
                ctx.Process(
                    target=_client,
                    args=(url, vkey, env["ENGRAM_OPERATOR_TOKEN"], p, args.threads, args.seconds, seed, out),
                )
                for p in range(args.procs)
            ]
            for p in procs:
                p.start()
            got = [out.get(timeout=args.seconds + 600) for _ in procs]
            for p in procs:
                p.join(timeout=60)
        finally:
            _stop_group(server, signal.SIGTERM)
        lat: dict[str, list[float]] = defaultdict(list)
        errors: dict[str, int] = defaultdict(int)
        acks: list[tuple[int, int, str]] = []
        first: list[str] = []
        for g in got:
            for op, xs in g["lat"].items():
                lat[op] += xs
            for op, n in g["errors"].items():
                errors[op] += n
            acks += [tuple(a) for a in g["acks"]]
            first += g["first_errors"]
        wall = max(g["wall"] for g in got)
        problems = _check(env, acks)
    finally:
        if db_name is not None:
            _drop_pg_database(args.pg, db_name)
    rows = {
        op: {
            "requests": len(lat[op]) + errors[op],
            "errors": errors[op],
            "per_s": len(lat[op]) / wall,
            "p50_ms": _pct(lat[op], 0.50),
            "p95_ms": _pct(lat[op], 0.95),
            "p99_ms": _pct(lat[op], 0.99),
        }
        for op, _ in OPS
    }
    total = sum(r["requests"] for r in rows.values())
    return {
        "backend": backend,
        "seconds": wall,
        "clients": args.procs * args.threads,
        "requests": total,
        "errors": sum(errors.values()),
        "error_rate": sum(errors.values()) / max(1, total),
        "acknowledged_checked": len(acks),
        "operations": rows,
        "first_errors": first[:5],
        "check_failures": problems,
    }


def _engram() -> str:
    from tests.e2e.processes import ENGRAM

    return ENGRAM


def _print(r: dict[str, Any]) -> None:
    print(
        f"[{r['backend']}] {r['seconds']:.0f} s, {r['clients']} clients: {r['requests']} requests, "
        f"{r['errors']} errors ({100 * r['error_rate']:.2f}%), {r['acknowledged_checked']} acknowledged entries "
        f"re-checked, audit and rebuild: {'ok' if not r['check_failures'] else r['check_failures'][:3]}"
    )
    print(
        f"  {'operation':<9} {'requests':>9} {'errors':>7} {'per s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
    )
    for op, row in r["operations"].items():
        print(
            f"  {op:<9} {row['requests']:>9} {row['errors']:>7} {row['per_s']:>8.1f} {row['p50_ms']:>8.1f} "
            f"{row['p95_ms']:>8.1f} {row['p99_ms']:>8.1f}"
        )
    for e in r["first_errors"]:
        print(f"  error: {e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.harness.load", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--seconds", type=float, default=60.0, help="how long the load runs per backend (default 60)"
    )
    ap.add_argument("--procs", type=int, default=4, help="client processes (default 4)")
    ap.add_argument("--threads", type=int, default=4, help="threads (agents) per client process (default 4)")
    add_backend_arguments(ap)
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    if not 0 < args.seconds <= 86_400 or not 1 <= args.procs <= 64 or not 1 <= args.threads <= 64:
        ap.error("--seconds must be in (0, 86400], --procs and --threads in 1..64")
    backends = chosen_backends(ap, args)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**20)
    print(f"load harness: {args.seconds:g} s per backend, {args.procs} x {args.threads} clients, seed {seed}")
    workdir = Path(tempfile.mkdtemp(prefix="engram-load-"))
    results = []
    for b in backends:
        r = run_backend(b, args, seed, workdir)
        _print(r)
        results.append(r)
    if args.json is not None:
        args.json.write_text(json.dumps({"seed": seed, "backends": results}, indent=2), encoding="utf-8")
    return 1 if any(r["errors"] or r["check_failures"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark harness for the log core: prints figures and ratios; asserts no timings.

    python bench/bench_log.py            # full run (a few minutes)
    python bench/bench_log.py --smoke    # CI smoke run (seconds): same code paths, tiny sizes
    python bench/bench_log.py --pg URL   # also PostgreSQL (default: the local server if reachable)

Every append is durable when measured: SQLite runs in WAL mode with synchronous=FULL and
PostgreSQL with synchronous_commit=on, so each acknowledged batch was fsynced.

Reference points (from shared/reference; not measured here): Ed25519 on one core of this
machine class ~44k sign/s and ~14.6k verify/s; provara-protocol's SDK appends ~40 events/s
average over 10k events (no fsync); Tessera POSIX on SAS HDD ~2,900 writes/s (fsync'd).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger, Submission
from ledger.storage.db import make_engine
from verifier.merkle import leaf_hash, verify_consistency, verify_inclusion
from verifier.note import VerifierKey, verify_checkpoint

ORIGIN = "bench.example/engram"


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}/s" if seconds > 0 else "inf"


def new_ledger(url: str) -> Ledger:
    return create_ledger(
        make_engine(url),
        LogKey(ORIGIN, Ed25519PrivateKey.generate()),
        policy_key=Ed25519PrivateKey.generate(),
    )


def pg_database(admin_url: str, suffix: str = "") -> tuple[str, Callable[[], None]] | None:
    """A fresh database (``suffix`` tells two of one process apart); None if unreachable."""
    try:
        import psycopg

        name = f"engram_bench_{os.getpid()}{suffix}"
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}"')
            c.execute(f'CREATE DATABASE "{name}"')
    except Exception as e:
        print(f"  (PostgreSQL skipped: {e})")
        return None

    def drop() -> None:
        with psycopg.connect(admin_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    base = admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{name}", drop


def concurrent_ingest(
    ledger: Ledger, clients: int, per_client: int, grouped: bool
) -> tuple[float, float, float, float]:
    """``clients`` threads, each a registered agent appending ``per_client`` events one at a
    time; returns events/s, p50 and p99 latency (ms) and events per commit."""
    import threading

    from ledger.groupcommit import GroupCommit

    saved = ledger.group_commit
    # The group commit the ledger itself builds (the signer's record written after the
    # leadership is given up), fresh so that its counters are this run's.
    ledger.group_commit = GroupCommit(ledger.append_batch, record=ledger.record_signed) if grouped else None
    agents = []
    for c in range(clients):
        ag = Agent.generate(
            f"conc-{clients}-{int(grouped)}-{c}",
            log_vkey=ledger.vkey,
            transport=InProcess(ledger, log_only=True),
            state_dir=None,
        )
        ag.register()
        agents.append(ag)
    size0 = ledger.size()
    lat: list[float] = []
    lock = threading.Lock()
    go = threading.Barrier(clients + 1)

    def work(ag: Agent) -> None:
        go.wait()
        mine = []
        for i in range(per_client):
            s = time.perf_counter()
            ag.append("commitment", {"promise": f"promise {i} " + "z" * 200})
            mine.append(time.perf_counter() - s)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=work, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    commits = len(list(ledger.store.checkpoints_upto(ledger.size()))) - len(
        list(ledger.store.checkpoints_upto(size0))
    )
    ledger.group_commit = saved
    lat.sort()
    n = clients * per_client
    return (
        n / dt,
        statistics.median(lat) * 1000,
        lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
        n / max(commits, 1),
    )


def presigned_ingest(ledger: Ledger, clients: int, n: int, tag: str) -> tuple[float, float, float, float]:
    """The SDK figure's twin without the client: ``n`` events signed beforehand, each the
    first of its own stream (a fresh agent, registered beforehand), appended one at a time
    by ``clients`` threads through the ledger's group commit (``Ledger.append``, what
    ``InProcess.submit`` calls), no receipt verified. Returns events/s, p50 and p99 latency
    (ms) and events per commit, as :func:`concurrent_ingest`."""
    import threading

    from ledger.groupcommit import GroupCommit

    now = time.time_ns() // 1000
    signers = [
        AgentSigner(f"raw-{tag}-{i}", Ed25519PrivateKey.generate(), origin=ledger.origin) for i in range(n)
    ]
    regs = [sg.registration(client_time_us=now) for sg in signers]
    for i in range(0, n, 200):
        ledger.append(regs[i : i + 200], operator=True)
    events = [
        sg.event(
            "commitment", {"promise": f"promise {i} " + "z" * 200}, version=0, prev=None, client_time_us=now
        )
        for i, sg in enumerate(signers)
    ]
    saved = ledger.group_commit
    ledger.group_commit = GroupCommit(ledger.append_batch, record=ledger.record_signed)
    size0 = ledger.size()
    lat: list[float] = []
    lock = threading.Lock()
    go = threading.Barrier(clients + 1)

    def work(share: list[Submission]) -> None:
        go.wait()
        mine = []
        for sub in share:
            t = time.perf_counter()
            ledger.append([sub])
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=work, args=(events[c::clients],)) for c in range(clients)]
    for t in threads:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    commits = len(list(ledger.store.checkpoints_upto(ledger.size()))) - len(
        list(ledger.store.checkpoints_upto(size0))
    )
    ledger.group_commit = saved
    lat.sort()
    return (
        n / dt,
        statistics.median(lat) * 1000,
        lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
        n / max(commits, 1),
    )


def bench_backend(
    label: str,
    url: str,
    n_single: int,
    n_batched: int,
    batch: int,
    concurrency: tuple[int, ...] = (8, 64),
    per_client: int = 40,
) -> dict[str, float]:
    ledger = new_ledger(url)
    agent = Agent.generate("bench-agent", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
    agent.register()
    figures: dict[str, float] = {}

    # 1. One event per transaction, through the SDK (sign, append, verify the receipt).
    lat = []
    t0 = time.perf_counter()
    for i in range(n_single):
        s = time.perf_counter()
        agent.append("commitment", {"promise": f"promise {i} " + "x" * 200})
        lat.append(time.perf_counter() - s)
    dt = time.perf_counter() - t0
    figures["single"] = n_single / dt
    lat.sort()
    p50 = statistics.median(lat) * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    print(f"  {label}: 1 event/commit via SDK  {rate(n_single, dt):>10}   p50 {p50:.2f} ms  p99 {p99:.2f} ms")

    # 2. Batches of events on distinct streams (one commit + one checkpoint per batch).
    signers = []
    for a in range(batch):
        ag = Agent.generate(f"bench-{a}", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
        ag.register()
        signers.append(ag.signer)
    heads: dict[str, tuple[int, str | None]] = {}
    done = 0
    t0 = time.perf_counter()
    while done < n_batched:
        subs: list[Submission] = []
        for sg in signers:
            v, p = heads.get(sg.agent, (0, None))
            subs.append(
                sg.event(
                    "commitment",
                    {"promise": f"promise {done} " + "y" * 200},
                    version=v,
                    prev=p,
                    client_time_us=1,
                )
            )
        receipts = ledger.append(subs)
        for sg, r in zip(signers, receipts, strict=True):
            heads[sg.agent] = (r.version + 1, r.leaf_hash.hex())
        done += len(subs)
    dt = time.perf_counter() - t0
    figures["batched"] = done / dt
    print(
        f"  {label}: batches of {batch:<4}             {rate(done, dt):>10}   ({rate(done // batch, dt)} commits)"
    )

    # 3. Concurrent clients, each its own agent appending one event at a time through the SDK
    #    (sign, append, verify the receipt): with the group commit (ledger.groupcommit) and
    #    without it (every append its own transaction), in the same run.
    for clients in concurrency:
        for grouped in (False, True):
            rate_c, p50_c, p99_c, per_batch = concurrent_ingest(ledger, clients, per_client, grouped)
            key = f"c{clients}_{'group' if grouped else 'single'}"
            figures[key] = rate_c
            print(
                f"  {label}: {clients:>2} clients, {'group commit' if grouped else 'one txn each'}"
                f"  {rate(clients * per_client, clients * per_client / rate_c):>10}   p50 {p50_c:.1f} ms  "
                f"p99 {p99_c:.1f} ms  ({per_batch:.1f} events per commit)"
            )
        print(
            f"  {label}: {clients:>2} clients: group commit {figures[f'c{clients}_group'] / figures[f'c{clients}_single']:.2f}x "
            "of one transaction per append"
        )

    # 4. Proofs at the final size: generation (O(log n) stored reads) and verification.
    size = ledger.size()
    vkey = VerifierKey.parse(ledger.vkey)
    cp = verify_checkpoint(ledger.latest_checkpoint().note, vkey)
    k = min(200, size)
    idx = [(i * 7919) % size for i in range(k)]
    t0 = time.perf_counter()
    proofs = [ledger.prove_inclusion(i, size) for i in idx]
    gen = time.perf_counter() - t0
    leaves = {i: ledger.store.leaf(i) for i in idx}
    t0 = time.perf_counter()
    for i, p in zip(idx, proofs, strict=True):
        verify_inclusion(leaf_hash=leaf_hash(leaves[i]), index=i, size=size, proof=p.hashes, root=cp.root)
    ver = time.perf_counter() - t0
    t0 = time.perf_counter()
    for m in range(1, k + 1):
        c = ledger.prove_consistency((m * 104729) % size, size)
        verify_consistency(
            old_size=c.old_size, new_size=size, old_root=c.old_root, new_root=cp.root, proof=c.hashes
        )
    cons = time.perf_counter() - t0
    print(
        f"  {label}: at size {size:,}: inclusion proof {gen / k * 1000:.2f} ms to build, "
        f"{ver / k * 1e6:.0f} us to verify; consistency build+verify {cons / k * 1000:.2f} ms"
    )
    figures["prove_ms"] = gen / k * 1000
    ledger.store.engine.dispose()
    return figures


def bench_crypto(n: int) -> dict[str, float]:
    key = Ed25519PrivateKey.generate()
    pub = key.public_key()
    msg = b"x" * 300
    t0 = time.perf_counter()
    for _ in range(n):
        sig = key.sign(msg)
    sign = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(n):
        pub.verify(sig, msg)
    verify = n / (time.perf_counter() - t0)
    signer = AgentSigner("crypto-bench", key, origin=ORIGIN)
    t0 = time.perf_counter()
    for i in range(n):
        signer.event(
            "commitment",
            {"promise": f"promise {i} " + "z" * 200},
            version=i,
            prev=None if i == 0 else "ab" * 32,
            client_time_us=1,
        )
    build = n / (time.perf_counter() - t0)
    print(
        f"  Ed25519 on this machine: sign {sign:,.0f}/s, verify {verify:,.0f}/s; SDK build+sign an event {build:,.0f}/s"
    )
    return {"sign": sign, "verify": verify, "build": build}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    ap.add_argument(
        "--pg", default=os.environ.get("ENGRAM_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    n_single, n_batched, batch, n_crypto = (30, 256, 64, 500) if args.smoke else (1000, 20_000, 256, 20_000)
    conc: dict[str, object] = {"concurrency": (4,), "per_client": 5} if args.smoke else {}

    print(
        f"Engram log-core benchmark ({'smoke' if args.smoke else 'full'}), Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    crypto = bench_crypto(n_crypto)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        results["sqlite"] = bench_backend(
            "SQLite", f"sqlite:///{d}/bench.db", n_single, n_batched, batch, **conc
        )  # type: ignore[arg-type]
    if not args.no_pg:
        pg = pg_database(args.pg)
        if pg is not None:
            url, drop = pg
            try:
                results["postgres"] = bench_backend("PostgreSQL", url, n_single, n_batched, batch, **conc)  # type: ignore[arg-type]
            finally:
                drop()

    print("ratios:")
    for name, f in results.items():
        print(
            f"  {name}: batched appends are {f['batched'] / crypto['verify']:.2f}x of raw Ed25519 verify "
            f"(the signature check is the floor per event); single appends {f['single'] / 40:.0f}x provara's "
            f"~40/s SDK append; batched {f['batched'] / 2900:.2f}x Tessera POSIX-on-HDD ~2,900/s"
        )


if __name__ == "__main__":
    main()

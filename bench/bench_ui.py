"""The web UI's pages on a small and a large log, in the same run: prints latencies and the
large-to-small ratio per page; asserts no timings.

    python bench/bench_ui.py                      # 10^3 and 10^6 entries (SQLite; ~4 min to build)
    python bench/bench_ui.py --large 200000       # a smaller large log
    python bench/bench_ui.py --db DIR             # keep the large log in DIR and reuse it
    python bench/bench_ui.py --pg URL             # PostgreSQL (an admin URL) instead of SQLite
    python bench/bench_ui.py --smoke              # CI: 300 and 3,000 entries

Both logs are built with bench.logbuild (pre-signed commitments of 2,000 agents, every event
verified and sequenced, a checkpoint per batch), then one agent ("star") appends pact and
evaluation outcomes (1,000 on the small log, 10,000 on the large) so its agent page has a
track record to plot. Each page is requested ``--repeat`` times through the app in process
(FastAPI's test client: routing, queries, templates; no network), and the figure is the
median and the 90th percentile. Bounded pages (keyset pages, a bounded scan window, a fixed
number of points) should cost about the same at both sizes: the ratio says whether they do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from bench.bench_log import new_ledger, pg_database  # noqa: E402
from bench.logbuild import LogBuilder  # noqa: E402
from engram.protocol.keyfiles import LogKey  # noqa: E402
from ledger.log import Ledger  # noqa: E402
from ledger.storage.db import make_engine  # noqa: E402

TOKEN = "bench-ui-operator-token-0123456789abcdef"


def _build(url: str, size: int, outcomes: int) -> Ledger:
    from engram.client.sdk import Agent
    from ledger.inprocess import InProcess

    ledger = new_ledger(url)
    t0 = time.perf_counter()
    with LogBuilder(ledger, agents=min(2000, max(2, size // 4))) as b:
        b.grow_to(size - outcomes - 1)
    star = Agent.generate("star", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
    star.register()
    events = []
    for i in range(outcomes):
        if i % 4 == 3:
            events.append(
                (
                    "eval.outcome",
                    {"eval": f"e{i}", "result": "pass" if i % 7 else "fail", "score": 50 + i % 50},
                )
            )
        else:
            events.append(
                (
                    "pact.outcome",
                    {"pact": f"p{i}", "result": "fulfilled" if i % 9 else "violated", "quality": 40 + i % 61},
                )
            )
    for kind, body in events:  # one at a time: a stream's next prev is the leaf the log made
        star.append(kind, body)
    print(f"  built {ledger.size():,} entries in {time.perf_counter() - t0:.0f} s", flush=True)
    return ledger


def _reopen(url: str, key_file: Path) -> Ledger:
    from ledger.log import Ledger as L
    from ledger.storage.store import SqlStore

    seed = key_file.read_bytes()
    origin, _, raw = seed.partition(b"\n")
    return L(SqlStore(make_engine(url)), LogKey(origin.decode(), Ed25519PrivateKey.from_private_bytes(raw)))


def _pages(ledger: Ledger) -> dict[str, str]:
    n = ledger.size()
    agent = "build-7"
    return {
        "explorer (/ui)": "/ui",
        "entries, newest": "/ui/entries",
        "entries, middle of the log": f"/ui/entries?before={n // 2}",
        "entries of an agent": f"/ui/entries?agent={agent}",
        "entries of an agent, deep page": f"/ui/entries?agent={agent}&before={n // 3}",
        "entries of a common kind": "/ui/entries?kind=commitment",
        "entries of a rare kind (bounded window)": f"/ui/entries?kind=key.rotated&before={n // 2}",
        "one entry": f"/ui/entries/{n // 2}",
        "agents": "/ui/agents",
        "agents by prefix": "/ui/agents?q=build-1",
        "agent page (10^3-10^4 outcomes)": "/ui/agents/star",
        "agent page (a builder agent)": f"/ui/agents/{agent}",
        "verify page": "/ui/verify",
        "inclusion proof (API the entry page calls)": f"/v1/proofs/inclusion?index={n // 2}",
    }


def _measure(ledger: Ledger, repeat: int) -> dict[str, tuple[float, float]]:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.settings import ApiSettings
    from ledger.memory.service import MemoryService

    # A running service's projection follows the log in the background (the follower catches
    # up at start-up); here it is brought up to date first, and that time is reported apart.
    t0 = time.perf_counter()
    MemoryService(ledger, access_log="off").sync()
    print(
        f"  memory projection at {ledger.size():,} entries: brought up to date in {time.perf_counter() - t0:.1f} s"
    )
    client = TestClient(
        create_app(
            ApiSettings(operator_token=TOKEN),
            ledger=ledger,
            memory_service=MemoryService(ledger, access_log="off"),
        )
    )
    out = {}
    for name, path in _pages(ledger).items():
        r = client.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = client.get(path)
            times.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200
        times.sort()
        out[name] = (statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.9))])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny logs, for CI")
    ap.add_argument("--small", type=int, default=1_000)
    ap.add_argument("--large", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--db", type=Path, help="keep the large SQLite log in this folder and reuse it")
    ap.add_argument("--pg", help="a PostgreSQL admin URL: build both logs there instead")
    args = ap.parse_args()
    small, large = (300, 3_000) if args.smoke else (args.small, args.large)
    repeat = 3 if args.smoke else args.repeat
    backend = "PostgreSQL" if args.pg else "SQLite"
    print(
        f"Engram web UI benchmark{' (smoke)' if args.smoke else ''}: {small:,} vs {large:,} entries, {backend}"
    )
    results = []
    drops = []
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        for size in (small, large):
            outcomes = min(10_000, max(50, size // 100)) if size == large else min(1_000, size // 3)
            reuse = args.db is not None and size == large and not args.pg
            if args.pg:
                made = pg_database(args.pg, suffix=f"_ui{size}")
                if made is None:
                    sys.exit(f"PostgreSQL at {args.pg} is unreachable")
                url, drop = made
                drops.append(drop)
            else:
                folder = args.db if reuse else Path(tmp)
                folder.mkdir(parents=True, exist_ok=True)
                url = f"sqlite:///{folder}/ui-{size}.db"
            key_file = Path(url.split("///", 1)[1]).with_suffix(".logkey") if reuse else None
            if key_file is not None and key_file.exists():
                ledger = _reopen(url, key_file)
                print(f"  reusing {ledger.size():,} entries from {args.db}")
            else:
                ledger = _build(url, size, outcomes)
                if key_file is not None:
                    raw = ledger.log_key.private_key.private_bytes_raw()
                    key_file.write_bytes(ledger.origin.encode() + b"\n" + raw)
            results.append((ledger.size(), _measure(ledger, repeat)))
            ledger.store.engine.dispose()
    for drop in drops:
        drop()
    (n_small, small_r), (n_large, large_r) = results
    w = max(len(k) for k in small_r)
    print(
        f"\n  {'page':<{w}}  {f'{n_small:,} p50 / p90 ms':>20}  {f'{n_large:,} p50 / p90 ms':>22}  ratio (p50)"
    )
    worst = 0.0
    for name in small_r:
        (a50, a90), (b50, b90) = small_r[name], large_r[name]
        ratio = b50 / a50 if a50 else float("nan")
        worst = max(worst, ratio)
        print(f"  {name:<{w}}  {a50:>9.1f} / {a90:>7.1f}  {b50:>11.1f} / {b90:>7.1f}  {ratio:>6.2f}x")
    slowest = max(large_r.items(), key=lambda kv: kv[1][0])
    print(
        f"\n  slowest page at {n_large:,} entries: {slowest[0]} ({slowest[1][0]:.1f} ms p50); "
        f"largest large/small ratio {worst:.2f}x"
    )


if __name__ == "__main__":
    main()

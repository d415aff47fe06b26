"""Durable in-process ingest: 1, 8 and 64 concurrent clients on one ledger.

Each client is a thread with its own registered agent appending one event at a time through
the SDK (sign, append, verify the receipt's checkpoint and inclusion proof), so concurrent
appends share transactions through the group commit (ledger.groupcommit). Every append is
durable before it returns (SQLite WAL + synchronous=FULL, PostgreSQL synchronous_commit=on).
The code path is bench_log.concurrent_ingest's.

Beside it, the same number of clients appending events signed beforehand (each the first of
a fresh agent's stream, bench_log.presigned_ingest): the log's own cost per event without
the client's signing and receipt checks, so the two figures side by side (and their ratio,
a row of the targets) say what the client path adds (issue 43).
"""

from __future__ import annotations

from bench.bench_log import concurrent_ingest, new_ledger, presigned_ingest
from bench.common import database, fig
from bench.plan import Config
from bench.report import Figure


def run(cfg: Config, out: list[Figure], backend: str) -> None:
    name = "SQLite" if backend == "sqlite" else "PostgreSQL"
    with database(backend, cfg.pg_url, cfg.workdir, "ingest") as url:
        ledger = new_ledger(url)
        try:
            concurrent_ingest(ledger, 2, 5, True)  # warm up: imports, connections, caches
            for clients in cfg.sizes.clients:
                per_client = max(2, cfg.sizes.ingest_events // clients)
                rate, p50, p99, per_commit = concurrent_ingest(ledger, clients, per_client, True)
                key = f"ingest.inproc.{backend}.c{clients}"
                what = f"in-process ingest, {clients} client{'s' if clients > 1 else ''}, {name}"
                n = f"{clients * per_client} events"
                out.append(fig(f"{key}.rate", what, rate, "events/s", note=n))
                out.append(fig(f"{key}.p50", f"{what}, p50", p50, "ms", note=n))
                out.append(fig(f"{key}.p99", f"{what}, p99", p99, "ms", note=n))
                out.append(fig(f"{key}.per_commit", f"{what}, events per commit", per_commit, "events"))
            clients = max(cfg.sizes.clients)
            n = max(2, cfg.sizes.ingest_events // clients) * clients
            rate, p50, p99, per_commit = presigned_ingest(ledger, clients, n, backend)
            key = f"ingest.inproc.{backend}.raw"
            what = f"in-process ingest, {clients} clients appending pre-signed events, {name}"
            note = f"{n} events, each the first of a fresh agent's stream, no receipt checked"
            out.append(fig(f"{key}.rate", what, rate, "events/s", note=note))
            out.append(fig(f"{key}.p50", f"{what}, p50", p50, "ms", note=note))
            out.append(fig(f"{key}.p99", f"{what}, p99", p99, "ms", note=note))
            out.append(fig(f"{key}.per_commit", f"{what}, events per commit", per_commit, "events"))
        finally:
            ledger.store.engine.dispose()

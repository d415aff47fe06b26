"""Memory as a projection of the log: rebuilding it, and recall over it.

* Rebuild: an ``engram init`` home whose log holds ``rebuild_events`` WARM memory writes
  (signed ``memory.written`` events of many agents, appended in batches through the memory
  ledger's rules, bench.logbuild), the projection caught up once; then
  ``MemoryService.rebuild`` (what ``engram memory rebuild`` calls: drop the projection, replay
  every entry, re-embed every item) in process, events/s over the log's entries; and the
  command itself, ``engram memory rebuild``, wall time with its start-up.
* Recall: one agent with ``recall_memories`` memories, written through the memory service
  (bench_recall.scale: sessions distilled into memories, the default embedder), then
  ``recall_queries`` recalls (HOT + rank fusion of facets, full text and embeddings over
  WARM and COLD), p50/p99.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from bench.common import ENGRAM, engram_home, fig, run_measured
from bench.logbuild import LogBuilder
from bench.plan import Config
from bench.report import Figure


def rebuild(cfg: Config, out: list[Figure]) -> None:
    from ledger.compose import memory_service, open_ledger
    from ledger.config import Settings

    s = cfg.sizes
    env = engram_home(cfg.workdir, "rebuild")
    os.environ["ENGRAM_HOME"] = env["ENGRAM_HOME"]
    settings = Settings.from_env()
    ledger = open_ledger(settings)
    try:
        agents = min(s.build_agents, max(2, s.rebuild_events // 10))
        with LogBuilder(ledger, agents=agents, kind="memory.written", tag="writer") as builder:
            builder.grow_to(ledger.size() + s.rebuild_events)
        memory = memory_service(ledger, settings)
        memory.sync()
        size = ledger.size()
        t0 = time.perf_counter()
        got, _digest = memory.rebuild()
        dt = time.perf_counter() - t0
        if got != size:
            raise RuntimeError(f"rebuild replayed {got} entries, the log holds {size}")
        out.append(
            fig("rebuild.events", "entries in the rebuilt log", size, "entries", note=f"{agents} agents")
        )
        out.append(
            fig(
                "rebuild.inprocess",
                "projection rebuild (MemoryService.rebuild: replay + re-embed)",
                size / dt,
                "events/s",
                note=f"{dt:.2f} s",
            )
        )
    finally:
        ledger.store.engine.dispose()
    run = run_measured([ENGRAM, "memory", "rebuild"], env)
    out.append(
        fig(
            "rebuild.cli",
            "engram memory rebuild (CLI, start-up included)",
            size / run.wall_s,
            "events/s",
            note=f"wall {run.wall_s:.2f} s, peak RSS {run.peak_rss_mib:.0f} MiB",
        )
    )


def recall(cfg: Config, out: list[Figure]) -> None:
    from bench.bench_recall import scale

    s = cfg.sizes
    d = Path(tempfile.mkdtemp(prefix="recall-", dir=cfg.workdir))
    figures = scale(s.recall_memories, queries=s.recall_queries, tmp=d)
    plain = figures["recall"]
    out.append(fig("recall.items", "memories recall searches (one agent)", plain["items"], "memories"))
    note = f"{s.recall_queries} queries, include_cold, limit 10, access not logged"
    out.append(fig("recall.p50", "recall latency, p50", plain["p50_ms"], "ms", note=note))
    out.append(fig("recall.p99", "recall latency, p99", plain["p99_ms"], "ms", note=note))

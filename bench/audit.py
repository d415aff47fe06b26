"""What a buyer and an auditor run: bundle verification and a whole-log replay.

* Bundles: agents with 1, 100 and 1000 ``pact.outcome`` entries (appended through the SDK);
  for each, ``ledger.bundle.create_bundle`` of its pact claim, then
  ``verifier.bundle.verify_bundle`` (all twelve checks: the checkpoint and stream-head
  signatures, every entry's inclusion proof and signature, completeness, bodies, the claim)
  again and again for ``bundle_seconds``. entries/s counts every entry the bundle carries (the
  claimed ones and the key history); one core. The largest bundle is also checked with the
  offline CLI, ``engram-verify bundle`` (wall time, interpreter start-up included).
* Replay: a log (``engram init`` home) grown with pre-signed events to each replay size,
  exported with ``engram export tiles DIR`` and audited from scratch with
  ``engram-verify log DIR --log-key K --quiet`` (every leaf, signature, stream, tile,
  checkpoint; signatures checked ahead in worker processes, ``--jobs`` defaults to the CPUs).
  entries/s over the command's wall time, and per core used (its CPU seconds, workers
  included, over its wall seconds, at least one); its peak RSS from ``wait4``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from bench.bench_log import new_ledger
from bench.common import ENGRAM, ENGRAM_VERIFY, database, engram_home, fig, log_vkey, run_measured
from bench.logbuild import LogBuilder
from bench.plan import Config, size_tag
from bench.report import Figure


def bundles(cfg: Config, out: list[Figure]) -> None:
    from engram.client.sdk import Agent
    from ledger.bundle import create_bundle, pact_claim
    from ledger.inprocess import InProcess
    from verifier.bundle import verify_bundle
    from verifier.note import VerifierKey

    s = cfg.sizes
    with database("sqlite", None, cfg.workdir, "bundles") as url:
        ledger = new_ledger(url)
        try:
            vkey = VerifierKey.parse(ledger.vkey)
            made: dict[int, bytes] = {}
            for m in s.bundle_sizes:
                agent = Agent.generate(
                    f"seller-{m}",
                    log_vkey=ledger.vkey,
                    transport=InProcess(ledger, log_only=True),
                    state_dir=None,
                )
                agent.register()
                for i in range(m):
                    agent.append(
                        "pact.outcome",
                        {
                            "pact": f"p{i}",
                            "result": "fulfilled" if i % 7 else "violated",
                            "quality": 50 + i % 50,
                        },
                    )
            for m in s.bundle_sizes:
                t0 = time.perf_counter()
                data = create_bundle(ledger, pact_claim(ledger, f"seller-{m}"))
                create_ms = (time.perf_counter() - t0) * 1000
                made[m] = data
                verified = verify_bundle(data, vkey)  # once: it must verify, and how many entries
                runs = 0
                t0 = time.perf_counter()
                while runs < 3 or time.perf_counter() - t0 < s.bundle_seconds:
                    verify_bundle(data, vkey)
                    runs += 1
                per = (time.perf_counter() - t0) / runs
                what = f"bundle of {m} claimed entr{'y' if m == 1 else 'ies'}"
                note = f"{verified.entries} entries in the bundle, {len(data):,} bytes, {runs} runs"
                out.append(
                    fig(
                        f"bundle.{m}.verify",
                        f"{what}: verify_bundle",
                        verified.entries / per,
                        "entries/s",
                        note=note,
                    )
                )
                out.append(fig(f"bundle.{m}.ms", f"{what}: verify_bundle time", per * 1000, "ms", note=note))
                out.append(
                    fig(f"bundle.{m}.entries", f"{what}: entries carried", verified.entries, "entries")
                )
                out.append(fig(f"bundle.{m}.create_ms", f"{what}: create_bundle time", create_ms, "ms"))
            largest = max(s.bundle_sizes)
            with tempfile.NamedTemporaryFile(dir=cfg.workdir, suffix=".json", delete=False) as f:
                f.write(made[largest])
            run = run_measured([ENGRAM_VERIFY, "bundle", f.name, "--log-key", ledger.vkey])
            out.append(
                fig(
                    "bundle.cli_ms",
                    f"engram-verify bundle, {largest} claimed entries (CLI, start-up included)",
                    run.wall_s * 1000,
                    "ms",
                    note=f"peak RSS {run.peak_rss_mib:.0f} MiB",
                )
            )
        finally:
            ledger.store.engine.dispose()


def replay(cfg: Config, out: list[Figure]) -> None:
    from ledger.compose import memory_service, open_ledger
    from ledger.config import Settings

    s = cfg.sizes
    env = engram_home(cfg.workdir, "replay")
    os.environ["ENGRAM_HOME"] = env["ENGRAM_HOME"]
    vkey = log_vkey(env)
    settings = Settings.from_env()
    ledger = open_ledger(settings)
    try:
        with LogBuilder(ledger, agents=min(s.build_agents, max(2, min(s.replay_sizes) // 4))) as builder:
            for n in sorted(s.replay_sizes):
                builder.grow_to(n)
                tiles = Path(tempfile.mkdtemp(prefix=f"tiles-{n}-", dir=cfg.workdir)) / "tiles"
                export = run_measured([ENGRAM, "export", "tiles", str(tiles)], env)
                verify = run_measured([ENGRAM_VERIFY, "log", str(tiles), "--log-key", vkey, "--quiet"], env)
                if "VERIFIED" not in verify.stdout:
                    raise RuntimeError(f"engram-verify log did not verify: {verify.stdout[-500:]}")
                tag = size_tag(n)
                out.append(
                    fig(
                        f"replay.{tag}.verify",
                        f"replay (engram-verify log) of {n:,} entries",
                        n / verify.wall_s,
                        "entries/s",
                        note=f"wall {verify.wall_s:.1f} s, CPU {verify.cpu_s:.1f} s, start-up included",
                    )
                )
                cores = max(1.0, verify.cpu_s / verify.wall_s)
                out.append(
                    fig(
                        f"replay.{tag}.per_core",
                        f"replay of {n:,} entries per core used",
                        n / verify.wall_s / cores,
                        "entries/s",
                        note=f"{cores:.2f} cores used on average (CPU s / wall s, its worker processes included)",
                    )
                )
                out.append(
                    fig(
                        f"replay.{tag}.export",
                        f"engram export tiles of {n:,} entries",
                        n / export.wall_s,
                        "entries/s",
                        note=f"wall {export.wall_s:.1f} s",
                    )
                )
                # engram audit (issue 15): every table re-derived from the leaves, the memory
                # projection included once it has caught up; exit code 0 means clean.
                memory_service(ledger, settings).sync()
                audited = run_measured([ENGRAM, "audit"], env)
                if "clean" not in audited.stdout:
                    raise RuntimeError(f"engram audit found differences: {audited.stdout[-500:]}")
                out.append(
                    fig(
                        f"replay.{tag}.audit",
                        f"engram audit of {n:,} entries (every table, projection included)",
                        n / audited.wall_s,
                        "entries/s",
                        note=f"wall {audited.wall_s:.1f} s, peak RSS {audited.peak_rss_mib:.0f} MiB, start-up included",
                    )
                )
                out.append(
                    fig(
                        f"replay.{tag}.rss",
                        f"peak RSS of engram-verify log at {n:,} entries",
                        verify.peak_rss_mib,
                        "MiB",
                    )
                )
    finally:
        ledger.store.engine.dispose()

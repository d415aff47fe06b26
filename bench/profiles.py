"""Profiles of the paths behind the benchmark's targets (cProfile, every thread).

    python -m bench.profiles ingest       # in process, SQLite, 64 clients (threads)
    python -m bench.profiles http         # engram serve (1 worker, profiled) under 64 HTTP clients
    python -m bench.profiles checkpoint   # the same server under GET /checkpoint
    python -m bench.profiles proofs       # Ledger.prove_inclusion on a fresh process, 10^5 entries
    python -m bench.profiles replay       # engram-verify log of an exported log
    python -m bench.profiles bundle       # verify_bundle, 1 and 1000 claimed entries
    python -m bench.profiles rebuild      # MemoryService.rebuild

Prints the top functions by cumulative time and by own time, summed over every thread
(cProfile sees only the thread that enabled it, so each thread started after the patch below
runs under its own profiler and the stats are merged). Profiling slows Python code several
times over and C code not at all, so read shares, not rates. docs/performance.md quotes these
for each missed target.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import ENGRAM, engram_home, log_vkey, run_measured

_PROFILES: list[cProfile.Profile] = []
_TOP = [25]  # rows per table (--top)


def _profiler() -> cProfile.Profile:
    # Each thread's own CPU time: a thread waiting for a lock, the GIL or an fsync is not
    # running Python (with the default wall clock, 64 waiting clients would dominate).
    return cProfile.Profile(time.thread_time)


def _patch_threads() -> None:
    """Every thread started from now on runs under its own profiler (collected in _PROFILES)."""
    original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]
    if getattr(original, "_engram_profiled", False):
        return

    def bootstrap(self: threading.Thread) -> None:
        prof = _profiler()
        _PROFILES.append(prof)
        prof.enable()
        try:
            original(self)
        finally:
            prof.disable()

    bootstrap._engram_profiled = True  # type: ignore[attr-defined]
    threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]


@contextmanager
def profiled(threads: bool = True) -> Iterator[list[cProfile.Profile]]:
    """Profile the block on this thread (and, with ``threads``, every thread it starts)."""
    _PROFILES.clear()
    if threads:
        _patch_threads()
    main = _profiler()
    _PROFILES.append(main)
    main.enable()
    try:
        yield _PROFILES
    finally:
        main.disable()


def _short(path: str) -> str:
    for marker in ("site-packages/", "/work/main/", str(Path(__file__).resolve().parents[1]) + "/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def report(profiles: list[cProfile.Profile] | pstats.Stats, title: str) -> str:
    """Top functions by cumulative and by own time, as a compact Markdown-ready table."""
    top = _TOP[0]
    if isinstance(profiles, pstats.Stats):
        stats = profiles
    else:
        usable = [p for p in profiles if p.getstats()]
        stats = pstats.Stats(usable[0], stream=io.StringIO())
        for p in usable[1:]:
            stats.add(p)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in raw.values())
    rows = [
        (ct, tt, nc, f"{_short(f)}:{line}({name})" if f != "~" else name)
        for (f, line, name), (_, nc, tt, ct, _) in raw.items()
    ]
    out = [
        f"## {title}",
        "",
        f"{total:.2f} s of CPU time profiled (all threads, each thread's own CPU clock)",
        "",
    ]
    for label, key in (("cumulative", 0), ("own time", 1)):
        out.append(f"top {top} by {label}:")
        out.append("| cumulative s | own s | calls | function |")
        out.append("|---:|---:|---:|---|")
        for ct, tt, nc, name in sorted(rows, key=lambda r: -r[key])[:top]:
            out.append(f"| {ct:.2f} | {tt:.2f} | {nc} | `{name}` |")
        out.append("")
    return "\n".join(out)


# -- the paths ---------------------------------------------------------------------------------


def p_ingest(tmp: str) -> str:
    from bench.bench_log import concurrent_ingest, new_ledger

    ledger = new_ledger(f"sqlite:///{tmp}/ingest.db")
    concurrent_ingest(ledger, 2, 5, True)
    with profiled() as profs:
        rate, *_ = concurrent_ingest(ledger, 64, 16, True)
    return report(profs, f"in-process ingest, SQLite, 64 clients ({rate:,.0f} events/s while profiled)")


def _serve(port: int, out: str) -> None:
    """The child: uvicorn with one worker in this process, profiled, until SIGINT."""
    import uvicorn

    with profiled() as profs:
        uvicorn.run(
            "api.main:app_factory", factory=True, host="127.0.0.1", port=port, workers=1, log_level="warning"
        )
    usable = [p for p in profs if p.getstats()]
    stats = pstats.Stats(usable[0], stream=io.StringIO())
    for p in usable[1:]:
        stats.add(p)
    stats.dump_stats(out)


class _ProfiledServer:
    def __init__(self, tmp: str) -> None:
        import httpx

        from bench.bench_http import TOKEN

        self.env = engram_home(tmp, "profile-http")
        self.env.update(
            {
                "ENGRAM_OPERATOR_TOKEN": TOKEN,
                "ENGRAM_RATE_LIMIT_PER_MINUTE": "1000000",
                "ENGRAM_RATE_LIMIT_BURST": "1000000",
                "ENGRAM_RATE_LIMIT_PER_CLIENT_PER_MINUTE": "10000000",
                "ENGRAM_RATE_LIMIT_PER_CLIENT_BURST": "10000000",
            }
        )
        self.vkey = log_vkey(self.env)
        from bench.bench_http import _port

        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.out = os.path.join(tmp, "server.prof")
        code = f"from bench.profiles import _serve; _serve({self.port}, {self.out!r})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], env={**self.env, "PYTHONPATH": _root()})
        for _ in range(300):
            try:
                if httpx.get(self.url + "/healthz").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the profiled server did not start")

    def stop(self) -> pstats.Stats:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        return pstats.Stats(self.out, stream=io.StringIO())


def _root() -> str:
    return str(Path(__file__).resolve().parents[1])


def p_http(tmp: str) -> str:
    from bench.web import http_ingest

    server = _ProfiledServer(tmp)
    try:
        http_ingest(server, 2, 3, 1, "warmup")  # type: ignore[arg-type]
        rate, p50, p99 = http_ingest(server, 64, 16, 4, "profile")  # type: ignore[arg-type]
    finally:
        stats = server.stop()
    return report(
        stats,
        f"engram serve (1 worker, profiled), HTTP ingest by 64 clients ({rate:,.0f} events/s, p50 {p50:.0f} ms, "
        f"p99 {p99:.0f} ms while profiled)",
    )


def p_checkpoint(tmp: str) -> str:
    from bench.web import http_reads

    server = _ProfiledServer(tmp)
    try:
        rate = http_reads(server.url, "/checkpoint", 4, 5.0)
    finally:
        stats = server.stop()
    return report(
        stats, f"engram serve (1 worker, profiled) under GET /checkpoint ({rate:,.0f}/s while profiled)"
    )


def p_proofs(tmp: str, size: int = 100_000) -> str:
    import random

    from bench.bench_log import new_ledger
    from bench.logbuild import LogBuilder
    from bench.proofs import _fresh

    url = f"sqlite:///{tmp}/proofs.db"
    ledger = new_ledger(url)
    with LogBuilder(ledger, agents=2000) as b:
        b.grow_to(size)
    fresh = _fresh(ledger, url)
    rng = random.Random(1)
    idx = [rng.randrange(size) for _ in range(4000)]
    with profiled(threads=False) as profs:
        t0 = time.perf_counter()
        for i in idx:
            fresh.prove_inclusion(i, size)
        rate = len(idx) / (time.perf_counter() - t0)
    return report(
        profs, f"Ledger.prove_inclusion at {size:,} entries, SQLite, fresh process ({rate:,.0f}/s profiled)"
    )


def p_replay(tmp: str, size: int = 20_000) -> str:
    from bench.logbuild import LogBuilder
    from ledger.compose import open_ledger
    from ledger.config import Settings
    from verifier.cli import main as verify_main

    env = engram_home(tmp, "profile-replay")
    os.environ["ENGRAM_HOME"] = env["ENGRAM_HOME"]
    vkey = log_vkey(env)
    ledger = open_ledger(Settings.from_env())
    with LogBuilder(ledger, agents=2000) as b:
        b.grow_to(size)
    tiles = os.path.join(tmp, "tiles")
    run_measured([ENGRAM, "export", "tiles", tiles], env)
    with profiled(threads=False) as profs:
        t0 = time.perf_counter()
        code = verify_main(["log", tiles, "--log-key", vkey, "--quiet"])
        dt = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError("engram-verify log failed")
    return report(
        profs, f"engram-verify log of {size:,} entries, in process ({size / dt:,.0f} entries/s profiled)"
    )


def p_bundle(tmp: str) -> str:
    from bench.bench_log import new_ledger
    from engram.client.sdk import Agent
    from ledger.bundle import create_bundle, pact_claim
    from ledger.inprocess import InProcess
    from verifier.bundle import verify_bundle
    from verifier.note import VerifierKey

    ledger = new_ledger(f"sqlite:///{tmp}/bundle.db")
    out = []
    for m, runs in ((1, 300), (1000, 5)):
        agent = Agent.generate(
            f"seller-{m}", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True), state_dir=None
        )
        agent.register()
        for i in range(m):
            agent.append("pact.outcome", {"pact": f"p{i}", "result": "fulfilled", "quality": 90})
        data = create_bundle(ledger, pact_claim(ledger, f"seller-{m}"))
        key = VerifierKey.parse(ledger.vkey)
        with profiled(threads=False) as profs:
            for _ in range(runs):
                verify_bundle(data, key)
        out.append(report(profs, f"verify_bundle, {m} claimed entries, {runs} runs"))
    return "\n".join(out)


def p_rebuild(tmp: str, events: int = 5_000) -> str:
    from bench.logbuild import LogBuilder
    from ledger.compose import memory_service, open_ledger
    from ledger.config import Settings

    env = engram_home(tmp, "profile-rebuild")
    os.environ["ENGRAM_HOME"] = env["ENGRAM_HOME"]
    settings = Settings.from_env()
    ledger = open_ledger(settings)
    with LogBuilder(ledger, agents=500, kind="memory.written", tag="writer") as b:
        b.grow_to(ledger.size() + events)
    memory = memory_service(ledger, settings)
    memory.sync()
    with profiled() as profs:
        t0 = time.perf_counter()
        size, _ = memory.rebuild()
        dt = time.perf_counter() - t0
    return report(profs, f"MemoryService.rebuild of {size:,} entries ({size / dt:,.0f} events/s profiled)")


PATHS: dict[str, Callable[[str], str]] = {
    "ingest": p_ingest,
    "http": p_http,
    "checkpoint": p_checkpoint,
    "proofs": p_proofs,
    "replay": p_replay,
    "bundle": p_bundle,
    "rebuild": p_rebuild,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profiles", description=__doc__)
    ap.add_argument("paths", nargs="+", choices=sorted(PATHS))
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    _TOP[0] = args.top
    for name in args.paths:
        with tempfile.TemporaryDirectory(prefix=f"engram-profile-{name}-") as tmp:
            print(PATHS[name](tmp), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

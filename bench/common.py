"""Helpers the sections share: databases per backend, percentiles, memory, timed commands."""

from __future__ import annotations

import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Figure

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ENGRAM = str(BIN / "engram")
ENGRAM_VERIFY = str(BIN / "engram-verify")


def fig(key: str, label: str, value: float | None, unit: str, *, note: str = "", reason: str = "") -> Figure:
    return Figure(key=key, label=label, value=value, unit=unit, note=note, reason=reason)


def pct(xs: Sequence[float], p: float) -> float:
    """The ``p``-quantile (0..1) by the nearest-rank method."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))]


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def rss_mib() -> float:
    """This process's resident set size now."""
    import psutil

    return float(psutil.Process().memory_info().rss) / (1 << 20)


def peak_rss_mib(who: int = resource.RUSAGE_SELF) -> float:
    """Peak RSS so far (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(who).ru_maxrss / 1024


@contextmanager
def database(backend: str, pg_url: str | None, workdir: str, name: str) -> Iterator[str]:
    """A SQLAlchemy URL of an empty database: a SQLite file under ``workdir``, or a
    throwaway PostgreSQL database (created and dropped as bench_log.pg_database does)."""
    if backend == "sqlite":
        d = tempfile.mkdtemp(prefix=f"{name}-", dir=workdir)
        try:
            yield f"sqlite:///{d}/{name}.db"
        finally:
            shutil.rmtree(d, ignore_errors=True)  # a 10^6-entry log is a gigabyte
        return
    if pg_url is None:
        raise RuntimeError("PostgreSQL was not given (--no-pg)")
    from bench.bench_log import pg_database

    made = pg_database(pg_url, suffix=f"_{name}")
    if made is None:
        raise RuntimeError(f"PostgreSQL at {pg_url} is unreachable")
    url, drop = made
    try:
        yield url
    finally:
        drop()


def plain_pg(url: str) -> str:
    """The libpq form of a SQLAlchemy PostgreSQL URL (what ENGRAM_DATABASE_URL takes)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@dataclass(frozen=True, slots=True)
class Measured:
    """A command run to completion: wall and CPU seconds, its peak RSS, its output."""

    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    stdout: str
    stderr: str


def run_measured(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Measured:
    """Run ``argv``; the child's own peak RSS and CPU come from ``wait4`` (not the sum of
    every child this process ever had). A non-zero exit raises with its stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), env=dict(env) if env is not None else None, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {stderr[-800:] or stdout[-800:]}")
    return Measured(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mib=usage.ru_maxrss / 1024,
        stdout=stdout,
        stderr=stderr,
    )


def engram_home(workdir: str, name: str, db_url: str | None = None) -> dict[str, str]:
    """A fresh ENGRAM_HOME initialised with ``engram init`` (keys + database); its environment."""
    home = tempfile.mkdtemp(prefix=f"{name}-", dir=workdir)
    env = {**os.environ, "ENGRAM_HOME": home}
    env.pop("ENGRAM_DATABASE_URL", None)
    if db_url is not None:
        env["ENGRAM_DATABASE_URL"] = plain_pg(db_url)
    run_measured([ENGRAM, "init", "--origin", f"bench.example/{name}"], env)
    return env


def log_vkey(env: Mapping[str, str]) -> str:
    return run_measured([ENGRAM, "log", "key"], env).stdout.strip()


def run_procs(target: Callable[..., None], argsets: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Start one spawned process per ``argsets`` entry, calling ``target(*args, ready, go,
    results)``; once every one put something on ``ready`` (it is set up), set ``go`` and
    return what each put on ``results``, in the order they finished. The load generators'
    one way of starting at the same moment."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=target, args=(*args, ready, go, results)) for args in argsets]
    for w in workers:
        w.start()
    for _ in workers:
        ready.get(timeout=600)
    go.set()
    got = [results.get(timeout=1800) for _ in workers]
    for w in workers:
        w.join()
    return got

"""Run each section in its own child process and collect its figures and peak memory.

A section is spawned (a fresh interpreter: nothing one section imported, cached or leaked
counts against the next), runs to completion and sends back its figures with its own peak
RSS and the largest peak RSS of the processes it started (servers, CLIs, signers). The
sections run one after the other, never together, so each has the machine to itself (as
much as a shared machine allows: the load average is recorded beside each run).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import importlib.metadata
import multiprocessing as mp
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from bench.common import ROOT
from bench.plan import Config, Section
from bench.report import Figure, SectionRun

__all__ = ["machine_facts", "run_section"]


def _child(func: str, cfg: Config, args: tuple[str, ...], conn: Connection) -> None:
    out: list[Figure] = []
    error = ""
    try:
        module, name = func.split(":")
        getattr(importlib.import_module(module), name)(cfg, out, *args)
    except BaseException as e:
        error = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    conn.send(
        {
            "figures": [dataclasses.asdict(f) for f in out],
            "error": error,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "children_peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
    )
    conn.close()


def run_section(section: Section, cfg: Config, log: Callable[[str], None]) -> tuple[list[Figure], SectionRun]:
    """Run one section in a spawned child; its figures (tagged with the section) and its run."""
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child, args=(section.func, cfg, section.args, send), name=f"bench-{section.name}"
    )
    t0 = time.perf_counter()
    log(f"[{section.name}] started")
    proc.start()
    send.close()
    try:
        payload: dict[str, Any] = receive.recv()
    except EOFError:
        payload = {"figures": [], "error": f"the section's process died (exit code {proc.exitcode})"}
    proc.join()
    seconds = time.perf_counter() - t0
    figures = [dataclasses.replace(Figure(**f), section=section.name) for f in payload["figures"]]
    run = SectionRun(
        name=section.name,
        seconds=seconds,
        peak_rss_mib=payload.get("peak_rss_mib"),
        children_peak_rss_mib=payload.get("children_peak_rss_mib"),
        error=payload.get("error", ""),
    )
    log(f"[{section.name}] {'FAILED: ' + run.error if run.error else 'done'} in {seconds:.1f} s")
    return figures, run


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    if shutil.which("git") is None:
        return None
    try:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True)
    except (subprocess.SubprocessError, OSError):
        return None
    return r.stdout.strip()


def _pg_version(pg_url: str | None) -> str | None:
    if pg_url is None:
        return None
    try:
        import psycopg

        with psycopg.connect(pg_url, connect_timeout=3) as c:
            row = c.execute("SHOW server_version").fetchone()
            return None if row is None else str(row[0])
    except Exception as e:
        return f"unreachable: {e}"


def machine_facts(cfg: Config, argv: list[str]) -> dict[str, Any]:
    """What a reader needs to compare runs: machine, versions, commit, date, mode, load."""
    dirty = _git("status", "--porcelain")
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": cfg.mode,
        "argv": argv,
        "git_commit": _git("rev-parse", "--short=12", "HEAD"),
        "git_dirty": bool(dirty),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "load_average_start": os.getloadavg(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "postgresql": _pg_version(cfg.pg_url),
        "versions": {
            d: _version(d)
            for d in (
                "cryptography",
                "pynacl",
                "sqlalchemy",
                "psycopg",
                "uvicorn",
                "fastapi",
                "httpx",
                "psutil",
                "pymerkle",
                "eventsourcing",
                "provara-protocol",
            )
        },
        "sizes": dataclasses.asdict(cfg.sizes),
        "note": "a shared machine (2 cores, other work running): compare ratios measured in one run, "
        "not absolute figures across runs",
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None

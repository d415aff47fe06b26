"""The write path under the floor's load, profiled (issue 43): ``engram serve --workers 2``
servers (one per build or setting), the load of ``bench.web.against_floor`` (pre-signed
record writes, 64 in flight, 2 load processes) in alternating rounds, the servers' CPU per
event from ``/proc/<pid>/stat`` around each load and, with ``--spy PREFIX``, a
``py-spy record --gil -r 100 -f raw`` of every server process (``PREFIX-<name>-<round>-<pid>.txt``).

    python -m bench.write_profile --events 1024 --rounds 3 \\
        --server 'main={"PYTHONPATH": "/path/to/a/worktree/of/main"}' --server 'this={}'

Prints one line per round and server, then the medians. A benchmark, not a test: the
figures are ratios of one run (docs/performance.md, "The write path after Deliver 1 and 2").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_http import Server
from bench.floor import load, presign
from bench.web import _register
from verifier.note import VerifierKey


def _cpu_s(pid: int) -> float:
    """utime + stime of ``pid``, seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pids(server: Server) -> list[int]:
    import psutil

    root = psutil.Process(server.proc.pid)
    return [root.pid, *(p.pid for p in root.children(recursive=True))]


def one_load(server: Server, n: int, tag: str, spy: str | None) -> tuple[float, float, float]:
    """(events/s, p50 ms, server CPU ms per event) of one load of ``n`` fresh events."""
    events = presign(VerifierKey.parse(server.vkey).name, n, tag)
    _register(server.url, events.registrations)
    jobs = [(f"/v1/agents/{a}/records", b) for a, b in zip(events.agents, events.records, strict=True)]
    pids = _pids(server)
    spies: list[subprocess.Popen[bytes]] = []
    if spy is not None:
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        for pid in pids:
            cmd = [
                pyspy,
                "record",
                "--gil",
                "-r",
                "100",
                "-f",
                "raw",
                "-o",
                f"{spy}-{pid}.txt",
                "-p",
                str(pid),
            ]
            spies.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
    before = {pid: _cpu_s(pid) for pid in pids}
    result = load(server.url, jobs, inflight=64, procs=2)
    cpu = sum(_cpu_s(pid) - before[pid] for pid in pids)
    for s in spies:
        s.send_signal(signal.SIGINT)
        s.wait(timeout=60)
    return result.rate, result.p50_ms, cpu / result.events * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--spy", default=None, help="py-spy output prefix (off by default)")
    ap.add_argument("--server", action="append", default=[], help="NAME=JSON environment (repeatable)")
    args = ap.parse_args()
    envs: dict[str, dict[str, str]] = {}
    for spec in args.server or ["this={}"]:
        name, _, env = spec.partition("=")
        envs[name] = json.loads(env or "{}")
    base = Path(tempfile.mkdtemp(prefix="engram-write-profile-"))
    servers = {name: Server(base / name, None, 2, env=env) for name, env in envs.items()}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
    try:
        for name, server in servers.items():
            one_load(server, 64, f"warm-{name}", None)
        for r in range(args.rounds):
            for name, server in servers.items():
                spy = f"{args.spy}-{name}-{r}" if args.spy else None
                rate, p50, cpu = one_load(server, args.events, f"{name}-{r}", spy)
                runs[name].append((rate, cpu))
                print(
                    f"{name} round {r}: {rate:.0f} events/s, p50 {p50:.1f} ms, server CPU {cpu:.3f} ms/event"
                )
        for name, got in runs.items():
            rates = sorted(x[0] for x in got)
            cpus = sorted(x[1] for x in got)
            print(
                f"median {name}: {rates[len(rates) // 2]:.0f} events/s, {cpus[len(cpus) // 2]:.3f} ms/event"
            )
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Crash harness (issue 15, Deliver 2): SIGKILL appenders and ``engram serve`` at random
points, then check that nothing acknowledged was lost and that the log is whole.

    python -m tests.harness.crash                     # 25 trials on SQLite and on PostgreSQL
    python -m tests.harness.crash --long              # 200 trials per backend
    python -m tests.harness.crash --trials 3 --backends sqlite --seed 7 --json crash.json

Each backend gets a fresh ``engram init`` home (PostgreSQL: a new database on
``--pg``, default the local server). Each trial starts, on that one log, two in-process
appender processes (3 threads each, through the group commit) and ``engram serve --workers
2`` with one HTTP appender process (2 threads); after a random delay it SIGKILLs a random
non-empty subset of them (the server with its workers, as a process group) and, a random
moment later, the rest, so that every process dies while appending or serving. All of them
run with ``ENGRAM_SEQUENCER=host``: one of them is the host's sequencer and the others
forward to it, so the kills land on the sequencer and on forwarders mid-batch. Then it
checks:

* every acknowledged entry is in the log at its original index, with its original
  timestamp and leaf hash;
* ``engram audit`` finds nothing (every stored hash, node, checkpoint and the chain of
  checkpoints, stream heads, key table and log state agree with the leaves; all checkpoints
  are roots of one tree, so every pair of them is consistent);
* the memory projection, caught up, has the digest a rebuild from the log gives;
* ``engram serve`` restarts on the database and answers ``GET /checkpoint``.

Prints one line per trial and a summary; ``--json`` writes the figures. Exit code 1 if any
trial failed a check.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.e2e.processes import ENGRAM, free_port

TOKEN = "crash-harness-" + secrets.token_hex(16)


@dataclass
class Figures:
    backend: str
    trials: int = 0
    killed: int = 0
    acknowledged: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _env(home: Path, database_url: str | None) -> dict[str, str]:
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_OPERATOR_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    # Every process of the host through one sequencer (ledger.sequencer): the kills land on
    # the sequencer and on forwarders alike, whichever process took the lock first.
    env["ENGRAM_SEQUENCER"] = "host"
    env.pop("ENGRAM_DEV_MODE", None)
    env.pop("ENGRAM_DATABASE_URL", None)
    if database_url is not None:
        env["ENGRAM_DATABASE_URL"] = database_url
    return env


def _new_pg_database(admin_url: str) -> tuple[str, str]:
    import psycopg

    name = "engram_crash_" + secrets.token_hex(6)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0]
    return name, f"{base}/{name}".replace("postgresql://", "postgresql+psycopg://", 1)


def _drop_pg_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _start_server(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [ENGRAM, "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: killed with its workers
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError("engram serve exited at start")
        try:
            if httpx.get(url + "/checkpoint", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("engram serve did not answer")


def _stop_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    proc.wait(timeout=60)


def _acks(text: str) -> list[tuple[int, int, str]]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "ack":
            out.append((int(parts[1]), int(parts[2]), parts[3]))
    return out


def _check(env: dict[str, str], acks: list[tuple[int, int, str]]) -> list[str]:
    """Everything the module docstring promises, on the database as the kills left it."""
    problems: list[str] = []
    from ledger.audit import audit
    from ledger.compose import memory_service, open_ledger
    from ledger.config import Settings
    from verifier.event import Leaf
    from verifier.merkle import leaf_hash

    # The settings of ``env`` only: the process environment is left alone (a test calling
    # this in a pytest worker must not leak ENGRAM_DATABASE_URL into the next test).
    settings = Settings.from_env({k: v for k, v in env.items() if k.startswith("ENGRAM_")})
    ledger = open_ledger(settings)
    try:
        for index, ts, lh in acks:
            raw = ledger.store.leaf(index)
            if raw is None:
                problems.append(f"acknowledged entry {index} is missing")
                continue
            if leaf_hash(raw).hex() != lh or Leaf.from_bytes(raw).timestamp_us != ts:
                problems.append(f"acknowledged entry {index} changed (hash or timestamp)")
        memory = memory_service(ledger, settings)
        memory.sync()
        report = audit(ledger.store, ledger.verifier_key)
        problems += [f"audit: {f}" for f in report.findings[:10]]
        caught_up = memory.digest()
        if memory.rebuild() != caught_up:
            problems.append("the caught-up projection differs from a rebuild")
    finally:
        ledger.store.engine.dispose()
    return problems


def _trial(env: dict[str, str], vkey: str, n: int, rng: random.Random) -> tuple[list[str], int, int]:
    appenders = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.harness.appender", f"t{n}-p{i}", "2000", "3"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for i in range(2)
    ]
    server, url = _start_server(env)
    over_http = ["--http", url, "--token", TOKEN, "--vkey", vkey]
    http_client = subprocess.Popen(
        [sys.executable, "-m", "tests.harness.appender", f"t{n}-h", "400", "2", *over_http],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    # Kill a random subset at a random point, then the rest a moment later: every process
    # dies by SIGKILL while it is appending (or serving), never by a clean exit.
    everyone = [*appenders, server, http_client]
    time.sleep(rng.uniform(0.3, 2.5))
    first = [p for p in everyone if rng.random() < 0.5] or [server]
    for group in (first, [p for p in everyone if p not in first]):
        for p in group:
            if p is server:
                _stop_group(server, signal.SIGKILL)
            else:
                p.kill()
        time.sleep(rng.uniform(0.1, 1.0))
    victims = everyone
    acks: list[tuple[int, int, str]] = []
    for p in (*appenders, http_client):
        try:
            out, _ = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        acks += _acks(out.decode())
    problems = _check(env, acks)
    try:  # the server restarts cleanly on what the kills left
        again, url = _start_server(env)
        _stop_group(again, signal.SIGTERM)
    except RuntimeError as e:
        problems.append(f"restart: {e}")
    return problems, len(victims), len(acks)


def run_backend(backend: str, trials: int, rng: random.Random, pg_admin: str, workdir: Path) -> Figures:
    figures = Figures(backend)
    home = Path(tempfile.mkdtemp(prefix=f"crash-{backend}-", dir=workdir))
    db_name, db_url = _new_pg_database(pg_admin) if backend == "postgres" else (None, None)
    try:
        return _run(backend, trials, rng, _env(home, db_url), figures)
    finally:
        if db_name is not None:
            _drop_pg_database(pg_admin, db_name)


def _run(backend: str, trials: int, rng: random.Random, env: dict[str, str], figures: Figures) -> Figures:
    subprocess.run(
        [ENGRAM, "init", "--origin", "crash.example/log"], env=env, check=True, capture_output=True
    )
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    t0 = time.monotonic()
    for n in range(trials):
        problems, killed, acked = _trial(env, vkey, n, rng)
        figures.trials += 1
        figures.killed += killed
        figures.acknowledged += acked
        figures.failures += [f"trial {n}: {p}" for p in problems]
        verdict = "ok" if not problems else f"FAILED: {problems[:3]}"
        print(
            f"[{backend}] trial {n + 1}/{trials}: {killed} killed, {acked} acknowledged entries checked: {verdict}"
        )
        sys.stdout.flush()
    figures.seconds = time.monotonic() - t0
    return figures


def add_backend_arguments(ap: argparse.ArgumentParser) -> None:
    """--backends, --pg and --seed, as every harness takes them."""
    ap.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    ap.add_argument(
        "--pg", default="postgresql://postgres@127.0.0.1:5432/postgres", help="PostgreSQL admin URL"
    )
    ap.add_argument("--seed", type=int, default=None, help="random seed (printed; default: random)")


def chosen_backends(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or any(b not in ("sqlite", "postgres") for b in backends):
        ap.error("--backends takes sqlite and/or postgres")
    return backends


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.harness.crash", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, help="trials per backend (default 25; --long 200)")
    ap.add_argument("--long", action="store_true", help="200 trials per backend")
    add_backend_arguments(ap)
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    trials = args.trials if args.trials is not None else (200 if args.long else 25)
    if trials < 1:
        ap.error("--trials must be at least 1")
    backends = chosen_backends(ap, args)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    print(f"crash harness: {trials} trials per backend, seed {seed}")
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="engram-crash-"))
    results = [run_backend(b, trials, rng, args.pg, workdir) for b in backends]
    failed = False
    for f in results:
        print(
            f"{f.backend}: {f.trials} trials, {f.killed} processes killed, {f.acknowledged} acknowledged entries "
            f"re-checked, {len(f.failures)} failures, {f.seconds:.0f} s"
        )
        for line in f.failures[:20]:
            print(f"  {line}")
        failed |= bool(f.failures)
    if args.json is not None:
        args.json.write_text(
            json.dumps({"seed": seed, "backends": [f.__dict__ for f in results]}, indent=2), encoding="utf-8"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

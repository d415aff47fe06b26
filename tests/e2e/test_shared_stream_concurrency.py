"""Concurrency on one stream (issue 15, Deliver 3): two in-process appender processes and two
HTTP appender processes through ``engram serve --workers 2``, 3 threads each, all racing for
the versions of one agent's ``commitment`` stream on one log (both backends). Every attempt
is answered exactly once (a receipt or a stream conflict, nothing else), the stream ends
dense (versions 0..n-1, each once, at distinct indices), the log has no gap or duplicate
(engram audit is clean), and the projection caught up equals a sequential replay (rebuild)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM, free_port, listening

PER_THREAD = 6
THREADS = 3
TOKEN = "shared-stream-" + secrets.token_hex(16)


def test_processes_and_service_workers_racing_for_one_stream(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_OPERATOR_TOKEN": TOKEN}
    env.pop("ENGRAM_DEV_MODE", None)
    env.pop("ENGRAM_DATABASE_URL", None)
    env.pop("ENGRAM_SEQUENCER", None)  # serve's workers share one; the appenders append as themselves
    if backend == "postgres":
        env["ENGRAM_DATABASE_URL"] = request.getfixturevalue("pg_server").new_database()
    subprocess.run([ENGRAM, "init", "--origin", "race.example/log"], env=env, check=True, capture_output=True)
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    _register(env, vkey)  # the racing agent, once (the appenders derive the same key)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with listening([ENGRAM, "serve", "--port", str(port), "--workers", "2"], env, port, what="engram serve"):
        base = [
            sys.executable,
            "-m",
            "tests.harness.appender",
            "racer",
            str(PER_THREAD),
            str(THREADS),
            "--shared",
        ]
        over_http = ["--http", url, "--token", TOKEN, "--vkey", vkey]
        procs = [
            subprocess.Popen(base, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)
        ]
        procs += [
            subprocess.Popen([*base, *over_http], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=300) for p in procs]
    acks: list[tuple[int, int]] = []
    conflicts = 0
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()[-2000:]
        lines = out.decode().splitlines()
        assert all(ln == "conflict" or ln.startswith("ack ") for ln in lines), lines[:5]
        conflicts += sum(1 for ln in lines if ln == "conflict")
        acks += [(int(ln.split()[1]), int(ln.split()[4])) for ln in lines if ln.startswith("ack ")]
    total = 4 * THREADS * PER_THREAD
    assert len(acks) == total
    assert sorted(v for _, v in acks) == list(range(total))  # dense, each version once
    assert len({i for i, _ in acks}) == total  # distinct indices
    assert conflicts > 0  # they did race
    audit = subprocess.run([ENGRAM, "audit"], env=env, capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout[-2000:]
    digest = subprocess.run([ENGRAM, "memory", "digest"], env=env, check=True, capture_output=True, text=True)
    rebuilt = subprocess.run(
        [ENGRAM, "memory", "rebuild"], env=env, check=True, capture_output=True, text=True
    )
    assert (
        digest.stdout.split()[-1] in rebuilt.stdout and "matches the incremental projection" in rebuilt.stdout
    )


def _register(env: dict[str, str], vkey: str) -> None:
    code = (
        "from ledger.compose import open_ledger; from ledger.config import Settings;"
        "from ledger.inprocess import InProcess; from engram.client.sdk import Agent;"
        "from engram.protocol.signer import AgentSigner; from tests.contract.worker import agent_key;"
        "led = open_ledger(Settings.from_env());"
        f"Agent(AgentSigner('racer', agent_key('racer'), origin={vkey.split('+')[0]!r}), log_vkey=led.vkey,"
        " transport=InProcess(led, log_only=True)).register()"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)

"""Rate limits hold across the workers of ``engram serve`` (issue 15, Deliver 7): each worker
kept its own buckets, so N workers allowed N times the limit. Every request opens a new
connection, so the kernel spreads them over both workers; the limit is counted once."""

from __future__ import annotations

import http.client
import os
import subprocess
from pathlib import Path

from tests.e2e.processes import ENGRAM, free_port, listening


def _get(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def _serve(tmp_path: Path, scope: str) -> tuple[dict[str, str], int]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")},
        "ENGRAM_HOME": str(tmp_path / scope),
        "ENGRAM_DEV_MODE": "1",
        "ENGRAM_RATE_LIMIT_PER_CLIENT_PER_MINUTE": "1",
        "ENGRAM_RATE_LIMIT_PER_CLIENT_BURST": "12",
        "ENGRAM_RATE_LIMIT_SCOPE": scope,
    }
    subprocess.run(
        [ENGRAM, "init", "--origin", "limits.example/log"], env=env, check=True, capture_output=True
    )
    return env, free_port()


def test_two_workers_allow_the_per_address_limit_once(tmp_path: Path) -> None:
    env, port = _serve(tmp_path, "host")
    args = [ENGRAM, "serve", "--port", str(port), "--workers", "2"]
    with listening(args, env, port, what="engram serve --workers 2"):
        statuses = [_get(port, "/checkpoint") for _ in range(48)]
    assert set(statuses) <= {200, 429}, statuses
    # a burst of 12, plus at most one token that a minute's rate refilled meanwhile
    assert 12 <= statuses.count(200) <= 13, statuses
    assert (tmp_path / "host" / "ratelimit-clients.bin").is_file()


def test_the_process_scope_keeps_a_table_per_worker_as_documented(tmp_path: Path) -> None:
    env, port = _serve(tmp_path, "process")
    with listening([ENGRAM, "serve", "--port", str(port)], env, port, what="engram serve"):
        statuses = [_get(port, "/checkpoint") for _ in range(20)]
    assert 12 <= statuses.count(200) <= 13, statuses
    assert not (tmp_path / "process" / "ratelimit-clients.bin").exists()

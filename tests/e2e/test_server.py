"""``engram serve`` as a real uvicorn process on loopback (two workers), driven by
``engram demo --server`` and curl-like raw requests, on both backends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from verifier.note import VerifierKey, verify_checkpoint

ENGRAM = str(Path(sys.executable).parent / "engram")
TOKEN = "KYmN3NpvX6U5-2bQPCkfFYlQjY1D_2Q0A2ht-zym"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_OPERATOR_TOKEN": TOKEN,
        "COLUMNS": "200",
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    env.pop("ENGRAM_DEV_MODE", None)
    if backend == "postgres":
        env["ENGRAM_DATABASE_URL"] = request.getfixturevalue("pg_server").new_database()
    subprocess.run([ENGRAM, "init", "--origin", "e2e.example/log"], env=env, check=True, capture_output=True)
    port = _free_port()
    proc = subprocess.Popen(
        [ENGRAM, "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if httpx.get(url + "/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError("the server did not start")
        yield url, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_demo_against_a_real_server(server: tuple[str, dict[str, str]]) -> None:
    url, env = server
    key = subprocess.run(
        [ENGRAM, "log", "key"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    demo = subprocess.run(
        [ENGRAM, "demo", "--server", url, "--log-key", key],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "refused (403, auth.agent)" in out
    assert "the replay is refused (401)" in out
    assert "verified offline" in out and "token is refused (403, token.revoked)" in out
    assert "supported; inflated by 100 tasks: contradicted" in out
    assert "root match the checkpoint" in out
    # what curl sees: a C2SP checkpoint, cacheable tiles, problem details
    cp = verify_checkpoint(httpx.get(url + "/checkpoint").content, VerifierKey.parse(key))
    assert cp.size > 50
    if cp.size >= 256:
        tile = httpx.get(url + "/tile/0/000")
        assert (
            tile.status_code == 200
            and "immutable" in tile.headers["cache-control"]
            and len(tile.content) == 8192
        )
    else:
        tile = httpx.get(url + f"/tile/0/000.p/{cp.size}")
        assert tile.status_code == 200 and "max-age=10" in tile.headers["cache-control"]
        assert len(tile.content) == 32 * cp.size
    r = httpx.get(url + "/v1/agents/nobody/memory")
    assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
    # a pinned key that is not the server's stops the demo before anything is sent
    wrong = subprocess.run(
        [ENGRAM, "demo", "--server", url, "--log-key", key.replace("e2e.example", "other.example")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode != 0


def test_serve_refuses_default_secrets(tmp_path: Path) -> None:
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path), "ENGRAM_OPERATOR_TOKEN": "changeme"}
    env.pop("ENGRAM_DEV_MODE", None)
    proc = subprocess.run(
        [ENGRAM, "serve", "--port", str(_free_port())], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "ENGRAM_OPERATOR_TOKEN" in proc.stdout + proc.stderr

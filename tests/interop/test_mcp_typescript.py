"""``engram mcp`` driven by an independent client: the official MCP TypeScript SDK (pinned in
tests/interop/mcpts/package-lock.json, installed with ``npm ci`` into a temporary directory),
over stdio and streamable HTTP. It lists the tools, writes and recalls a memory, gets a
schema refusal and a typed not-found problem back as tool errors, and reads a resource."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.processes import free_port, listening

HERE = Path(__file__).resolve().parent / "mcpts"
ENGRAM = str(Path(sys.executable).parent / "engram")
IN_CI = os.environ.get("CI", "").lower() == "true"

pytestmark = pytest.mark.interop


def _unavailable(msg: str) -> None:
    if IN_CI:
        pytest.fail(f"CI requires the TypeScript MCP client: {msg}")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def ts_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        _unavailable("node and npm are not installed")
    d = tmp_path_factory.mktemp("mcpts")
    for name in ("package.json", "package-lock.json", "client.mjs"):
        shutil.copy(HERE / name, d / name)
    run = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=d,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if run.returncode != 0:
        _unavailable(f"npm ci failed: {run.stderr[-500:]}")
    return d / "client.mjs"


@pytest.fixture
def home(tmp_path: Path) -> tuple[dict[str, str], Path]:
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_VERIFIER_STATE": str(tmp_path / "vstate"),
        "ENGRAM_EMBEDDER": "off",
    }
    for var in ("ENGRAM_DATABASE_URL", "ENGRAM_URL", "ENGRAM_KEY_FILE", "ENGRAM_LOG_KEY"):
        env.pop(var, None)
    subprocess.run([ENGRAM, "init", "--origin", "ts.example/log"], env=env, check=True, capture_output=True)
    key = tmp_path / "ts.key"
    subprocess.run(
        [ENGRAM, "agent", "create", "ts-agent", "--key-file", str(key)],
        env=env,
        check=True,
        capture_output=True,
    )
    return env, key


def _check(out: dict[str, Any], env: dict[str, str]) -> None:
    assert out["protocol"]["name"] == "engram"
    assert {"memory_write", "memory_recall", "memory_show", "log_prove", "token_mint"} <= set(out["tools"])
    assert out["write"]["ref"] == f"{out['write']['index']}.0"
    assert "port 7443" in out["recall"] and out["recall"].startswith("<memory-context")
    assert out["bad"]["isError"] and "category" in out["bad"]["text"]
    nf = out["notFound"]
    problem = json.loads(nf["text"][nf["text"].index("{") :])
    assert nf["isError"] and problem["type"].endswith("/not-found") and problem["check"] == "memory.item"
    key = subprocess.run(
        [ENGRAM, "log", "key"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out["logKey"] == key


def _run_client(ts_client: Path, env: dict[str, str], *args: str) -> None:
    """Run the TypeScript client with ``args``; it prints its findings as the last line."""
    run = subprocess.run(
        ["node", str(ts_client), *args],
        env=env,
        cwd=ts_client.parent,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    _check(json.loads(run.stdout.strip().splitlines()[-1]), env)


def test_typescript_client_over_stdio(ts_client: Path, home: tuple[dict[str, str], Path]) -> None:
    env, key = home
    _run_client(ts_client, env, "stdio", ENGRAM, str(key))


def test_typescript_client_over_streamable_http(ts_client: Path, home: tuple[dict[str, str], Path]) -> None:
    env, key = home
    port = free_port()
    server = [ENGRAM, "mcp", "--key-file", str(key), "--transport", "http", "--port", str(port)]
    with listening(server, env, port, what="engram mcp --transport http"):
        token = Path(f"{key}.mcp-token").read_text(encoding="utf-8").strip()
        _run_client(ts_client, env, "http", f"http://127.0.0.1:{port}/mcp", token)

"""What the ``engram`` command and the MCP server answer when a write or an import redacted
secrets (issue 40, finding 6: "Neither ``write`` nor ``import`` says whether it redacted
anything"), on the embedded log, as a user runs them."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.processes import ENGRAM
from tests.e2e.test_mcp import _env

VAULT = "hvs.CAESIiQS3YbhVtqSpUFg5KufQh5dM0DqK3uk"
PROSE = "The prod DB password is hunter2-SECRET-key."


@pytest.fixture
def home(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An embedded log with the agent bob (its key file)."""
    env = _env(tmp_path)
    subprocess.run([ENGRAM, "init", "--origin", "mcp.example/log"], env=env, check=True, capture_output=True)
    key = tmp_path / "bob.key"
    subprocess.run(
        [ENGRAM, "agent", "create", "bob", "--key-file", str(key)], env=env, check=True, capture_output=True
    )
    return env, key


def _engram(env: dict[str, str], *args: str) -> str:
    return subprocess.run([ENGRAM, *args], env=env, check=True, capture_output=True, text=True).stdout


def test_the_cli_says_what_a_write_and_an_import_redacted(
    home: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, key = home
    k = ("--key-file", str(key))
    out = _engram(env, "memory", "write", *k, "--category", "LEARNING", "--content", f"vault login {VAULT}")
    assert "1 secret redacted before signing" in out and VAULT not in out
    data = json.loads(
        _engram(env, "memory", "write", *k, "--category", "LEARNING", "--content", PROSE, "--json")
    )
    assert data["redacted"] == 1
    quiet = _engram(
        env, "memory", "write", *k, "--category", "LEARNING", "--content", "Staging restarts nightly"
    )
    assert "redacted" not in quiet
    src = tmp_path / "mem0.json"
    src.write_text(
        json.dumps({"results": [{"id": "1", "memory": f"Deploys use {VAULT}"}, {"id": "2", "memory": PROSE}]})
    )
    summary = _engram(env, "memory", "import", "mem0", str(src), *k)
    assert "2 secrets redacted" in summary, summary
    report = json.loads(_engram(env, "memory", "import", "mem0", str(src), *k, "--json", "--dry-run"))
    assert report["redacted"] == 0 and report["already_imported"] == 2  # nothing left to write


def test_mcp_tool_results_say_what_they_redacted(home: tuple[dict[str, str], Path]) -> None:
    env, key = home

    async def go() -> None:
        params = StdioServerParameters(command=ENGRAM, args=["mcp", "--key-file", str(key)], env=env)
        async with Client(params, read_timeout_seconds=120) as c:
            w = await c.call_tool(
                "memory_write", {"content": f"Deploys log in with {VAULT}", "category": "LEARNING"}
            )
            assert not w.is_error and w.structured_content["redacted"] == 1
            s = await c.call_tool("session_open", {"title": "pasting"})
            sid = s.structured_content["session"]
            t = await c.call_tool("session_turn", {"session": sid, "role": "user", "content": PROSE})
            assert not t.is_error and t.structured_content["redacted"] == 1
            closed = await c.call_tool("session_close", {"session": sid, "summary": f"rotated {VAULT}"})
            assert not closed.is_error and closed.structured_content["redacted"] == 1

    asyncio.run(go())

"""``pip install '<checkout>[client]'`` (the engram-ledger distribution) in a fresh virtual environment: the client installs without
the server's libraries, and from there runs the user journeys against a real ``engram serve``
(started from the full install): the SDK's demo, and (issue 44) every agent-side command of
``engram`` (``--help``, ``--version``, ``memory``, ``mesh``, ``ui``, ``mcp``, ``hook``) with
``--server`` / ``ENGRAM_URL``; a command that needs the service says which extra."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGRAM = str(Path(sys.executable).parent / "engram")
TOKEN = "ZRTpABvBEIzdOK7r4gl5Fb4kgAQ0Yocv8uqVlxTC"
SERVER_ONLY = (
    "sqlalchemy",
    "alembic",
    "psycopg",
    "fastapi",
    "starlette",
    "uvicorn",
    "numpy",
    "pydantic_settings",
)


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("client-install")
    src = base / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".venv-hermes",
            "node_modules",
            "build",
            "*.egg-info",
            "__pycache__",
            ".mypy_cache",
            ".ruff_cache",
            ".pytest_cache",
        ),
    )
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", f"{src}[client]"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return venv


def _python(venv: Path, code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # Run outside the repository so nothing is imported from the working tree.
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=venv,
        env=env,
        check=False,
    )


def test_client_extra_installs_no_server_library(client_venv: Path) -> None:
    code = (
        "import importlib.util, json\n"
        f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {SERVER_ONLY!r}}}))\n"
    )
    run = _python(client_venv, code)
    assert run.returncode == 0, run.stderr
    assert '"sqlalchemy": false' in run.stdout and "true" not in run.stdout, run.stdout
    run = _python(
        client_venv,
        "import engram.client.http, engram.client.sdk, engram.protocol.kinds, verifier; "
        "from ledger.client import Buyer; print(engram.client.http.__file__)",
    )
    assert run.returncode == 0, run.stderr
    assert str(client_venv) in run.stdout  # the installed copy, not the working tree


def test_engram_command_says_how_to_install_the_service(client_venv: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(client_venv), "COLUMNS": "400"}
    run = subprocess.run(
        [str(client_venv / "bin" / "engram"), "init"], capture_output=True, text=True, check=False, env=env
    )
    assert run.returncode == 2
    assert "engram init needs the service's libraries (missing " in run.stderr
    assert "[server]' (the engram-ledger distribution)" in run.stderr
    assert "Traceback" not in run.stderr
    # an agent command without --server would open the embedded log: it names both ways out
    embedded = subprocess.run(
        [str(client_venv / "bin" / "engram"), "memory", "recall", "--agent", "a", "x"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert embedded.returncode == 2 and "Traceback" not in embedded.stderr, embedded.stderr
    assert "engram memory recall: without --server it acts on the embedded log" in embedded.stderr
    assert "give --server URL (or export ENGRAM_URL)" in embedded.stderr and "[server]'" in embedded.stderr
    verify = subprocess.run(
        [str(client_venv / "bin" / "engram-verify"), "--help"], capture_output=True, text=True, check=False
    )
    assert verify.returncode == 0, verify.stderr


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    import socket

    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_OPERATOR_TOKEN": TOKEN}
    env.pop("ENGRAM_DATABASE_URL", None)
    subprocess.run(
        [ENGRAM, "init", "--origin", "client.example/log"], env=env, check=True, capture_output=True
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [ENGRAM, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
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


def test_client_only_install_runs_the_journeys_against_a_server(
    client_venv: Path, server: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, server_env = server
    key = subprocess.run(
        [ENGRAM, "log", "key"], env=server_env, check=True, capture_output=True, text=True
    ).stdout.strip()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ENGRAM_OPERATOR_TOKEN": TOKEN,
        "ENGRAM_VERIFIER_STATE": str(tmp_path / "state"),
        "COLUMNS": "200",
    }
    demo = subprocess.run(
        [str(client_venv / "bin" / "engram-client-demo"), url, "--log-key", key],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "replayed" in demo.stdout and "match the checkpoint" in demo.stdout


def test_the_readme_wheel_line_installs_engram_ledger(tmp_path: Path) -> None:
    """Issue 26, finding 5: ``pip install 'engram[client]'`` installs an unrelated project.
    The distribution is engram-ledger, built here and installed by the README's own line
    (``pip install 'engram-ledger[client] @ file:///.../dist/engram_ledger-...whl'``)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = readme.split("`pip install 'engram-ledger[client] @ file://", 1)[1].split("'`", 1)[0]
    assert line.startswith("/path/to/dist/engram_ledger-") and line.endswith(".whl")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = dist / Path(line).name
    assert wheel.exists(), sorted(p.name for p in dist.iterdir())  # the README names the file built
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    run = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            f"engram-ledger[client] @ {wheel.as_uri()}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    show = _python(
        venv, "import importlib.metadata as m; print(m.version('engram-ledger')); import engram.client.http"
    )
    assert show.returncode == 0 and show.stdout.strip() == "0.1.0", show.stderr
    version = subprocess.run([str(venv / "bin" / "engram"), "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == "engram 0.1.0", version.stdout + version.stderr


def _engram(
    venv: Path, env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "engram"), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_client_only_install_runs_every_agent_command_against_a_server(
    client_venv: Path, server: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    """Issue 44, finding 2: on the client extra, ``engram --help`` and ``engram memory recall
    --server`` said "the service is not installed here (missing typer)" and ``engram mcp``
    that pydantic was missing."""
    url, server_env = server
    keys = {}
    for agent in ("ada", "ben"):
        keys[agent] = tmp_path / f"{agent}.key"
        subprocess.run(
            [ENGRAM, "agent", "create", agent, "--key-file", str(keys[agent])],
            env=server_env,
            check=True,
            capture_output=True,
        )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ENGRAM_VERIFIER_STATE": str(tmp_path / "state"),
        "ENGRAM_URL": url,  # the agent's commands take the service and the key from the environment
        "ENGRAM_KEY_FILE": str(keys["ada"]),
        "COLUMNS": "400",
    }
    venv = client_venv

    def ok(*args: str, stdin: str | None = None) -> str:
        run = _engram(venv, env, *args, stdin=stdin)
        assert run.returncode == 0, (args, run.stdout, run.stderr)
        return run.stdout

    top = ok("--help")
    for command in ("memory", "mesh", "ui", "mcp", "hook", "hermes", "--version"):
        assert command in top, command
    assert ok("--version").strip() == "engram 0.1.0"
    assert "written as ref" in ok(
        "memory", "write", "--category", "LEARNING", "--content", "Deploys need the cache warmed."
    )
    assert "cache warmed" in ok("memory", "recall", "what before a deploy?")
    recalled = json.loads(ok("memory", "recall", "what before a deploy?", "--json"))
    assert any("cache warmed" in r["content"] for r in recalled["results"])
    assert ok("mesh", "create", "--name", "team").strip() == "ada/team"
    ok("mesh", "invite", "--mesh", "ada/team", "--agent", "ben")
    ok("mesh", "join", "--mesh", "ada/team", "--key-file", str(keys["ben"]))
    assert "ben" in ok("mesh", "show")
    assert "removed ben from ada/team" in ok("mesh", "remove", "--mesh", "ada/team", "--agent", "ben")
    assert "dissolved ada/team" in ok("mesh", "dissolve", "--mesh", "ada/team")
    link = ok("ui").strip().splitlines()[-1]
    assert link.startswith(f"{url}/ui/login?ticket=")
    # engram mcp over stdio (pydantic validates the tools' arguments)
    script = "".join(
        json.dumps(m) + "\n"
        for m in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "memory_recall", "arguments": {"query": "what before a deploy?"}},
            },
        )
    )
    answers = [json.loads(line) for line in ok("mcp", stdin=script).splitlines()]
    assert answers[-1]["id"] == 2 and "cache warmed" in json.dumps(answers[-1]["result"]), answers[-1]
    mcp = answers[-1]["result"]["structuredContent"]  # one recall shape: the CLI's --json minus its old keys
    assert set(mcp) == set(recalled) - {"hot", "ranked"}, (sorted(mcp), sorted(recalled))
    # engram hook (Claude Code's SessionStart): the agent's memory as context
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "s1.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    started = json.loads(ok("hook", "claude-code", stdin=json.dumps(payload)))
    assert started["hookSpecificOutput"]["additionalContext"].startswith("<memory-context")

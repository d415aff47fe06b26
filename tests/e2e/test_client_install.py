"""``pip install '<checkout>[client]'`` (the engram-ledger distribution) in a fresh virtual environment: the client installs without
the server's libraries, and from there runs the user journeys against a real ``engram serve``
(started from the full install)."""

from __future__ import annotations

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
    "typer",
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
    run = subprocess.run(
        [str(client_venv / "bin" / "engram"), "demo"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2
    assert "[server]' (the engram-ledger distribution)" in run.stderr
    assert "Traceback" not in run.stderr
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

"""Issue 44, deliver 1, with the real clients: in a fresh home whose path holds a space, one
``engram setup`` per harness, and then the harness itself sees Engram: Claude Code 2.1 lists
the MCP server connected and its hooks inject memory into the prompt; Codex 0.171 lists the
server and, its hooks trusted for the run, injects memory; Hermes 0.19 reports the provider
installed and available. ``engram doctor`` is green after each."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM, engram_serve
from tests.interop.harnesses.fake_model import serve
from tests.interop.test_harnesses_real import HOOK_BLOCK, _clean_env, _model_requests, _need

ROOT = Path(__file__).resolve().parents[2]
HERMES_VENV = ROOT / ".venv-hermes"
TOKEN = secrets.token_urlsafe(32)

World = tuple[dict[str, str], str, Path, Path, int]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """(the user's env: a fresh HOME with a space, the service URL; the model's request log, port)."""
    log_env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "log"), "ENGRAM_EMBEDDER": "off"}
    log_env |= {"ENGRAM_DEV_MODE": "1", "ENGRAM_OPERATOR_TOKEN": TOKEN}
    log_env.pop("ENGRAM_DATABASE_URL", None)
    assert subprocess.run([ENGRAM, "init"], env=log_env, capture_output=True, timeout=120).returncode == 0
    home = tmp_path / "fresh home"
    home.mkdir()
    log = tmp_path / "model-requests.jsonl"
    model = serve(0, log, "Noted.")
    try:
        with engram_serve(log_env) as url:
            env = _clean_env(home) | {"ENGRAM_URL": url, "ENGRAM_OPERATOR_TOKEN": TOKEN}
            yield env, url, home, log, int(model.server_address[1])
    finally:
        model.shutdown()


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=180)


def _doctor_green(engram: str, env: dict[str, str], harness: str) -> None:
    done = _run([engram, "doctor", "--harness", harness], env)
    assert done.returncode == 0 and "the chain holds" in done.stdout, done.stdout + done.stderr


def test_claude_code_after_one_setup(world: World, tmp_path: Path) -> None:
    claude = _need("claude")
    env, _, _, log, port = world
    done = _run([ENGRAM, "setup", "claude-code"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    _doctor_green(ENGRAM, env, "claude-code")
    cenv = env | {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "sk-fake-for-tests",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    listed = _run([claude, "mcp", "list"], cenv, cwd=tmp_path)
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("engram:")), "")
    assert ENGRAM in line and "Connected" in line, listed.stdout + listed.stderr
    work = tmp_path / "project"
    work.mkdir()
    for prompt in ("Remember this: I deploy on Tuesdays.", "Which day do I deploy on?"):
        run = _run([claude, "-p", prompt], cenv, cwd=work)
        assert run.returncode == 0 and "Noted." in run.stdout, run.stdout + run.stderr
    first, second = _model_requests(log)[-2:]
    assert HOOK_BLOCK in first and "Tuesdays" in second.replace("Which day do I deploy on?", "")
    # running it again changes nothing, and Claude Code still sees the server
    again = _run([ENGRAM, "setup", "claude-code"], env)
    assert again.returncode == 0 and "wrote" not in again.stdout, again.stdout


def test_codex_after_one_setup(world: World, tmp_path: Path) -> None:
    codex = _need("codex")
    env, _, home, log, port = world
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    provider = (
        '# the user\'s own model provider\nmodel = "fake-model"\nmodel_provider = "fake"\n\n'
        f'[model_providers.fake]\nname = "fake"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        'wire_api = "responses"\nenv_key = "FAKE_MODEL_KEY"\n'
    )
    config.write_text(provider, encoding="utf-8")
    done = _run([ENGRAM, "setup", "codex"], env)
    assert done.returncode == 0 and "/hooks" in done.stdout, done.stdout + done.stderr
    assert config.read_text(encoding="utf-8").startswith(provider)
    _doctor_green(ENGRAM, env, "codex")
    cenv = env | {"CODEX_HOME": str(home / ".codex"), "FAKE_MODEL_KEY": "x"}
    listed = _run([codex, "mcp", "list"], cenv)
    assert any(ln.startswith("engram") and ENGRAM in ln for ln in listed.stdout.splitlines()), listed.stdout
    work = tmp_path / "project"
    work.mkdir()
    for prompt in ("Remember this: I deploy on Tuesdays.", "Which day do I deploy on?"):
        run = _run(
            [codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", prompt],
            cenv,
            cwd=work,
        )
        assert run.returncode == 0 and "Noted." in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    first, second = _model_requests(log)[-2:]
    assert HOOK_BLOCK in first and "Tuesdays" in second.replace("Which day do I deploy on?", "")


def test_hermes_after_one_setup(world: World) -> None:
    if not (HERMES_VENV / "bin" / "hermes").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs .venv-hermes (bash .ci/install-interop.sh)")
        pytest.skip("no .venv-hermes here (bash .ci/install-interop.sh)")
    env = world[0]
    henv = {k: v for k, v in env.items() if k != "VIRTUAL_ENV"}
    henv |= {"PATH": f"{HERMES_VENV / 'bin'}:{env.get('PATH', '')}"}
    engram_h, hermes = str(HERMES_VENV / "bin" / "engram"), str(HERMES_VENV / "bin" / "hermes")
    # before: the key file Hermes would be given does not exist, and doctor says what to run
    before = _run([engram_h, "doctor", "--harness", "hermes"], henv)
    assert before.returncode == 1 and "engram setup hermes" in before.stdout, before.stdout
    done = _run([engram_h, "setup", "hermes"], henv)  # the client extra alone, in Hermes' venv
    assert done.returncode == 0 and "ran " in done.stdout, done.stdout + done.stderr
    status = _run([hermes, "memory", "status"], henv)
    assert "Plugin:    installed" in status.stdout and "Status:    available" in status.stdout, status.stdout
    assert "Provider:  engram" in status.stdout
    _doctor_green(engram_h, henv, "hermes")
    again = _run([engram_h, "setup", "hermes"], henv)
    assert again.returncode == 0 and "wrote" not in again.stdout and "ran " not in again.stdout, again.stdout

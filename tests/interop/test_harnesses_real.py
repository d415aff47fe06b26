"""Issue 26, findings 2 and 6: the real Claude Code (2.1.328) and Codex (0.171.0) CLIs from
the npm registry, pinned (tests/interop/harnesses/package-lock.json, installed by
``.ci/install-interop.sh``), configured with the README's own hook and MCP blocks (the
service URL, the key file and the absolute path of ``engram`` filled in, as the README
says), run two sessions each against ``engram serve`` and a fake model endpoint on loopback
(tests/interop/harnesses/fake_model.py). What the first session said reaches the model in
the second, through the hooks. Codex runs the hooks only once they are trusted: untrusted,
nothing reaches Engram (what the README now says), and ``--dangerously-bypass-hook-trust``
is how a script runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM, engram_serve
from tests.interop.harnesses.fake_model import serve

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "tests" / "interop" / "harnesses" / "node_modules" / ".bin"
README = (ROOT / "docs" / "harnesses.md").read_text(encoding="utf-8")  # the blocks the README points to
FACT = "Remember this: I always deploy on Tuesdays with blue-green rollouts."
QUESTION = "Which day of the week do I deploy on?"
#: The opening of a block a hook injected (the MCP server's instructions only mention the tag).
HOOK_BLOCK = "<memory-context agent="


def _need(binary: str) -> str:
    path = BIN / binary
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs {path} (bash .ci/install-interop.sh)")
        pytest.skip(f"no {binary} here (bash .ci/install-interop.sh)")
    return str(path)


World = tuple[dict[str, str], str, Path, int]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """(engram env, service URL, fake model request log, fake model port)."""
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / "log"),
        "ENGRAM_EMBEDDER": "off",
        "ENGRAM_DEV_MODE": "1",
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    assert subprocess.run([ENGRAM, "init"], env=env, capture_output=True, timeout=120).returncode == 0
    log = tmp_path / "model-requests.jsonl"
    model = serve(0, log, "Noted.")
    try:
        with engram_serve(env) as url:
            yield env, url, log, int(model.server_address[1])
    finally:
        model.shutdown()


def _fill(block: str, url: str, key: Path, default_key: str) -> str:
    """The README block with this test's service, key file and engram's absolute path."""
    out = block.replace("http://127.0.0.1:8080", url).replace(default_key, str(key))
    return out.replace('"engram hook', f'"{ENGRAM} hook').replace(
        'command = "engram"', f'command = "{ENGRAM}"'
    )


def _model_requests(log: Path) -> list[str]:
    return [json.dumps(json.loads(line)["body"]) for line in log.read_text(encoding="utf-8").splitlines()]


def _clean_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ENGRAM_", "ANTHROPIC_", "OPENAI_", "CODEX_"))
    }
    env |= {"HOME": str(home), "ENGRAM_VERIFIER_STATE": os.environ["ENGRAM_VERIFIER_STATE"]}
    return env


def _setup(env: dict[str, str], tmp_path: Path, name: str, pattern: str) -> tuple[Path, str, Path]:
    """The agent's key (created on the log), the documented config block, the harness's HOME
    with its config directory (``.claude`` / ``.codex``)."""
    key = tmp_path / f"{name}.key"
    made = subprocess.run([ENGRAM, "agent", "create", name, "--key-file", str(key)], env=env)
    assert made.returncode == 0
    block = re.search(pattern, README, re.S)
    assert block, f"the documented {name} block"
    home = tmp_path / "home"
    (home / f".{name}").mkdir(parents=True)
    return key, block.group(1), home


def test_claude_code_remembers_across_sessions(world: World, tmp_path: Path) -> None:
    claude = _need("claude")
    env, url, log, port = world
    key, block, home = _setup(env, tmp_path, "claude", r"```json\n(\{\n  \"hooks\".*?)\n```")
    settings = _fill(block, url, key, "~/.config/engram/claude.key")
    (home / ".claude" / "settings.json").write_text(json.dumps(json.loads(settings)), encoding="utf-8")
    cenv = _clean_env(home) | {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "sk-fake-for-tests",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    work = tmp_path / "project"
    work.mkdir()
    for prompt in (FACT, QUESTION):
        run = subprocess.run(
            [claude, "-p", prompt], env=cenv, cwd=work, capture_output=True, text=True, timeout=180
        )
        assert run.returncode == 0 and "Noted." in run.stdout, run.stdout + run.stderr
    first, second = _model_requests(log)[-2:]
    assert HOOK_BLOCK in first  # SessionStart injected the (empty) HOT block
    assert "Tuesdays" in second.replace(QUESTION, "")  # recalled from the first session

    # The documented MCP registration by hand, as written (user scope, engram by its absolute
    # path; the README now gives `engram setup claude-code`, tests/interop/test_setup_real.py):
    # Claude Code starts the server and reports it connected.
    readme = README
    add = " ".join(("claude mcp add" + readme.split("`claude mcp add", 1)[1].split("`", 1)[0]).split())
    add = add.replace("claude mcp add", f"{claude} mcp add", 1).replace("http://127.0.0.1:8080", url)
    add = add.replace("~/.config/engram/claude.key", str(key))
    shell = cenv | {"PATH": f"{Path(ENGRAM).parent}:{cenv.get('PATH', '')}"}
    added = subprocess.run(
        ["bash", "-c", add], env=shell, cwd=work, capture_output=True, text=True, timeout=120
    )
    assert added.returncode == 0 and "user config" in added.stdout, added.stdout + added.stderr
    listed = subprocess.run(
        [claude, "mcp", "list"], env=cenv, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    line = next((ln for ln in listed.stdout.splitlines() if ln.startswith("engram:")), "")
    assert ENGRAM in line and "Connected" in line, listed.stdout + listed.stderr  # from another directory too


def test_codex_runs_the_readme_hooks_once_trusted(world: World, tmp_path: Path) -> None:
    """Issue 26, finding 2."""
    codex = _need("codex")
    env, url, log, port = world
    key, block, home = _setup(env, tmp_path, "codex", r"```toml\n(\[mcp_servers\.engram\].*?)\n```")
    provider = (
        'model = "fake-model"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "FAKE_MODEL_KEY"\n\n'
    )
    config = provider + _fill(block, url, key, "~/.config/engram/codex.key") + "\n"
    (home / ".codex" / "config.toml").write_text(config, encoding="utf-8")
    cenv = _clean_env(home) | {"CODEX_HOME": str(home / ".codex"), "FAKE_MODEL_KEY": "x"}
    work = tmp_path / "project"
    work.mkdir()

    def ask(prompt: str, *flags: str) -> None:
        run = subprocess.run(
            [codex, "exec", "--skip-git-repo-check", *flags, prompt],
            env=cenv,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert run.returncode == 0 and "Noted." in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]

    # Untrusted (a fresh config): Codex skips the hooks, and nothing reaches Engram.
    ask(FACT)
    assert HOOK_BLOCK not in _model_requests(log)[-1]
    # Trusted for this run: the hooks log and recall.
    ask(FACT, "--dangerously-bypass-hook-trust")
    ask(QUESTION, "--dangerously-bypass-hook-trust")
    first, second = _model_requests(log)[-2:]
    assert HOOK_BLOCK in first
    assert "Tuesdays" in second.replace(QUESTION, "")  # the first session's turn, recalled

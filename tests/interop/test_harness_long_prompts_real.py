"""Issue 40, finding 7, with the real Claude Code and Codex CLIs (tests/interop/harnesses,
installed by ``.ci/install-interop.sh``) configured with docs/harnesses.md's own blocks
against ``engram serve`` and a fake model on loopback: a prompt of 5,000 characters and one
of 40,000 (a pasted traceback) reach the model with the memory block the hook injected, and
the turn is in the log whole; with the service down the prompt still reaches the model (the
hook exits 0: nothing is blocked) and nothing is injected."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path

from engram.protocol.longtext import PART_MARKER
from tests.e2e.processes import free_port
from tests.interop.test_harnesses_real import (
    FACT,
    HOOK_BLOCK,
    World,
    _clean_env,
    _fill,
    _model_requests,
    _need,
    _setup,
)
from tests.interop.test_harnesses_real import world as world  # the fixture


def _prompt(length: int) -> str:
    head = "Which day do I deploy on, and why does this deploy fail? Traceback:\n"
    tail = "\nRuntimeError: blue-green switch aborted"
    body = "".join(
        f'  File "/srv/ship/stage_{i}.py", line {i + 3}, in stage_{i}\n' for i in range(length // 40)
    )
    return head + body[: length - len(head) - len(tail)] + tail


def _user_turns(env: dict[str, str]) -> list[str]:
    db = next(Path(env["ENGRAM_HOME"]).glob("*.db"))
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT b.body FROM bodies b JOIN leaves l ON l.idx = b.idx "
            "WHERE l.kind = 'session.turn' ORDER BY l.idx"
        ).fetchall()
    finally:
        con.close()
    bodies = [json.loads(bytes(r[0])) for r in rows]
    return [b["content"] for b in bodies if b["role"] == "user"]


def _whole(turns: list[str], prompt: str) -> bool:
    """Whether the last user turns, joined without their part markers, are ``prompt``."""
    return any("".join(PART_MARKER.sub("", t) for t in turns[-n:]) == prompt for n in (1, 2, 3))


def test_claude_code_logs_a_long_prompt_and_injects_memory_for_it(world: World, tmp_path: Path) -> None:
    claude = _need("claude")
    env, url, log, port = world
    key, block, home = _setup(env, tmp_path, "claude", r"```json\n(\{\n  \"hooks\".*?)\n```")
    settings = home / ".claude" / "settings.json"
    settings.write_text(json.dumps(json.loads(_fill(block, url, key, "~/.config/engram/claude.key"))))
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

    def ask(prompt: str) -> str:
        run = subprocess.run(
            [claude, "-p", prompt], env=cenv, cwd=work, capture_output=True, text=True, timeout=240
        )
        assert run.returncode == 0 and "Noted." in run.stdout, run.stdout + run.stderr[-2000:]
        return _model_requests(log)[-1]

    ask(FACT)
    for length in (5_000, 40_000):
        prompt = _prompt(length)
        sent = ask(prompt)
        assert HOOK_BLOCK in sent and "Tuesdays" in sent, length  # the prompt does not say it
        assert _whole(_user_turns(env), prompt), length
    # The service down: the prompt is not blocked, it reaches the model without a block.
    dead = f"http://127.0.0.1:{free_port()}"
    settings.write_text(settings.read_text().replace(url, dead))
    sent = ask("Is the service down? " + "x" * 3000)
    assert "Is the service down?" in sent and HOOK_BLOCK not in sent


def test_codex_logs_a_long_prompt_and_injects_memory_for_it(world: World, tmp_path: Path) -> None:
    codex = _need("codex")
    env, url, log, port = world
    key, block, home = _setup(env, tmp_path, "codex", r"```toml\n(\[mcp_servers\.engram\].*?)\n```")
    provider = (
        'model = "fake-model"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\nenv_key = "FAKE_MODEL_KEY"\n\n'
    )
    config = home / ".codex" / "config.toml"
    config.write_text(provider + _fill(block, url, key, "~/.config/engram/codex.key") + "\n")
    cenv = _clean_env(home) | {"CODEX_HOME": str(home / ".codex"), "FAKE_MODEL_KEY": "x"}
    work = tmp_path / "project"
    work.mkdir()

    def ask(prompt: str) -> str:
        run = subprocess.run(
            [codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", prompt],
            env=cenv,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert run.returncode == 0 and "Noted." in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
        return _model_requests(log)[-1]

    ask(FACT)
    for length in (5_000, 40_000):
        prompt = _prompt(length)
        sent = ask(prompt)
        assert HOOK_BLOCK in sent and "Tuesdays" in sent, length  # the prompt does not say it
        assert _whole(_user_turns(env), prompt), length
    dead = f"http://127.0.0.1:{free_port()}"
    config.write_text(re.sub(re.escape(url), dead, config.read_text()))
    sent = ask("Is the service down? " + "x" * 3000)
    assert "Is the service down?" in sent and HOOK_BLOCK not in sent

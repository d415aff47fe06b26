"""``engram hook claude-code`` and ``engram hook codex`` replaying the hook payloads each
harness documents (stdin JSON: session_id, transcript_path, cwd, hook_event_name and the
event's fields) against a real Engram: a served one (the client path, no database here) and
the embedded log. Two sessions: what the first one learned is injected into the second."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.harness.hooks import MAX_PAYLOAD_BYTES
from tests.e2e.processes import ENGRAM, engram_serve, free_port

TOKEN = "KuDMrJaUGAEAYeEOHCgAgHDoCibNmxG9rgC_QQJ6"
ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:8080"


def readme_hook_commands() -> dict[str, dict[str, str]]:
    """The hook commands docs/harnesses.md tells users to paste, per harness and event."""
    section = (
        (ROOT / "docs" / "harnesses.md")
        .read_text(encoding="utf-8")
        .split("## Inside the agent's harness", 1)[1]
    )
    section = section.split("\n## ", 1)[0]
    (cc,) = re.findall(r"```json\n(.+?)\n```", section, flags=re.S)
    (cx,) = re.findall(r"```toml\n(.+?)\n```", section, flags=re.S)
    out: dict[str, dict[str, str]] = {"claude-code": {}, "codex": {}}
    for event, groups in json.loads(cc)["hooks"].items():
        ((handler,),) = [g["hooks"] for g in groups]
        assert handler["type"] == "command"
        out["claude-code"][event] = handler["command"]
    for event, groups in tomllib.loads(cx)["hooks"].items():
        ((handler,),) = [g["hooks"] for g in groups]
        out["codex"][event] = handler["command"]
    return out


def test_the_readme_wires_every_event_the_hook_handles() -> None:
    cmds = readme_hook_commands()
    assert set(cmds["claude-code"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "SubagentStop",
        "PreCompact",
        "SessionEnd",
    }
    # issue 44: Codex 0.171 has SessionEnd too, and the block wires it
    assert set(cmds["codex"]) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}


def _base_env(tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_VERIFIER_STATE": str(tmp_path / "vstate"),
        "ENGRAM_HOOK_STATE": str(tmp_path / "hookstate"),
        "ENGRAM_EMBEDDER": "off",
        "ENGRAM_OPERATOR_TOKEN": TOKEN,
    }
    for var in ("ENGRAM_DATABASE_URL", "ENGRAM_URL", "ENGRAM_KEY_FILE", "ENGRAM_LOG_KEY", "ENGRAM_DEV_MODE"):
        env.pop(var, None)
    return env


def embedded_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An embedded log in ``tmp_path`` with the agent ``claude`` (its key in ENGRAM_KEY_FILE)."""
    env = {**_base_env(tmp_path), **extra}
    subprocess.run(
        [ENGRAM, "init", "--origin", "hooks.example/log"], env=env, check=True, capture_output=True
    )
    key = tmp_path / "claude.key"
    subprocess.run(
        [ENGRAM, "agent", "create", "claude", "--key-file", str(key)],
        env=env,
        check=True,
        capture_output=True,
    )
    env["ENGRAM_KEY_FILE"] = str(key)
    return env


@pytest.fixture(params=["served", "embedded"])
def engram_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = embedded_env(tmp_path)
    if request.param == "embedded":
        yield env
        return
    with engram_serve(env) as url:
        yield {**env, "ENGRAM_URL": url, "ENGRAM_HOME": str(tmp_path / "no-home-here")}


def _argv(env: dict[str, str], harness: str, event: str) -> list[str]:
    """The README's command for this event, pointed at the test's Engram and key file (the
    harness runs it through a shell; ``~`` is expanded by Engram)."""
    command = (
        readme_hook_commands()[harness].get(event)
        or f"engram hook {harness} --server {README_URL} --key-file k"
    )
    argv = shlex.split(command)
    assert argv[:3] == ["engram", "hook", harness]
    argv[0] = ENGRAM
    i = argv.index("--key-file")
    argv[i + 1] = env["ENGRAM_KEY_FILE"]
    j = argv.index("--server")
    if env.get("ENGRAM_URL"):
        argv[j + 1] = env["ENGRAM_URL"]
    else:
        del argv[j : j + 2]
    return argv


def hook(
    env: dict[str, str], harness: str, payload: dict[str, Any] | bytes
) -> subprocess.CompletedProcess[str]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    event = payload.get("hook_event_name") if isinstance(payload, dict) else None
    argv = _argv(env, harness, str(event)) if "ENGRAM_KEY_FILE" in env else [ENGRAM, "hook", harness]
    out = subprocess.run(argv, env=env, input=data, capture_output=True, timeout=120)
    return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.decode(), out.stderr.decode())


def _context(run: subprocess.CompletedProcess[str], event: str) -> str:
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event
    text: str = out["hookSpecificOutput"]["additionalContext"]
    assert len(text) <= 10_000
    return text


def _cc(event: str, session: str, tmp_path: Path, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(tmp_path / f"{session}.jsonl"),
        "cwd": str(tmp_path / "project"),
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }


def test_claude_code_sessions_carry_memory_forward(engram_env: dict[str, str], tmp_path: Path) -> None:
    env = engram_env
    s1 = "00893aaf-19fa-41d2-8238-13269b9b3ca0"
    start = _context(
        hook(env, "claude-code", _cc("SessionStart", s1, tmp_path, source="startup", model="m")),
        "SessionStart",
    )
    assert start.startswith("<memory-context")
    ctx = _context(
        hook(
            env,
            "claude-code",
            _cc(
                "UserPromptSubmit",
                s1,
                tmp_path,
                prompt="I prefer short answers. We decided to drop IE11 support.",
            ),
        ),
        "UserPromptSubmit",
    )
    assert ctx.startswith("<memory-context")
    stop = hook(
        env,
        "claude-code",
        _cc(
            "Stop",
            s1,
            tmp_path,
            stop_hook_active=False,
            last_assistant_message="Understood: IE11 is dropped from the build matrix.",
        ),
    )
    assert stop.returncode == 0 and stop.stdout == ""
    # an answer without last_assistant_message (older Claude Code) comes from the transcript
    (tmp_path / f"{s1}.jsonl").write_text(
        "\n".join(
            json.dumps(line)
            for line in (
                {
                    "type": "user",
                    "uuid": "u1",
                    "sessionId": s1,
                    "message": {"role": "user", "content": "and the order number?"},
                },
                {
                    "type": "assistant",
                    "uuid": "a1",
                    "sessionId": s1,
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": "..."},
                            {"type": "text", "text": "The refund was for Acme order 8812."},
                            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
                        ],
                    },
                },
                {"type": "summary", "summary": "refunds"},
            )
        )
        + "\nnot json at all\n",
        encoding="utf-8",
    )
    assert hook(env, "claude-code", _cc("Stop", s1, tmp_path, stop_hook_active=False)).returncode == 0
    end = hook(env, "claude-code", _cc("SessionEnd", s1, tmp_path, reason="prompt_input_exit"))
    assert end.returncode == 0, end.stderr
    # a second end (Claude Code can fire it twice on /clear) closes nothing more
    assert hook(env, "claude-code", _cc("SessionEnd", s1, tmp_path, reason="other")).returncode == 0

    s2 = "1f2e3d4c-0000-4000-8000-000000000002"
    start2 = _context(
        hook(env, "claude-code", _cc("SessionStart", s2, tmp_path, source="startup")), "SessionStart"
    )
    assert "short answers" in start2  # a preference the first session stated is standing context
    ctx2 = _context(
        hook(env, "claude-code", _cc("UserPromptSubmit", s2, tmp_path, prompt="Which browser did we drop?")),
        "UserPromptSubmit",
    )
    assert "IE11" in ctx2
    ctx3 = _context(
        hook(
            env,
            "claude-code",
            _cc("UserPromptSubmit", s2, tmp_path, prompt="What was the Acme order number?"),
        ),
        "UserPromptSubmit",
    )
    assert "8812" in ctx3  # the answer read from the transcript was logged


def test_pre_compact_flushes_the_session_so_far(engram_env: dict[str, str], tmp_path: Path) -> None:
    env = engram_env
    s = "c0ffee00-0000-4000-8000-00000000c0de"
    hook(env, "claude-code", _cc("SessionStart", s, tmp_path, source="startup"))
    hook(
        env,
        "claude-code",
        _cc("UserPromptSubmit", s, tmp_path, prompt="We decided to ship the Postgres migration on Friday."),
    )
    flush = hook(env, "claude-code", _cc("PreCompact", s, tmp_path, trigger="auto", custom_instructions=None))
    assert flush.returncode == 0, flush.stderr
    # after the harness compacts, a new SessionStart (source compact) sees the decision in
    # recall: the flushed part was distilled
    hook(env, "claude-code", _cc("SessionStart", s, tmp_path, source="compact"))
    ctx = _context(
        hook(
            env,
            "claude-code",
            _cc("UserPromptSubmit", s, tmp_path, prompt="When do we ship the Postgres migration?"),
        ),
        "UserPromptSubmit",
    )
    assert "Friday" in ctx
    assert hook(env, "claude-code", _cc("SessionEnd", s, tmp_path, reason="other")).returncode == 0


def test_codex_hooks(engram_env: dict[str, str], tmp_path: Path) -> None:
    env = engram_env
    s = "019d036d-c7fa-7000-8000-000000000001"

    def cx(event: str, **fields: Any) -> dict[str, Any]:
        return {
            "session_id": s,
            "transcript_path": None,
            "cwd": str(tmp_path),
            "hook_event_name": event,
            "model": "gpt-5",
            "permission_mode": "default",
            **fields,
        }

    assert _context(hook(env, "codex", cx("SessionStart", source="startup")), "SessionStart").startswith(
        "<memory-context"
    )
    hook(
        env,
        "codex",
        cx("UserPromptSubmit", turn_id="t1", prompt="Remember: the staging host is stg-7.internal."),
    )
    stop = hook(
        env,
        "codex",
        cx("Stop", turn_id="t1", stop_hook_active=False, last_assistant_message="Noted, stg-7.internal."),
    )
    assert stop.returncode == 0 and stop.stdout == ""
    ctx = _context(
        hook(env, "codex", cx("UserPromptSubmit", turn_id="t2", prompt="what is the staging host?")),
        "UserPromptSubmit",
    )
    assert "stg-7.internal" in ctx  # the logged turn, recalled verbatim under RECORDS


def test_bad_payloads_pass_the_prompt_through_with_one_line_and_write_nothing(tmp_path: Path) -> None:
    """A payload the hook cannot read, a missing key file, a service that is down: one line
    on stderr naming the problem, nothing written, and exit 0 (issue 40, finding 7: exit 1
    was a failed hook to both harnesses, and 2 would block the prompt)."""
    env = embedded_env(tmp_path)
    size = subprocess.run(
        [ENGRAM, "log", "checkpoint"], env=env, capture_output=True, text=True, check=True
    ).stdout
    for payload, needle in (
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (json.dumps({"hook_event_name": "SessionStart"}).encode(), "session_id"),
        (b"x" * (MAX_PAYLOAD_BYTES + 10), "larger than"),  # past the 16 MiB read bound
    ):
        run = hook(env, "claude-code", payload)
        assert run.returncode == 0 and needle in run.stderr and run.stderr.count("\n") == 1, run.stderr
        assert run.stdout == ""
    # an unknown event does nothing
    assert hook(env, "claude-code", _cc("Notification", "s", tmp_path, message="hi")).returncode == 0
    # a missing key file and a server that is down: one line naming the problem
    run = hook(
        {**env, "ENGRAM_KEY_FILE": str(tmp_path / "none.key")},
        "claude-code",
        _cc("SessionStart", "s", tmp_path),
    )
    assert run.returncode == 0 and "none.key" in run.stderr and run.stdout == ""
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    down = {**env, "ENGRAM_URL": f"http://127.0.0.1:{free_port()}", "ENGRAM_LOG_KEY": vkey}
    run = hook(down, "claude-code", _cc("UserPromptSubmit", "s", tmp_path, prompt="hi"))
    assert run.returncode == 0 and run.stderr.startswith("engram hook:") and "cannot reach" in run.stderr, (
        run.stderr
    )
    assert "without memory" in run.stderr and run.stdout == ""
    assert (
        subprocess.run([ENGRAM, "log", "checkpoint"], env=env, capture_output=True, text=True).stdout == size
    )


def test_the_hook_client_path_loads_neither_the_service_nor_typer(tmp_path: Path) -> None:
    """What makes the hook fast: against a service it imports the client only (timed in
    bench/bench_cli.py)."""
    code = (
        "import io, sys\n"
        "sys.argv = ['engram', 'hook', 'claude-code', '--server', 'http://127.0.0.1:9', '--key-file', sys.argv[1]]\n"
        'sys.stdin = io.TextIOWrapper(io.BytesIO(b\'{"hook_event_name": "Stop", "session_id": "s"}\'))\n'
        "from engram.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy','psycopg','fastapi','alembic','typer','httpx','mcp'})\n"
        "print(bad, sorted(m for m in sys.modules if m.split('.')[0] in {'ledger', 'api'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "k")], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[] []", out.stdout + out.stderr


def test_session_state_snapshots_resume_a_restarted_session(
    engram_env: dict[str, str], tmp_path: Path
) -> None:
    """Every N exchanges (here 2) and before a flush the hook records a signed session-state
    snapshot; a resumed session gets it first, before its HOT block."""
    env = {**engram_env, "ENGRAM_SNAPSHOT_EVERY": "2"}
    s = "5ca1ab1e-0000-4000-8000-000000000005"
    hook(env, "claude-code", _cc("SessionStart", s, tmp_path, source="startup"))
    hook(
        env,
        "claude-code",
        _cc("UserPromptSubmit", s, tmp_path, prompt="We promised Acme a fix for invoice rounding by Friday."),
    )
    hook(
        env,
        "claude-code",
        _cc("SubagentStop", s, tmp_path, agent_type="Explore", agent_id="a1", stop_hook_active=False),
    )
    hook(
        env,
        "claude-code",
        _cc("UserPromptSubmit", s, tmp_path, prompt="Now refactor the rounding helper in billing/round.py"),
    )
    resumed = _context(
        hook(env, "claude-code", _cc("SessionStart", s, tmp_path, source="resume")), "SessionStart"
    )
    assert resumed.startswith("<session-state ref=")
    state = resumed.split("</session-state>", 1)[0]
    assert "after 2 exchanges" in state and "billing/round.py" in state and "Explore" in state
    assert "<memory-context" in resumed  # the HOT block follows
    fresh = _context(
        hook(env, "claude-code", _cc("SessionStart", "other-session", tmp_path, source="startup")),
        "SessionStart",
    )
    assert "<session-state" not in fresh
    bad = hook(
        {**env, "ENGRAM_SNAPSHOT_EVERY": "often"},
        "claude-code",
        _cc("UserPromptSubmit", s, tmp_path, prompt="x"),
    )
    # a bad setting is said on stderr; the prompt is still logged and recalled for (issue 40)
    assert bad.returncode == 0 and "ENGRAM_SNAPSHOT_EVERY" in bad.stderr, bad.stderr
    assert bad.stdout.startswith('{"hookSpecificOutput"')

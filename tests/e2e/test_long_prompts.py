"""No prompt is lost (issue 40, finding 7). Any prompt over 1,000 characters (a pasted
traceback or diff) made the UserPromptSubmit hook of Claude Code and Codex exit 1 before the
turn was logged, embedded and against a server: the prompt never reached memory and no memory
was injected; MCP ``memory_recall`` and the Hermes prefetch failed the same way on long
queries. Now a turn is logged whole (in marked parts past the 32,000-character turn limit),
recall runs on the bounded query derived from it, and a hook that cannot reach memory exits 0
with the reason on stderr."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.harness.hermes import EngramMemoryProvider
from engram.protocol.keyfiles import format_agent_key, write_private_file
from engram.protocol.longtext import PART_MARKER
from tests.e2e.processes import ENGRAM, engram_serve, free_port
from tests.e2e.test_hooks import _cc, embedded_env, hook
from tests.e2e.test_mcp_stdio import _call, _exchange, _req

FACT = "Remember: the staging host is stg-7.internal."


def _traceback_prompt(length: int) -> str:
    """A question, a pasted traceback of ``length`` characters, and the error."""
    head = "Why does the deploy to the staging host fail? Here is the traceback:\n"
    tail = "\nRuntimeError: staging deploy aborted: health check timed out"
    frames = []
    i = 0
    while len(head) + sum(len(f) + 1 for f in frames) + len(tail) < length:
        frames.append(
            f'  File "/srv/deploy/step_{i}.py", line {10 + i}, in run_step_{i}\n    ok = probe(target)'
        )
        i += 1
    text = head + "\n".join(frames) + tail
    return text[: length - len(tail)] + tail if len(text) > length else text


def _turns(env: dict[str, str]) -> list[str]:
    """The contents of every logged turn, in log order (read from the embedded log's file,
    which the served test's service uses too)."""
    db = next(Path(env["ENGRAM_HOME"]).glob("*.db"))
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT b.body FROM bodies b JOIN leaves l ON l.idx = b.idx "
            "WHERE l.kind = 'session.turn' ORDER BY l.idx"
        ).fetchall()
    finally:
        con.close()
    return [json.loads(bytes(r[0]))["content"] for r in rows]


def _payload(harness: str, event: str, session: str, tmp_path: Path, **fields: Any) -> dict[str, Any]:
    if harness == "claude-code":
        return _cc(event, session, tmp_path, **fields)
    return {
        "session_id": session,
        "transcript_path": None,
        "cwd": str(tmp_path),
        "hook_event_name": event,
        "model": "gpt-5",
        "permission_mode": "default",
        "turn_id": "t1",
        **fields,
    }


@pytest.fixture(params=["served", "embedded"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """(the env the hook runs with, the env of the log's files)."""
    env = embedded_env(tmp_path)
    if request.param == "embedded":
        yield env, env
        return
    with engram_serve(env) as url:
        yield {**env, "ENGRAM_URL": url, "ENGRAM_HOME": str(tmp_path / "no-home-here")}, env


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
@pytest.mark.parametrize("length", [5_000, 40_000])
def test_a_long_prompt_is_logged_whole_and_gets_a_memory_block(
    where: tuple[dict[str, str], dict[str, str]], harness: str, length: int, tmp_path: Path
) -> None:
    env, files = where
    s = f"long-{harness}-{length}"
    assert (
        hook(env, harness, _payload(harness, "SessionStart", s, tmp_path, source="startup")).returncode == 0
    )
    first = hook(env, harness, _payload(harness, "UserPromptSubmit", s, tmp_path, prompt=FACT))
    assert first.returncode == 0 and first.stderr == "", first.stderr
    prompt = _traceback_prompt(length)
    assert len(prompt) == length
    run = hook(env, harness, _payload(harness, "UserPromptSubmit", s, tmp_path, prompt=prompt))
    assert run.returncode == 0 and run.stderr == "", run.stderr
    block = json.loads(run.stdout)["hookSpecificOutput"]["additionalContext"]
    assert block.startswith("<memory-context") and "stg-7.internal" in block  # recalled for it
    turns = _turns(files)
    assert turns[0] == FACT
    parts = turns[1:]
    assert len(parts) == (1 if length <= 32_000 else 2)
    assert all(len(p) <= 32_000 for p in parts)
    assert "".join(PART_MARKER.sub("", p) for p in parts) == prompt  # whole, nothing cut
    if len(parts) > 1:
        assert parts[0].endswith("continued in the next turn]")
        assert parts[1].startswith("[engram: turn part 2 of 2")


def _unregistered_key(tmp_path: Path) -> Path:
    key = tmp_path / "mallory.key"
    write_private_file(key, format_agent_key("mallory", Ed25519PrivateKey.generate()))
    return key


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_hook_that_cannot_reach_memory_lets_the_prompt_through_and_says_why(
    harness: str, tmp_path: Path
) -> None:
    env = embedded_env(tmp_path)
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    prompt = _traceback_prompt(5_000)
    down = {**env, "ENGRAM_URL": f"http://127.0.0.1:{free_port()}", "ENGRAM_LOG_KEY": vkey}
    with engram_serve(env) as url:
        wrong_key = {**env, "ENGRAM_URL": url, "ENGRAM_KEY_FILE": str(_unregistered_key(tmp_path))}
        for case, e in (
            ("down", down),
            ("wrong key", wrong_key),
            ("wrong key, embedded", {**wrong_key, "ENGRAM_URL": ""}),
        ):
            for event, fields in (
                ("SessionStart", {"source": "startup"}),
                ("UserPromptSubmit", {"prompt": prompt}),
                ("Stop", {"stop_hook_active": False, "last_assistant_message": "ok"}),
                ("PreCompact", {"trigger": "auto"}),
                ("SessionEnd", {"reason": "other"}),
            ):
                run = hook(e, harness, _payload(harness, event, f"s-{case}", tmp_path, **fields))
                assert run.returncode == 0, (case, event, run.stderr)
                assert run.stdout == ""  # nothing injected, and the prompt is not blocked
                assert len(run.stderr.splitlines()) == 1, (case, event, run.stderr)
                (line,) = run.stderr.splitlines()
                assert line.startswith(f"engram hook: {event}: "), (case, line)
                # issue 44: an unregistered key on the embedded log is named on every event, with
                # the log it was looked up in and the fix (--server / ENGRAM_URL)
                why = {
                    "down": ("cannot reach",),
                    "wrong key": ("mallory", "key.unknown"),
                    "wrong key, embedded": ("mallory", "not registered in the embedded log"),
                }[case]
                assert any(w in line for w in why), (case, line)
                assert line.count("[key.unknown]") <= 1  # the check named once
    assert _turns(env) == []


def _mcp_recall(cmd: list[str], env: dict[str, str], query: str) -> dict[str, Any]:
    init = _req(
        1,
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )
    answers = _exchange(
        cmd,
        env,
        [
            init,
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
            _call(
                2, "memory_write", {"content": "The staging host is stg-7.internal", "category": "CONTEXT"}
            ),
            _call(3, "memory_recall", {"query": query}),
        ],
    )
    assert not answers[1]["result"].get("isError"), answers[1]
    result: dict[str, Any] = answers[2]["result"]
    return result


@pytest.mark.parametrize("mode", ["embedded", "served"])
def test_mcp_memory_recall_answers_a_long_query(mode: str, tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    query = _traceback_prompt(5_000)
    if mode == "embedded":
        result = _mcp_recall([ENGRAM, "mcp", "--key-file", env["ENGRAM_KEY_FILE"]], env, query)
    else:
        with engram_serve(env) as url:
            cmd = [ENGRAM, "mcp", "--server", url, "--key-file", env["ENGRAM_KEY_FILE"]]
            result = _mcp_recall(cmd, env, query)
    assert not result.get("isError"), result
    answer = result["structuredContent"]
    assert answer["context"].startswith("<memory-context") and "stg-7.internal" in answer["context"]
    assert any("derived from a text of 5,000 characters" in n for n in answer["notes"])


def test_the_hermes_prefetch_answers_a_long_query_and_logs_a_long_turn(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    key = Path(env["ENGRAM_KEY_FILE"])
    with engram_serve(env) as url:
        from engram.harness.target import Target

        target = Target(url=url, key_file=key, log_key=None)
        p = EngramMemoryProvider(target=target)
        p.initialize("20261201_100000_aa11bb")
        p.mem.write(category="CONTEXT", content="The staging host is stg-7.internal", tier="WARM")
        block = p.prefetch(_traceback_prompt(5_000))
        assert block.startswith("<memory-context") and "stg-7.internal" in block
        tool = json.loads(p.handle_tool_call("engram_recall", {"query": _traceback_prompt(5_000)}))
        assert "stg-7.internal" in tool["context"]
        long_turn = _traceback_prompt(40_000)
        p.sync_turn(long_turn, "Noted.")
        p.shutdown()
        assert p.errors == []
    parts = _turns(env)[:-1]
    assert len(parts) == 2 and "".join(PART_MARKER.sub("", t) for t in parts) == long_turn


def test_a_hermes_prefetch_whose_memory_is_down_answers_without_it(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    from engram.harness.target import Target

    target = Target(
        url=f"http://127.0.0.1:{free_port()}", key_file=Path(env["ENGRAM_KEY_FILE"]), log_key=vkey
    )
    p = EngramMemoryProvider(target=target)
    assert p.prefetch(_traceback_prompt(5_000)) == ""
    assert p.system_prompt_block() == ""
    p.on_session_end([])
    assert len(p.errors) == 3 and all("cannot reach" in e for e in p.errors), p.errors


def test_a_prompt_with_what_a_turn_may_not_hold_is_logged_visibly_and_recalled_for(
    where: tuple[dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    """Attack on the change: a pasted terminal's colour codes and a lone surrogate (JSON lets
    ``\\ud800`` through) made the turn body invalid, and over HTTP the recall request
    unsendable; the prompt is logged with them made visible, and recall runs."""
    env, files = where
    prompt = "\x1b[31mdeploy failed\x1b[0m on \ud800 staging\x00 " + "y" * 1500
    run = hook(
        env, "claude-code", _payload("claude-code", "UserPromptSubmit", "vis", tmp_path, prompt=prompt)
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert json.loads(run.stdout)["hookSpecificOutput"]["additionalContext"].startswith("<memory-context")
    (turn,) = _turns(files)
    assert turn.startswith("\u241b[31mdeploy failed\u241b[0m on \ufffd staging\u2400 ")
    bad = hook(env, "codex", _payload("codex", "UserPromptSubmit", "vis", tmp_path, prompt=["not", "text"]))
    assert bad.returncode == 0 and "prompt is not text" in bad.stderr


def test_crafted_prompts_are_logged_whole_and_recalled_for_with_a_bounded_query(tmp_path: Path) -> None:
    """Attack on the change: a prompt as long as a hook payload may be (1 MiB), and one with no
    word to derive a query from, are both logged whole and recalled for; a long answer at Stop
    is logged whole too."""
    env = embedded_env(tmp_path)
    huge = ("deploy staging " + "x" * 60 + "\n") * 13_000  # 1,001,000 characters
    wordless = "!?" * 20_000
    answer = _traceback_prompt(40_000)
    for prompt in (huge, wordless):
        run = hook(
            env,
            "claude-code",
            _payload("claude-code", "UserPromptSubmit", "crafted", tmp_path, prompt=prompt),
        )
        assert run.returncode == 0 and run.stderr == "", run.stderr
        assert json.loads(run.stdout)["hookSpecificOutput"]["additionalContext"].startswith("<memory-context")
    stop = hook(
        env,
        "claude-code",
        _payload(
            "claude-code", "Stop", "crafted", tmp_path, stop_hook_active=False, last_assistant_message=answer
        ),
    )
    assert stop.returncode == 0 and stop.stderr == "", stop.stderr
    turns = _turns(env)
    assert len(turns) == 32 + 2 + 2
    assert "".join(PART_MARKER.sub("", t) for t in turns[:32]) == huge.strip()
    assert "".join(PART_MARKER.sub("", t) for t in turns[32:34]) == wordless
    assert "".join(PART_MARKER.sub("", t) for t in turns[34:]) == answer

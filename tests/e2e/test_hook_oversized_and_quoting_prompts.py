"""No prompt is lost, from outside (issue 40, finding 7, attacked again after the fix landed):

* a prompt over 1 MiB (a pasted log) made the hook payload too large to read: the hook exited
  0 with ``[hook.size]`` and the prompt never reached memory. It is now logged, cut at a line
  break past what one turn's parts hold, with a marker counting what was cut, and recalled
  for by its two ends (the question after the log included);
* a prompt that starts with a pasted ``<memory-context>`` block and then asks about it was
  taken for the harness echoing Engram's own block and not logged. Only a text that is one
  block and nothing else is skipped."""

from __future__ import annotations

import json
import re
from pathlib import Path

from engram.protocol.longtext import MAX_TEXT_CHARS, PART_MARKER
from tests.e2e.test_hooks import embedded_env, hook
from tests.e2e.test_long_prompts import FACT, _payload, _turns

QUESTION = "Why does the nightly export to the staging host stop?"
_CUT = re.compile(r"\[engram: (\d+) more characters of this turn were cut")


def _log_lines(chars: int) -> str:
    lines = []
    n = 0
    while n < chars:
        line = f"2026-11-28T05:{len(lines) % 60:02d}:00Z INFO export worker-{len(lines) % 7} wrote batch {len(lines)}"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


def test_a_prompt_larger_than_a_megabyte_is_logged_cut_with_a_marker_and_recalled_for(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    s = "oversized"
    assert (
        hook(
            env, "claude-code", _payload("claude-code", "SessionStart", s, tmp_path, source="startup")
        ).returncode
        == 0
    )
    assert (
        hook(
            env, "claude-code", _payload("claude-code", "UserPromptSubmit", s, tmp_path, prompt=FACT)
        ).returncode
        == 0
    )
    prompt = _log_lines(1_600_000) + "\n" + QUESTION
    payload = json.dumps(_payload("claude-code", "UserPromptSubmit", s, tmp_path, prompt=prompt)).encode()
    assert len(payload) > 1024 * 1024
    run = hook(env, "claude-code", payload)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    block = json.loads(run.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "stg-7.internal" in block  # recalled for the question at the end of the log
    parts = _turns(env)[1:]
    assert parts, "the oversized prompt was not logged"
    kept = "".join(PART_MARKER.sub("", p) for p in parts)
    assert prompt.startswith(kept) and MAX_TEXT_CHARS // 3 < len(kept) <= MAX_TEXT_CHARS
    (cut,) = _CUT.findall(parts[-1])
    assert int(cut) == len(prompt) - len(kept)  # the marker counts every character not kept


def test_a_prompt_quoting_a_memory_block_is_logged_and_only_a_bare_echo_is_not(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    s = "quoting"
    assert (
        hook(env, "codex", _payload("codex", "SessionStart", s, tmp_path, source="startup")).returncode == 0
    )
    quoted = "<memory-context>\n- the staging host is stg-7\n</memory-context>\nWhy did you recall this?"
    unclosed = "<memory-context> is the tag Engram wraps recall in: how do I turn it off?"
    echo = "<memory-context>\n- the staging host is stg-7\n</memory-context>"
    for prompt in (quoted, unclosed, echo):
        run = hook(env, "codex", _payload("codex", "UserPromptSubmit", s, tmp_path, prompt=prompt))
        assert run.returncode == 0
    assert _turns(env) == [quoted, unclosed]

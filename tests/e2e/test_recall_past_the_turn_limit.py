"""Recall for a text longer than a turn (issue 40, finding 7, attacked from outside after the
fix): MCP ``memory_recall`` refused a query over 32,000 characters with a validation error
(``string_too_long``), and the Hermes ``engram_recall`` tool cut its query at 32,000
characters before redaction, so a cut could halve a secret and send the half to the service.
Both now hand the whole text to recall, which derives its bounded query from both ends of it
(the question after a pasted log included), secrets redacted first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engram.harness.hermes import EngramMemoryProvider
from tests.e2e.processes import ENGRAM, engram_serve
from tests.e2e.test_hooks import embedded_env
from tests.e2e.test_long_prompts import _mcp_recall, _traceback_prompt

LENGTH = 40_000


def test_mcp_memory_recall_answers_a_query_longer_than_a_turn(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    query = _traceback_prompt(LENGTH)
    result: dict[str, Any] = _mcp_recall([ENGRAM, "mcp", "--key-file", env["ENGRAM_KEY_FILE"]], env, query)
    assert not result.get("isError"), result
    answer = result["structuredContent"]
    assert "stg-7.internal" in answer["context"]
    assert any(f"derived from a text of {LENGTH:,} characters" in n for n in answer["notes"])


def test_the_hermes_recall_tool_takes_a_query_longer_than_a_turn_whole(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    with engram_serve(env) as url:
        from engram.harness.target import Target

        p = EngramMemoryProvider(target=Target(url=url, key_file=Path(env["ENGRAM_KEY_FILE"]), log_key=None))
        p.initialize("20261201_100000_cc22dd")
        p.mem.write(category="CONTEXT", content="The staging host is stg-7.internal", tier="WARM")
        p.mem.write(category="CONTEXT", content="The zebrafish export runs nightly at 02:00", tier="WARM")
        # the question sits past 32,000 characters: a cut query never saw it
        log = "\n".join(f"INFO worker-{i % 7} wrote batch {i}" for i in range(LENGTH // 20))
        query = log + "\nWhen does the zebrafish export run?"
        assert log.find("zebrafish") == -1 and len(log) > 32_000
        tool = json.loads(p.handle_tool_call("engram_recall", {"query": query}))
        p.shutdown()
        assert "zebrafish export runs nightly" in tool["context"]
        assert p.errors == []

"""A write says whether it redacted anything (issue 40, finding 6: "Neither ``write`` nor
``import`` says whether it redacted anything"), on both backends: the SDK's frozen answers
(``Written``, ``Appended``, ``Closed``: what MCP and the CLI print) carry ``redacted``, the
secrets removed from what the caller gave; the import summary carries the total and each
item's count, dry run included."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from engram.client.sdk import Agent
from engram.harness.transfer import import_source
from engram.protocol.redact import count_redactions
from ledger.log import Ledger
from tests.contract.conftest import MemoryOf

VAULT = "hvs.CAESIiQS3YbhVtqSpUFg5KufQh5dM0DqK3uk"
DOPPLER = "dp.st.prd.q8WkN2vXr7TzL4bYm9PcH3sJf6GdA1eK0uRtVwZyQ5n"
PROSE = "The prod DB password is hunter2-SECRET-key."


def test_every_write_answer_says_how_many_secrets_it_redacted(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    mem = memory_of(make_agent("ada"))
    sid = mem.open_session()
    turn = mem.turn(sid, "user", f"vault login {VAULT} then {PROSE}")
    assert turn.redacted == 2
    assert turn.to_json()["redacted"] == 2
    plain = mem.turn(sid, "assistant", "Logged in; the deploy can go on.")
    assert plain.redacted == 0
    tool = mem.turn(sid, "tool", "ok", tool={"name": "db", "arguments": {"password": "correct horse"}})
    assert tool.redacted == 1
    written = mem.write(
        category="LEARNING", content=f"Doppler runs the deploy with {DOPPLER}", evidence=PROSE
    )
    assert written.redacted == 2 and written.to_json()["redacted"] == 2
    stored = ledger.store.body(written.index)
    assert stored is not None and count_redactions(json.loads(stored[1])) == 2
    none = mem.write(category="LEARNING", content="Staging restarts nightly at 02:00 UTC")
    assert none.redacted == 0
    sup = mem.supersede(written.ref or "", content=f"Doppler now uses {DOPPLER}", reason="rotated")
    assert sup.redacted == 1
    rec = mem.record("pact.outcome", {"pact": "p-1", "result": "fulfilled", "quality": 90, "evidence": PROSE})
    assert rec.redacted == 1
    closed = mem.close_session(sid, summary=f"rotated {VAULT}")
    assert closed.redacted == 1 and closed.to_json()["redacted"] == 1


def test_a_marker_the_caller_already_had_is_not_counted(
    make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    mem = memory_of(make_agent("ada"))
    w = mem.write(category="LEARNING", content=f"old key [REDACTED:vault_token], new key {VAULT}")
    assert w.redacted == 1


def test_the_import_summary_says_how_many_secrets_it_redacted(
    make_agent: Callable[..., Agent], memory_of: MemoryOf, tmp_path: Path
) -> None:
    token = "ghp_7Hd8Kq2mPz9RtV4wLs8NbY3cJdQe5fGh6iJk"
    long_text = "a1," * 1330 + token + ",b2" * 150  # redacted before it is cut in two
    src = tmp_path / "mem0.json"
    src.write_text(
        json.dumps(
            {
                "results": [
                    {"id": "m-1", "memory": f"Deploys use {VAULT}"},
                    {"id": "m-2", "memory": PROSE},
                    {"id": "m-3", "memory": "The user prefers dark mode"},
                    {"id": "m-4", "memory": long_text},
                ]
            }
        ),
        encoding="utf-8",
    )
    mem = memory_of(make_agent("ada"))
    dry = import_source(mem, "mem0", src, dry_run=True)
    assert dry.redacted == 3 and dry.to_json()["redacted"] == 3
    report = import_source(mem, "mem0", src)
    assert report.redacted == 3 and report.to_json()["redacted"] == 3
    assert [item["redacted"] for item in report.written] == [1, 1, 0, 0, 1]  # the marker opens part 2

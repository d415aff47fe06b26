"""Import, attacked from outside after issue 40's redaction fix (finding 6): a tag derived from
a source's names (a Mem0 item's tags and user id, a Codex or Claude Code heading) was lower-cased
and cut to 32 characters *before* redaction, so a token in it no longer read as one and its
first 26 characters were signed (``ci-ghp_ab3de5fg7hj9kl1mn3pq5rs7t``). The name is now redacted
first and the tag reads ``redacted``; nothing of the token reaches the log, on every backend."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from engram.client.sdk import Agent
from engram.harness.formats import tag
from engram.harness.transfer import import_source
from ledger.log import Ledger
from tests.contract.conftest import MemoryOf

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"


def test_a_tag_made_from_a_name_holding_a_secret_says_redacted() -> None:
    assert tag(f"ci-{TOKEN}") == "ci-redacted"
    assert tag("Deploy notes") == "deploy-notes"


def test_imported_tags_carry_no_part_of_a_secret(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf, tmp_path: Path
) -> None:
    mem = memory_of(make_agent("ada"))
    source = tmp_path / "mem0.json"
    item = {"id": "m1", "memory": "The nightly export runs at 02:00.", "user_id": f"u-{TOKEN}"}
    item["metadata"] = {"category": "CONTEXT", "tags": [f"ci-{TOKEN}"]}
    source.write_text(json.dumps({"results": [item]}), encoding="utf-8")
    report = import_source(mem, "mem0", source)
    [written] = report.written
    body = ledger.store.body(written["index"])
    assert body is not None
    stored = json.loads(body[1])
    assert stored["tags"] == sorted(["about-user-u-redacted", "ci-redacted", "mem0"])
    for fragment in (TOKEN[:12], TOKEN[4:16].lower(), TOKEN[12:]):
        assert fragment.lower().encode() not in body[1].lower(), body[1]


def test_a_dry_run_shows_the_content_as_it_would_be_signed(
    make_agent: Callable[..., Agent], memory_of: MemoryOf, tmp_path: Path
) -> None:
    """The dry run's preview printed the pasted secret in clear beside ``redacted: 1``."""
    mem = memory_of(make_agent("ada"))
    source = tmp_path / "mem0.json"
    item = {
        "id": "m1",
        "memory": f"CI uses the token {TOKEN} for releases.",
        "metadata": {"category": "CONTEXT"},
    }
    source.write_text(json.dumps({"results": [item]}), encoding="utf-8")
    report = import_source(mem, "mem0", source, dry_run=True)
    [preview] = report.written
    assert preview["content"] == "CI uses the token [REDACTED:github_token] for releases."
    assert preview["redacted"] == 1 and TOKEN not in json.dumps(report.to_json())

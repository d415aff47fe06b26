"""Scopes (issue 13, Deliver 5), on every backend: a global + project overlay, per user where
a harness has users. Recall given scopes keeps only those (HOT included) and labels each
result; without scopes it searches every scope; a bad scope is refused by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from engram.client.agent_memory import AgentMemory, recall_rows
from engram.client.sdk import Agent
from engram.protocol.errors import MalformedError, RejectedEventError
from engram.protocol.scopes import claude_encoded, claude_project_scope, scope_of, scope_tag
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf

pytestmark = pytest.mark.filterwarnings("ignore")


def _write(
    agent: AgentMemory,
    content: str,
    scope: str,
    *,
    category: str = "LEARNING",
    tier: str | None = None,
) -> str:
    tag = scope_tag(scope)
    r = agent.write(category=category, content=content, tags=[tag] if tag else [], tier=tier)
    return f"{r.index}.0"


def test_recall_merges_the_scopes_asked_for_and_labels_them(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    g = _write(ada, "The deploy pipeline runs on GitHub Actions", "global", tier="WARM")
    a = _write(ada, "In repo alpha the deploy pipeline needs the staging token", "project:alpha", tier="WARM")
    b = _write(ada, "In repo beta the deploy pipeline is manual", "project:beta", tier="WARM")
    u = _write(ada, "Dana wants deploy summaries in German", "user:dana", tier="WARM")
    hot_b = _write(ada, "Beta prefers squash merges", "project:beta", category="PREFERENCE")
    hot_g = _write(ada, "The user prefers short answers", "global", category="PREFERENCE")

    res = memory.recall("ada", "deploy pipeline", scopes=["global", "project:alpha"], record_access=False)
    assert {r.ref for r in res.ranked} == {g, a}
    assert [r.ref for r in res.hot] == [hot_g]  # HOT keeps to the scopes too
    rows = {r["ref"]: r["scope"] for r in recall_rows([dataclasses.asdict(r) for r in res.ranked])}
    assert rows == {g: "global", a: "project:alpha"}

    everything = memory.recall("ada", "deploy pipeline", record_access=False)
    assert {g, a, b, u} <= {r.ref for r in everything.ranked} and {hot_b, hot_g} == {
        r.ref for r in everything.hot
    }
    only_user = memory.recall("ada", "deploy summaries", scopes=["user:dana"], record_access=False)
    assert [r.ref for r in only_user.ranked] == [u]
    with pytest.raises(RejectedEventError, match="scope"):
        memory.recall("ada", "deploy", scopes=["team:x"], record_access=False)


def test_scope_names_and_tags() -> None:
    assert scope_tag("global") is None
    assert scope_tag("project:My Repo") == "project-my-repo"
    assert scope_of(["ops", "project-my-repo"]) == "project:my-repo" and scope_of(["ops"]) == "global"
    long = scope_tag("project:" + "x" * 100)
    assert long is not None and len(long) <= 32 and long != scope_tag("project:" + "x" * 99)
    for bad in ("", "team:x", "project:", "project:!!!", "user"):
        with pytest.raises(MalformedError):
            scope_tag(bad)


def test_claude_code_project_directories_and_working_directories_meet(tmp_path: object) -> None:
    """The hook's project (from cwd, at the repository root) is the project a Claude Code
    memory directory (~/.claude/projects/<encoded root>/memory) is imported as."""
    from pathlib import Path

    root = Path(str(tmp_path)) / "my_repo"
    (root / ".git").mkdir(parents=True)
    (root / "src" / "pkg").mkdir(parents=True)
    encoded = claude_encoded(str(root))
    assert encoded.startswith("-") and "_" not in encoded
    assert claude_project_scope(str(root / "src" / "pkg")) == claude_project_scope(encoded=encoded)

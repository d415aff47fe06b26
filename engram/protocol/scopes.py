"""Memory scopes: global, per project, per user (a global + project overlay).

A scope is carried by one tag on the memory (so it is signed with it and survives export):
``project-<slug>`` or ``user-<slug>``; a memory with neither is global. Recall given scopes
keeps only memories of those scopes and labels each result with its scope; without scopes it
searches them all. Logged session turns (the records tier) are global.

Scope names: ``global``, ``project:<name>``, ``user:<name>``. A name becomes its slug
(lower case, ``[a-z0-9_-]``); a slug longer than 23 characters keeps its last 14 and a
hash of the whole, so tags stay within the 32-character limit and stay distinct.

Claude Code keeps a project's memory in ``~/.claude/projects/<encoded path>/memory/`` (the
repository root with every character outside ``[A-Za-z0-9]`` replaced by ``-``);
:func:`claude_project_scope` gives the same project scope for the directory's name and for
a working directory inside the repository, so imported memories and the hooks meet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from engram.protocol.errors import MalformedError

__all__ = [
    "GLOBAL",
    "claude_encoded",
    "claude_project_scope",
    "parse_scopes",
    "scope_of",
    "scope_tag",
]

GLOBAL = "global"
KINDS = ("project", "user")
MAX_SCOPES = 8
_SLUG_MAX = 23


def _slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
    if not s:
        raise MalformedError(f"scope name {name!r} has no letters or digits", check="scope.name")
    if len(s) > _SLUG_MAX:
        s = s[-14:].strip("-_") + "-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return s


def normalize(scope: str) -> str:
    """``global`` or ``<kind>:<slug>`` (raises on anything else)."""
    if not isinstance(scope, str) or len(scope) > 512:
        raise MalformedError("a scope is a short string", check="scope.format")
    if scope == GLOBAL:
        return GLOBAL
    kind, sep, name = scope.partition(":")
    if not sep or kind not in KINDS:
        raise MalformedError(
            f"scope {scope!r} is not global, project:<name> or user:<name>", check="scope.format"
        )
    return f"{kind}:{_slug(name)}"


def scope_tag(scope: str) -> str | None:
    """The tag that puts a memory in ``scope`` (None for global)."""
    s = normalize(scope)
    if s == GLOBAL:
        return None
    kind, _, slug = s.partition(":")
    return f"{kind}-{slug}"


def scope_of(tags: Iterable[str]) -> str:
    """The scope a memory's tags put it in (the first scope tag; else global)."""
    for t in tags:
        for kind in KINDS:
            if t.startswith(kind + "-") and len(t) > len(kind) + 1:
                return f"{kind}:{t[len(kind) + 1 :]}"
    return GLOBAL


def parse_scopes(scopes: Sequence[str] | None) -> frozenset[str] | None:
    if scopes is None:
        return None
    if len(scopes) > MAX_SCOPES:
        raise MalformedError(f"at most {MAX_SCOPES} scopes", check="scope.count")
    return frozenset(normalize(s) for s in scopes)


def claude_encoded(path: str) -> str:
    """Claude Code's name for a project directory: every character outside [A-Za-z0-9] -> '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def _repo_root(cwd: Path) -> Path:
    for p in (cwd, *cwd.parents):
        if (p / ".git").exists():
            return p
    return cwd


def claude_project_scope(cwd: str | None = None, *, encoded: str | None = None) -> str:
    """The project scope of a working directory (its repository's root), or of Claude Code's
    encoded project directory name."""
    if encoded is None:
        if not cwd:
            raise MalformedError("no working directory to derive the project from", check="scope.project")
        encoded = claude_encoded(str(_repo_root(Path(cwd))))
    return normalize("project:" + encoded.strip("-"))

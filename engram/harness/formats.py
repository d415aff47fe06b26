"""The harnesses' own memory files, read and written: Claude Code, Codex, Hermes, Mem0.

Readers turn a source into :class:`Entry` values (text, category, tags, and where each came
from: file, line or id, and the SHA-256 of the source file); writers render memories back
into the same format, so memory moves from one harness to another through Engram.

==============  ===================================================================  ==========================
format          source                                                               one entry is
==============  ===================================================================  ==========================
``claude-code`` ``~/.claude/projects/<project>/memory/``: ``MEMORY.md`` (index) and     a memory file (its body),
                one file per memory with YAML frontmatter (``name``, ``description``,  or a plain bullet of
                ``type`` or ``metadata.type``: user, feedback, project, reference)     ``MEMORY.md``
``codex``       ``~/.codex/memories/``: ``memory_summary.md``, ``MEMORY.md``,          a bullet or paragraph
                ``rollout_summaries/*.md``                                             under a heading
``hermes``      ``~/.hermes/memories/``: ``MEMORY.md`` and ``USER.md``, entries        an entry
                separated by a line holding ``§``
``mem0``        the JSON of ``Memory.get_all()`` (``{"results": [...]}`` or a list)     an item (``id``, ``memory``)
==============  ===================================================================  ==========================

Every input is bounded before it is read and parsed strictly: a file that is not UTF-8,
frontmatter that does not close or holds a line that is not ``key: value``, JSON that is not
the documented shape, each raise :class:`FormatError` naming the file and line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.protocol.errors import LimitExceededError, MalformedError
from engram.protocol.files import loads_bounded, write_file
from engram.protocol.redact import MARKER, count_redactions, redact_secrets

__all__ = ["FORMATS", "Entry", "FormatError", "read_source", "write_export"]

FORMATS = ("claude-code", "codex", "hermes", "mem0")
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_FILES = 10_000
MAX_ENTRY_CHARS = 4000  # engram.protocol.schemas.MAX_CONTENT_CHARS
HERMES_DELIMITER = "\n§\n"
HERMES_LIMITS = {"MEMORY.md": 2200, "USER.md": 1375}
_TAG_OK = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_PREFERS = re.compile(r"\b(prefers?|preferred|likes?|dislikes?|wants?|always|never|rather)\b", re.I)


class FormatError(MalformedError):
    """A harness memory file that cannot be read as its format says (names file and line)."""

    default_check = "import.format"


@dataclass(frozen=True, slots=True)
class Entry:
    text: str
    category: str
    tags: tuple[str, ...]
    #: ``<format>:<relative path>:<line>`` or ``mem0:<id>`` (with the part number of a split entry)
    locator: str
    #: SHA-256 of the whole source file
    file_sha256: str
    extra: Mapping[str, str] = field(default_factory=dict)
    #: Secrets redacted from the text as the source was read (a long text is redacted before
    #: it is cut into entries, so that no secret is cut in two).
    redacted: int = 0

    @property
    def key(self) -> str:
        """What makes re-importing idempotent: where it came from and what it said."""
        return f"{self.locator}:{hashlib.sha256(self.text.encode('utf-8')).hexdigest()[:16]}"


def tag(text: str) -> str | None:
    """A tag from a source's name: lower case, ``[a-z0-9_-]``, at most 32 characters. A
    secret in the name is redacted first and reads ``redacted``: cut and lower-cased, its
    first characters would no longer look like a secret to the redactor, and be signed."""
    text, found = redact_secrets(text)
    if found:
        text = MARKER.sub("redacted", text)
    t = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")[:32].rstrip("-_")
    return t if t and _TAG_OK.fullmatch(t) else None


def _tags(*names: str | None) -> tuple[str, ...]:
    """Tags derived from a source's names (format, heading, file). One that reads as a scope
    tag (``user-…``, ``project-…``: a Codex heading "User preferences") is marked as a topic
    (``about-user-preferences``): it would otherwise move the memory out of the global scope."""
    from engram.protocol.scopes import KINDS

    out: list[str] = []
    for n in names:
        t = tag(n) if n else None
        if t and t.startswith(tuple(f"{k}-" for k in KINDS)):
            t = tag(f"about-{t}")
        if t and t not in out:
            out.append(t)
    return tuple(out[:8])


def _guess_category(text: str, default: str = "CONTEXT") -> str:
    return "PREFERENCE" if _PREFERS.search(text) else default


def _read_text(path: Path, root: Path) -> tuple[str, str]:
    """The file's text and SHA-256, bounded and strictly UTF-8."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise FormatError(f"{path}: cannot be read ({e.strerror})") from e
    if size > MAX_FILE_BYTES:
        raise FormatError(f"{path}: {size} bytes, more than {MAX_FILE_BYTES}", check="import.size")
    with path.open("rb") as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 (byte {e.start})", check="import.encoding") from e
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n"), hashlib.sha256(raw).hexdigest()


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def _split(text: str, limit: int = MAX_ENTRY_CHARS) -> list[tuple[str, int]]:
    """Text longer than one memory, cut at paragraph (else line, else word) boundaries, each
    part with the secrets redacted from it. A long text is redacted whole before it is cut:
    a secret cut in two would reach the log as halves that no rule recognises."""
    text = text.strip()
    if len(text) <= limit:
        return [(text, 0)] if text else []
    given = count_redactions(text)
    text = redact_secrets(text)[0]
    out: list[tuple[str, int]] = []
    for part in _cut(text, limit):
        markers = count_redactions(part)
        mine = min(markers, given)  # the source's own markers come first
        given -= mine
        out.append((part, markers - mine))
    return out


def _cut(text: str, limit: int) -> list[str]:
    parts: list[str] = []
    cur = ""
    for para in re.split(r"(\n\s*\n)", text):
        if len(cur) + len(para) <= limit:
            cur += para
            continue
        if cur.strip():
            parts.append(cur.strip())
        cur = ""
        while len(para) > limit:
            cut = para.rfind("\n", 0, limit)
            cut = cut if cut > limit // 2 else para.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            mark = para.rfind("[REDACTED:", 0, cut)
            if mark > 0 and para.find("]", mark) >= cut:
                cut = mark  # never through a redaction marker
            parts.append(para[:cut].strip())
            para = para[cut:]
        cur = para
    if cur.strip():
        parts.append(cur.strip())
    return [p for p in parts if p]


# -- Claude Code -------------------------------------------------------------------------

CLAUDE_TYPES = {"user": "CONTEXT", "feedback": "PREFERENCE", "project": "CONTEXT", "reference": "CONTEXT"}


def parse_frontmatter(text: str, where: str) -> tuple[dict[str, str], str, int]:
    """``---``-fenced ``key: value`` lines (one nested level, two-space indent, e.g.
    ``metadata:`` / ``  type: user``) and the body; returns (fields, body, body's first line)."""
    if not text.startswith("---\n"):
        return {}, text, 1
    end = text.find("\n---\n", 3)
    if end < 0:
        end = text.find("\n---", 3)
        if end < 0 or text[end + 4 :].strip():
            raise FormatError(
                f"{where}: the frontmatter opened on line 1 is never closed by ---",
                check="import.frontmatter",
            )
    head = text[4:end]
    fields: dict[str, str] = {}
    parent: str | None = None
    for i, line in enumerate(head.split("\n"), start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.fullmatch(r"( {2})?([A-Za-z_][A-Za-z0-9_-]*):(?: (.*))?", line.rstrip())
        if m is None:
            raise FormatError(
                f"{where}:{i}: frontmatter line is not 'key: value': {line[:60]!r}",
                check="import.frontmatter",
            )
        nested, key, value = m.group(1), m.group(2), (m.group(3) or "").strip()
        if nested and parent is None:
            raise FormatError(f"{where}:{i}: indented key outside a section", check="import.frontmatter")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if nested:
            fields[f"{parent}.{key}"] = value
        else:
            parent = key if not value else None
            if value:
                fields[key] = value
    body_start = end + 5
    return fields, text[body_start:], head.count("\n") + 3


_INDEX_LINK = re.compile(r"^\s*[-*]\s+\[([^\]]+)\]\(([^)]+)\)(?:\s*(?:—|-|:)\s*(.*))?$")


def read_claude_code(root: Path) -> list[Entry]:
    """A project's ``memory/`` directory; the projects root (``~/.claude/projects``: every
    project's ``memory/``, each entry tagged with its project's scope); or a plain
    ``CLAUDE.md`` (or any Markdown file: its bullets and paragraphs). The
    projects root and ``CLAUDE.md`` were once refused."""
    if root.is_file():
        if root.suffix.lower() != ".md":
            raise FormatError(
                f"{root}: a Claude Code source is a memory directory or a Markdown file", check="import.path"
            )
        text, sha = _read_text(root, root.parent)
        out = _markdown_entries(text, root.name, sha, "claude-code", ("claude-code", "claude-md"))
        if not out:
            raise FormatError(f"{root}: no bullet or paragraph to import", check="import.empty")
        return out
    if not any(p.is_file() for p in root.glob("*.md")):
        projects = sorted(p for p in root.glob("*/memory") if p.is_dir() and any(p.glob("*.md")))
        if projects:  # the projects root
            from engram.protocol.scopes import claude_project_scope, scope_tag

            out = []
            for mem in projects:
                project_tag = scope_tag(claude_project_scope(encoded=mem.parent.name))
                for e in _read_claude_dir(mem, root):
                    tags = (*e.tags, project_tag)[:16] if project_tag else e.tags
                    out.append(dataclasses.replace(e, tags=tags))
            return out
    return _read_claude_dir(root, root)


def _read_claude_dir(root: Path, base: Path) -> list[Entry]:
    files = sorted(p for p in root.glob("*.md") if p.is_file())
    if len(files) > MAX_FILES:
        raise FormatError(f"{root}: more than {MAX_FILES} files", check="import.size")
    if not files:
        raise FormatError(f"{root}: no Claude Code memory files (*.md) here", check="import.empty")
    out: list[Entry] = []
    for path in files:
        text, sha = _read_text(path, root)
        rel = _rel(path, base)
        if path.name == "MEMORY.md":
            for n, line in enumerate(text.split("\n"), start=1):
                s = line.strip()
                if not re.match(r"^[-*]\s+\S", s) or _INDEX_LINK.match(s):
                    continue  # headings, prose and pointers to memory files
                body = s[1:].strip()
                out.append(
                    Entry(body, _guess_category(body), _tags("claude-code"), f"claude-code:{rel}:{n}", sha)
                )
            continue
        fields, body, first = parse_frontmatter(text, str(path))
        kind = fields.get("type") or fields.get("metadata.type") or ""
        category = CLAUDE_TYPES.get(kind, _guess_category(body))
        extra: dict[str, str] = {k: fields[k] for k in ("name", "description") if k in fields}
        extra["file"] = path.stem
        if kind:
            extra["type"] = kind
        chunks = _split(body) or _split(fields.get("description", ""))
        for part, (chunk, red) in enumerate(chunks):
            loc = f"claude-code:{rel}:{first}" + (f":{part}" if len(chunks) > 1 else "")
            out.append(Entry(chunk, category, _tags("claude-code", kind, path.stem), loc, sha, extra, red))
    return out


#: What of a Claude Code memory file an import keeps beside its text, so an export writes
#: the file back under its own name (provenance ``claude-code:<key>=<value>``).
CLAUDE_META = ("file", "name", "description", "type")


def claude_meta(provenance: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The Claude Code file metadata an import kept in a memory's provenance."""
    out: dict[str, str] = {}
    for p in provenance:
        ref = str(p.get("source_ref", ""))
        if p.get("source_type") == "external" and ref.startswith("claude-code:") and "=" in ref:
            key, _, value = ref[len("claude-code:") :].partition("=")
            if key in CLAUDE_META and key not in out:
                out[key] = value
    return out


def _slug(text: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:48] or "memory"
    slug, n = base, 2
    while slug in used:
        slug, n = f"{base}_{n}", n + 1
    used.add(slug)
    return slug


def write_claude_code(items: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """One file per memory, named and described as Claude Code expects; a memory imported
    from Claude Code goes back under its own file name, ``name``, ``description`` and
    ``type``, and the parts of a file that was split on import are joined again."""
    out.mkdir(parents=True, exist_ok=True)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    order: list[str] = []
    for it in items:
        meta = claude_meta(it.get("provenance") or [])
        key = f"file:{meta['file']}" if meta.get("file") else f"ref:{it['ref']}"
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(it)
    used: set[str] = set()
    index = ["# Memory Index", ""]
    written: list[Path] = []
    for key in order:
        group = groups[key]
        first = group[0]
        meta = claude_meta(first.get("provenance") or [])
        content = "\n\n".join(str(it["content"]).rstrip() for it in group)
        kind = meta.get("type") or {"PREFERENCE": "feedback", "COMMITMENT": "project"}.get(
            str(first["category"]), "reference"
        )
        if not meta.get("type") and "user" in (first.get("tags") or []):
            kind = "user"
        title = meta.get("name") or " ".join(content.split()[:6])
        desc = meta.get("description") or content.split("\n", 1)[0][:150]
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", meta["file"]).strip("._")[:96] if meta.get("file") else ""
        slug = stem if stem and stem not in used and stem != "MEMORY" else _slug(f"{kind}_{title}", used)
        used.add(slug)
        fm = [
            "---",
            f"name: {json.dumps(title, ensure_ascii=False)}",
            f"description: {json.dumps(desc, ensure_ascii=False)}",
            f"type: {kind}",
            f"engram_ref: {json.dumps(', '.join(str(it['ref']) for it in group))}",
            "---",
            "",
        ]
        path = out / f"{slug}.md"
        write_file(path, "\n".join(fm) + content.rstrip() + "\n")
        written.append(path)
        index.append(f"- [{title}]({slug}.md) — {desc[:100]}")
    write_file(out / "MEMORY.md", "\n".join(index) + "\n")
    return [out / "MEMORY.md", *written]


# -- Codex ---------------------------------------------------------------------------------

_CODEX_SKIP = re.compile(
    r"what's in memory|older memory topics|keywords|rollout_summary_files|rollout context", re.I
)


_CODEX_META = re.compile(
    r"^(thread_id|updated_at|rollout_path|cwd|git_branch|scope|applies_to|keywords|task|task_group|"
    r"task_outcome|description|rollout_summary_file|outcome|rollout context):",
    re.I,
)


def _codex_category(heading: str) -> str:
    h = heading.lower()
    if "preference" in h:
        return "PREFERENCE"
    if "fail" in h:
        return "FAILURE"
    if "knowledge" in h or "tip" in h or "learning" in h:
        return "LEARNING"
    return "CONTEXT"


def _markdown_entries(text: str, rel: str, sha: str, fmt: str, base_tags: tuple[str, ...]) -> list[Entry]:
    """Bullets (with their continuation lines) and paragraphs under each heading."""
    out: list[Entry] = []
    heading = ""
    skip = False
    skip_level = 0  # a skipped section's sub-headings are skipped with it
    cur: list[str] = []
    cur_line = 0

    def flush() -> None:
        nonlocal cur
        body = "\n".join(cur).strip()
        cur = []
        if not body or skip:
            return
        body = re.sub(r"^[-*]\s+", "", body)
        body = re.sub(r"\s*(\[Task \d+\])+\s*$", "", body)
        for part, (chunk, red) in enumerate(_split(body)):
            cat = _codex_category(heading)
            cat = _guess_category(chunk, cat) if cat == "CONTEXT" else cat
            loc = f"{fmt}:{rel}:{cur_line}" + (f":{part}" if part else "")
            tags = _tags(*base_tags, heading[:32] if heading else None)
            out.append(Entry(chunk, cat, tags, loc, sha, redacted=red))

    for n, line in enumerate(text.split("\n"), start=1):
        if re.match(r"^#{1,6}\s", line):
            flush()
            level = len(line) - len(line.lstrip("#"))
            heading = line.lstrip("#").strip()
            if skip and level > skip_level:
                continue
            skip = bool(_CODEX_SKIP.search(heading))
            skip_level = level
            continue
        if n == 1 and line.strip() == "v1":
            continue
        if _CODEX_META.match(line):
            continue
        if re.fullmatch(r"[A-Z][A-Za-z ,/-]{0,48}:\s*", line):  # a label such as "Reusable knowledge:"
            flush()
            heading, skip = line.strip().rstrip(":"), False
            continue
        if re.match(r"^[-*]\s", line) or not line.strip():
            flush()
            if line.strip():
                cur, cur_line = [line], n
            continue
        if not cur:
            cur_line = n
        cur.append(line)
    flush()
    return out


def read_codex(root: Path) -> list[Entry]:
    files = [p for p in (root / "memory_summary.md", root / "MEMORY.md") if p.is_file()]
    files += sorted(p for p in (root / "rollout_summaries").glob("*.md") if p.is_file())
    if not files:
        raise FormatError(
            f"{root}: no Codex memory files (memory_summary.md, MEMORY.md, rollout_summaries/)",
            check="import.empty",
        )
    if len(files) > MAX_FILES:
        raise FormatError(f"{root}: more than {MAX_FILES} files", check="import.size")
    out: list[Entry] = []
    for path in files:
        text, sha = _read_text(path, root)
        rel = _rel(path, root)
        if path.name == "memory_summary.md" and text.split("\n", 1)[0].strip() != "v1":
            raise FormatError(
                f"{path}:1: a Codex memory_summary.md starts with the line 'v1'", check="import.format"
            )
        extra_tags = ("codex", "rollout") if rel.startswith("rollout_summaries/") else ("codex",)
        out += _markdown_entries(text, rel, sha, "codex", extra_tags)
    return out


def _codex_section(it: Mapping[str, Any]) -> str:
    cat = str(it["category"])
    if "user" in (it.get("tags") or []) and cat != "PREFERENCE":
        return "User Profile"
    if cat == "PREFERENCE":
        return "User preferences"
    if cat == "FAILURE":
        return "Failures and how to do differently"
    if cat in ("LEARNING", "PERFORMANCE"):
        return "Reusable knowledge"
    return "Context"


def write_codex(items: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    """``memory_summary.md`` (``v1``; the user profile, preferences and tips Codex always
    injects), ``MEMORY.md`` in the block shape Codex's consolidation keeps
    (``# Task Group``, ``scope:``, ``applies_to:``, a ``## Task`` with its
    ``### rollout_summary_files`` and ``### keywords``, then the consolidated sections), one
    block per scope (a project's memories apply to that project), and a rollout summary per
    block holding its context memories."""
    from engram.protocol.scopes import GLOBAL, scope_of

    out.mkdir(parents=True, exist_ok=True)
    by_scope: dict[str, list[Mapping[str, Any]]] = {}
    for it in items:
        by_scope.setdefault(scope_of(it.get("tags") or ()), []).append(it)
    summary_sections: dict[str, list[str]] = {
        "User Profile": [],
        "User preferences": [],
        "Reusable knowledge": [],
    }
    memory: list[str] = []
    written: list[Path] = []
    for scope in sorted(by_scope, key=lambda x: (x != GLOBAL, x)):
        group = by_scope[scope]
        sections: dict[str, list[str]] = {}
        for it in group:
            line = "- " + " ".join(str(it["content"]).split())
            sections.setdefault(_codex_section(it), []).append(line)
            if _codex_section(it) in summary_sections:
                summary_sections[_codex_section(it)].append(line)
        slug = re.sub(r"[^a-z0-9]+", "-", scope.lower()).strip("-") or "global"
        cwd = "any working directory" if scope == GLOBAL else scope.partition(":")[2]
        newest = max((int(it.get("created_us") or 0) for it in group), default=0)
        updated = _iso(newest) or "unknown"
        tags = sorted(
            {t for it in group for t in (it.get("tags") or []) if not t.startswith(("project-", "user-"))}
        )
        rollout = f"rollout_summaries/engram-{slug}.md"
        memory += [
            f"# Task Group: memories kept in Engram's signed log ({scope})",
            f"scope: {len(group)} memories this agent keeps in Engram for {scope}; each is a signed log entry",
            f"applies_to: cwd={cwd}; reuse_rule=reuse while Engram holds them; a later export supersedes this block",
            "",
            f"## Task 1: keep what was learned in {scope}, exported from Engram",
            "### rollout_summary_files",
            f"- {rollout} (cwd={cwd}, rollout_path=engram memory export, updated_at={updated}, thread_id=engram-{slug})",
            "### keywords",
            "- " + ", ".join(["engram", *tags[:12]]),
            "",
        ]
        for name in ("User preferences", "Reusable knowledge", "Failures and how to do differently"):
            if sections.get(name):
                memory += [f"## {name}", *(f"{b} [Task 1]" for b in sections[name]), ""]
        context = sections.get("Context", []) + sections.get("User Profile", [])
        (out / "rollout_summaries").mkdir(exist_ok=True)
        write_file(
            out / rollout,
            "\n".join([f"# Engram export: {scope}", "", "## Context", *context, ""])
            if context
            else f"# Engram export: {scope}\n",
        )
        written.append(out / rollout)
    summary = ["v1", "", "## User Profile", *summary_sections["User Profile"], ""]
    summary += ["## User preferences", *summary_sections["User preferences"], ""]
    summary += ["## General Tips", *summary_sections["Reusable knowledge"], ""]
    summary += [
        "## What's in Memory",
        "### engram",
        f"- engram export: {len(items)} memories in {len(by_scope)} task groups",
        "",
    ]
    write_file(out / "memory_summary.md", "\n".join(summary))
    write_file(out / "MEMORY.md", "\n".join(memory) + ("\n" if memory else ""))
    return [out / "memory_summary.md", out / "MEMORY.md", *written]


# -- Hermes --------------------------------------------------------------------------------


def read_hermes(root: Path) -> list[Entry]:
    files = [p for p in (root / "MEMORY.md", root / "USER.md") if p.is_file()]
    if not files:
        raise FormatError(f"{root}: no Hermes memory files (MEMORY.md, USER.md)", check="import.empty")
    out: list[Entry] = []
    for path in files:
        text, sha = _read_text(path, root)
        line = 1
        for n, raw in enumerate(text.split(HERMES_DELIMITER), start=1):
            entry = raw.strip()
            first = line + (len(raw) - len(raw.lstrip("\n")))
            line += raw.count("\n") + 2
            if not entry:
                continue
            target = "user" if path.name == "USER.md" else "memory"
            for part, (chunk, red) in enumerate(_split(entry)):
                loc = f"hermes:{path.name}:{first}" + (f":{part}" if part else "")
                out.append(
                    Entry(
                        chunk,
                        _guess_category(chunk),
                        _tags("hermes", target),
                        loc,
                        sha,
                        {"entry": str(n)},
                        red,
                    )
                )
    return out


def write_hermes(items: Sequence[Mapping[str, Any]], out: Path) -> tuple[list[Path], int]:
    """MEMORY.md and USER.md within Hermes' character limits (newest first are kept; returns
    how many did not fit)."""
    out.mkdir(parents=True, exist_ok=True)
    left_out = 0
    paths = []
    for name, limit in HERMES_LIMITS.items():
        want_user = name == "USER.md"
        chosen: list[str] = []
        for it in sorted(items, key=lambda i: -int(i.get("index", 0))):
            is_user = "user" in (it.get("tags") or []) or "hermes-user" in (it.get("tags") or [])
            if is_user != want_user:
                continue
            text = str(it["content"]).replace(HERMES_DELIMITER, "\n")
            if len(HERMES_DELIMITER.join([*chosen, text])) <= limit:
                chosen.append(text)
            else:
                left_out += 1
        chosen.reverse()
        write_file(out / name, HERMES_DELIMITER.join(chosen))
        paths.append(out / name)
    return paths, left_out


# -- Mem0 ----------------------------------------------------------------------------------


def read_mem0(path: Path) -> list[Entry]:
    if path.is_dir():
        raise FormatError(
            f"{path}: a Mem0 export is a JSON file (the output of get_all)", check="import.format"
        )
    text, sha = _read_text(path, path.parent)
    try:
        data = loads_bounded(text)
    except LimitExceededError as e:
        raise FormatError(f"{path}: {e}", check="import.json") from e
    except MalformedError as e:
        raise FormatError(f"{path}: not JSON ({e})", check="import.json") from e
    items = data.get("results") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise FormatError(
            f'{path}: expected {{"results": [...]}} or a list of memories', check="import.format"
        )
    return [entry for i, it in enumerate(items) for entry in _mem0_entries(path, i, it, sha)]


_MEM0_CATEGORIES = ("COMMITMENT", "PERFORMANCE", "LEARNING", "FAILURE", "PREFERENCE", "ANOMALY", "CONTEXT")


def _mem0_entries(path: Path, i: int, it: object, sha: str) -> list[Entry]:
    """The entries of Mem0 memory ``i`` (one per part of a long memory)."""
    if (
        not isinstance(it, dict)
        or not isinstance(it.get("memory"), str)
        or not isinstance(it.get("id"), (str, int))
    ):
        raise FormatError(f"{path}: item {i} has no string 'memory' and 'id'", check="import.format")
    meta = it.get("metadata") if isinstance(it.get("metadata"), dict) else {}
    cat = str(meta.get("category", "")).upper() if meta else ""
    category = cat if cat in _MEM0_CATEGORIES else _guess_category(it["memory"])
    tags = [t for t in (meta.get("tags") or []) if isinstance(t, str)] if meta else []
    who = [
        f"user-{it['user_id']}" if it.get("user_id") else None,
        f"agent-{it['agent_id']}" if it.get("agent_id") else None,
    ]
    out: list[Entry] = []
    for part, (chunk, red) in enumerate(_split(it["memory"])):
        loc = f"mem0:{str(it['id'])[:128]}" + (f":{part}" if part else "")
        extra = {"created_at": str(it.get("created_at") or "")}
        out.append(Entry(chunk, category, _tags("mem0", *who, *tags), loc, sha, extra, red))
    return out


def write_mem0(items: Sequence[Mapping[str, Any]], agent: str, out: Path) -> list[Path]:
    out.parent.mkdir(parents=True, exist_ok=True)
    results = [
        {
            "id": f"engram-{it['ref']}",
            "memory": str(it["content"]),
            "hash": hashlib.md5(str(it["content"]).encode("utf-8"), usedforsecurity=False).hexdigest(),
            "metadata": {
                "category": it["category"],
                "tags": list(it.get("tags") or []),
                "engram_ref": it["ref"],
                "engram_index": it["index"],
            },
            "created_at": _iso(it.get("created_us")),
            "updated_at": None,
            "agent_id": agent,
        }
        for it in items
    ]
    write_file(out, json.dumps({"results": results}, indent=2, ensure_ascii=False) + "\n")
    return [out]


def _iso(us: Any) -> str | None:
    if not isinstance(us, int):
        return None
    import datetime

    return datetime.datetime.fromtimestamp(us / 1e6, tz=datetime.UTC).isoformat()


# -- entry points ------------------------------------------------------------------------------


def read_source(fmt: str, path: Path) -> list[Entry]:
    """Every entry of a harness's memory source (raises :class:`FormatError` on a bad file,
    before anything is written)."""
    path = path.expanduser()
    if not path.exists():
        raise FormatError(f"{path}: no such file or directory", check="import.path")
    readers = {"claude-code": read_claude_code, "codex": read_codex, "hermes": read_hermes, "mem0": read_mem0}
    if fmt not in readers:
        raise FormatError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})", check="import.format")
    if fmt != "mem0" and not path.is_dir() and not (fmt == "claude-code" and path.suffix.lower() == ".md"):
        raise FormatError(f"{path}: a {fmt} memory source is a directory", check="import.path")
    return readers[fmt](path)


def write_export(
    fmt: str, items: Iterable[Mapping[str, Any]], out: Path, *, agent: str
) -> tuple[list[Path], int]:
    """Render memories as ``fmt`` under ``out`` (a directory; for mem0 a JSON file). Returns
    the files written and how many memories did not fit (Hermes' character limits)."""
    items = list(items)
    out = out.expanduser()
    if fmt == "claude-code":
        return write_claude_code(items, out), 0
    if fmt == "codex":
        return write_codex(items, out), 0
    if fmt == "hermes":
        return write_hermes(items, out)
    if fmt == "mem0":
        return write_mem0(items, agent, out if out.suffix == ".json" else out / "mem0.json"), 0
    raise FormatError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})", check="import.format")

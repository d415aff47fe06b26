"""Import a harness's memory files into Engram, and export an agent's memories back.

Import (``engram memory import FORMAT PATH``): every entry is gated and validated before
anything is signed; refused entries are reported with the gate's reason and check and not
written; each accepted entry becomes a ``memory.written`` signed by the agent whose
provenance names its source (``import:<format>:<file>:<line>:<digest>`` or
``import:mem0:<id>:<digest>``, and ``sha256:<source file>``). Re-importing is idempotent:
entries already in the agent's memory (by that provenance) are skipped, so an interrupted
import is finished by running it again, and nothing is written twice.

Export (``engram memory export FORMAT OUT``): the agent's active memories (not records or
session turns) in the format, so another harness reads them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.client.agent_memory import AgentMemory
from engram.harness.formats import CLAUDE_META, Entry, read_source, write_export
from engram.protocol.answers import ItemRow
from engram.protocol.bodies import written_body
from engram.protocol.errors import EngramError
from engram.protocol.gate import WriteGate
from engram.protocol.redact import count_redactions, redact_body, redact_secrets
from engram.protocol.scopes import GLOBAL, claude_project_scope, scope_tag

__all__ = ["ImportReport", "export_memories", "import_source"]

_MEMORY_KINDS = {"memory.written", "memory.distilled", "memory.superseded"}
_TIERS = {"HOT", "WARM", "COLD"}


@dataclass(slots=True)
class ImportReport:
    format: str
    source: str
    entries: int = 0
    written: list[dict[str, Any]] = field(default_factory=list)
    already: int = 0
    refused: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False
    #: Secrets redacted before signing, over every entry written (or, dry, to be written).
    redacted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "source": self.source,
            "entries": self.entries,
            "written": len(self.written),
            "already_imported": self.already,
            "refused": self.refused,
            "dry_run": self.dry_run,
            "redacted": self.redacted,
            "items": self.written,
        }


def _import_ref(e: Entry) -> str:
    ref = f"import:{e.key}"
    if len(ref) > 256:
        ref = f"import:{e.locator.split(':', 1)[0]}:{hashlib.sha256(e.key.encode()).hexdigest()}"
    return ref


def _already_imported(mem: AgentMemory) -> set[str]:
    seen: set[str] = set()
    for it in mem.items(status="all"):
        for p in it.provenance:
            ref = p.get("source_ref", "")
            if p.get("source_type") == "external" and ref.startswith("import:"):
                seen.add(ref)
    return seen


def default_scope(fmt: str, path: Path) -> str:
    """Claude Code's ``~/.claude/projects/<encoded project>/memory`` is that project's scope;
    everything else is global unless a scope is given."""
    p = path.expanduser().resolve()
    if fmt == "claude-code" and p.name == "memory" and p.parent.parent.name == "projects":
        return claude_project_scope(encoded=p.parent.name)
    return GLOBAL


def import_source(
    mem: AgentMemory,
    fmt: str,
    path: Path,
    *,
    dry_run: bool = False,
    gate: WriteGate | None = None,
    scope: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Read, check, then write (see the module docstring). A file that cannot be read raises
    before anything is written. ``scope`` (default: :func:`default_scope`) tags every entry;
    ``progress(written, to write)`` is called as the writes go."""
    tag = scope_tag(scope or default_scope(fmt, path))
    entries = read_source(fmt, path)
    if tag is not None:
        entries = [dataclasses.replace(e, tags=(*e.tags, tag)[:16]) for e in entries]
    gate = gate or WriteGate()
    report = ImportReport(format=fmt, source=str(path), entries=len(entries), dry_run=dry_run)
    seen = _already_imported(mem)
    todo: list[tuple[Entry, list[dict[str, str]], int, str]] = []
    for e in entries:
        ref = _import_ref(e)
        if ref in seen:
            report.already += 1
            continue
        seen.add(ref)  # the same entry twice in one source is imported once
        provenance = [
            {"source_type": "external", "source_ref": ref},
            {"source_type": "external", "source_ref": f"sha256:{e.file_sha256}"},
        ]
        if fmt == "claude-code":  # the file's name and frontmatter, for an export that keeps them
            provenance += [
                # redacted before the cut: a cut secret no longer reads as one and would be signed
                {
                    "source_type": "external",
                    "source_ref": redact_secrets(f"claude-code:{k}={e.extra[k]}")[0][:256],
                }
                for k in CLAUDE_META
                if e.extra.get(k)
            ]
        try:
            body = redact_body(
                written_body(gate, category=e.category, content=e.text, tags=e.tags, provenance=provenance)
            )
        except EngramError as err:
            report.refused.append(
                {"source": e.locator, "reason": str(err), "check": str(getattr(err, "check", "") or "")}
            )
            continue
        redacted = e.redacted + max(
            0, count_redactions(body) - count_redactions([e.text, list(e.tags), provenance])
        )
        todo.append((e, provenance, redacted, str(body["content"])))
    if dry_run:  # the content as it would be signed: redacted, in the gate's normal form
        report.written = [
            {"source": e.locator, "category": e.category, "content": content, "redacted": n}
            for e, _, n, content in todo
        ]
        report.redacted = sum(n for _, _, n, _ in todo)
        return report
    for n, (e, provenance, _, _) in enumerate(todo, start=1):
        out = mem.write(category=e.category, content=e.text, tags=e.tags, provenance=provenance)
        redacted = e.redacted + out.redacted  # read from the source (formats.py), then at signing
        report.written.append({"source": e.locator, "index": out.index, "ref": out.ref, "redacted": redacted})
        report.redacted += redacted
        if progress is not None:
            progress(n, len(todo))
    return report


def exportable(items: Sequence[ItemRow]) -> list[ItemRow]:
    """The active memories of the exported tiers (not records, not session turns)."""
    return [
        it for it in items if it.status == "active" and it.tier in _TIERS and it.source_kind in _MEMORY_KINDS
    ]


def export_memories(mem: AgentMemory, fmt: str, out: Path) -> tuple[list[Path], int, int]:
    """Write the agent's active memories as ``fmt``; returns (files, memories, left out)."""
    items = exportable(mem.items(status="active"))
    files, left_out = write_export(fmt, [it.to_json() for it in items], out, agent=mem.agent_id)
    return files, len(items), left_out

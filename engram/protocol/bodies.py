"""Bodies of agent-signed memory events, built the same way in process and over HTTP.

Pure: each builder gates its texts (refuses threats, redacts secrets) with the given
:class:`WriteGate`, applies the defaults of specs/memory-events.md and validates the result
against the kind's schema, so that what an agent signs is what the ledger will accept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engram.protocol.gate import WriteGate, redact_secrets
from engram.protocol.kinds import gated_texts, validate_body
from engram.protocol.schemas import parse_ref
from verifier.tiers import DEFAULT_TIER_V2_FROM_US, default_tier

__all__ = [
    "DEFAULT_TIER_V2_FROM_US",
    "closed_body",
    "default_tier",
    "erased_body",
    "exempt_body",
    "gated_normal",
    "opened_body",
    "superseded_body",
    "turn_body",
    "written_body",
]


def opened_body(session: str, title: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"session": session}
    if title:
        body["title"] = redact_secrets(title)[0]
    validate_body("session.opened", body)
    return body


def turn_body(
    session: str, turn: int, role: str, content: str, tool: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A ``session.turn`` body: the turn in full, except secrets, which are redacted before
    signing (the log is permanent; a pasted API key must not land in it)."""
    body: dict[str, Any] = {
        "session": session,
        "turn": turn,
        "role": role,
        "content": redact_secrets(content)[0],
    }
    if tool is not None:
        body["tool"] = dict(tool)
    validate_body("session.turn", body)
    return body


def closed_body(session: str, summary: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"session": session}
    if summary:
        body["summary"] = redact_secrets(summary)[0]
    validate_body("session.closed", body)
    return body


# DEFAULT_TIER_V2_FROM_US and default_tier: from this server time on (2026-11-24T00:00:00Z;
# memory events v2), a ``memory.written`` without ``tier`` is filed by default_tier, the rule
# every client already applied; before it the log filed such an entry in HOT, and old logs
# replay as they were written. Defined in verifier.tiers, below both sides: the projection,
# the clients and the offline verifier of a mesh proof apply the one rule.


def written_body(
    gate: WriteGate,
    *,
    category: str,
    content: str,
    tags: Sequence[str] = (),
    confidence: int = 70,
    evidence: str | None = None,
    session: str | None = None,
    provenance: Sequence[Mapping[str, str]] = (),
    tier: str | None = None,
    decay_exempt: bool = False,
) -> dict[str, Any]:
    """A ``memory.written`` body. HOT is the working set: session memories (compacted when
    the session ends), preferences and blockers; anything else outside a session is WARM."""
    text, _ = gate.prepare(content)
    body: dict[str, Any] = {
        "category": category,
        "content": text,
        "tags": sorted(set(tags)),
        "confidence": confidence,
        "provenance": [dict(p) for p in provenance],
    }
    if evidence:
        body["evidence"] = gate.prepare(evidence)[0]
    if session:
        body["session"] = session
    body["tier"] = default_tier(category, body["tags"], session) if tier is None else tier
    if decay_exempt:
        body["decay_exempt"] = True
    validate_body("memory.written", body)
    return body


def gated_normal(gate: WriteGate, kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with each text the write gate reads (a record's promise, description,
    evidence) scanned and in the gate's normal form, the form the log accepts."""
    texts = set(gated_texts(kind, body))
    return {k: gate.scan(v) if isinstance(v, str) and v in texts else v for k, v in body.items()}


def superseded_body(gate: WriteGate, ref: str, *, content: str, reason: str) -> dict[str, Any]:
    parse_ref(ref)
    text, _ = gate.prepare(content)
    body = {"item": ref, "content": text, "reason": gate.scan(reason)}
    validate_body("memory.superseded", body)
    return body


def exempt_body(ref: str, *, reason: str) -> dict[str, Any]:
    body = {"item": ref, "reason": WriteGate().scan(reason)}
    validate_body("memory.decay_exempted", body)
    return body


def erased_body(
    index: int,
    refs: Sequence[str],
    *,
    reason: str,
    also: Sequence[int] = (),
    sessions: Sequence[str] = (),
    session: str | None = None,
    replaced: Sequence[tuple[int, str, str]] = (),
) -> dict[str, Any]:
    """A ``memory.erased`` body for an erasure plan (engram.protocol.erasure): ``replaced``
    names the version 1 replacement decisions it takes, (index, item, by)."""
    if session is not None:  # a session's title or summary (engram.protocol.erasure)
        body: dict[str, Any] = {"index": index, "session": session, "reason": reason}
        validate_body("memory.erased", body)
        return body
    body = {"index": index, "reason": reason}
    if refs:
        body["refs"] = list(refs)
    if also:
        body["also"] = sorted(also)
    if sessions:
        body["sessions"] = sorted(sessions)
    if replaced:
        body["replaced"] = [{"index": i, "item": item, "by": by} for i, item, by in sorted(replaced)]
    validate_body("memory.erased", body)
    return body

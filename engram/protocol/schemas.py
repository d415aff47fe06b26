"""Body schemas of the event-kind registry v2 (specs/memory-events.md): one function per
kind, named for it, which :mod:`engram.protocol.kinds` puts in the kind's registry entry.

Every body is validated before anything is signed (agent-side helpers) and again before
anything is stored (the ledger's append path), through
:func:`engram.protocol.kinds.validate_body`. Unknown members are rejected, every
string and list is bounded, numbers are integers in range. Each failure is a
:class:`RejectedEventError` whose check names the kind and member.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engram.protocol.errors import RejectedEventError
from verifier.event import PER_ENTRY
from verifier.mesh import MESH_ID

__all__ = [
    "CATEGORIES",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TURN_CHARS",
    "NAME_PATTERN",
    "REF_JSON_PATTERN",
    "SESSION_JSON_PATTERN",
    "SESSION_PATTERN",
    "SOURCE_TYPES",
    "TIERS",
    "BodyReader",
    "boundary_event",
    "commitment",
    "eval_outcome",
    "key_event",
    "memory_accessed",
    "memory_archived",
    "memory_decay_exempted",
    "memory_distilled",
    "memory_erased",
    "memory_replaced",
    "memory_superseded",
    "memory_tier_changed",
    "memory_written",
    "mesh_created",
    "mesh_granted",
    "mesh_member",
    "mesh_only",
    "pact_outcome",
    "parse_ref",
    "session_closed",
    "session_opened",
    "session_turn",
    "share_revoked",
]

CATEGORIES = ("COMMITMENT", "PERFORMANCE", "LEARNING", "FAILURE", "PREFERENCE", "ANOMALY", "CONTEXT")
TIERS = ("HOT", "WARM", "COLD")
SOURCE_TYPES = ("log", "session", "turn", "pact", "eval", "tool", "url", "external")
ROLES = ("user", "assistant", "system", "tool")
MAX_CONTENT_CHARS = 4000
MAX_TURN_CHARS = 32_000
#: The longest recall query (specs/http-api.md); a longer text is bounded by
#: :func:`engram.protocol.longtext.recall_query` before it is sent.
MAX_QUERY_CHARS = 1000
MAX_TAGS = 16
MAX_PROVENANCE = 16
MAX_DISTILLED_ENTRIES = 50
MAX_ACCESSED = 100

_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TAG = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_REF = re.compile(r"(0|[1-9][0-9]{0,15})\.(0|[1-9][0-9]?)")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}")
NAME_PATTERN = _NAME
SESSION_PATTERN = _SESSION
#: The same rules as JSON Schema ``pattern`` strings (anchored: a JSON Schema pattern
#: searches), for every schema made from them: the HTTP API's and the MCP tools'.
REF_JSON_PATTERN = f"^{_REF.pattern}$"
SESSION_JSON_PATTERN = f"^{_SESSION.pattern}$"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NONCE = re.compile(r"[0-9a-f]{32}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def parse_ref(ref: str) -> tuple[int, int]:
    """An item reference ``"<log index>.<position>"`` (position 0 for single-item events)."""
    if not isinstance(ref, str) or not _REF.fullmatch(ref):
        raise RejectedEventError(f"item reference {str(ref)[:40]!r} is not <index>.<n>", check="body.ref")
    index, pos = ref.split(".")
    return int(index), int(pos)


class BodyReader:
    """Reads members of one body, recording which were read so unknown ones are refused."""

    def __init__(self, kind: str, body: object) -> None:
        if not isinstance(body, Mapping):
            raise RejectedEventError(f"{kind} body must be a JSON object", check=f"body.{kind}")
        self.kind = kind
        self.body = body
        self.seen: set[str] = set()

    def _fail(self, name: str, why: str) -> RejectedEventError:
        return RejectedEventError(f"{self.kind}.{name} {why}", check=f"body.{self.kind}.{name}")

    def get(self, name: str, required: bool) -> Any:
        self.seen.add(name)
        if name not in self.body:
            if required:
                raise self._fail(name, "is required")
            return None
        return self.body[name]

    def text(
        self, name: str, *, max_len: int, required: bool = True, pattern: re.Pattern[str] | None = None
    ) -> Any:
        v = self.get(name, required)
        if v is None and not required:
            return None
        if not isinstance(v, str) or not v.strip() or len(v) > max_len:
            raise self._fail(name, f"must be a non-empty string of at most {max_len} characters")
        if _CONTROL.search(v):
            raise self._fail(
                name, "holds a control character (only tab, newline and carriage return are allowed)"
            )
        if pattern is not None and not pattern.fullmatch(v):
            raise self._fail(name, f"does not match {pattern.pattern}")
        return v

    def integer(self, name: str, lo: int, hi: int, *, required: bool = True) -> Any:
        v = self.get(name, required)
        if v is None and not required:
            return None
        if type(v) is not int or not lo <= v <= hi:
            raise self._fail(name, f"must be an integer in [{lo}, {hi}]")
        return v

    def choice(self, name: str, options: tuple[str, ...], *, required: bool = True) -> Any:
        v = self.get(name, required)
        if v is None and not required:
            return None
        if v not in options:
            raise self._fail(name, f"must be one of {', '.join(options)}")
        return v

    def boolean(self, name: str, *, required: bool = False) -> Any:
        v = self.get(name, required)
        if v is not None and not isinstance(v, bool):
            raise self._fail(name, "must be true or false")
        return v

    def tags(self, name: str = "tags") -> Any:
        v = self.get(name, False)
        if v is None:
            return None
        if not isinstance(v, list) or len(v) > MAX_TAGS or len(set(v)) != len(v):
            raise self._fail(name, f"must be a list of at most {MAX_TAGS} distinct tags")
        for t in v:
            if not isinstance(t, str) or not _TAG.fullmatch(t):
                raise self._fail(name, "holds a tag that is not [a-z0-9][a-z0-9_-]{0,31}")
        return v

    def provenance(self, name: str = "provenance", *, required: bool = False) -> Any:
        v = self.get(name, required)
        if v is None:
            return None
        if not isinstance(v, list) or len(v) > MAX_PROVENANCE:
            raise self._fail(name, f"must be a list of at most {MAX_PROVENANCE} references")
        for p in v:
            if not isinstance(p, Mapping) or set(p) != {"source_type", "source_ref"}:
                raise self._fail(name, "entries are {source_type, source_ref}")
            if p["source_type"] not in SOURCE_TYPES:
                raise self._fail(name, f"source_type must be one of {', '.join(SOURCE_TYPES)}")
            ref = p["source_ref"]
            if not isinstance(ref, str) or not 0 < len(ref) <= 256:
                raise self._fail(name, "source_ref must be a string of 1-256 characters")
            if p["source_type"] in ("log", "turn", "pact", "eval") and not re.fullmatch(
                r"0|[1-9][0-9]{0,15}", ref
            ):
                raise self._fail(name, f"a {p['source_type']} source_ref is a log index")
        return v

    def ref(self, name: str) -> str:
        v = self.get(name, True)
        try:
            parse_ref(v)
        except RejectedEventError as e:
            raise self._fail(name, "must be an item reference <index>.<n>") from e
        return str(v)

    def done(self) -> None:
        extra = set(self.body) - self.seen
        if extra:
            raise RejectedEventError(
                f"{self.kind} has unknown members {sorted(extra)}", check=f"body.{self.kind}.unknown"
            )


def _memory_fields(b: BodyReader) -> None:
    b.choice("category", CATEGORIES)
    b.text("content", max_len=MAX_CONTENT_CHARS)
    b.tags()
    b.integer("confidence", 0, 100)
    b.text("evidence", max_len=MAX_CONTENT_CHARS, required=False)
    b.provenance()
    # When the fact became true (a date the distiller resolved, else the turn's server
    # time); without it, the entry's own server time.
    b.integer("valid_from_us", 0, 2**53 - 1, required=False)


def session_opened(b: BodyReader) -> None:
    b.text("session", max_len=64, pattern=_SESSION)
    b.text("title", max_len=200, required=False)


def session_turn(b: BodyReader) -> None:
    b.text("session", max_len=64, pattern=_SESSION)
    b.integer("turn", 0, 1_000_000)
    b.choice("role", ROLES)
    b.text("content", max_len=MAX_TURN_CHARS)
    tool = b.get("tool", False)
    if tool is not None:
        if (
            not isinstance(tool, Mapping)
            or not set(tool) <= {"name", "arguments", "result"}
            or "name" not in tool
        ):
            raise b._fail("tool", "must be {name, arguments?, result?}")
        if not isinstance(tool["name"], str) or not _NAME.fullmatch(tool["name"]):
            raise b._fail("tool", "name must be a tool name")


def session_closed(b: BodyReader) -> None:
    b.text("session", max_len=64, pattern=_SESSION)
    b.text("summary", max_len=MAX_CONTENT_CHARS, required=False)


def memory_written(b: BodyReader) -> None:
    _memory_fields(b)
    b.text("session", max_len=64, pattern=_SESSION, required=False)
    tier = b.choice("tier", ("HOT", "WARM", "COLD"), required=False)
    if tier == "COLD":
        raise b._fail("tier", "COLD is write-once: it takes records and supersessions, not new memories")
    b.boolean("decay_exempt")


def memory_distilled(b: BodyReader) -> None:
    b.text("session", max_len=64, pattern=_SESSION)
    inp = b.get("input", True)
    if (
        not isinstance(inp, Mapping)
        or set(inp) != {"start", "end", "digest"}
        or type(inp["start"]) is not int
        or type(inp["end"]) is not int
        or not 0 <= inp["start"] <= inp["end"]
        or not isinstance(inp["digest"], str)
        or not _HEX64.fullmatch(inp["digest"])
    ):
        raise b._fail("input", "must be {start, end, digest}: an index range and its hex SHA-256")
    dist = b.get("distiller", True)
    if (
        not isinstance(dist, Mapping)
        or set(dist) != {"name", "version"}
        or not all(isinstance(dist[k], str) and _NAME.fullmatch(dist[k]) for k in ("name", "version"))
    ):
        raise b._fail("distiller", "must be {name, version}")
    _distill_stats(b)
    # The per-entry form (verifier.event.commitment_of): each entry carries its own
    # random nonce, and the body's commitment is over the entries' digests, so one memory
    # can be disclosed without the session's others.
    per_entry = b.choice("disclosure", (PER_ENTRY,), required=False) is not None
    entries = b.get("entries", True)
    if not isinstance(entries, list) or len(entries) > MAX_DISTILLED_ENTRIES:
        raise b._fail(
            "entries", f"must be a list of at most {MAX_DISTILLED_ENTRIES} entries (empty is valid)"
        )
    for i, e in enumerate(entries):
        eb = BodyReader(f"memory.distilled.entries[{i}]", e)
        _memory_fields(eb)
        if per_entry:
            eb.text("nonce", max_len=32, pattern=_NONCE)
        eb.done()


#: The members of a ``memory.distilled`` body's optional ``stats`` (the distiller's
#: instrumentation): integer counts, and whether the token counts were reported by the
#: model's endpoint or estimated.
DISTILL_STATS = (
    "turns",
    "turns_kept",
    "turns_dropped",
    "input_tokens",
    "output_tokens",
    "latency_us",
)


def _distill_stats(b: BodyReader) -> None:
    stats = b.get("stats", False)
    if stats is None:
        return
    if (
        not isinstance(stats, Mapping)
        or set(stats) != {*DISTILL_STATS, "tokens"}
        or not all(type(stats[k]) is int and 0 <= stats[k] <= 2**53 - 1 for k in DISTILL_STATS)
        or stats["tokens"] not in ("reported", "estimated")
        or stats["turns_kept"] + stats["turns_dropped"] != stats["turns"]
    ):
        raise b._fail(
            "stats",
            "must be {turns, turns_kept, turns_dropped, input_tokens, output_tokens, latency_us: "
            "non-negative integers with kept + dropped = turns; tokens: reported or estimated}",
        )


def memory_tier_changed(b: BodyReader) -> None:
    b.ref("item")
    src = b.choice("from", TIERS)
    dst = b.choice("to", TIERS)
    if src == dst:
        raise b._fail("to", "must differ from 'from'")
    b.text("rule", max_len=64, pattern=_NAME)
    b.integer("policy_version", 1, 1_000_000)
    if b.get("confirms", False) is not None:
        b.ref("confirms")
    b.integer("not_before_us", 0, 2**53 - 1, required=False)
    b.integer("last_activity_us", 0, 2**53 - 1, required=False)


def memory_superseded(b: BodyReader) -> None:
    b.ref("item")
    b.text("content", max_len=MAX_CONTENT_CHARS)
    b.text("reason", max_len=MAX_CONTENT_CHARS)
    b.integer("confidence", 0, 100, required=False)
    b.tags()


#: The first policy version whose ``memory.replaced`` names memories by reference and leaf
#: hash only; version 1 bodies copied both values.
REPLACED_BY_DIGEST = 2


def memory_replaced(b: BodyReader) -> None:
    """A policy decision: ``by`` states a new value of the attribute ``item`` stated, so
    ``item`` is no longer current (both stay; ledger.memory.facts).

    From policy version 2 the body names each memory by its reference and the leaf hash of
    the entry that holds it (``item_leaf``, ``by_leaf``: SHA-256 of 0x00 and the leaf, whose
    body commitment is salted), never by its text: an erased value leaves no copy here.
    Version 1 bodies, which logs written before issue 40 hold, copied the two values
    (``subject``, ``attribute``, ``was``, ``now``); an erasure of either memory takes such a
    body with it and carries its decision (engram.protocol.erasure)."""
    old = b.ref("item")
    if b.ref("by") == old:
        raise b._fail("by", "must differ from 'item'")
    b.text("rule", max_len=64, pattern=_NAME)
    version = b.integer("policy_version", 1, 1_000_000)
    if version < REPLACED_BY_DIGEST:
        b.text("subject", max_len=64)
        b.text("attribute", max_len=96)
        b.text("was", max_len=200)
        b.text("now", max_len=200)
        return
    b.text("item_leaf", max_len=64, pattern=_HEX64)
    b.text("by_leaf", max_len=64, pattern=_HEX64)


def memory_decay_exempted(b: BodyReader) -> None:
    b.ref("item")
    b.text("reason", max_len=MAX_CONTENT_CHARS)


def memory_archived(b: BodyReader) -> None:
    b.ref("item")
    b.text("rule", max_len=64, pattern=_NAME)
    b.integer("policy_version", 1, 1_000_000)
    b.integer("not_before_us", 0, 2**53 - 1)
    b.integer("last_activity_us", 0, 2**53 - 1)


def memory_accessed(b: BodyReader) -> None:
    items = b.get("items", True)
    if not isinstance(items, list) or not 0 < len(items) <= MAX_ACCESSED or len(set(items)) != len(items):
        raise b._fail("items", f"must be 1-{MAX_ACCESSED} distinct item references")
    for r in items:
        parse_ref(r)
    # ``query`` (the raw query) is what logs written before issue 25 carry; the ledger now
    # writes only ``query_digest``, a keyed digest (ledger/memory/access.py), and the log
    # refuses both together.
    b.text("query", max_len=MAX_QUERY_CHARS, required=False)
    b.text("query_digest", max_len=64, pattern=_HEX64, required=False)
    if "query" in b.body and "query_digest" in b.body:
        raise b._fail("query", "an access entry carries a query or its digest, not both")
    b.text("session", max_len=64, pattern=_SESSION, required=False)


#: An erasure names at most this many items and erases at most this many further entries.
MAX_ERASED_REFS = 1000
MAX_ERASED_ALSO = 256


def memory_erased(b: BodyReader) -> None:
    """The entry ``index`` and the entries in ``also`` lose their bodies; ``refs`` are the
    items they made or fed (each an item of one of those entries); ``sessions`` are the
    sessions whose distillation is among them (they stay distilled).

    With ``session``, the entry ``index`` is that session's ``session.opened`` or
    ``session.closed``: its title or closing summary goes, the session
    keeps its turns, and no item is named (``refs``, ``also`` and ``sessions`` absent).

    ``replaced``: the erased entries that are version 1
    ``memory.replaced`` decisions (they copied the values of the memories they name), each
    as ``{index, item, by}``: the decision without the values, which replays fold in place
    of the body. An erasure of such an entry alone (its memories stay, or are gone already)
    names no item: ``index`` is that entry, ``replaced`` names it, and ``refs``, ``also``
    and ``sessions`` are absent."""
    index = b.integer("index", 0, 2**53 - 1)
    if b.get("session", False) is not None:
        _session_entry_erased(b)
    elif b.get("refs", False) is None:
        _copy_alone_erased(b, index, _replaced_stand_ins(b))
    else:
        replaced = _replaced_stand_ins(b)
        entries = {index, *_erased_also(b, index)}
        if not {r["index"] for r in replaced} <= entries:
            raise b._fail("replaced", "must name entries the erasure takes (index and also)")
        _erased_refs(b, entries)
        _erased_sessions(b)
    b.text("reason", max_len=MAX_CONTENT_CHARS)


def _session_entry_erased(b: BodyReader) -> None:
    """A session's opening or closing entry: the session, and no item."""
    b.text("session", max_len=64, pattern=_SESSION)
    for name in ("refs", "also", "sessions", "replaced"):
        if b.get(name, False) is not None:
            raise b._fail(name, "must be absent when the erasure names a session entry")


def _copy_alone_erased(b: BodyReader, index: int, replaced: list[Mapping[str, Any]]) -> None:
    """One replacement decision's copy alone: ``replaced`` names exactly ``index``."""
    if [r["index"] for r in replaced] != [index]:
        raise b._fail("refs", "is required unless the erasure takes one replacement decision's copy alone")
    for name in ("also", "sessions"):
        if b.get(name, False) is not None:
            raise b._fail(name, "must be absent when the erasure names no item")


def _erased_also(b: BodyReader, index: int) -> list[int]:
    also = b.get("also", False)
    if also is not None and (
        not isinstance(also, list)
        or not 0 < len(also) <= MAX_ERASED_ALSO
        or not all(type(i) is int and 0 <= i <= 2**53 - 1 for i in also)
        or len(set(also)) != len(also)
        or index in also
    ):
        raise b._fail("also", f"must be 1-{MAX_ERASED_ALSO} distinct log indices other than index")
    return list(also or ())


def _erased_refs(b: BodyReader, entries: set[int]) -> None:
    refs = b.get("refs", True)
    if not isinstance(refs, list) or not 0 < len(refs) <= MAX_ERASED_REFS or len(set(refs)) != len(refs):
        raise b._fail("refs", f"must be 1-{MAX_ERASED_REFS} distinct item references")
    for r in refs:
        if parse_ref(r)[0] not in entries:
            raise b._fail("refs", "must all be items of the erased entries (index and also)")


def _erased_sessions(b: BodyReader) -> None:
    sessions = b.get("sessions", False)
    if sessions is not None and (
        not isinstance(sessions, list)
        or not 0 < len(sessions) <= MAX_ERASED_ALSO
        or not all(isinstance(s, str) and _SESSION.fullmatch(s) for s in sessions)
        or len(set(sessions)) != len(sessions)
    ):
        raise b._fail("sessions", "must be distinct session ids")


def _replaced_stand_ins(b: BodyReader) -> list[Mapping[str, Any]]:
    items = b.get("replaced", False)
    if items is None:
        return []
    if not isinstance(items, list) or not 0 < len(items) <= MAX_ERASED_ALSO + 1:
        raise b._fail("replaced", f"must be 1-{MAX_ERASED_ALSO + 1} replacement decisions")
    seen: set[int] = set()
    for r in items:
        if (
            not isinstance(r, Mapping)
            or set(r) != {"index", "item", "by"}
            or type(r["index"]) is not int
            or not 0 <= r["index"] <= 2**53 - 1
            or r["index"] in seen
        ):
            raise b._fail("replaced", "must be distinct {index, item, by} objects")
        seen.add(r["index"])
        try:
            parse_ref(r["item"])
            parse_ref(r["by"])
        except RejectedEventError as e:
            raise b._fail("replaced", "must name items by reference") from e
        if r["item"] == r["by"]:
            raise b._fail("replaced", "must name two different items")
    return list(items)


def pact_outcome(b: BodyReader) -> None:
    b.text("pact", max_len=128, pattern=_NAME)
    b.choice("result", ("fulfilled", "violated"))
    b.integer("quality", 0, 100)
    b.text("evidence", max_len=MAX_CONTENT_CHARS, required=False)
    b.text("task_type", max_len=64, pattern=_NAME, required=False)


def eval_outcome(b: BodyReader) -> None:
    b.text("eval", max_len=128, pattern=_NAME)
    b.choice("result", ("pass", "fail"))
    b.integer("score", 0, 100)
    b.text("evidence", max_len=MAX_CONTENT_CHARS, required=False)


def boundary_event(b: BodyReader) -> None:
    b.choice("type", ("scope_violation", "safety_intervention", "anomaly"))
    b.text("description", max_len=MAX_CONTENT_CHARS)
    b.integer("severity", 0, 100, required=False)


def commitment(b: BodyReader) -> None:
    b.text("promise", max_len=MAX_CONTENT_CHARS)
    b.text("due", max_len=32, required=False, pattern=re.compile(r"\d{4}-\d{2}-\d{2}"))
    b.text("counterparty", max_len=128, required=False)


#: A mesh id: "<creator agent>/<name>" (the creator's id namespaces it).
MESH_PATTERN = MESH_ID  # verifier.mesh: one rule for the schema and the verifier
_AGENT = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def _mesh(b: BodyReader) -> None:
    b.text("mesh", max_len=97, pattern=MESH_PATTERN)


def _categories(b: BodyReader, name: str) -> None:
    v = b.get(name, True)
    if not isinstance(v, list) or len(set(v)) != len(v) or not all(c in CATEGORIES for c in v):
        raise b._fail(name, f"must be a list of distinct categories ({', '.join(CATEGORIES)})")


def mesh_created(b: BodyReader) -> None:
    _mesh(b)
    b.text("title", max_len=200, required=False)


def mesh_member(b: BodyReader) -> None:
    """mesh.invited and mesh.removed: the mesh and the agent."""
    _mesh(b)
    b.text("agent", max_len=64, pattern=_AGENT)


def mesh_only(b: BodyReader) -> None:
    """mesh.joined, mesh.left, mesh.dissolved: the mesh alone."""
    _mesh(b)


def mesh_granted(b: BodyReader) -> None:
    """A member's grant, replacing its earlier one: the WARM categories it shares with the
    mesh and those it reads from it, and whether memories older than the grant are shared."""
    _mesh(b)
    _categories(b, "share")
    _categories(b, "read")
    b.boolean("backfill")


def share_revoked(b: BodyReader) -> None:
    b.text("token_id", max_len=128, pattern=re.compile(r"[A-Za-z0-9_-]{1,128}"))


def key_event(b: BodyReader) -> None:
    b.text("description", max_len=500, required=False)
    b.text("reason", max_len=500, required=False)
    b.text("by", max_len=64, required=False)

"""The leaves export, as a client reads it: ``GET /v1/log/entries`` answers NDJSON lines
``{"index": i, "leaf": base64, "leaf_hash": hex}`` (specs/http-api.md). An auditor replays the
whole log from it and ``prove`` reads one entry, so a service's answer is parsed strictly:
bounded before it is read, every line an object of exactly those members, indices
consecutive from the one asked for, and each ``leaf_hash`` the RFC 9162 hash of its leaf.
Anything else is a :class:`MalformedError` naming ``export.entry`` (issue 25, finding 10:
these lines went through ``json.loads`` and ``row["leaf"]``, so a bad answer raised an
untyped ``KeyError``)."""

from __future__ import annotations

import hmac

from verifier.errors import MalformedError
from verifier.jcs import parse_strict
from verifier.merkle import leaf_hash
from verifier.note import b64decode_strict

__all__ = ["MAX_EXPORT_ENTRIES", "parse_entry_lines"]

#: The service answers at most this many lines per request.
MAX_EXPORT_ENTRIES = 10_000
#: A leaf is at most 65,535 bytes: base64 and the line's other members fit in this.
_MAX_LINE_BYTES = 90_000
_MEMBERS = {"index", "leaf", "leaf_hash"}


def parse_entry_lines(data: bytes | str, *, start: int, max_entries: int = MAX_EXPORT_ENTRIES) -> list[bytes]:
    """The leaves of an export answer, in order, the first at index ``start``."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_entries * (_MAX_LINE_BYTES + 1):
        raise MalformedError("the export answer is larger than its entries can be", check="export.entry")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) > max_entries:
        raise MalformedError(f"the export answer has more than {max_entries} lines", check="export.entry")
    out: list[bytes] = []
    for n, line in enumerate(lines):
        where = f"export line {n + 1}"
        if len(line) > _MAX_LINE_BYTES:
            raise MalformedError(f"{where} is longer than any entry's line", check="export.entry")
        row = parse_strict(line, max_bytes=_MAX_LINE_BYTES, max_containers=1, max_values=4)
        if not isinstance(row, dict) or set(row) != _MEMBERS:
            raise MalformedError(f"{where} is not {{index, leaf, leaf_hash}}", check="export.entry")
        index, leaf_b64, hash_hex = row["index"], row["leaf"], row["leaf_hash"]
        if type(index) is not int or index != start + n:
            raise MalformedError(f"{where} has index {index!r}, expected {start + n}", check="export.entry")
        if not isinstance(leaf_b64, str) or not isinstance(hash_hex, str) or len(hash_hex) != 64:
            raise MalformedError(f"{where}: leaf and leaf_hash must be strings", check="export.entry")
        leaf = b64decode_strict(leaf_b64, check="export.entry")
        try:
            claimed = bytes.fromhex(hash_hex)
        except ValueError:
            raise MalformedError(f"{where}: leaf_hash is not hex", check="export.entry") from None
        if not hmac.compare_digest(claimed, leaf_hash(leaf)):
            raise MalformedError(f"{where}: leaf_hash is not the hash of its leaf", check="export.entry")
        out.append(leaf)
    return out

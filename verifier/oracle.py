"""Trust-oracle statements (specs/oracle.md): what the log operator vouches for, bound to a
checkpoint.

Trust role: a statement is a C2SP signed note by the *log key*. Its first line names the
statement type (``engram.oracle-agent/v1`` or ``engram.oracle-claim/v1``), which can never
be a checkpoint's origin line followed by a decimal size, so a statement cannot pass for a
checkpoint or a stream-head statement, nor the reverse. It names the origin, the tree size
and root it was computed at (the same as the checkpoint served beside it) and carries its
payload as one line of canonical JSON, so the signed bytes are exact.

An oracle statement is the operator's word about data a caller may not be allowed to see;
an evidence bundle (specs/bundle.md) is what makes a claim checkable without that trust.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from verifier.errors import MalformedError, VerificationError
from verifier.jcs import canonical_bytes, parse_strict
from verifier.note import SignedNote, VerifiedCheckpoint, VerifierKey, check_origin, parse_decimal

__all__ = ["AGENT_HEADER", "CLAIM_HEADER", "OracleStatement", "oracle_text", "verify_oracle_statement"]

AGENT_HEADER = "engram.oracle-agent/v1"
CLAIM_HEADER = "engram.oracle-claim/v1"
_HEADERS = (AGENT_HEADER, CLAIM_HEADER)
MAX_STATEMENT_BYTES = 64 * 1024


class OracleStatementError(VerificationError):
    default_check = "oracle"


def oracle_text(header: str, origin: str, size: int, root: bytes, payload: dict[str, Any]) -> str:
    """The note text of one statement (payload: a JSON object of integers and strings)."""
    if header not in _HEADERS:
        raise MalformedError(f"unknown oracle statement type {header!r}", check="oracle.format")
    body = canonical_bytes(payload).decode("utf-8")
    root_b64 = base64.b64encode(root).decode("ascii")
    return f"{header}\norigin {check_origin(origin)}\nsize {size}\nroot {root_b64}\n{body}\n"


@dataclass(frozen=True, slots=True)
class OracleStatement:
    header: str
    origin: str
    size: int
    root: bytes
    payload: dict[str, Any]


def verify_oracle_statement(
    note: bytes, vkey: VerifierKey, *, checkpoint: VerifiedCheckpoint | None = None
) -> OracleStatement:
    """Verify the log key's signature and the statement's form; with ``checkpoint``, also
    that the statement was made at exactly that checkpoint (same origin, size and root)."""
    if len(note) > MAX_STATEMENT_BYTES:
        raise MalformedError("oracle statement too large", check="oracle.format")
    signed = SignedNote.parse(note)
    signed.verify([vkey])
    lines = signed.text.split("\n")
    if len(lines) != 6 or lines[5] != "" or lines[0] not in _HEADERS:
        raise OracleStatementError("not an oracle statement", check="oracle.format")
    if not (lines[1].startswith("origin ") and lines[2].startswith("size ") and lines[3].startswith("root ")):
        raise OracleStatementError("oracle statement lines are out of order", check="oracle.format")
    origin = check_origin(lines[1][7:])
    if origin != vkey.name:
        raise OracleStatementError("statement origin is not the key's log", check="oracle.origin")
    size = parse_decimal(lines[2][5:], check="oracle.format")
    try:
        root = base64.b64decode(lines[3][5:].encode("ascii"), validate=True)
    except ValueError as e:
        raise OracleStatementError("statement root is not base64", check="oracle.format") from e
    if len(root) != 32:
        raise OracleStatementError("statement root is not 32 bytes", check="oracle.format")
    payload = parse_strict(lines[4].encode("utf-8"), max_bytes=MAX_STATEMENT_BYTES)
    if not isinstance(payload, dict) or canonical_bytes(payload).decode("utf-8") != lines[4]:
        raise OracleStatementError(
            "statement payload is not one canonical JSON object", check="oracle.format"
        )
    if checkpoint is not None and (
        checkpoint.origin != origin or checkpoint.size != size or checkpoint.root != root
    ):
        raise OracleStatementError("statement is not bound to this checkpoint", check="oracle.checkpoint")
    return OracleStatement(header=lines[0], origin=origin, size=size, root=root, payload=payload)

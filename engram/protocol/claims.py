"""Task claims a buyer or platform asks the trust oracle to check (specs/oracle.md):
"completed ``count`` tasks (of ``task_type``) with mean quality ``mean_quality``". Parsed
the same way by the client that sends one and the service that evaluates it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from engram.protocol.errors import MalformedError
from engram.protocol.schemas import NAME_PATTERN as _TASK_TYPE
from verifier.errors import VerificationError
from verifier.event import check_agent_id

__all__ = ["parse_task_claim"]

_CLAIM_KEYS = {"agent", "count", "task_type", "mean_quality"}
_QUALITY = re.compile(r"(?:0|[1-9][0-9]{0,2})\.[0-9]{2}")


def parse_task_claim(claim: Mapping[str, Any]) -> dict[str, Any]:
    """``{"agent", "count", "task_type"?, "mean_quality"?}``: "completed ``count`` tasks (of
    ``task_type``) with mean quality ``mean_quality``" (a decimal string with 2 places)."""
    extra = set(claim) - _CLAIM_KEYS
    if extra or "agent" not in claim or "count" not in claim:
        raise MalformedError(
            "a task claim has agent, count and optional task_type, mean_quality", check="claim"
        )
    out: dict[str, Any] = {"agent": claim["agent"], "count": claim["count"]}
    if not isinstance(out["count"], int) or isinstance(out["count"], bool) or not 0 <= out["count"] < 2**53:
        raise MalformedError("count is a non-negative integer", check="claim")
    try:
        out["agent"] = check_agent_id(claim["agent"])
    except VerificationError as e:
        raise MalformedError("agent is not a valid agent id", check="claim") from e
    if "task_type" in claim:
        if not isinstance(claim["task_type"], str) or not _TASK_TYPE.fullmatch(claim["task_type"]):
            raise MalformedError("task_type is a kind name like 'code-review'", check="claim")
        out["task_type"] = claim["task_type"]
    if "mean_quality" in claim:
        q = claim["mean_quality"]
        if not isinstance(q, str) or not _QUALITY.fullmatch(q) or Decimal(q) > 100:
            raise MalformedError(
                "mean_quality is a decimal string 0-100 with two places, e.g. '94.20'", check="claim"
            )
        out["mean_quality"] = q
    return out

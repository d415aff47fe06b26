"""Records: the event kinds that go straight to COLD memory (commitments, pact and
evaluation outcomes, boundary events), their category, and the item text each body makes
(specs/memory-events.md). The service's projection and a client checking an item both use
this one definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RECORD_KINDS", "record_content"]

#: Records go straight to COLD, never staged in WARM.
RECORD_KINDS = {
    "pact.outcome": "PERFORMANCE",
    "eval.outcome": "PERFORMANCE",
    "boundary.event": "ANOMALY",
    "commitment": "COMMITMENT",
}


def record_content(kind: str, b: Mapping[str, Any]) -> str:
    """The item text a record's body makes (clients recompute it to check an item)."""
    if kind == "pact.outcome":
        text = f"pact {b['pact']} {b['result']}, quality {b['quality']}"
    elif kind == "eval.outcome":
        text = f"evaluation {b['eval']} {b['result']}, score {b['score']}"
    elif kind == "boundary.event":
        text = f"{b['type'].replace('_', ' ')}: {b['description']}"
    else:
        text = f"commitment: {b['promise']}" + (f" (due {b['due']})" if b.get("due") else "")
    evidence = b.get("evidence")
    return f"{text}. {evidence}" if evidence else text

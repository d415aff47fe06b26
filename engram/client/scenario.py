"""The demo scenario's content: support topics and plausible conversations, shared by the
embedded demo (``engram demo``) and the server demo (``engram demo --server``)."""

from __future__ import annotations

import random

__all__ = ["FINDINGS", "TOPICS", "turns"]

TOPICS = ["refund", "shipping delay", "password reset", "invoice", "API quota", "data export"]
_PREFS = ["short answers", "answers in French", "the ticket number in every reply", "bullet points"]
_BLOCKERS = ["the invoice export until finance approves", "the carrier's tracking API", "a legal review"]
_CAUSES = ["a stale cache key", "a missing idempotency key", "a timezone bug in the scheduler"]
FINDINGS = ["latency regression", "cache hit rate", "tokenizer drift", "eval leakage", "retry storm"]


def turns(rng: random.Random, topic: str) -> list[tuple[str, str]]:
    """A plausible support conversation; some turns carry what the distiller looks for."""
    out = [
        ("user", f"Hi, I need help with a {topic} issue on my account."),
        ("assistant", f"Thanks. Let me look up the {topic} details for you."),
    ]
    if rng.random() < 0.6:
        out.append(("user", f"I prefer {rng.choice(_PREFS)}."))
    if rng.random() < 0.5:
        out.append(("tool", f"Error: the {topic} service timed out after 30 seconds."))
    if rng.random() < 0.4:
        out.append(("user", f"We are blocked on {rng.choice(_BLOCKERS)}."))
    if rng.random() < 0.5:
        out.append(("assistant", f"Turns out the root cause was {rng.choice(_CAUSES)}."))
    out.append(("assistant", f"I will follow up on the {topic} case by Friday."))
    for _ in range(rng.randint(2, 6)):
        out.append(("user", f"Thanks, one more question about the {topic}: when will I hear back?"))
        out.append(("assistant", f"You will get an update on the {topic} within a day."))
    return out

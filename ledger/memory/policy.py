"""Tier policies: pure ``decide`` functions that turn state + time + config into events.

Nothing here writes or reads a clock: the caller passes ``now_us`` and appends what comes
back as ``memory.tier_changed`` / ``memory.archived`` events signed by the ledger's policy
key. Replaying the log re-applies those decisions without re-deciding them.

Rules (specs/memory-events.md §4), policy version :data:`POLICY_VERSION`:

At session end (``compact_on_session_end``), for the session's active HOT memories:
  1. decisions and tasks (category COMMITMENT, or tagged ``task``/``decision``) -> COLD;
  2. ``blocker``-tagged -> stay HOT (within the caps);
  3. preferences (category PREFERENCE) -> stay HOT (within the caps);
  4. everything else -> WARM.
  Then, while HOT exceeds ``hot_max_items`` or ``hot_max_tokens``, the least recently
  active non-blocker (then blocker) HOT memory moves to WARM (rule ``hot_cap``).

Sweep (``engram memory compact``), at ``now``:
  5. HOT preferences not accessed for ``inactive_preference_days`` -> WARM;
  6. WARM -> COLD when recency x importance >= ``promote_threshold``;
  7. decay: a WARM memory whose retention window (``warm_min_days`` .. ``warm_max_days``,
     extended by importance) has ended since its last activity is archived, unless it is
     decay-exempt or linked to an action (a pact or evaluation).

Dedup at the target tier: if the target tier already holds an active item with the same
normalized text, the move is written with ``confirms`` and confirms that item instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.memory.state import Item, MemoryState, tokens

__all__ = ["POLICY_VERSION", "Decision", "PolicyConfig", "decide_session_end", "decide_sweep", "importance"]

POLICY_VERSION = 1
DAY_US = 86_400_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyConfig:
    hot_max_tokens: int = 2000
    hot_max_items: int = 50
    inactive_preference_days: int = 7
    compact_on_session_end: bool = True
    warm_min_days: int = 14
    warm_max_days: int = 90
    decay_half_life_days: int = 30
    #: recency x importance, both in [0, 1], scaled to 0-100 (integers only in signed data)
    promote_threshold: int = 60

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> PolicyConfig:
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown policy settings {sorted(unknown)}")
        return cls(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One policy event to append: kind and body (the subject agent is the caller's)."""

    kind: str
    body: dict[str, Any]


def importance(item: Item) -> float:
    """0..1: confidence (50 %), sightings (30 %, saturating at 5: ``confirmations`` counts
    the first write), use (20 %, at 10)."""
    return (
        0.5 * item.confidence / 100
        + 0.3 * min(item.confirmations, 5) / 5
        + 0.2 * min(item.access_count, 10) / 10
    )


def recency(item: Item, now_us: int, half_life_days: int) -> float:
    age_days = max(0, now_us - item.last_activity_us) / DAY_US
    return float(0.5 ** (age_days / half_life_days))


def _move(item: Item, to: str, rule: str, state: MemoryState, *, window_us: int | None = None) -> Decision:
    body: dict[str, Any] = {
        "item": item.ref,
        "from": item.tier,
        "to": to,
        "rule": rule,
        "policy_version": POLICY_VERSION,
    }
    if window_us is not None:
        # Time-based: it applies only if the item is still unused and the window has ended
        # by the server time of the entry that records it (checked again on replay).
        body["last_activity_us"] = item.last_activity_us
        body["not_before_us"] = item.last_activity_us + window_us
    dup = state.find_duplicate(item.agent, to, item.norm)
    if dup is not None and dup.ref != item.ref:
        body["confirms"] = dup.ref
    # Two items with the same text moving in one round: the first lands, and evolve finds
    # it as a duplicate of the second, which then confirms it (no double promotion).
    return Decision(kind="memory.tier_changed", body=body)


def _is_decision(item: Item) -> bool:
    return item.category == "COMMITMENT" or bool({"task", "decision"} & set(item.tags))


def decide_session_end(state: MemoryState, agent: str, session: str, cfg: PolicyConfig) -> list[Decision]:
    """Compaction at session end for the session's active HOT memories (rules 1-4 + caps)."""
    hot = state.hot_items(agent)
    ours = [i for i in hot if i.session == session]
    out: list[Decision] = []
    staying: list[Item] = [i for i in hot if i.session != session]
    for it in sorted(ours, key=lambda i: (i.index, i.ref)):
        if _is_decision(it):
            out.append(_move(it, "COLD", "session_end.decision", state))
        elif "blocker" in it.tags or it.category == "PREFERENCE":
            staying.append(it)
        else:
            out.append(_move(it, "WARM", "session_end.default", state))
    out += _enforce_caps(staying, state, cfg)
    return out


def _enforce_caps(hot: list[Item], state: MemoryState, cfg: PolicyConfig) -> list[Decision]:
    # Evict least recently active first; blockers last.
    order = sorted(hot, key=lambda i: ("blocker" in i.tags, i.last_activity_us, i.index, i.ref))
    count, budget = len(hot), sum(tokens(i.content) for i in hot)
    out = []
    for it in order:
        if count <= cfg.hot_max_items and budget <= cfg.hot_max_tokens:
            break
        out.append(_move(it, "WARM", "hot_cap", state))
        count -= 1
        budget -= tokens(it.content)
    return out


def decide_sweep(state: MemoryState, items: Iterable[Item], now_us: int, cfg: PolicyConfig) -> list[Decision]:
    """Time-based rules 5-7 for one agent's active items, as of ``now_us``."""
    out: list[Decision] = []
    for it in sorted(items, key=lambda i: (i.index, i.ref)):
        if it.status != "active":
            continue
        idle_days = (now_us - it.last_activity_us) / DAY_US
        if it.tier == "HOT" and it.category == "PREFERENCE" and idle_days >= cfg.inactive_preference_days:
            out.append(
                _move(
                    it, "WARM", "inactive_preference", state, window_us=cfg.inactive_preference_days * DAY_US
                )
            )
        elif it.tier == "WARM":
            imp = importance(it)
            score = round(100 * recency(it, now_us, cfg.decay_half_life_days) * imp)
            retention_days = cfg.warm_min_days + (cfg.warm_max_days - cfg.warm_min_days) * imp
            if score >= cfg.promote_threshold:
                out.append(_move(it, "COLD", "warm_to_cold.score", state))
            elif idle_days >= retention_days and not it.decay_exempt and not it.linked_action:
                out.append(
                    Decision(
                        kind="memory.archived",
                        body={
                            "item": it.ref,
                            "rule": "decay.window_end",
                            "policy_version": POLICY_VERSION,
                            "last_activity_us": it.last_activity_us,
                            "not_before_us": it.last_activity_us + int(retention_days * DAY_US),
                        },
                    )
                )
    return out

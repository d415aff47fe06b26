"""Tier policies: pure ``decide`` functions that turn state + time + config into events.

Nothing here writes or reads a clock: the caller passes ``now_us`` and appends what comes
back as ``memory.tier_changed`` / ``memory.archived`` events signed by the ledger's policy
key. Replaying the log re-applies those decisions without re-deciding them.

Rules (specs/memory-events.md §4), policy version :data:`POLICY_VERSION`:

Every compaction (at session end with ``compact_on_session_end``, and ``engram memory
compact``) files **every** eligible memory of the agent, wherever and whenever it was written:
  1. decisions and tasks (category COMMITMENT, or tagged ``task``/``decision``), in HOT or
     WARM -> COLD;
  2. ``blocker``-tagged -> HOT (a WARM blocker moves up), within the caps;
  3. preferences (category PREFERENCE) -> stay HOT (within the caps);
  4. every other HOT memory -> WARM;
  5. HOT preferences not used for ``inactive_preference_days`` -> WARM;
  and then the **caps**: HOT keeps at most ``hot_max_items`` memories and
  ``hot_max_tokens`` tokens, blockers first, then the most recently active; what does not
  fit moves to WARM (rule ``hot_cap``), never dropped. The caps also hold after every write
  that lands in HOT (:func:`decide_caps`).

``engram memory compact`` also applies the WARM time rules, at ``now``:
  6. WARM -> COLD when recency x importance >= ``promote_threshold``;
  7. decay: a WARM memory whose retention window (``warm_min_days`` .. ``warm_max_days``,
     extended by importance) has ended since its last activity is archived, unless it is
     decay-exempt or linked to an action (a pact or evaluation).

Dedup at the target tier: if the target tier already holds an active item with the same
normalized text, the move is written with ``confirms`` and confirms that item instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engram.protocol.scopes import scope_of
from ledger.memory.facts import Fact, fact_of
from ledger.memory.state import RECORD, Item, MemoryState, ref_key
from ledger.memory.tokens import HOT_BLOCK_OVERHEAD, hot_tokens
from ledger.memory.voice import RETRIEVED_SOURCES, Cited, Statement, voice_of

__all__ = [
    "POLICY_VERSION",
    "Decision",
    "PolicyConfig",
    "decide_caps",
    "decide_replacements",
    "decide_session_end",
    "decide_sweep",
    "decide_updates",
    "importance",
    "statement_of",
    "why_not_replaced",
]

#: Version 2: replacements only by the owner's own word, and ``memory.replaced``
#: bodies name memories by reference and leaf hash, never by value.
POLICY_VERSION = 2
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


def _is_fileable_warm(item: Item) -> bool:
    """A WARM memory the filing rules move: a decision or task (to COLD), a blocker (to HOT)."""
    return _is_decision(item) or "blocker" in item.tags


def _filing(
    state: MemoryState,
    hot: Iterable[Item],
    warm: Iterable[Item],
    cfg: PolicyConfig,
    now_us: int | None,
    prefix: str,
) -> list[Decision]:
    """Rules 1-5 and the caps over the agent's active HOT memories and the WARM memories the
    rules file (decisions, tasks, blockers)."""
    out: list[Decision] = []
    staying: list[Item] = []
    for it in sorted(hot, key=lambda i: (i.index, i.ref)):
        idle_days = None if now_us is None else (now_us - it.last_activity_us) / DAY_US
        if _is_decision(it):
            out.append(_move(it, "COLD", f"{prefix}.decision", state))
        elif "blocker" in it.tags:
            staying.append(it)
        elif it.category == "PREFERENCE":
            if idle_days is not None and idle_days >= cfg.inactive_preference_days:
                window = cfg.inactive_preference_days * DAY_US
                out.append(_move(it, "WARM", "inactive_preference", state, window_us=window))
            else:
                staying.append(it)
        else:
            out.append(_move(it, "WARM", f"{prefix}.default", state))
    rising: list[Item] = []
    for it in sorted(warm, key=lambda i: (i.index, i.ref)):
        if _is_decision(it):
            out.append(_move(it, "COLD", f"{prefix}.decision", state))
        elif "blocker" in it.tags:
            rising.append(it)
    return out + _fit_caps(staying, rising, state, cfg)


def _fit_caps(hot: list[Item], rising: list[Item], state: MemoryState, cfg: PolicyConfig) -> list[Decision]:
    """What HOT keeps within the caps: blockers first, then the most recently active; the HOT
    memories left out move to WARM (``hot_cap``), the WARM blockers kept move up."""
    keep: set[str] = set()
    count, budget = 0, HOT_BLOCK_OVERHEAD
    for it in sorted(
        [*hot, *rising], key=lambda i: ("blocker" not in i.tags, -i.last_activity_us, -i.index, i.ref)
    ):
        cost = hot_tokens(it)
        if count < cfg.hot_max_items and budget + cost <= cfg.hot_max_tokens:
            keep.add(it.ref)
            count += 1
            budget += cost
    out = [_move(it, "WARM", "hot_cap", state) for it in hot if it.ref not in keep]
    out += [_move(it, "HOT", "blocker", state) for it in rising if it.ref in keep]
    return out


def decide_session_end(
    state: MemoryState, agent: str, session: str, cfg: PolicyConfig, now_us: int | None = None
) -> list[Decision]:
    """Compaction at the end of ``session``: rules 1-5 (5 when ``now_us`` is given) and the
    caps for every eligible memory of the agent, the session's and any other."""
    return _filing(state, state.hot_items(agent), state.fileable_warm(agent), cfg, now_us, "session_end")


def decide_caps(state: MemoryState, agent: str, cfg: PolicyConfig) -> list[Decision]:
    """The caps alone (after a write that lands in HOT): nothing moves while HOT fits."""
    return _fit_caps(state.hot_items(agent), [], state, cfg)


def statement_of(state: MemoryState, it: Item) -> Statement:
    """What the replacement rules see of ``it`` (ledger.memory.voice): its text, the role and
    text of each session turn it cites (the turns' records), whether its provenance names a
    retrieved source, its tier and exemption. A cited turn that is not there any more (or
    not a turn) leaves nobody's word to read: the memory counts as retrieved."""
    cited: list[Cited] = []
    retrieved = any(p.get("source_type") in RETRIEVED_SOURCES for p in it.provenance)
    for p in it.provenance:
        if p.get("source_type") != "turn":
            continue
        ref = p.get("source_ref", "")
        rec = state.item(it.agent, f"{ref}.0") if ref.isdigit() else None
        if rec is None or rec.tier != RECORD or rec.status != "active" or not rec.tags:
            retrieved = True
            continue
        cited.append(Cited(role=rec.tags[0], text=rec.content))
    return Statement(
        content=it.content,
        cited=tuple(cited),
        retrieved=retrieved,
        tier=it.tier,
        decay_exempt=it.decay_exempt,
    )


def why_not_replaced(
    old: Statement,
    new: Statement,
    *,
    old_value: str | None,
    new_value: str | None,
    moves_to: str | None = None,
) -> str | None:
    """Why the policy may not let ``new`` replace ``old``, or None:

    * ``cold``: COLD memories change only by their owner's own signed correction
      (``memory.superseded``); so does a memory this round files in COLD (``moves_to``);
    * ``decay_exempt``: the owner marked it to be kept as it is;
    * ``retrieved``, ``reported``, ``quoted``, ``hypothetical``: ``new`` does not state the
      fact in its owner's own voice (ledger.memory.voice);
    * ``hot_speaker``: a HOT memory is replaced only by its own speaker's later statement.
    """
    if old.tier not in ("HOT", "WARM") or moves_to == "COLD":
        return "cold"
    if old.decay_exempt:
        return "decay_exempt"
    said = voice_of(new, new_value)
    if not said.own:
        return said.why
    if old.tier == "HOT":
        was = voice_of(old, old_value)
        if said.speaker is None or said.speaker != was.speaker:
            return "hot_speaker"
    return None


#: The leaf hash (hex) of the entry at a log index: how a decision names a memory's entry.
LeafHash = Callable[[int], str]


def decide_replacements(
    state: MemoryState, items: Iterable[Item], *, leaf_hash: LeafHash, moving: Mapping[str, str] | None = None
) -> list[Decision]:
    """A newer value replaces an older one: among active memories that
    state the same fact (subject and attribute, ledger.memory.facts) in the same scope, each
    one is replaced by the next newer one (``since_us``, then log order) that states a
    different value and may replace it (:func:`why_not_replaced`: in its owner's own voice;
    never a COLD or decay-exempt memory; a HOT one only by its own speaker). Memories that
    agree stay. ``moving``: item -> the tier this round's other decisions move it to."""
    moving = moving or {}
    groups: dict[tuple[str, str], list[tuple[Item, Fact]]] = {}
    for it in items:
        fact = fact_of(it.content)
        if it.status == "active" and it.tier != RECORD and fact is not None:
            groups.setdefault((fact.key, scope_of(it.tags)), []).append((it, fact))
    out: list[Decision] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda m: (m[0].since_us, ref_key(m[0].ref)))
        said = {it.ref: statement_of(state, it) for it, _ in members}
        for n, (old, was) in enumerate(members[:-1]):
            for new, now in members[n + 1 :]:
                if now.value == was.value:
                    continue
                why = why_not_replaced(
                    said[old.ref],
                    said[new.ref],
                    old_value=was.value,
                    new_value=now.value,
                    moves_to=moving.get(old.ref),
                )
                if why is None:
                    out.append(_replaced(old, new, "same_fact", leaf_hash))
                    break
    return out


def decide_updates(
    state: MemoryState, agent: str, updates: Iterable[tuple[str, str]], *, leaf_hash: LeafHash
) -> list[Decision]:
    """The distiller said each ``(old, new)``: memory ``new`` states a new value of the fact
    ``old`` states. A ``memory.replaced`` (rule ``distiller_update``) for each pair the rules
    of :func:`why_not_replaced` allow, both still active memories."""
    out: list[Decision] = []
    for old_ref, new_ref in updates:
        old, new = state.item(agent, old_ref), state.item(agent, new_ref)
        if old is None or new is None or old.ref == new.ref:
            continue
        if old.status != "active" or new.status != "active" or RECORD in (old.tier, new.tier):
            continue
        was, now = fact_of(old.content), fact_of(new.content)
        why = why_not_replaced(
            statement_of(state, old),
            statement_of(state, new),
            old_value=was.value if was else None,
            new_value=now.value if now else None,
        )
        if why is None:
            out.append(_replaced(old, new, "distiller_update", leaf_hash))
    return out


def _replaced(old: Item, new: Item, rule: str, leaf_hash: LeafHash) -> Decision:
    """A ``memory.replaced`` body (policy version 2): the two memories by reference and by
    the leaf hash of the entry holding each (salted through its body commitment, so a short
    value cannot be guessed from it), never by value."""
    body = {
        "item": old.ref,
        "item_leaf": leaf_hash(old.index),
        "by": new.ref,
        "by_leaf": leaf_hash(new.index),
        "rule": rule,
        "policy_version": POLICY_VERSION,
    }
    return Decision(kind="memory.replaced", body=body)


def decide_sweep(state: MemoryState, items: Iterable[Item], now_us: int, cfg: PolicyConfig) -> list[Decision]:
    """One on-demand compaction of one agent's active items, as of ``now_us``: rules 1-5 and
    the caps (as at session end), then the WARM time rules 6-7 for what the filing leaves."""
    active = [i for i in items if i.status == "active"]
    hot = [i for i in active if i.tier == "HOT"]
    warm = [i for i in active if i.tier == "WARM"]
    out = _filing(state, hot, [i for i in warm if _is_fileable_warm(i)], cfg, now_us, "compaction")
    filed = {d.body["item"] for d in out}
    for it in sorted(warm, key=lambda i: (i.index, i.ref)):
        if it.ref in filed:
            continue
        idle_days = (now_us - it.last_activity_us) / DAY_US
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

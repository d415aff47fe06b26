"""What an erasure must take with it: the closure of an entry over the memories it fed.

Erasing an entry deletes its body (right to be forgotten; the leaf and every proof stay),
but the text an agent asks to forget is rarely in one body only:

* a **duplicate** write confirmed the memory instead of making one, and its body holds the
  same text (it is in the memory's provenance as ``{"source_type": "log", ...}``);
* a **supersession** chain holds the corrections of the memory;
* a **distillation** holds the memory among others: its body is one unit, so all of that
  entry's memories go, and its session must stay distilled (never distilled again from the
  turns);
* a **turn** fed the memories distilled from it (their provenance cites the turn).

:func:`plan_erasure` follows these links from the entry to a fixed point, over the agent's
items (client and server compute the same plan from the same items), and returns what one
``memory.erased`` event names: the other entries whose bodies go (``also``), every live item
of the erased entries (``refs``) and the sessions whose distillation is erased. The links
followed are entry -> items it made or fed -> the other entries of those items; a memory's
cited turns are not followed (erasing a memory does not erase what was said; erasing the turn
erases both).

A session's ``session.opened`` (its title) and ``session.closed`` (its closing summary) are
erasable too: the plan names the session and no item, and the session
keeps its turns and its state (ledger.memory.state.stand_ins).

A **version 1 replacement decision** (a ``memory.replaced`` written before issue 40) copied
the values of the two memories it names. Each memory lists those entries (``copies``): the
plan takes them with the memory (in ``also``, followed no further: the other memory stays)
and names each one's decision, ``{index, item, by}`` (``replaced``), which replays fold in
place of the erased body: the values go, the decision stays. Such an
entry can also be erased alone (its memories stay, or an erasure before issue 40 left it):
the plan names it and no item. Every other policy decision is a control entry an erasure
never takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engram.protocol.errors import RejectedEventError
from engram.protocol.schemas import MAX_ERASED_ALSO, MAX_ERASED_REFS

__all__ = ["ErasableItem", "ErasableSession", "ErasurePlan", "plan_erasure"]


class ErasableItem(Protocol):
    """The item fields the plan reads (a projection item, or the HTTP item view)."""

    @property
    def ref(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def source_kind(self) -> str: ...
    @property
    def provenance(self) -> Sequence[Mapping[str, str]]: ...
    @property
    def session(self) -> str | None: ...
    @property
    def superseded_by(self) -> str | None: ...
    @property
    def supersedes(self) -> str | None: ...
    @property
    def copies(self) -> Sequence[Mapping[str, Any]]: ...


class ErasableSession(Protocol):
    """The session fields the plan reads (a projection session, or the HTTP session view)."""

    @property
    def session(self) -> str: ...
    @property
    def opened_index(self) -> int: ...
    @property
    def closed_index(self) -> int | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasurePlan:
    index: int
    also: tuple[int, ...]
    refs: tuple[str, ...]
    sessions: tuple[str, ...]
    #: Set when ``index`` is a session's opening or closing entry (its title or summary).
    session: str | None = None
    #: The version 1 replacement decisions among the erased entries: (index, item, by).
    replaced: tuple[tuple[int, str, str], ...] = ()


def _entry_of(ref: str | None) -> int | None:
    return None if ref is None else int(ref.split(".", 1)[0])


def plan_erasure(
    index: int, items: Iterable[ErasableItem], agent_sessions: Iterable[ErasableSession] = ()
) -> ErasurePlan:
    """The closure of entry ``index`` over ``items`` (all of one agent's items, every tier
    and status, session-turn records included); raises if it names no live item. When
    ``index`` opened or closed one of ``agent_sessions``, the plan erases that entry alone:
    the session's title or closing summary."""
    for s in agent_sessions:
        if index in (s.opened_index, s.closed_index):
            return ErasurePlan(index=index, also=(), refs=(), sessions=(), session=s.session)
    items = list(items)
    copies = _copies(items)
    links = _Links(items)
    entries = links.closure(index)
    live = [it for e in sorted(entries) for it in links.made.get(e, ())]
    if not live:
        if index in copies:  # a version 1 replacement decision alone: its values go
            return ErasurePlan(index=index, also=(), refs=(), sessions=(), replaced=(copies[index],))
        raise RejectedEventError(f"entry {index} holds no memory to erase", check="memory.missing_item")
    taken = {c["index"]: copies[c["index"]] for it in live for c in it.copies if c.get("index") in copies}
    entries |= set(taken)
    _bounded(index, entries)
    if len(live) > MAX_ERASED_REFS:
        raise RejectedEventError(
            f"erasing entry {index} would name more than {MAX_ERASED_REFS} items",
            check="memory.erase_too_large",
        )
    sessions = {it.session for it in live if it.source_kind == "memory.distilled" and it.session}
    return ErasurePlan(
        index=index,
        also=tuple(sorted(entries - {index})),
        refs=tuple(sorted((it.ref for it in live), key=lambda r: tuple(int(x) for x in r.split(".")))),
        sessions=tuple(sorted(sessions)),
        replaced=tuple(taken[i] for i in sorted(taken)),
    )


def _bounded(index: int, entries: set[int]) -> None:
    if len(entries) > MAX_ERASED_ALSO + 1:
        raise RejectedEventError(
            f"erasing entry {index} would take more than {MAX_ERASED_ALSO + 1} entries with it",
            check="memory.erase_too_large",
        )


def _log_sources(it: ErasableItem) -> list[int]:
    """The entries an item cites as its log sources (the entries it confirmed)."""
    return [
        int(p["source_ref"])
        for p in it.provenance
        if p.get("source_type") == "log" and p.get("source_ref", "").isdigit()
    ]


class _Links:
    """The live items of one agent, by the entry that made them, the entries they confirmed
    (log marks) and the session turns they cite."""

    def __init__(self, items: Iterable[ErasableItem]) -> None:
        self.made: dict[int, list[ErasableItem]] = {}
        self.fed: dict[int, list[ErasableItem]] = {}  # entry -> items it confirmed (log marks)
        self.from_turn: dict[int, list[ErasableItem]] = {}  # turn entry -> items citing it
        for it in items:
            if it.status != "erased":
                self._add(it)

    def _add(self, it: ErasableItem) -> None:
        self.made.setdefault(it.index, []).append(it)
        for p in it.provenance:
            if not p.get("source_ref", "").isdigit():
                continue
            if p.get("source_type") == "log":
                self.fed.setdefault(int(p["source_ref"]), []).append(it)
            elif p.get("source_type") == "turn":
                self.from_turn.setdefault(int(p["source_ref"]), []).append(it)

    def touched(self, entry: int) -> list[ErasableItem]:
        """The items erasing ``entry`` takes: those it made or confirmed, and, for a session
        turn, the items citing it."""
        made = self.made.get(entry, [])
        out = [*made, *self.fed.get(entry, ())]
        if any(it.source_kind == "session.turn" for it in made):
            out += self.from_turn.get(entry, [])
        return out

    def closure(self, index: int) -> set[int]:
        """Every entry erasing ``index`` takes with it (bounded: a typed error past the limit)."""
        entries: set[int] = set()
        todo = [index]
        while todo:
            e = todo.pop()
            if e in entries:
                continue
            entries.add(e)
            for it in self.touched(e):
                todo.append(it.index)
                todo += _log_sources(it)
                todo += [i for i in (_entry_of(it.superseded_by), _entry_of(it.supersedes)) if i is not None]
            _bounded(index, entries)
        return entries


def _copies(items: Sequence[ErasableItem]) -> dict[int, tuple[int, str, str]]:
    """Every version 1 replacement entry the items list as copying a value (tombstones
    included: an erasure before issue 40 left them): index -> (index, item, by)."""
    out: dict[int, tuple[int, str, str]] = {}
    for it in items:
        for c in it.copies:
            i, item, by = c.get("index"), c.get("item"), c.get("by")
            if type(i) is int and isinstance(item, str) and isinstance(by, str):
                out[i] = (i, item, by)
    return out

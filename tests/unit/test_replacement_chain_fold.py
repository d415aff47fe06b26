"""The fold of a replacement chain under erasure (issue 40, finding 5), pure: whatever values
of a chain are erased, in one erasure or several, in any order, the newest value left is
current, every older value left is past, and the values left form one linear chain; a
replay of the log as stored after the erasures (the erased bodies gone) gives the same
statuses and links as applying the erasures to the projection that had the bodies."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ledger.memory.state import InMemoryState, LoggedEvent, evolve

JOBS = ("nurse", "pilot", "chef", "baker", "architect", "teacher")
T0 = 1_800_000_000_000_000


def _written(i: int) -> dict[str, Any]:
    return {
        "category": "CONTEXT",
        "content": f"Caroline works as a {JOBS[i]}.",
        "confidence": 70,
        "tier": "WARM",
    }


def _replaced(i: int) -> dict[str, Any]:
    return {"item": f"{2 * (i - 1)}.0", "by": f"{2 * i}.0", "rule": "same_fact", "policy_version": 1}


def _log(n: int, erasures: list[list[int]], *, stored: bool) -> list[LoggedEvent]:
    """Memory i at index 2i, the decision that it replaces memory i-1 at 2i+1 (i >= 1), then
    the erasures. ``stored``: the log as stored after them (the erased bodies gone)."""
    gone = {i for group in erasures for i in group}
    events = []
    for i in range(n):
        body = None if stored and i in gone else _written(i)
        events.append(
            LoggedEvent(index=2 * i, timestamp_us=T0 + i, agent="a", kind="memory.written", body=body)
        )
        if i:
            events.append(
                LoggedEvent(
                    index=2 * i + 1, timestamp_us=T0 + i, agent="a", kind="memory.replaced", body=_replaced(i)
                )
            )
    for k, group in enumerate(erasures):
        body = {"index": 2 * group[0], "refs": [f"{2 * i}.0" for i in group], "reason": "x"}
        if len(group) > 1:
            body["also"] = [2 * i for i in group[1:]]
        events.append(
            LoggedEvent(
                index=2 * n + k, timestamp_us=T0 + 100 + k, agent="a", kind="memory.erased", body=body
            )
        )
    return events


def _fold(events: list[LoggedEvent]) -> dict[str, tuple[str, str | None, str | None]]:
    state = InMemoryState()
    for ev in events:
        evolve(state, ev)
    return {it.ref: (it.status, it.replaces, it.replaced_by) for it in state.all_items()}


@st.composite
def chains(draw: st.DrawFn) -> tuple[int, list[list[int]]]:
    n = draw(st.integers(2, len(JOBS)))
    erased = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    groups: list[list[int]] = []
    for i in erased:  # drawn order: the order refs are named and erasures come
        if groups and draw(st.booleans()):
            groups[-1].append(i)
        else:
            groups.append([i])
    return n, groups


@given(chains())
def test_a_chain_stays_linear_whatever_is_erased(chain: tuple[int, list[list[int]]]) -> None:
    n, erasures = chain
    gone = {i for group in erasures for i in group}
    left = [i for i in range(n) if i not in gone]
    stored = _fold(_log(n, erasures, stored=True))
    for i in gone:
        assert stored[f"{2 * i}.0"][0] == "erased"
    for k, i in enumerate(left):
        status, replaces, replaced_by = stored[f"{2 * i}.0"]
        newer = f"{2 * left[k + 1]}.0" if k + 1 < len(left) else None
        older = f"{2 * left[k - 1]}.0" if k else None
        assert status == ("active" if newer is None else "superseded")
        assert (replaces, replaced_by) == (older, newer)
    assert _fold(_log(n, erasures, stored=False)) == stored


def test_erasing_the_middle_of_three_keeps_the_newest_current() -> None:
    """The issue's case: nurse -> pilot -> chef, erase pilot."""
    stored = _fold(_log(3, [[1]], stored=True))
    assert stored == {
        "0.0": ("superseded", None, "4.0"),
        "2.0": ("erased", None, None),
        "4.0": ("active", "0.0", None),
    }

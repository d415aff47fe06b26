"""The memory wing's rooms (docs/design.md, "The memory wing"): each job of the memory
service in a room of its own, arrows pointing down their order only, none importing the
face that composes them, each small enough to read (issue 41: MemoryService split by job).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MEMORY = Path(__file__).resolve().parents[2] / "ledger" / "memory"

#: The rooms, bottom up: a room may import the rooms before it, never one after it.
ROOMS = ("follower", "decisions", "closing", "door", "block", "recall", "stages", "recaller")
FACE = "service"


def _memory_imports(room: str) -> set[str]:
    tree = ast.parse((MEMORY / f"{room}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ledger.memory."):
            found.add(node.module.removeprefix("ledger.memory."))
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("ledger.memory.")
                for a in node.names
                if a.name.startswith("ledger.memory.")
            )
    return found


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_neither_the_face_nor_a_room_above_it(room: str) -> None:
    above = set(ROOMS[ROOMS.index(room) :]) | {FACE}
    assert not _memory_imports(room) & above


@pytest.mark.parametrize("room", [*ROOMS, FACE])
def test_each_room_stays_under_four_hundred_lines(room: str) -> None:
    lines = (MEMORY / f"{room}.py").read_text(encoding="utf-8").count("\n")
    assert lines < 400, f"ledger/memory/{room}.py has {lines} lines: split it by job"


def test_the_face_only_composes_the_rooms() -> None:
    """MemoryService keeps its public methods for its callers; the work is in the rooms."""
    from ledger.memory.service import MemoryService

    tree = ast.parse((MEMORY / f"{FACE}.py").read_text(encoding="utf-8"))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == MemoryService.__name__]
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno < 300
    for name in (
        "sync",
        "follow",
        "accept",
        "submit",
        "distill",
        "finish_session",
        "hold_caps",
        "compact",
        "recall",
    ):
        assert callable(getattr(MemoryService, name))

"""The ``<memory-context>`` block recall renders (ledger.memory.recall), read back by the
harnesses: its lines are fixed (entries are one line each; memory text cannot start a line
of its own), so its sections can be told apart by their headings.

A harness injects the HOT section once per session (the system prompt, ``SessionStart``) and
recall for each prompt after it; :func:`without_hot` keeps the second from repeating the
first (HOT items appeared in the system prompt and in every prefetch),
and :func:`hot_part` is the block a session starts with when recall ran without a query.
"""

from __future__ import annotations

__all__ = ["HOT_HEADING", "hot_part", "without_hot"]

HOT_HEADING = "## HOT (standing context)"


def _split(block: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """(opening lines, HOT section, other sections, closing lines) of a rendered block."""
    lines = block.rstrip("\n").split("\n")
    head: list[str] = []
    hot: list[str] = []
    rest: list[str] = []
    tail: list[str] = []
    part = head
    for line in lines:
        if line == HOT_HEADING:
            part = hot
        elif line.startswith("## "):
            part = rest
        elif line.startswith(("(note: ", "(as of log size ", "</memory-context>")):
            part = tail
        part.append(line)
    return head, hot, rest, tail


def without_hot(block: str) -> str:
    """``block`` without its HOT section (unchanged if it has none)."""
    head, _hot, rest, tail = _split(block)
    return "\n".join([*head, *rest, *tail]) + "\n"


def hot_part(block: str) -> str:
    """``block`` with its HOT section only, closed (what a session starts with). The notes
    and the log size are left out: inside a session these bytes do not change, so a prompt
    that starts with them keeps its cache (the embedded log's block ended
    unclosed after HOT, the service's with the size line, which moves with every write)."""
    head, hot, _rest, _tail = _split(block)
    return "\n".join([*head, *hot, "</memory-context>"]) + "\n"

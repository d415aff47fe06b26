"""A harness's text of many megabytes (issue 40, finding 7, attacked from outside): the recall
query is derived from its two ends, so the question after a pasted log still leads the query
and the cost stays bounded; a turn is cut at a line break, never inside a token, and the cut is
counted in the last part's marker."""

from __future__ import annotations

import re

from engram.protocol.longtext import MAX_QUERY_CHARS, MAX_TEXT_CHARS, bounded_text, recall_query, turn_parts

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"


def _log(chars: int) -> str:
    line = "INFO export worker wrote batch ok\n"
    return line * (chars // len(line) + 1)


def test_the_query_of_a_text_past_the_bound_keeps_the_question_at_its_end() -> None:
    text = _log(3 * MAX_TEXT_CHARS) + "Why does the nightly zebrafish export stop?"
    query = recall_query(text)
    assert len(query) <= MAX_QUERY_CHARS and "zebrafish" in query


def test_a_text_past_the_bound_is_cut_at_a_line_break_and_the_cut_counted() -> None:
    text = _log(MAX_TEXT_CHARS - 40) + TOKEN + "\n" + _log(500_000)
    kept, dropped = bounded_text(text)
    assert len(kept) <= MAX_TEXT_CHARS and kept.endswith("\n") and kept + text[len(kept) :] == text
    assert dropped == len(text) - len(kept) > 0
    assert TOKEN[:10] not in kept  # the token is on the far side of the cut, not halved by it
    parts = turn_parts(kept, dropped=dropped)
    (cut,) = re.findall(r"\[engram: (\d+) more characters of this turn were cut", parts[-1])
    assert int(cut) >= dropped


def test_a_short_text_cut_before_says_so_in_its_one_part() -> None:
    (part,) = turn_parts("a short turn", dropped=123)
    assert part.startswith("a short turn") and "123 more characters of this turn were cut" in part

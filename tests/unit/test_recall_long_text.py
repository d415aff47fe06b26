"""The recall query derived from a long text and a long turn in parts
(engram.protocol.longtext; issue 40, finding 7): bounded whatever the text, never empty when
the text has something to say, and a turn split so that nothing is lost and no secret is cut
in two."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.protocol.bodies import turn_body
from engram.protocol.longtext import (
    MAX_SEGMENT_CHARS,
    MAX_TURN_PARTS,
    PART_MARKER,
    recall_query,
    storable_turn_text,
    turn_parts,
)
from engram.protocol.redact import redact_secrets
from engram.protocol.schemas import MAX_QUERY_CHARS, MAX_TURN_CHARS

TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(" \n.?!;"),
    max_size=6000,
)
WORDY = st.lists(
    st.sampled_from(
        ["deploy", "staging", "the", "a", "File", "line", "KeyError", "?", ".", "\n", " ", "x" * 300]
    ),
    max_size=2000,
).map(" ".join)


@given(TEXT | WORDY)
@settings(max_examples=300, deadline=None)
def test_a_derived_query_is_bounded_and_made_of_the_texts_own_words(text: str) -> None:
    q = recall_query(text)
    assert len(q) <= MAX_QUERY_CHARS
    if len(text) <= MAX_QUERY_CHARS:
        assert q == redact_secrets(text)[0]
        return
    assert bool(q) == bool(text.strip())  # empty only when the text is
    flat = " ".join(redact_secrets(text)[0].split())
    for line in q.split("\n"):
        assert 0 < len(line) <= MAX_SEGMENT_CHARS and line in flat
    if re.search(r"\w*[^\W\d_]\w*", text) and any(len(t) >= 2 for t in re.findall(r"\w*[^\W\d_]\w*", text)):
        assert re.search(r"[^\W\d_]", q)


def test_the_query_keeps_the_question_and_the_rare_words_of_a_pasted_traceback() -> None:
    frames = "\n".join(
        f'  File "/srv/app/common.py", line {i}, in wrapper\n    return fn(*args)' for i in range(200)
    )
    text = f"Why does checkout fail for tenant acme?\n{frames}\nKeyError: 'invoice_rounding_mode'"
    q = recall_query(text)
    assert len(text) > 10_000 and len(q) <= MAX_QUERY_CHARS
    assert q.startswith("Why does checkout fail for tenant acme?")
    assert q.endswith("KeyError: 'invoice_rounding_mode'")
    assert q.count("common.py") <= 2  # a repeated frame adds nothing after the first


@pytest.mark.parametrize(
    "text",
    [
        "x" * 1_000_000,  # one token, no space: cut into pieces
        "!" * 40_000,  # no term at all: its first segments
        "?\n" * 40_000,
        "\u200b" * 5_000 + " deploy staging " + "\u200b" * 5_000,
        "é" * 3 + " " * 50_000,
    ],
)
def test_crafted_texts_give_a_bounded_non_empty_query(text: str) -> None:
    q = recall_query(text)
    assert 0 < len(q) <= MAX_QUERY_CHARS


def test_a_text_of_white_space_gives_an_empty_query() -> None:
    assert recall_query(" \n\t" * 1000) == ""


def _unmarked(parts: list[str]) -> str:
    return "".join(PART_MARKER.sub("", p) for p in parts)


@given(st.integers(min_value=0, max_value=120_000), st.sampled_from(["a", "ab cd ", "line\n", "p\n\n", "é"]))
@settings(max_examples=60, deadline=None)
def test_turn_parts_hold_the_whole_text_within_the_limit(length: int, unit: str) -> None:
    text = (unit * (length // len(unit) + 1))[:length]
    parts = turn_parts(text)
    assert all(len(p) <= MAX_TURN_CHARS for p in parts)
    assert _unmarked(parts) == text
    assert len(parts) == 1 or all(PART_MARKER.search(p) for p in parts)
    for i, p in enumerate(parts):  # each part is a turn body as it is (nothing more redacted)
        assert not p or turn_body("s", i, "user", p)["content"] == p


def test_a_secret_on_a_part_boundary_is_redacted_whole() -> None:
    token = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
    room = MAX_TURN_CHARS - 200
    text = "x" * (room - 20) + "/" + token + "/" + "y" * 5000  # no space: the cut falls in the token
    assert redact_secrets(text)[0] != text
    parts = turn_parts(text)
    assert len(parts) == 2
    joined = _unmarked(parts)
    assert token[:20] not in joined and token[-16:] not in joined
    assert joined == redact_secrets(text)[0]


def test_a_turn_longer_than_every_part_says_how_much_was_cut() -> None:
    text = "word " * (MAX_TURN_CHARS * (MAX_TURN_PARTS + 2) // 5)
    parts = turn_parts(text)
    assert len(parts) == MAX_TURN_PARTS and all(len(p) <= MAX_TURN_CHARS for p in parts)
    cut = int(re.search(r"\[engram: (\d+) more characters of this turn were cut", parts[-1]).group(1))  # type: ignore[union-attr]
    assert len(_unmarked(parts)) + cut == len(text)


def test_control_characters_and_lone_surrogates_are_made_visible_not_refused() -> None:
    pasted = "\x1b[31mERROR\x1b[0m build failed\x00\x7f\x85 \ud800 done\ttab\r\n"
    (part,) = turn_parts(pasted)
    assert (
        part
        == storable_turn_text(pasted)
        == "\u241b[31mERROR\u241b[0m build failed\u2400\u2421\ufffd \ufffd done\ttab\r\n"
    )
    assert turn_body("s", 0, "user", part)["content"] == part


def test_a_query_carries_no_secret_short_or_long() -> None:
    """Attack on the change: the derived query would send a pasted token to the service and
    its embedder (the log holds none to match)."""
    token = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
    assert recall_query(f"is {token} still valid?") == "is [REDACTED:github_token] still valid?"
    long_text = f"Why does the deploy fail with {token}?\n" + "filler line here\n" * 500
    q = recall_query(long_text)
    assert token[4:20] not in q and "[REDACTED:github_token]" in q

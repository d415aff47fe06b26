"""Query terms (ledger.memory.terms): content words in query order, bounded; recency cues."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledger.memory.terms import MAX_TERMS, STOP_WORDS, asks_for_recency, content_terms


def test_stop_words_are_dropped_and_order_kept() -> None:
    assert content_terms("What did Caroline say about the adoption agency?") == [
        "caroline",
        "adoption",
        "agency",
    ]
    assert content_terms("what did the") == []
    assert content_terms("Zoe zoe ZOE") == ["zoe"]


def test_terms_are_bounded_and_keep_the_first_words() -> None:
    words = [f"w{i}" for i in range(100)]
    got = content_terms(" ".join(words))
    assert len(got) == MAX_TERMS and got == words[:MAX_TERMS]


@given(st.text(max_size=400))
def test_terms_are_word_characters_only(query: str) -> None:
    for t in content_terms(query):
        assert t.isalnum() or "_" in t
        assert t not in STOP_WORDS and len(t) >= 2


def test_recency_cues() -> None:
    assert asks_for_recency("What is Jon's latest job?")
    assert asks_for_recency("Where does she live now")
    assert asks_for_recency("what happened the last time we met")
    assert not asks_for_recency("Where did Jon work as a baker?")
    assert not asks_for_recency("knowledge of snowboarding")  # 'now' inside a word is not a cue

"""Issue 42, Deliver 4: the default distiller wrote 2.3 memories per turn on LongMemEval, each
longer than a third of its turns, that read badly: "The user said that Remember: our staging
DB is postgres 16 on port 5433.", "The assistant said that we deploy on Tuesdays.", "Noted
said that Invoices go out as PDF attachments.", one memory per sentence of a long reply;
and an assistant's "I will note that staging uses postgres 16" became a COLD commitment."""

from __future__ import annotations

from typing import Any

import pytest

from bench.commitment_set import HALVES, STATEMENTS, score
from ledger.memory.distill import RuleBasedDistiller, Turn
from ledger.memory.tokens import count_tokens

T0 = 1_683_000_000_000_000


def _distill(*lines: tuple[str, str]) -> list[dict[str, Any]]:
    turns = [Turn(index=10 + n, turn=n, role=r, content=c, timestamp_us=T0) for n, (r, c) in enumerate(lines)]
    return RuleBasedDistiller().distill("s-1", turns)


def _texts(*lines: tuple[str, str]) -> list[str]:
    return [str(e["content"]) for e in _distill(*lines)]


def test_a_directive_in_front_is_not_reported_as_said() -> None:
    [text] = _texts(("user", "Remember: our staging DB is postgres 16 on port 5433."))
    assert "Remember" not in text and "said that" not in text
    assert text == "The user said: \u201cOur staging DB is postgres 16 on port 5433.\u201d"


def test_a_sentence_for_a_group_is_quoted_in_the_speakers_words() -> None:
    [text] = _texts(("assistant", "We deploy on Tuesdays."))
    assert text == "The assistant said: \u201cWe deploy on Tuesdays.\u201d"


def test_a_sentence_initial_word_is_not_a_speaker() -> None:
    [entry] = _distill(("assistant", "Noted: Invoices go out as PDF attachments."))
    assert "Noted" not in entry["content"] and entry["content"].startswith("The assistant said")
    assert entry["tags"] == ["fact"]  # no speaker tag "noted"


@pytest.mark.parametrize(
    "said",
    [
        "I will note that staging uses postgres 16.",
        "I'll check the logs.",
        "If you want, I could send you the report tomorrow.",
        "Let me know your address, and I'll send you the form.",
        "I'll keep that in mind for future recommendations.",
        "I'll provide some tips below.",
    ],
)
def test_noting_checking_and_offers_are_not_commitments(said: str) -> None:
    assert all(e["category"] != "COMMITMENT" for e in _distill(("assistant", said)))


def test_a_real_promise_by_the_agent_is_a_commitment_and_the_users_is_not() -> None:
    [entry] = _distill(("assistant", "I'll send you a summary of your itinerary tomorrow."))
    assert entry["category"] == "COMMITMENT" and entry["tags"] == ["task"]
    assert all(e["category"] != "COMMITMENT" for e in _distill(("user", "I'll send you the list tomorrow.")))


def test_noted_facts_keep_the_fact_without_the_acknowledgement() -> None:
    [text] = _texts(("assistant", "I will note that staging uses postgres 16."))
    assert text == "The assistant said: \u201cStaging uses postgres 16.\u201d"


def test_one_memory_per_turn_not_per_sentence_and_a_repeat_is_not_written_again() -> None:
    entries = _distill(
        (
            "user",
            "I'm planning a trip to Lisbon in June. I've never been to Portugal. Can you suggest hotels?",
        ),
        ("assistant", "Sure! Lisbon is lovely in June."),
        ("user", "Like I said, I'm planning a trip to Lisbon in June! I need a hotel near the river."),
    )
    first = [e for e in entries if e["provenance"][0]["source_ref"] == "10"]
    assert [e["content"] for e in first] == [
        "The user is planning a trip to Lisbon in June. The user has never been to Portugal."
    ]
    assert [e["content"] for e in entries if e not in first][-1] == "The user needs a hotel near the river."


REPLY = """Here are some packing cubes that travellers rate well:

1. **Eagle Creek Pack-It Cubes**: durable, water-resistant, and sold in many sizes for every bag.
2. **eBags Packing Cubes**: a favourite for their sturdy zips and the price of a full set of six.
3. **Minaal Packing Cubes**: made for carry-on luggage from a light, durable and tough fabric.
4. **Peak Design Packing Cubes**: they compress the clothes inside with a second zip around them.

Choose the size that fits your luggage, and roll your clothes to save space and avoid wrinkles."""


def test_a_long_reply_becomes_the_gist_of_what_it_lists() -> None:
    [entry] = _distill(("assistant", REPLY))
    assert entry["content"] == (
        "The assistant listed packing cubes that travellers rate well: Eagle Creek Pack-It Cubes, "
        "eBags Packing Cubes, Minaal Packing Cubes, Peak Design Packing Cubes."
    )
    assert count_tokens(REPLY) >= 3 * count_tokens(entry["content"])


def test_the_labelled_commitment_set_keeps_precision_on_both_halves() -> None:
    """At least 150 statements of real conversations (bench/commitment_set.py); precision
    >= 0.95 on the half the classifier was corrected on and on the held-out half."""
    assert len(STATEMENTS) >= 150
    for half in HALVES:
        part = tuple(s for s in STATEMENTS if s.half == half)
        r = score(part)
        assert r["promises"] >= 10 and r["statements"] - r["promises"] >= 50, r
        assert r["precision"] >= 0.95 and r["recall"] >= 0.5, (half, r)
    drawn = {s.drawn_by for s in STATEMENTS if not s.promise}
    assert drawn >= {"note", "check", "hypo", "user_req", "user_will", "reported"}


def test_a_persons_news_outranks_an_echo_of_the_last_reply() -> None:
    """Regression (LongMemEval 078150f1): a person's statements were weighed by the words of
    the reply before them, so echoes of its tips ("I'll start by setting goals ...") filled
    the memory and the news in the same turn (a charity ride and its goal) was left out; and
    "I initially aimed" became "the user initiallies aimed"."""
    entries = _distill(
        (
            "assistant",
            "Here are tips: set specific goals, track your workouts with a fitness app, celebrate small wins.",
        ),
        (
            "user",
            "I think I'll start by setting specific goals and tracking my workouts with a fitness app. "
            "I'll also celebrate small wins to stay motivated. "
            "I recently rode a charity cycling event where I initially aimed to raise $200 for the hospital.",
        ),
    )
    [memory] = [e["content"] for e in entries if e["provenance"][0]["source_ref"] == "11"]
    assert "the user initially aimed to raise $200" in memory

"""An assistant turn that quotes the user's own "I'll ..." (or any quotation the sentence
splitter cut in two) is not the agent's promise: no permanent COLD commitment from it."""

from __future__ import annotations

import pytest

from ledger.memory.distill import RuleBasedDistiller, Turn
from ledger.memory.promises import is_promise

T0 = 1_683_000_000_000_000


@pytest.mark.parametrize(
    "sentence",
    [
        "You said: I'll send the invoice to the landlord tomorrow.",
        "You told me 'I will send the report to Anna tomorrow.'",
        "You wrote \u2018I will send the report to Anna tomorrow.\u2019",
        "Your message was: I'll call the bank on Monday.",
        "> I will send the report to Anna tomorrow.",
        "`I will send the report to Anna tomorrow`",
        'I will send the report to Anna tomorrow."',
    ],
)
def test_a_quoted_or_reported_i_will_is_not_a_promise(sentence: str) -> None:
    assert not is_promise("assistant", sentence)


def test_the_agents_own_promise_still_is_one() -> None:
    assert is_promise("assistant", "Got it: I'll send the invoice to the landlord tomorrow.")
    assert is_promise("assistant", "I\u2019ll send the users' reports to Anna tomorrow.")


@pytest.mark.parametrize(
    "reply",
    [
        "You said: I'll send the invoice to the landlord tomorrow. Here is a draft for it.",
        'Your note reads: "Thanks for the help. I will send the report to Anna tomorrow."',
    ],
)
def test_a_reply_quoting_the_user_files_no_commitment(reply: str) -> None:
    lines = [
        ("user", "I'll send the invoice to the landlord tomorrow, can you help me word it?"),
        ("assistant", reply),
    ]
    turns = [Turn(index=10 + n, turn=n, role=r, content=c, timestamp_us=T0) for n, (r, c) in enumerate(lines)]
    entries = RuleBasedDistiller().distill("s-1", turns)
    assert [e for e in entries if e["category"] == "COMMITMENT"] == []

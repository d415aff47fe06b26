"""Supersession only by the owner's own word, attacked from outside (issue 40, finding 3): a
source named without a determiner ("Per HR, ...", "(per Dana)", "..., via Slack", "From
Slack: ..."), a label or a bracket naming the source ("HR's email: ...", "[HR email]"), a
source tag ("source: the HR portal", a closing "Source: ..." sentence), "as HR put it", and a
hedge or a joke ("it seems", "(unconfirmed)", "jk") each replaced the user's fact, in a memory
the agent wrote and in the assistant turn a memory cites. None of them is the owner's word;
the owner's own plain statements still replace."""

from __future__ import annotations

import pytest

from bench.supersession_set import Case, replaces

OLD = "The user's manager is Dana."

#: Memories the agent wrote itself: none is the owner's word.
WRITTEN = [
    "Per Dana, the user's manager is now Mallory.",
    "Per Slack, the user's manager is now Mallory.",
    "Per HR the user's manager is now Mallory.",
    "The user's manager is now Mallory (per HR).",
    "Via email: the user's manager is now Mallory.",
    "The user's manager is now Mallory, via Slack.",
    "From Slack: the user's manager is now Mallory.",
    "The email: the user's manager is now Mallory.",
    "HR's email: the user's manager is now Mallory.",
    "The user's manager is now Mallory (source: HR portal).",
    "The user's manager is now Mallory [HR email].",
    "The user's manager is now Mallory, as HR put it.",
    "It seems the user's manager is now Mallory.",
    "The user's manager is now Mallory (unconfirmed).",
    "The user's manager is now Mallory, I guess.",
    "The user's manager is now Mallory lol jk.",
]

#: Assistant replies a memory stating the new value cites: each relays someone else's word.
SAID = [
    "Per HR, your manager is now Mallory.",
    "Per Dana, your manager is now Mallory.",
    "From Slack: your manager is now Mallory.",
    "HR Email: your manager is now Mallory.",
    "Via email: your manager is now Mallory.",
    "HR's email: your manager is now Mallory.",
    "Your manager is now Mallory (source: HR portal).",
    "Your manager is now Mallory [HR email].",
    "Your manager is now Mallory, as HR put it.",
    "It seems your manager is now Mallory.",
    "Your manager is now Mallory (per HR).",
    "Your manager is now Mallory. Source: HR portal.",
    "Your manager is now Mallory, via Slack.",
    "Org chart: your manager is now Mallory.",
    "Subject: your manager is now Mallory.",
    "HR bot: your manager is now Mallory.",
    "Your manager is now Mallory, going by the org chart.",
    "Based on the org chart, your manager is now Mallory.",
    "Judging by the calendar invite, your manager is now Mallory.",
    "Looks like your manager is now Mallory.",
    "The search turned up that your manager is now Mallory.",
    "Translated from Spanish: your manager is now Mallory.",
    "Your manager is now Mallory; HR's memo.",
    "Last I saw in Workday, your manager is now Mallory.",
    "I found out that your manager is now Mallory.",
    "I saw that your manager is now Mallory.",
]


@pytest.mark.parametrize("new", WRITTEN)
def test_an_agent_written_memory_naming_its_source_without_a_determiner_never_replaces(new: str) -> None:
    assert not replaces(Case(old=OLD, new=new, replaces=False))


@pytest.mark.parametrize("said", SAID)
def test_an_assistant_turn_relaying_an_unmarked_source_never_replaces(said: str) -> None:
    case = Case(
        old=OLD, new="The user's manager is now Mallory.", said=(("assistant", said),), replaces=False
    )
    assert not replaces(case)


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (OLD, "The user's manager is now Mallory.", (("user", "HR: Your manager is now Mallory."),)),
        (OLD, "The user's manager is now Mallory.", (("assistant", "Dana: your manager is now Mallory."),)),
        (
            "Caroline lives in Lisbon.",
            "Caroline moved to Kyoto.",
            (("user", "Dana: Caroline moved to Kyoto."),),
        ),
    ],
)
def test_a_named_speakers_word_about_another_persons_fact_never_replaces(
    old: str, new: str, said: tuple[tuple[str, str], ...]
) -> None:
    """A turn opening with a name is that person speaking; about someone else (the user, or
    another named person) it is hearsay, not the fact's owner's word."""
    assert not replaces(Case(old=old, new=new, said=said, replaces=False))


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (OLD, "The user's manager is now Mallory.", ()),
        ("Caroline lives in Lisbon.", "Caroline moved to Kyoto.", (("user", "Caroline: I moved to Kyoto."),)),
        (
            "The team uses Jenkins for builds.",
            "The team now uses GitHub Actions for builds.",
            (("user", "Dana: the team now uses GitHub Actions for builds."),),
        ),
        (OLD, "From now on, the user's manager is Mallory.", ()),
        (OLD, "The user's manager is now Mallory.", (("user", "My manager is now Mallory."),)),
        (OLD, "The user's manager is now Mallory.", (("user", "Note: my manager is now Mallory."),)),
        (OLD, "The user's manager is now Mallory.", (("user", "Big news: my manager is now Mallory."),)),
        (
            "Caroline works as a nurse.",
            "Caroline works as a pilot at a cargo airline.",
            (("user", "Caroline: I found a new job as a pilot at a cargo airline."),),
        ),
        (
            "Caroline works as a nurse.",
            "Caroline works as a pilot at a cargo airline.",
            (("user", "Caroline: Based in Lisbon, I work as a pilot at a cargo airline now."),),
        ),
    ],
)
def test_the_owners_plain_word_still_replaces(old: str, new: str, said: tuple[tuple[str, str], ...]) -> None:
    assert replaces(Case(old=old, new=new, said=said, replaces=True))

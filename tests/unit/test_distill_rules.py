"""Issue 29, finding 2: the rule distiller rewrote rather than distilled. On a long
conversation it kept photo captions and reactions as memories ("John said that [shares a
photo", "Caroline said that Whoa, Mel, that sign looks serious.") and garbled second-person
turns in its third-person rewrite ("Melanie is so proud to be part of the difference you're
making"). Here a conversation in that style (written for this test) is distilled: captions,
reactions and remarks about the listener go, the facts stay with their dates, a sentence
spoken to the listener is quoted with the listener named, and the memories are far shorter
than the turns."""

from __future__ import annotations

from ledger.memory.distill import RuleBasedDistiller, Turn

T0 = 1_683_000_000_000_000  # 2 May 2023
LINES = [
    ("user", "Caroline: Hey Mel! Good to see you! How have you been?"),
    ("assistant", "Melanie: Hey Caroline! I'm swamped with the kids & work. What's up with you?"),
    ("user", "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."),
    ("assistant", "Melanie: Wow, that's cool, Caroline! Did you hear any inspiring stories?"),
    ("user", "Caroline: The support group has made me feel accepted and given me courage."),
    ("assistant", "Melanie: Whoa, Mel, that sign looks serious. [shares a photo of a protest sign]"),
    ("user", "Caroline: Gonna check out counseling programs, which is pretty exciting!"),
    ("assistant", "Melanie: You'd be a great counselor! Your empathy will really help people."),
    ("user", "Caroline: Thanks, Melanie! That's really sweet. Is this your own painting?"),
    ("assistant", "Melanie: Yeah, I painted that lake sunrise last year! [shares a photo of a lake]"),
    ("user", "John: [shares a photo of a dog in the snow]"),
    ("assistant", "Melanie: I'm so proud to be part of the difference you're making. Take care!"),
    ("user", "Caroline: I'll send you the program list by Friday."),
]


def _distill() -> list[dict[str, object]]:
    turns = [
        Turn(index=100 + n, turn=n, role=r, content=c, timestamp_us=T0 + n * 60_000_000)
        for n, (r, c) in enumerate(LINES)
    ]
    return RuleBasedDistiller().distill("s-1", turns)


def test_captions_reactions_and_the_second_person_do_not_become_memories() -> None:
    texts = [str(e["content"]) for e in _distill()]
    joined = " ".join(texts)
    assert "[shares" not in joined and "photo" not in joined  # captions are not things said
    assert "sign looks serious" not in joined and "great counselor" not in joined  # reactions
    assert "Melanie is so proud" not in joined  # no garbled rewrite of a sentence to "you"
    for t in texts:  # "you" only inside a quote that names who it was said to
        if "you" in t.replace("you're", "you").split("\u201c", 1)[0]:
            raise AssertionError(t)
    assert any("support group yesterday (1 May 2023)" in t for t in texts)
    assert any("Caroline is going to check out counseling programs" in t for t in texts)
    assert any("Melanie painted that lake sunrise last year (2022)" in t for t in texts)
    assert any("Caroline will send" in t or "said to Melanie" in t for t in texts)  # the promise stays


def test_memories_are_several_times_shorter_than_their_turns() -> None:
    entries = _distill()
    said = sum(len(c) for _, c in LINES)
    kept = sum(len(str(e["content"])) for e in entries)
    assert said >= 2.5 * kept, (said, kept)
    assert all("valid_from_us" in e for e in entries)  # when each fact became true

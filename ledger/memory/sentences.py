"""The language of a transcript, sentence by sentence: who said it, what is filler, the
first person turned into the speaker's name, relative dates turned into dates. Pure
functions over text, used by the rule-based distiller and the voice of recalled memories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from ledger.memory.terms import STOP_WORDS

__all__ = [
    "FIRST_PERSON",
    "PROMISE_RULE",
    "RELATIVE_DATE",
    "ROLE_SUBJECTS",
    "SECOND_PERSON",
    "STATEMENT_RULES",
    "StatementRule",
    "content_words",
    "is_filler",
    "resolve_dates",
    "speaker_of",
    "strip_captions",
    "subject_tag",
    "third_person",
    "tidy",
]


@dataclass(frozen=True, slots=True)
class StatementRule:
    """A kind of statement worth its own memory (a decision, a preference ...), by pattern
    and by who may say it."""

    category: str
    pattern: re.Pattern[str]
    tags: tuple[str, ...]
    label: str
    confidence: int
    roles: tuple[str, ...] = ("user", "assistant", "tool")


STATEMENT_RULES = (
    StatementRule(
        "COMMITMENT",
        # a decision of the team or the project, not a person's ("I decided to rest")
        re.compile(
            r"\b(we(?: have|'ve)? decided|we(?: have|'ve)? agreed|decision:|the team (?:decided|agreed)|"
            r"(?:it was|it's been|it has been) decided)\b",
            re.I,
        ),
        ("decision",),
        "Decision",
        85,
        # a person's or the agent's word, never a tool's output (a fetched page, a file): a
        # COMMITMENT is filed COLD, permanently, and the trust oracle counts it
        ("user", "assistant"),
    ),
    StatementRule(
        "PREFERENCE",
        re.compile(
            r"\b(i prefer|please always|please never|i like|i don't like|i want you to|always use|never use)\b",
            re.I,
        ),
        ("preference",),
        "Preference",
        80,
        ("user",),
    ),
    StatementRule(
        "CONTEXT",
        re.compile(r"\b(blocked (on|by)|blocker|cannot proceed|can't proceed|waiting on)\b", re.I),
        ("blocker",),
        "Blocker",
        75,
    ),
    StatementRule(
        "FAILURE",
        re.compile(r"\b(error|failed|failure|exception|traceback|timed out)\b", re.I),
        ("failure",),
        "Failure observed",
        70,
        ("tool", "assistant"),
    ),
    StatementRule(
        "ANOMALY",
        re.compile(r"\b(unexpected|anomal\w*|suspicious|inconsistent)\b", re.I),
        ("anomaly",),
        "Anomaly",
        65,
    ),
    StatementRule(
        "LEARNING",
        re.compile(r"\b(learned|turns out|it appears|root cause|the fix (is|was))\b", re.I),
        ("learning",),
        "Learned",
        70,
    ),
)


#: A promise by the agent (ledger.memory.promises decides; the pattern only names it).
PROMISE_RULE = StatementRule(
    "COMMITMENT",
    re.compile(r"\b(?:will|'ll|promise|commit)\b", re.I),
    ("task",),
    "Commitment",
    80,
    ("assistant",),
)


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# -- who said it ------------------------------------------------------------------------

#: "Name: text" at the start of a user or assistant turn names the speaker (harnesses that
#: log a conversation between people put the name there).
_SPEAKER = re.compile(r"\s*([A-Z][\w'\u2019-]*(?: [A-Z][\w'\u2019-]*){0,2}):[ \t]+(?=\S)")
#: Line labels that look like a name before a colon but are not a speaker.
_LABELS = _wordset(
    "error warning note notes decision update todo info q a ps summary re fyi edit tl;dr "
    "question answer result output input step status reminder tip important update fix "
    "user assistant system tool "
    # words that open a sentence before a colon and are no one's name ("Noted: ...")
    "noted remember reminder done confirmed updated understood acknowledged agreed got ok okay "
    "sure yes no correct great thanks context background goal task plan example tip hint "
    "warning caution heads fact facts fyi btw also and but so then now next finally first "
    "second third last important key bonus recap overview conclusion result results "
    "solution problem issue bug fixed resolved learned lesson observation action todo done"
)
#: Who a turn without a named speaker is, by its role.
ROLE_SUBJECTS = {"user": "the user", "assistant": "the assistant", "tool": "a tool", "system": "the system"}


def speaker_of(role: str, content: str) -> tuple[str, str]:
    """(who said a turn of ``role``, its text without the speaker prefix): the name a user
    or assistant turn opens with ("Caroline: ..."), else the role's subject."""
    m = _SPEAKER.match(content) if role in ("user", "assistant") else None
    if m and m.group(1).casefold() not in _LABELS and m.group(1).casefold() not in STOP_WORDS:
        return m.group(1), content[m.end() :]
    return ROLE_SUBJECTS.get(role, role), content


def subject_tag(subject: str) -> str | None:
    """A speaker's name as a tag ("Caroline" -> "caroline"); None for role subjects."""
    if subject in ROLE_SUBJECTS.values():
        return None
    tag = re.sub(r"[^a-z0-9_-]+", "-", subject.casefold()).strip("-")[:32]
    return tag if re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,31}", tag) else None


# -- filler ---------------------------------------------------------------------------------

#: Words that carry no fact on their own (reactions, greetings, intensifiers).
_PHATIC_WORDS = _wordset(
    "hey hi hello bye goodbye thanks thank thx ty wow oh ah aww yeah yes yep nope ok okay sure "
    "great awesome amazing cool nice lovely wonderful fantastic incredible glad happy sorry "
    "congrats congratulations haha lol omg totally really super absolutely definitely "
    "exactly indeed agree true right sounds good fun love cute hope hear see soon later "
    "keep posted talk take care luck guess know think mean gosh dear well"
)
_PHATIC = re.compile(
    r"^(thanks|thank you|sounds (great|good|fun|amazing)|that'?s (great|awesome|amazing|so|really|cool|nice)|"
    r"i'?ll keep you posted|talk (soon|later)|see you|take care|good luck|how are you|how have you been|"
    r"nice to|glad to hear|me too|i agree|i know,? right|i hope so|that makes sense|can'?t wait|"
    r"no worries|you too|same here|of course)\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\u2019-]*")
FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'll|i'd|my|me|mine|myself)\b", re.I)


def content_words(sentence: str) -> list[str]:
    return [
        w
        for w in (x.casefold().replace("\u2019", "'") for x in _WORD.findall(sentence))
        if w.split("'")[0] not in STOP_WORDS and w not in _PHATIC_WORDS and len(w) > 1
    ]


#: A bare media caption a harness inlines ("[shares a photo of a sunset]", "[image: ...]"):
#: a description of an attachment, not something anyone said.
_CAPTION = re.compile(
    r"\[(?:[^\[\]]{0,40}\b(?:shares?|shared|sends?|sent|posts?|posted|attach(?:es|ed)?)\b[^\[\]]{0,300}|"
    r"(?:image|photo|picture|video|gif|sticker|attachment|audio)(?::[^\[\]]{0,300})?)\]",
    re.I,
)
SECOND_PERSON = re.compile(r"\b(you|your|yours|yourself|you're|you've|you'll|you'd)\b", re.I)
#: A proper noun inside a sentence (not its first word): a name, a place, a brand.
_PROPER = re.compile(r"(?<=\s)[A-Z][a-z]{2,}")


def strip_captions(text: str) -> str:
    return " ".join(_CAPTION.sub(" ", text).split())


#: Words of a reaction ("that sign looks serious", "the colors blend nicely").
_EVALUATIVE = re.compile(
    r"\b(looks?|sounds?|seems?|nice(?:ly)?|cool|great|beautiful|gorgeous|amazing|awesome|lovely|"
    r"sweet|cute|fun|serious|incredible|wonderful|fantastic|impressive|inspiring|special|perfect|"
    r"stunning|adorable|brave|proud|blend\w*)\b",
    re.I,
)
_WE = re.compile(r"\b(we|we're|we've|we'll|our|us)\b", re.I)


def is_filler(sentence: str, *, chat: bool = False) -> bool:
    """A question, a reaction or small talk: nothing to remember (facts are statements).

    A statement counts when it says something about its speaker (the first person) with
    substance, or carries a number or a name; an exclamation or a remark about the listener
    ("that sign looks serious!", "you're so brave") without one is a reaction, unless it is a
    decision, a commitment, a blocker, ... (the rules). In a conversation between named
    people (``chat``), an evaluation that is neither about the speakers nor anchored by a
    number or a name ("the colors really blend nicely") is a reaction too."""
    s = sentence.strip()
    if s.endswith("?") or _PHATIC.match(s.lstrip("\"'(").strip()):
        return True
    words = content_words(s)
    anchored = bool(any(c.isdigit() for c in s) or _PROPER.search(s))
    first = bool(FIRST_PERSON.search(s))
    remark = s.endswith("!") or bool(SECOND_PERSON.search(s))
    remark = remark or (chat and not _WE.search(s) and bool(_EVALUATIVE.search(s)))
    reaction = not anchored and remark and (not first or SECOND_PERSON.search(s))
    if reaction and not any(r.pattern.search(s) for r in STATEMENT_RULES):
        return True
    return len(words) < (2 if first or anchored else 3)


#: Interjections that open a sentence ("Yeah, I painted that" -> "I painted that").
_INTERJECTION = re.compile(
    r"^(?:(?:yeah|yes|yep|wow|whoa|oh|ooh|well|haha|hah|lol|hey|ok|okay|omg|aww|ah|um|hmm|so|"
    r"honestly|actually|anyway|btw|by the way)\b[,!.]*\s+)+",
    re.I,
)
#: A closing aside after a comma ("..., so cute.", "..., it took forever.", "..., lots of
#: meetings."): a reaction to what the sentence said, without a name, number or "I".
_ASIDE = re.compile(
    r",\s+(?:so|it|it's|that's|which|such|lots of|too|really|haha|lol|ugh|yay)\b(?![^,]*\b(?:i|my|me|we|our)\b)"
    r"[a-z' ]{0,40}[.!]*$"
)
_GONNA = re.compile(r"^(?:gonna|going to|gotta|wanna)\b", re.I)
#: A closing evaluation that adds no fact (", which is pretty exciting!", "and it was so powerful").
_EVALUATION = re.compile(
    r",?\s+(?:and|which|it|that)\s+(?:(?:it|that|this)\s+)?(?:was|is|'s|were|felt|feels|looks?|looked)\s+"
    r"(?:(?:so|really|pretty|very|super|just|totally|quite|such)\s+)*(?:an?\s+)?[a-z]+(?:\s+(?:experience|time|day))?\s*[.!]*$",
    re.I,
)


def tidy(sentence: str, subject: str) -> str:
    """The sentence without opening interjections, with a subject where speech dropped it
    ("Gonna check out programs" -> "<subject> is going to check out programs")."""
    s = _INTERJECTION.sub("", sentence).strip()
    s = _EVALUATION.sub(".", s) if len(s) > 40 else s
    s = _ASIDE.sub(".", s)
    m = _GONNA.match(s)
    if m is not None:
        verb = {"gonna": "is going to", "going to": "is going to", "gotta": "has to", "wanna": "wants to"}
        s = f"{subject} {verb[m.group(0).casefold()]}{s[m.end() :]}"
    return s[:1].upper() + s[1:] if s else s


# -- first person -> the subject, relative dates -> dates -----------------------------------

_ADVERBS = _wordset(
    "really also just still never always usually often sometimes actually totally absolutely "
    "definitely finally even only already recently truly kinda mostly honestly literally "
    "seriously probably certainly rarely"
)
_MODALS = _wordset("can could will would should might must may shall wanna gotta")
_IRREGULAR_PRESENT = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}
_IRREGULAR_PAST = _wordset(
    "was went got saw made took had bought found gave came did felt knew left met ran said sent told "
    "thought won wrote began brought built caught chose drove fell flew forgot grew heard held kept "
    "lost paid put rode sang sat slept sold spent spoke stood swam taught tore understood woke wore "
    "became hit let set cut shut quit upset broke ate drank threw hung lit led fed fought dug"
)


#: Verbs in the present that end like a past ("I need" -> "needs").
_PRESENT_IN_ED = _wordset("need feed proceed succeed exceed speed heed bleed breed seed weed embed shed")


def _third_person(verb: str) -> str:
    low = verb.casefold()
    if low in _IRREGULAR_PRESENT:
        return _IRREGULAR_PRESENT[low]
    past = low.endswith("ed") and low not in _PRESENT_IN_ED
    if len(low) > 4 and low.endswith("ly"):
        return verb  # an adverb before the verb ("I initially aimed"), not a verb
    if low in _MODALS or low in _IRREGULAR_PAST or past or low.endswith("n't") or not low.isalpha():
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 2 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


_CONTRACTIONS = (
    (re.compile(r"\bI(?:'|\u2019)m\b|\bI am\b"), "{s} is"),
    (re.compile(r"\bI(?:'|\u2019)ve\b|\bI have(?= (?:been|had|got|gotten|\w+ed)\b)"), "{s} has"),
    (re.compile(r"\bI(?:'|\u2019)ll\b"), "{s} will"),
    (re.compile(r"\bI(?:'|\u2019)d\b"), "{s} would"),
    (re.compile(r"\bI don(?:'|\u2019)t\b|\bI do not\b"), "{s} doesn't"),
)
_I_VERB = re.compile(r"\bI((?: (?:" + "|".join(sorted(_ADVERBS)) + r"))*) ([A-Za-z']+)")
_POSSESSIVE = re.compile(r"\b(?:my|mine)\b", re.I)
_OBJECT = re.compile(r"\b(?:me|myself)\b", re.I)


def third_person(sentence: str, subject: str) -> str:
    """The sentence with its speaker's first person replaced by the subject, so that the
    memory says who ("I adopted a dog" -> "Caroline adopted a dog")."""
    out = sentence
    for pattern, repl in _CONTRACTIONS:
        out = pattern.sub(repl.format(s=subject), out)
    out = _I_VERB.sub(lambda m: f"{subject}{m.group(1)} {_third_person(m.group(2))}", out)
    out = re.sub(r"\bI\b", subject, out)
    out = _POSSESSIVE.sub(f"{subject}'s", out)
    out = _OBJECT.sub(subject, out)
    return out[:1].upper() + out[1:]


_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
    "couple of": 2, "few": 3,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
RELATIVE_DATE = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|this (?:morning|afternoon|evening)|last night|"
    r"(?:last|next|this) (?:week|weekend|month|year)|"
    r"(?:last|next) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(?:(?:a couple of|a few|couple of|few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,2}) "
    r"(?:day|week|month|year)s? ago))\b",
    re.I,
)


def _fmt(d: date) -> str:
    return f"{d.day} {d.strftime('%B')} {d.year}"


def _month(d: date, delta: int) -> date:
    m = d.month - 1 + delta
    return date(d.year + m // 12, m % 12 + 1, 1)


def _resolve(expr: str, today: date) -> str | None:
    e = expr.casefold()
    if e in ("today", "tonight") or (
        e.startswith("this ") and e.split()[1] in ("morning", "afternoon", "evening")
    ):
        return _fmt(today)
    if e in ("yesterday", "last night"):
        return _fmt(today - timedelta(days=1))
    if e == "tomorrow":
        return _fmt(today + timedelta(days=1))
    when, _, unit = e.partition(" ")
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday())
        start = monday + timedelta(weeks={"last": -1, "this": 0, "next": 1}[when])
        if unit == "weekend":
            return f"{_fmt(start + timedelta(days=5))} to {_fmt(start + timedelta(days=6))}"
        return f"the week of {_fmt(start)}"
    if unit == "month":
        first = _month(today, {"last": -1, "this": 0, "next": 1}[when])
        return f"{first.strftime('%B')} {first.year}"
    if unit == "year":
        return str(today.year + {"last": -1, "this": 0, "next": 1}[when])
    if unit in _WEEKDAYS:
        target = _WEEKDAYS.index(unit)
        if when == "last":
            back = (today.weekday() - target) % 7 or 7
            return _fmt(today - timedelta(days=back))
        ahead = (target - today.weekday()) % 7 or 7
        return _fmt(today + timedelta(days=ahead))
    m = re.fullmatch(r"(.+) (day|week|month|year)s? ago", e)
    if m is None:
        return None
    n = int(m.group(1)) if m.group(1).isdigit() else _NUMBERS.get(m.group(1), 0)
    if m.group(2) == "day":
        return _fmt(today - timedelta(days=n))
    if m.group(2) == "week":
        return f"around {_fmt(today - timedelta(weeks=n))}"
    if m.group(2) == "month":
        earlier = _month(today, -n)
        return f"around {earlier.strftime('%B')} {earlier.year}"
    return f"around {today.year - n}"


def resolve_dates(sentence: str, timestamp_us: int) -> str:
    """Relative dates ("yesterday", "last month", "two weeks ago") followed by the date they
    mean as of the turn's server time, in brackets; unchanged without a time."""
    if timestamp_us <= 0:
        return sentence
    today = datetime.fromtimestamp(timestamp_us / 1e6, tz=UTC).date()

    def sub(m: re.Match[str]) -> str:
        when = _resolve(m.group(0), today)
        return m.group(0) if when is None else f"{m.group(0)} ({when})"

    return RELATIVE_DATE.sub(sub, sentence)

"""Facts that change, and what a query asks about time.

A memory that states a value of an attribute of a subject ("Caroline works as a pilot":
subject Caroline, attribute job, value pilot) is a **fact**. When a newer memory states a
different value for the same subject and attribute, the older one is no longer current:
the service links them with a policy-signed ``memory.replaced`` entry (ledger.memory.policy
:func:`~ledger.memory.policy.decide_replacements`), and both stay in the log.

Precision comes first: a wrong supersession hides a true fact. So a fact is read only from
an explicit statement of one of the attributes below, about a named subject (a name, "the
user", "the assistant", "the team", "the project"), in a sentence that is not a question,
a negation, a wish or a hypothetical ("wants to work as", "used to live in", "might move
to", "no longer"), in a memory short enough to be about that one thing (at most
:data:`MAX_FACT_SENTENCES` sentences, and exactly one fact in it): a memory that also says
something else is never hidden by a change to one of its parts.

:func:`time_intent` reads what a recall query asks about time: the current value (the
default), a past one ("in 2022", "before", "first", "used to", "originally", "earlier"), or
a date ("when did ...").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

__all__ = [
    "ATTRIBUTES",
    "MAX_FACT_SENTENCES",
    "Fact",
    "TimeIntent",
    "asked_fact_keys",
    "attribute_asked",
    "dates_in",
    "fact_key",
    "fact_of",
    "time_intent",
]

MAX_FACT_SENTENCES = 1

_SUBJECT = (
    r"(?P<subject>(?:[Tt]he (?:user|assistant|team|project|client|customer))|[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?)"
)
#: What may stand between the subject and the verb ("Caroline now works as", "Caroline has
#: recently started working as").
_ADV = r"(?:(?:now|currently|recently|just|finally|also|officially) )*"
_VALUE_WORDS = r"[a-z][a-z'-]*(?: [a-z][a-z'-]*){0,3}?"
_END = (
    r"(?=\s+(?:at|for|in|with|since|on|from|and|but|because|to|after|who|which|where|,)\b|\s*[,.;:!)(]|\s*$)"
)
_PLACE = r"[A-Z][\w'-]*(?:[ -][A-Z][\w'-]*){0,2}(?![\w'-])"


def _rx(body: str) -> re.Pattern[str]:
    return re.compile(_SUBJECT + r"(?:'s)? " + _ADV + body)


#: attribute -> the statements that state its value (each has ``subject`` and ``value``).
ATTRIBUTES: dict[str, tuple[re.Pattern[str], ...]] = {
    "job": (
        _rx(
            r"(?:works|is working|has been working|has started working|started working|starts working|"
            r"began working|got a (?:new )?job|has a (?:new )?job|took a (?:new )?job|landed a (?:new )?job|"
            r"was hired|has been hired|got hired|is employed|was promoted to be|was promoted|works now) "
            r"as (?:an? |the )?(?P<value>" + _VALUE_WORDS + r")" + _END
        ),
        re.compile(
            _SUBJECT + r"'s (?:new |current )?(?:job|occupation|profession|role|position) is (?:now )?"
            r"(?:an? |the )?(?P<value>" + _VALUE_WORDS + r")" + _END
        ),
    ),
    "employer": (
        _rx(
            r"(?:works|is working|has been working|started working|began working|got a (?:new )?job|"
            r"took a (?:new )?job|joined|was hired) (?:as (?:an? )?[a-z][a-z'-]*(?: [a-z][a-z'-]*){0,2} )?"
            r"(?:at|for) (?P<value>(?:the |a |an )?" + _PLACE + r")"
        ),
    ),
    "home": (
        _rx(
            r"(?:lives|is living|has been living|now lives|moved|has moved|relocated|has relocated|"
            r"is based|settled) (?:to|in) (?P<value>" + _PLACE + r")"
        ),
        re.compile(_SUBJECT + r"'s (?:new )?(?:home|hometown|city) is (?:now )?(?P<value>" + _PLACE + r")"),
    ),
    "partner": (
        _rx(
            r"(?:is dating|started dating|is seeing|is engaged to|got engaged to|is married to|"
            r"got married to|married) (?P<value>[A-Z][a-z]+)" + _END
        ),
    ),
    "age": (_rx(r"(?:is|turned) (?P<value>\d{1,3}) (?:years old|years of age)\b"),),
}
#: "<subject>'s <attribute> is <value>": attributes named in the text itself.
_POSSESSIVE_ATTRIBUTE = re.compile(
    _SUBJECT + r"'s (?:new |current |preferred |favou?rite )?(?P<attr>phone number|email address|email|"
    r"address|title|manager|boss|team|deadline|salary|rate|budget|time ?zone|pronouns|editor|"
    r"language|car|school|major|diet|schedule|doctor|therapist|coach|nickname|username) "
    r"is (?:now )?(?P<value>[^,;!?]{1,60}?)" + r"(?=\s*[,.;!]|\s*$)"
)
_FAVOURITE = re.compile(
    _SUBJECT + r"'s (?:new |current |all-time )?favou?rite (?P<attr>[a-z]+(?: [a-z]+)?) is (?:now )?"
    r"(?P<value>[^,;!?]{1,60}?)(?=\s*[,.;!]|\s*$)"
)
_PREFERS = _rx(
    r"(?:prefers|likes|enjoys|loves) (?P<value>[a-z][\w' -]{1,40}?) (?:way |much |far )?"
    r"(?:more than|over|to|better than) (?P<other>[a-z][\w' -]{1,40}?)(?=\s*[,.;!]|\s*$)"
)
_USES_FOR = re.compile(
    r"(?:" + _SUBJECT + r" )?(?:decided to use|decided on|switched to|agreed to use|chose|will use|"
    r"now uses?|is using|uses|standardi[sz]ed on) (?P<value>[A-Za-z0-9][\w.+#-]*(?: [A-Z0-9][\w.+#-]*)?) "
    r"(?:for|as) (?:the |our |its |their |all )?(?P<attr>[a-z][a-z -]{2,30}?)(?=\s*[,.;!]|\s*$)"
)
#: A sentence that states a wish, a doubt, a negation or a past state states no current fact.
_HEDGE = re.compile(
    r"\b(not|n't|never|no longer|wants? to|wanted to|would|might|may|could|should|hopes? to|hoping|"
    r"dreams? (?:of|about)|if|unless|thinking (?:of|about)|considering|plans? to|planning|going to|"
    r"used to|wish(?:es)?|maybe|perhaps|probably|someday|former(?:ly)?|previously|once|"
    r"cousin|neighbou?r|brother|sister|mother|father|mom|dad|friend|colleague)\b",
    re.I,
)
#: Capitalised words that are not a subject of their own ("We" is the team's).
_NOT_SUBJECTS = frozenset(
    [
        "i",
        "you",
        "he",
        "she",
        "it",
        "they",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "my",
        "our",
        "his",
        "her",
        "their",
        "its",
        "big",
        "news",
        "today",
        "yesterday",
        "tomorrow",
        "also",
        "so",
        "then",
        "now",
        "well",
        "anyway",
        "decision",
        "update",
        "note",
        "learned",
    ]
)
_SENTENCES = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_ARTICLE = re.compile(r"^(?:the|a|an) ", re.I)


@dataclass(frozen=True, slots=True)
class Fact:
    subject: str
    attribute: str
    value: str

    @property
    def key(self) -> str:
        return fact_key(self.subject, self.attribute)


def fact_key(subject: str, attribute: str) -> str:
    return f"{subject.casefold()}|{attribute}"[:160]


#: Words that end a value ("a nurse again this year": nurse).
_VALUE_STOPS = frozenset(
    [
        "again",
        "this",
        "that",
        "these",
        "those",
        "now",
        "too",
        "also",
        "still",
        "since",
        "today",
        "tonight",
        "yesterday",
        "every",
        "each",
        "last",
        "next",
        "once",
        "full-time",
        "part-time",
        "there",
        "here",
        "so",
        "very",
        "really",
        "then",
        "anymore",
    ]
)


def _norm_value(v: str) -> str:
    words = _ARTICLE.sub("", " ".join(v.split()).casefold()).strip(" '\"").split()
    kept: list[str] = []
    for w in words:
        if w in _VALUE_STOPS:
            break
        kept.append(w)
    return " ".join(kept)


def _subject(m: re.Match[str]) -> str | None:
    subject = m.group("subject")
    if subject is None:
        return None
    low = subject.casefold()
    if low == "we":
        return "the team"
    if low in _NOT_SUBJECTS:
        return None
    return low if low.startswith("the ") else subject


def _sentence_facts(sentence: str) -> list[Fact]:
    s = sentence.strip()
    if not s or s.endswith("?"):
        return []
    return [
        *_attribute_facts(s),
        *_named_attribute_facts(s),
        *_optional(_preference_fact(s)),
        *_optional(_uses_for_fact(s)),
    ]


def _optional(fact: Fact | None) -> list[Fact]:
    return [] if fact is None else [fact]


def _asserted(rx: re.Pattern[str], s: str) -> re.Match[str] | None:
    """``rx``'s match in ``s``, unless a hedge ("maybe", "I think") comes before its end."""
    m = rx.search(s)
    return None if m is None or _HEDGE.search(s[: m.end()]) else m


def _attribute_facts(s: str) -> list[Fact]:
    """One fact per attribute (a job, a home ...): its first pattern that matches decides."""
    out: list[Fact] = []
    for attr, patterns in ATTRIBUTES.items():
        for p in patterns:
            m = p.search(s)
            if m is not None and not _HEDGE.search(s[: m.end()]):
                subject = _subject(m)
                value = _norm_value(m.group("value"))
                if subject is not None and value:
                    out.append(Fact(subject, attr, value))
                break
    return out


def _named_attribute_facts(s: str) -> list[Fact]:
    """ "my <attribute> is <value>", "my favourite <thing> is <value>"."""
    out: list[Fact] = []
    for rx, prefix in ((_POSSESSIVE_ATTRIBUTE, ""), (_FAVOURITE, "favourite ")):
        m = _asserted(rx, s)
        if m is not None:
            attr = prefix + " ".join(m.group("attr").casefold().split())
            subject = _subject(m)
            if subject is not None:
                out.append(Fact(subject, attr, _norm_value(m.group("value"))))
    return out


def _preference_fact(s: str) -> Fact | None:
    m = _asserted(_PREFERS, s)
    if m is None:
        return None
    a, b = _norm_value(m.group("value")), _norm_value(m.group("other"))
    subject = _subject(m)
    return (
        Fact(subject, "prefers " + " or ".join(sorted((a, b))), a) if a != b and subject is not None else None
    )


def _uses_for_fact(s: str) -> Fact | None:
    m = _asserted(_USES_FOR, s)
    if m is None:
        return None
    subject = _subject(m) if m.group("subject") else None
    if subject is None and re.search(r"\bwe\b", s[: m.start() + 40], re.I):
        subject = "the team"
    if subject is None:
        return None
    return Fact(subject, "uses for " + " ".join(m.group("attr").split()), _norm_value(m.group("value")))


@lru_cache(maxsize=8192)
def fact_of(content: str) -> Fact | None:
    """The one changeable fact ``content`` states, or None (no fact, several, or too long to
    be about one thing)."""
    sentences = [s for s in _SENTENCES.findall(content) if s.strip()]
    if not sentences or len(sentences) > MAX_FACT_SENTENCES:
        return None
    found = {f.key: f for s in sentences for f in _sentence_facts(s)}
    if len(found) != 1:
        # "works as a pilot at Acme" states a job and an employer: one fact about work, keyed
        # by the job (the employer changes with it).
        if (
            set(k.split("|")[1] for k in found) == {"job", "employer"}
            and len({k.split("|")[0] for k in found}) == 1
        ):
            return next(f for f in found.values() if f.attribute == "job")
        return None
    return next(iter(found.values()))


# -- what a query asks about time ----------------------------------------------------------

#: Query words that name an attribute (for the attribute facet of recall).
_ASKED = {
    "job": r"jobs?|occupation|profession|career|employ\w*|role|position|for (?:a )?(?:work|living)|"
    r"work(?:s|ed)? as|working as|do (?:for work|now)",
    "employer": r"employer|company|firm|works? (?:at|for)",
    "home": r"live[sd]?|living|home|city|moved?|reside\w*|based",
    "partner": r"dating|partner|boyfriend|girlfriend|married|spouse|husband|wife|engaged",
    "age": r"age|old",
}
_ASKED_RX = {a: re.compile(rf"\b(?:{w})\b", re.I) for a, w in _ASKED.items()}


def attribute_asked(query: str) -> set[str]:
    """The attributes of :data:`ATTRIBUTES` a query asks about ("What is X's job now?": job)."""
    return {a for a, rx in _ASKED_RX.items() if rx.search(query)}


_QUERY_SUBJECT = re.compile(
    r"\b[Tt]he (?:user|assistant|team|project|client|customer)\b|(?<![\w'])[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?"
)
_QUERY_POSSESSIVE = re.compile(r"'s (?:new |current |preferred |favou?rite )?([a-z]+(?: [a-z]+)?)")
_QUESTION_WORDS = frozenset(
    [
        "what",
        "who",
        "whom",
        "whose",
        "which",
        "when",
        "where",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "did",
        "does",
        "do",
        "has",
        "have",
    ]
)


def asked_fact_keys(query: str) -> list[str]:
    """The fact keys ("<subject>|<attribute>") a query may ask about: each subject it names
    (a capitalised name, "the user", ...) with each attribute it asks about. Bounded."""
    subjects: dict[str, None] = {}
    for m in _QUERY_SUBJECT.finditer(query):
        s = m.group(0)
        if s[:1].isupper() or s.casefold().startswith("the "):
            low = s.casefold()
            if low.split()[0] not in _QUESTION_WORDS and low not in _NOT_SUBJECTS:
                subjects[low] = None
    attrs = dict.fromkeys(sorted(attribute_asked(query)))
    for m in _QUERY_POSSESSIVE.finditer(query.casefold()):
        words = [w for w in m.group(1).split() if w not in _VALUE_STOPS and w not in _QUESTION_WORDS]
        for attr in dict.fromkeys([" ".join(words[:1]), " ".join(words)]):
            if attr:
                attrs[attr] = None
                attrs["favourite " + attr] = None
    keys = [fact_key(s, a) for s in list(subjects)[:4] for a in list(attrs)[:8]]
    return keys[:32]


@dataclass(frozen=True, slots=True)
class TimeIntent:
    """``mode``: ``now`` (the current value, the default), ``then`` (what was true in the
    past: ``start_us``..``end_us`` when the query names a period, else any earlier value),
    or ``when`` (the question asks for a date: memories with a resolved date rank first)."""

    mode: str
    start_us: int | None = None
    end_us: int | None = None


_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_YEAR = re.compile(
    r"\b(?:in|during|back in|around|of|by)\s+(?:(?P<month>"
    + "|".join(_MONTHS)
    + r")\s+)?(?P<year>(?:19|20)\d\d)\b",
    re.I,
)
_STRONG_PAST = re.compile(
    r"\b(before|used to|originally|initially|at first|earlier|previous(?:ly)?|former(?:ly)?|prior to|back when)\b|"
    r"\bwhat (?:did|was) \w+(?:'s)? first\b|\bfirst (?:job|home|city|car|pet|house|apartment)\b",
    re.I,
)
_WHEN = re.compile(
    r"^\s*(?:when|what (?:date|day|month|year)|which (?:date|day|month|year)|how long ago)\b", re.I
)


def _us(year: int, month: int = 1) -> int:
    return int(datetime(year, month, 1, tzinfo=UTC).timestamp() * 1_000_000)


def time_intent(query: str) -> TimeIntent:
    m = _YEAR.search(query)
    if m is not None:
        year = int(m.group("year"))
        if m.group("month"):
            month = _MONTHS.index(m.group("month").casefold()) + 1
            end = _us(year + (month == 12), month % 12 + 1)
            return TimeIntent("then", _us(year, month), end)
        return TimeIntent("then", _us(year), _us(year + 1))
    if _WHEN.search(query):
        return TimeIntent("when")
    if _STRONG_PAST.search(query):
        return TimeIntent("then")
    return TimeIntent("now")


_DATE = re.compile(
    r"\b(?:(?P<day>\d{1,2}) )?(?P<month>"
    + "|".join(m.capitalize() for m in _MONTHS)
    + r") (?P<year>(?:19|20)\d\d)\b"
)


_YEAR_ONLY = re.compile(r"\((?:around |in )?((?:19|20)\d\d)\)|\b(?:in|around|since|during) ((?:19|20)\d\d)\b")


def dates_in(content: str) -> list[int]:
    """Every date the text states ("8 May 2023", "May 2023", "(2022)", "in 2019"), as the
    microseconds (UTC) of its first day; bounded to the first eight."""
    out: list[int] = []
    for m in _DATE.finditer(content):
        month = _MONTHS.index(m.group("month").casefold()) + 1
        try:
            out.append(
                int(
                    datetime(int(m.group("year")), month, int(m.group("day") or 1), tzinfo=UTC).timestamp()
                    * 1e6
                )
            )
        except ValueError:
            continue
    for m in _YEAR_ONLY.finditer(content):
        out.append(_us(int(m.group(1) or m.group(2))))
    return out[:8]

"""The gist of a turn: its sentences, which of them say something, and what a long reply comes
to. Pure functions over text, used by the rule-based distiller (ledger.memory.distill).

* :func:`sentences`: a turn's sentences, across markdown (list markers, emphasis, headings)
  and abbreviations, without cutting "e.g." or "3.5".
* :func:`is_request`: a request to the listener or a question ("Can you ...", "Please ...",
  "I'm looking for suggestions"): nothing to remember about the speaker.
* :func:`strip_directive`: "Remember: ...", "Note that ...", "FYI, ..." without the directive.
* :func:`list_gist`: what a reply that lists things lists ("packing cubes: Eagle Creek,
  eBags, ...").
* :func:`salience`: how much a sentence carries (names, numbers, content words, words of the
  question it answers).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from ledger.memory.sentences import content_words

__all__ = [
    "anchors",
    "is_request",
    "list_gist",
    "near_duplicate",
    "salience",
    "sentences",
    "strip_directive",
    "unmark",
]

_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "vs",
        "mr",
        "mrs",
        "ms",
        "dr",
        "st",
        "jr",
        "sr",
        "no",
        "approx",
        "fig",
        "inc",
        "ltd",
        "co",
        "dept",
        "est",
        "min",
        "max",
        "mt",
        "ft",
    ]
)
_BREAK = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]*]*\s+(?=[\"'\u201c\u2018(\[*]*[A-Z0-9])")
_LIST_MARK = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|(?:\d{1,3}[.)]|[-*\u2022+])\s+)+")
_EMPHASIS = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`")


def unmark(line: str) -> str:
    """A line without its markdown: list markers, headings, emphasis, code ticks."""
    return " ".join(_LIST_MARK.sub("", _EMPHASIS.sub("", line)).split())


def sentences(text: str) -> list[str]:
    """The sentences of ``text``: each line (a list item, a paragraph) split after ``.!?``
    before a capital or a digit, unless the period ends an abbreviation."""
    out: list[str] = []
    for raw in text.splitlines():
        line = unmark(raw)
        if not line:
            continue
        start = 0
        for m in _BREAK.finditer(line):
            word = line[: m.start()].rsplit(None, 1)[-1].rstrip(".").casefold() if m.start() else ""
            if word in _ABBREVIATIONS or len(word) == 1:
                continue
            out.append(line[start : m.start()].strip())
            start = m.end()
        out.append(line[start:].strip())
    return [s for s in out if s]


_REQUEST = re.compile(
    r"^(?:(?:so|and|but|also|ok|okay|now|well|hi|hello|hey)[,!.]?\s+)*(?:"
    r"(?:can|could|would|will|do|did|does|are|is|have|has|should|shall|may|might)\s+(?:you|u|we|i|it|there|they)\b|"
    r"please\b|pls\b|kindly\b|help\s+me\b|tell\s+me\b|give\s+me\b|show\s+me\b|let\s+me\s+know\b|"
    r"i\s+(?:need|want|would\s+like|'d\s+like|\u2019d\s+like)\s+(?:you|your|some|a\s+few|help|advice|ideas|"
    r"suggestions|recommendations|tips|information|info|to\s+know|to\s+learn|to\s+get|to\s+find\s+out)\b|"
    r"i(?:'m|\u2019m|\s+am|\s+was)\s+(?:wondering|curious|looking\s+for\s+(?:some\s+|a\s+few\s+|more\s+)?"
    r"(?:recommendations|suggestions|ideas|tips|advice|help|information|info|resources|ways|options))\b|"
    r"any\s+(?:tips|ideas|suggestions|recommendations|advice|thoughts)\b|"
    r"(?:what|how|why|where|when|which|who)\b|"
    r"(?:write|create|make|list|explain|suggest|recommend|provide|generate|describe|compare|summari[sz]e|"
    r"translate|rewrite|draft|design|outline|develop|find|continue|add|remove|change|convert|act\s+as|"
    r"imagine|pretend|consider|include|use|keep|give|name|identify|analy[sz]e|discuss|elaborate|expand|"
    r"brainstorm|plan|edit|proofread|improve|fix|check|review|calculate|define|share)\b)",
    re.I,
)


def is_request(sentence: str) -> bool:
    """A question, or a request or instruction to the listener: "Can you ...", "Please ...",
    "Write a poem about ...", "I'm looking for recommendations ..."."""
    s = sentence.strip()
    return s.endswith("?") or bool(_REQUEST.match(s))


_DIRECTIVE = re.compile(
    r"^(?:(?:remember|reminder|note|nb|n\.b\.|fyi|important|heads\s+up|for\s+the\s+record|just\s+so\s+you\s+know|"
    r"by\s+the\s+way|btw|please\s+note|please\s+remember|keep\s+in\s+mind|just\s+a\s+heads\s+up|for\s+context|"
    r"context|update|quick\s+update|noted|understood|acknowledged|got\s+it|will\s+do)\s*(?:that\b|[:,\u2014-])\s*)+",
    re.I,
)


#: An acknowledgement in front of what it acknowledges ("I will note that x" -> "x").
_NOTING = re.compile(
    r"^(?:(?:ok|okay|sure|got it|thanks|thank you)[,!.]?\s+)?i(?:'ll|\u2019ll|\s+will|\s+shall)\s+"
    r"(?:make\s+(?:a\s+)?note|note|remember|keep\s+in\s+mind|bear\s+in\s+mind)\s+(?:of\s+)?that\s+",
    re.I,
)


def strip_directive(sentence: str) -> str:
    """The sentence without a directive to the listener in front ("Remember: x" -> "x") or an
    acknowledgement ("I will note that x" -> "x")."""
    s = _NOTING.sub("", _DIRECTIVE.sub("", sentence).strip()).strip()
    return s[:1].upper() + s[1:] if s else s


_PROPER = re.compile(r"(?<=[\s(\"'\u201c])(?!I[\'\u2019])[A-Z][\w'\u2019&.-]+")
_NUMBER = re.compile(r"\d")


def salience(sentence: str, asked: Collection[str] = ()) -> float:
    """How much a sentence carries: names and numbers first, then the words of the question
    it answers (``asked``), then its other content words."""
    words = content_words(sentence)
    names = len(_PROPER.findall(" " + sentence))
    numbers = len(_NUMBER.findall(sentence))
    overlap = sum(1 for w in set(words) if w in asked)
    return 2.0 * names + min(numbers, 4) + 1.5 * overlap + 0.2 * len(words)


def anchors(sentence: str) -> list[str]:
    """A sentence's words for :func:`near_duplicate`: its content words and its numbers
    (marked ``#``: another number is another fact)."""
    return [*content_words(sentence), *(f"#{n}" for n in re.findall(r"\d+", sentence))]


def near_duplicate(words: Collection[str], seen: list[frozenset[str]]) -> bool:
    """Whether ``words`` (:func:`anchors`) are nearly all (80 %) in a sentence already kept,
    every number among them."""
    mine = frozenset(words)
    numbers = frozenset(w for w in mine if w.startswith("#"))
    return bool(mine) and any(numbers <= s and len(mine & s) >= 0.8 * len(mine) for s in seen)


_ITEM = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*\u2022+])\s+(?P<body>\S.*)$")
_HEAD_END = re.compile(r"\*\*(?=\s*[:\-\u2013\u2014(])|:\s|\s[-\u2013\u2014]\s|\s\(|:$")
_LEAD = re.compile(
    r"^(?:.*?,\s*)?(?:here\s+(?:are|is)|here's|these\s+are|below\s+are|some\s+of\s+the|there\s+are)\s+"
    r"(?:(?:some|a\s+few|several|a\s+list\s+of|the|my|our)\s+)*(?P<topic>.+?):?$",
    re.I,
)
_TOPIC_END = re.compile(r"(?:\s+(?:include|includes|are|is|are as follows))?\s*:?$", re.I)
#: At most this many items and characters in a list's gist.
GIST_ITEMS = 8
GIST_CHARS = 260


def _head(body: str) -> str:
    """A list item's head: its bold lead or the words before its first colon or dash."""
    bold = re.match(r"^\*\*(.+?)\*\*", body)
    if bold:
        head = bold.group(1)
    else:
        m = _HEAD_END.search(body)
        head = body[: m.start()] if m else body
    head = unmark(head).strip(" :.-")
    words = head.split()
    return " ".join(words[:7]) if len(words) <= 9 else ""


def list_gist(text: str) -> tuple[str, list[str]] | None:
    """(what the list is of, its items' heads) for a text with at least three list items,
    else None. The topic is the lead line before the first item ("Here are some packing
    cubes:" -> "packing cubes"), empty without one."""
    lines = text.splitlines()
    heads: list[str] = []
    topic = ""
    first = None
    for n, line in enumerate(lines):
        m = _ITEM.match(line)
        if m is None:
            continue
        if first is None:
            first = n
        head = _head(m.group("body"))
        if head and head.casefold() not in (h.casefold() for h in heads):
            heads.append(head)
    if first is None or len(heads) < 3:
        return None
    for line in reversed(lines[:first]):  # the nearest lead that presents the list
        lead = sentences(unmark(line))
        m = _LEAD.match(lead[-1]) if lead and lead[-1].endswith(":") else None
        if m is not None:
            topic = _TOPIC_END.sub("", m.group("topic")).strip()
            break
    kept: list[str] = []
    for h in heads:
        if len(kept) >= GIST_ITEMS or sum(len(k) + 2 for k in kept) + len(h) > GIST_CHARS:
            break
        kept.append(h)
    return topic, kept

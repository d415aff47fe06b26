"""Long texts from a harness: the recall query derived from a prompt, and a turn in parts.

A harness hands Engram whatever the user typed or pasted: a traceback, a diff, a whole file.
Two limits meet it (specs/memory-events.md §1, specs/http-api.md): a recall query is at most
:data:`MAX_QUERY_CHARS` characters and a turn's text at most ``MAX_TURN_CHARS``. Neither may
make a prompt be refused (any prompt over 1,000 characters made the
prompt hook fail before the turn was logged). Both functions here are pure and bounded, so
the hooks, the MCP server, the Hermes provider and the SDK derive the same thing.

**The recall query** (:func:`recall_query`). Secrets are redacted from the text first (the
log holds none to match, and a query must not carry one to the service or its embedder); a
text within the limit is then the query as it is.
A longer one is cut into segments (its lines; a long line into its sentences; a long
sentence into word-bounded pieces of at most :data:`MAX_SEGMENT_CHARS`; white space folded,
a repeated segment kept once), and the query is made of whole segments, in their order in
the text:

1. the first and the last segment that carry a term (a question is usually at one end of a
   pasted block: "why does this fail?" before or after the traceback);
2. then, while the limit allows, the segment adding the most *weight per character* of
   terms not chosen yet, a term weighing ``1 / (the number of segments it occurs in)``: a
   word every line of a traceback repeats ("File", "line") weighs little, an error name or
   an identifier that occurs once weighs 1. Ties go to the earlier segment.

A term is a run of letters, digits and underscores holding a letter, at least two long,
compared case-folded. A lone surrogate becomes U+FFFD (it has no UTF-8 form to send).
The query is never longer than the limit (the segments chosen plus one separator between
each), never empty unless the text has nothing but white space (a text
without a single term gives its first segments), and costs O(n log n) in the text's length;
a text longer than :data:`MAX_TEXT_CHARS` is read by its two ends only (each cut at a space or
line break), so a pasted log of many megabytes costs no more than that.

**Turns in parts** (:func:`turn_parts`). What a turn may not hold is made visible first:
control characters other than tab, line feed and carriage return (a pasted terminal's
colour codes) become their Unicode control pictures (ESC is ``\u241b``), and a lone
surrogate (JSON lets ``"\ud800"`` through) becomes U+FFFD. Secrets are redacted from the whole text first
(a part boundary must never cut a secret in two and let each half pass the redactor), then
a text over the limit is split at paragraph, line or word boundaries into parts that each
carry a visible marker (``[engram: turn part 1 of 3, continued in the next turn]`` ...);
joined without their markers, the parts give back the redacted text exactly. Past
:data:`MAX_TURN_PARTS` parts the rest is cut, and the last part says how many characters
were cut. A harness's text longer than :data:`MAX_TEXT_CHARS` is first cut at a space or
line break (:func:`bounded_text`) and the cut counted in the same marker: it is stored cut,
never refused.
"""

from __future__ import annotations

import heapq
import re

from engram.protocol.redact import redact_secrets
from engram.protocol.schemas import MAX_QUERY_CHARS, MAX_TURN_CHARS

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_SEGMENT_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_TURN_PARTS",
    "PART_MARKER",
    "bounded_text",
    "recall_query",
    "storable_turn_text",
    "turn_parts",
]

#: The longest segment a derived query is made of.
MAX_SEGMENT_CHARS = 240
#: The most parts one turn is stored in (up to 1.28 million characters).
MAX_TURN_PARTS = 40
#: The longest text a harness hands over that is read whole (redacted, split, recalled
#: for): what the parts of one turn hold at most. Past it the text is cut first
#: (:func:`bounded_text`), so a pasted log of many megabytes costs no more than this.
MAX_TEXT_CHARS = MAX_TURN_PARTS * MAX_TURN_CHARS
#: Room kept in each part for its markers.
_MARKER_ROOM = 200

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_TERM = re.compile(r"\w*[^\W\d_]\w*")


def _pieces(line: str) -> list[str]:
    """A line cut into word-bounded pieces of at most :data:`MAX_SEGMENT_CHARS`."""
    out: list[str] = []
    start, n = 0, len(line)
    while n - start > MAX_SEGMENT_CHARS:
        cut = line.rfind(" ", start + 1, start + MAX_SEGMENT_CHARS + 1)
        if cut <= start:
            cut = start + MAX_SEGMENT_CHARS
        out.append(line[start:cut].strip())
        start = cut
    rest = line[start:].strip()
    if rest:
        out.append(rest)
    return [p for p in out if p]


def _segments(text: str) -> list[str]:
    out: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line:
            continue
        if len(line) <= MAX_SEGMENT_CHARS:
            out.append(line)
            continue
        for sentence in _SENTENCE_END.split(line):
            out.extend(_pieces(sentence))
    return out


def _terms(segment: str) -> frozenset[str]:
    return frozenset(t[:64] for t in _TERM.findall(segment.casefold()) if len(t) >= 2)


def _both_ends(text: str, bound: int) -> str:
    """``text`` within ``bound`` characters: its two ends (a question sits at one end of a
    pasted block), each cut at a line break or space, never inside a token."""
    if len(text) <= bound:
        return text
    head = text[: _cut_at(text, 0, bound // 2)]
    start = len(text) - bound // 2
    for sep in ("\n", " "):
        at = text.find(sep, start, start + bound // 4)
        if at >= 0:
            start = at + 1
            break
    return head + "\n" + text[start:]


def recall_query(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """The recall query for ``text``: the text itself within ``limit`` characters, else its
    most informative segments (see the module docstring)."""
    if limit < MAX_SEGMENT_CHARS:
        raise ValueError(f"a query limit below {MAX_SEGMENT_CHARS} characters holds no segment")
    text = _SURROGATE.sub("\ufffd", _both_ends(text, MAX_TEXT_CHARS))  # a lone surrogate cannot be sent
    # No secret leaves in a query (to the service, its embedder, its logs): stored texts hold
    # none (redacted before signing), so a secret in a query matches nothing anyway.
    text = redact_secrets(text)[0]
    if len(text) <= limit:
        return text
    return _Selection(list(dict.fromkeys(_segments(text))), limit).choose()  # a repeated line: once


class _Selection:
    """Segments chosen for a query within ``limit`` characters: both ends first, then by
    the rarest terms they add per character, else the first segments."""

    def __init__(self, segments: list[str], limit: int) -> None:
        self.segments, self.limit = segments, limit
        self.terms = [_terms(s) for s in segments]
        self.df: dict[str, int] = {}
        for ts in self.terms:
            for t in ts:
                self.df[t] = self.df.get(t, 0) + 1
        self.chosen: set[int] = set()
        self.covered: set[str] = set()
        self.used = -1  # the separator before the first segment is not written

    def take(self, i: int) -> None:
        self.chosen.add(i)
        self.covered.update(self.terms[i])
        self.used += len(self.segments[i]) + 1

    def fits(self, i: int) -> bool:
        return self.used + len(self.segments[i]) + 1 <= self.limit

    def gain(self, i: int) -> float:
        return sum(1.0 / self.df[t] for t in self.terms[i] - self.covered) / (len(self.segments[i]) + 1)

    def choose(self) -> str:
        with_terms = [i for i, ts in enumerate(self.terms) if ts]
        for i in with_terms[:1] + with_terms[-1:]:  # 1: both ends
            if i not in self.chosen and self.fits(i):
                self.take(i)
        self._greedy(with_terms)
        if not self.chosen:  # no term anywhere: the text's first segments
            for i in range(len(self.segments)):
                if not self.fits(i):
                    break
                self.take(i)
        return "\n".join(self.segments[i] for i in sorted(self.chosen))

    def _greedy(self, with_terms: list[int]) -> None:
        """2: lazy greedy (a segment's gain only falls as terms are covered, so a popped entry
        whose recomputed gain still beats the next one's stale gain is the best one)."""
        heap = [(-self.gain(i), i) for i in with_terms if i not in self.chosen]
        heapq.heapify(heap)
        while heap and heap[0][0] < 0:  # a stale gain only overstates: at 0 nothing adds a term
            _, i = heapq.heappop(heap)
            if not self.fits(i):
                continue  # the room only shrinks: it never will
            now = self.gain(i)
            if now <= 0:
                continue
            if heap and (-now, i) > heap[0]:  # stale: the next one may be better now
                heapq.heappush(heap, (-now, i))
                continue
            self.take(i)


def _marker_head(part: int, total: int) -> str:
    return f"[engram: turn part {part} of {total}, continued from the previous turn]\n"


def _marker_tail(part: int, total: int) -> str:
    return f"\n[engram: turn part {part} of {total}, continued in the next turn]"


def _marker_cut(cut: int) -> str:
    return f"\n[engram: {cut} more characters of this turn were cut: a turn is stored in at most {MAX_TURN_PARTS} parts]"


#: The markers :func:`turn_parts` adds, to take them off again.
PART_MARKER = re.compile(
    r"\A\[engram: turn part \d+ of \d+, continued from the previous turn\]\n"
    r"|\n\[engram: turn part \d+ of \d+, continued in the next turn\]\Z"
    r"|\n\[engram: \d+ more characters of this turn were cut: a turn is stored in at most \d+ parts\]\Z"
)


def _cut_at(text: str, start: int, room: int) -> int:
    """Where the chunk of ``text`` from ``start`` ends (at most ``room`` long): after the
    last blank line, line break or space in its second half, else at ``room``."""
    end = start + room
    if end >= len(text):
        return len(text)
    floor = start + room // 2
    for sep in ("\n\n", "\n", " "):
        at = text.rfind(sep, floor, end)
        if at >= 0:
            return at + len(sep)
    return end


def _picture(m: re.Match[str]) -> str:
    c = ord(m.group())
    return chr(0x2400 + c) if c < 0x20 else "\u2421" if c == 0x7F else "\ufffd"


def storable_turn_text(text: str) -> str:
    """``text`` with what a turn body may not hold made visible (see the module docstring)."""
    text = _SURROGATE.sub("\ufffd", text)
    return _CONTROL.sub(_picture, text)


def bounded_text(text: str, bound: int = MAX_TEXT_CHARS) -> tuple[str, int]:
    """``text`` cut to at most ``bound`` characters at a line break or space in its second
    half (never inside a token, where a half of a secret could pass the redactor), and how
    many characters were cut (to pass to :func:`turn_parts` as ``dropped``)."""
    if len(text) <= bound:
        return text, 0
    end = _cut_at(text, 0, bound)
    return text[:end], len(text) - end


def turn_parts(text: str, limit: int = MAX_TURN_CHARS, *, dropped: int = 0) -> list[str]:
    """``text`` made storable and redacted, in parts of at most ``limit`` characters (one
    part when it fits), each marked as a part; see the module docstring. ``dropped``: the
    characters already cut from the end of ``text`` (:func:`bounded_text`), counted in the
    last part's marker."""
    if limit <= 2 * _MARKER_ROOM:
        raise ValueError(f"a turn limit must exceed {2 * _MARKER_ROOM} characters")
    text = redact_secrets(storable_turn_text(text))[0]
    if len(text) <= limit and not dropped:
        return [text]
    room = limit - _MARKER_ROOM
    chunks: list[str] = []
    start = 0
    while start < len(text) and len(chunks) < MAX_TURN_PARTS:
        end = _cut_at(text, start, room)
        chunks.append(text[start:end])
        start = end
    cut = len(text) - start + dropped
    total = len(chunks)
    parts = []
    for n, chunk in enumerate(chunks, 1):
        head = _marker_head(n, total) if n > 1 else ""
        tail = _marker_tail(n, total) if n < total else (_marker_cut(cut) if cut else "")
        parts.append(head + chunk + tail)
    return parts

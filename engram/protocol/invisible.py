"""Invisible characters in memory text: what is kept, what is removed, what is refused.

Pure, and part of the write gate (:mod:`engram.protocol.gate`, specs/memory-events.md §3).
Text pasted from chats, web pages, editors and right-to-left languages carries characters
that render as nothing: most are harmless, a few change how text reads. Each class is
decided by what it can do, never by where the text came from:

* **kept where the text needs them**: the zero-width joiner inside an emoji sequence
  (``❤️‍🔥``) and after or before a virama (Indic conjuncts), the joiners beside
  Arabic-family letters (the Persian half-space ``می‌خواهم``: RFC 5892 CONTEXTJ, with the
  Unicode joining types), the Mongolian vowel separator before a final *a*/*e*, one
  variation selector after a base that has variants (emoji and symbols, CJK ideographs,
  Mongolian letters), the three flag tag sequences of Unicode's emoji list (England,
  Scotland, Wales); direction marks (LRM, RLM, ALM) in text that holds right-to-left
  letters, where they only place punctuation and numbers as an RTL letter would;
* **removed** (the text reads the same without them): zero-width spaces, word joiners,
  soft hyphens, byte-order marks, invisible math operators, the combining grapheme joiner,
  Khmer inherent vowels, shorthand and musical format controls; joiners, variation
  selectors and the vowel separator where they join or select nothing; direction marks in
  text without right-to-left letters (there they can only move neutral characters, e.g.
  show ``1 2 3`` as ``3 2 1``); a flag's tag letters left without their flag; an embedding
  (LRE or RLE with its PDF, on one line) that only restates the direction of the letters it
  holds, as word processors and PDF viewers paste right-to-left text;
* **refused** (they hide or reorder text): any other bidirectional embedding, overrides and isolates
  (the Trojan Source class), tag characters other than the three flags (invisible ASCII),
  two variation selectors in a row (a base takes one: a run carries hidden bytes), the
  Hangul fillers (letters that render blank), interlinear annotations, the deprecated
  shaping controls, and the reserved default-ignorable code points.

:func:`normal_form` returns the text the gate signs (idempotent: its output is its own
normal form); :func:`strip_for_scan` removes every invisible character, kept ones included,
from the form the threat patterns read, so no joiner or mark can split a keyword.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable

from engram.protocol import _confusables

__all__ = ["HiddenText", "normal_form", "strip_for_scan"]


class HiddenText(ValueError):
    """A character that hides or reorders text; the gate refuses the text."""

    def __init__(self, offset: int, codepoint: int, why: str) -> None:
        self.offset = offset
        self.codepoint = codepoint
        self.why = why
        super().__init__(f"U+{codepoint:04X} at offset {offset} ({why})")


def _ranges(*spans: tuple[int, int]) -> frozenset[int]:
    return frozenset(cp for a, b in spans for cp in range(a, b + 1))


_ZWNJ, _ZWJ, _MVS, _BLACK_FLAG, _CANCEL_TAG = 0x200C, 0x200D, 0x180E, 0x1F3F4, 0xE007F
_DIRECTION_MARKS = frozenset((0x200E, 0x200F, 0x061C))
#: Read as nothing: removed wherever they are.
_REMOVED = _ranges(
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x17B4, 0x17B5),  # Khmer inherent vowels ("should be ignored", The Unicode Standard ch. 16)
    (0x200B, 0x200B),  # zero-width space
    (0x2060, 0x2064),  # word joiner, invisible function application / times / separator / plus
    (0xFEFF, 0xFEFF),  # byte-order mark, zero-width no-break space
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls (beam, tie, slur, phrase)
)
_REFUSED: dict[int, str] = {
    **dict.fromkeys(
        _ranges((0x202A, 0x202E), (0x2066, 0x2069)),
        "a bidirectional embedding, override or isolate: it reorders how the text reads",
    ),
    **dict.fromkeys(_ranges((0x206A, 0x206F)), "a deprecated shaping control: it changes how text displays"),
    **dict.fromkeys(_ranges((0xFFF9, 0xFFFB)), "an interlinear annotation control: it hides text"),
    **dict.fromkeys((0x115F, 0x1160, 0x3164, 0xFFA0), "a Hangul filler: a letter that renders blank"),
    0xE0001: "a language tag: invisible text",
}
#: Reserved default-ignorable code points (invisible when assigned): refused.
_RESERVED = ((0x2065, 0x2065), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000), (0xE0002, 0xE001F), (0xE0080, 0xE00FF))
_RESERVED_TAIL = (0xE01F0, 0xE0FFF)
_TAGS = _ranges((0xE0020, 0xE007F))
#: The flag tag sequences of Unicode's emoji list (UTS #51, RGI): England, Scotland, Wales.
_FLAG_TAGS = frozenset(
    "".join(chr(0xE0000 + ord(c)) for c in name) + chr(_CANCEL_TAG) for name in ("gbeng", "gbsct", "gbwls")
)
_EMOJI_VS = frozenset((0xFE0E, 0xFE0F))
_STANDARD_VS = _ranges((0xFE00, 0xFE0D))
_IDEOGRAPHIC_VS = _ranges((0xE0100, 0xE01EF))
_MONGOLIAN_FVS = frozenset((0x180B, 0x180C, 0x180D, 0x180F))
_VARIATION_SELECTORS = _EMOJI_VS | _STANDARD_VS | _IDEOGRAPHIC_VS | _MONGOLIAN_FVS
_EMOJI_MODIFIERS = _ranges((0x1F3FB, 0x1F3FF))
_HAN = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
_MONGOLIAN = (0x1800, 0x18AF)
_STANDARD_VARIANT_LETTERS = (*_HAN, (0x3000, 0x303F), (0x1000, 0x109F), (0xA840, 0xA877), (0x10AC0, 0x10AFF))
#: Every character the normal form decides on: the classes above.
_INVISIBLE = (
    _REMOVED | frozenset(_REFUSED) | _TAGS | _VARIATION_SELECTORS | _DIRECTION_MARKS | {_ZWNJ, _ZWJ, _MVS}
)
#: Format characters (Cf) that render visibly, kept by the normal form: the Arabic, Syriac
#: and Kaithi number signs and marks, and the Egyptian hieroglyph format controls.
_VISIBLE_FORMAT = _ranges(
    (0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2)
) | _ranges((0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F))
_VIRAMA = 9  # canonical combining class of a virama (RFC 5892 Appendix A.1/A.2)


def _char_class(cps: Iterable[int]) -> re.Pattern[str]:
    """One regex character class of ``cps`` and the reserved code points, written as ranges
    (matching runs in C)."""
    spans: list[list[int]] = []
    for cp in sorted(cps):
        if spans and spans[-1][1] == cp - 1:
            spans[-1][1] = cp
        else:
            spans.append([cp, cp])
    spans += [[a, b] for a, b in (*_RESERVED, _RESERVED_TAIL)]
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in spans) + "]")


_SPECIAL = _char_class(_INVISIBLE)
_FOR_SCAN = _char_class(_INVISIBLE | _VISIBLE_FORMAT)


def _in(cp: int, spans: tuple[tuple[int, int], ...]) -> bool:
    return any(a <= cp <= b for a, b in spans)


def _joining(cp: int, table: tuple[tuple[int, int], ...]) -> bool:
    """``cp`` is in a table of (first, last) ranges (the generated joining types)."""
    i = bisect.bisect_right(table, (cp, 0x10FFFF)) - 1
    return i >= 0 and table[i][0] <= cp <= table[i][1]


def _pictographic(cp: int) -> bool:
    """An emoji or symbol an emoji sequence joins: a symbol (So), or a code point of the
    emoji planes this Python's Unicode version has not assigned yet (newer emoji)."""
    cat = unicodedata.category(chr(cp))
    return cat == "So" or (cat == "Cn" and 0x1F000 <= cp <= 0x1FFFD)


def _emoji_before(out: list[str]) -> bool:
    """The kept text ends with an emoji (with its presentation selector or skin tone)."""
    i = len(out) - 1
    while i >= 0 and (ord(out[i]) in _EMOJI_VS or ord(out[i]) in _EMOJI_MODIFIERS):
        i -= 1
    return i >= 0 and _pictographic(ord(out[i]))


def _joins_before(out: list[str]) -> bool:
    """RFC 5892 A.1: (Joining_Type L or D) (Joining_Type T)* before the joiner."""
    for ch in reversed(out):
        cp = ord(ch)
        if _joining(cp, _confusables.JOINING_TRANSPARENT):
            continue
        return _joining(cp, _confusables.JOINS_FORWARD)
    return False


def _joins_after(text: str, pos: int) -> bool:
    """RFC 5892 A.1: (Joining_Type T)* (Joining_Type R or D) after the joiner."""
    for ch in text[pos + 1 :]:
        cp = ord(ch)
        if _joining(cp, _confusables.JOINING_TRANSPARENT):
            continue
        return _joining(cp, _confusables.JOINS_BACKWARD)
    return False


def _joining_letter(ch: str | None) -> bool:
    return ch is not None and (
        _joining(ord(ch), _confusables.JOINS_FORWARD) or _joining(ord(ch), _confusables.JOINS_BACKWARD)
    )


def _keep_joiner(cp: int, text: str, pos: int, out: list[str]) -> bool:
    prev = out[-1] if out else None
    nxt = text[pos + 1] if pos + 1 < len(text) else None
    if prev is not None and unicodedata.combining(prev) == _VIRAMA:
        return True  # Indic: half forms and explicit virama (RFC 5892 A.1, A.2)
    if cp == _ZWNJ:
        return _joins_before(out) and _joins_after(text, pos)  # Persian, Arabic: a half-space
    if nxt is not None and unicodedata.combining(nxt) == _VIRAMA:
        return True  # Bengali, Oriya: ra + ZWJ + virama (ya-phala, reph forms)
    if nxt is not None and _emoji_before(out) and _pictographic(ord(nxt)):
        return True  # an emoji ZWJ sequence (UTS #51)
    return _joining_letter(prev) or _joining_letter(nxt)  # a joined form shown on its own


def _keep_selector(cp: int, out: list[str]) -> bool:
    """One variation selector directly after a base that has variants."""
    if not out:
        return False
    base = ord(out[-1])
    cat = unicodedata.category(out[-1])
    if cp in _MONGOLIAN_FVS:
        return _MONGOLIAN[0] <= base <= _MONGOLIAN[1] and cat.startswith("L")
    if cp in _IDEOGRAPHIC_VS:
        return _in(base, _HAN)
    if base in _INVISIBLE:
        return False
    if cp in _EMOJI_VS:  # emoji or text presentation: symbols, keycap digits, U+203C, U+2139 (an Ll)
        return cat[0] in "SPN" or base == 0x2139 or _pictographic(base)
    # The standardized variants: math symbols, digits, CJK ideographs and punctuation, and
    # the letters of Myanmar, Phags-pa and Manichaean; never a letter of another alphabet.
    return cat[0] in "SN" or _in(base, _STANDARD_VARIANT_LETTERS)


def _keep_vowel_separator(text: str, pos: int, out: list[str]) -> bool:
    prev = ord(out[-1]) if out else 0
    nxt = ord(text[pos + 1]) if pos + 1 < len(text) else 0
    return 0x1820 <= prev <= 0x1878 and nxt in (0x1820, 0x1821)


def _flag_tags(text: str, pos: int) -> str | None:
    """The flag tag sequence starting at ``pos`` (after its black flag or without it)."""
    for seq in _FLAG_TAGS:
        if text.startswith(seq, pos):
            return seq
    return None


_LRE, _RLE, _PDF = 0x202A, 0x202B, 0x202C
_LINE_END = frozenset("\n\r\u2028\u2029\x85")


def _agreeing_embedding(text: str, pos: int) -> int | None:
    """Where the PDF closing the embedding opened at ``pos`` is, when the embedding only
    restates its letters' own direction (an RLE around right-to-left letters, an LRE around
    left-to-right ones, as Word, Outlook and PDF viewers paste them): closed on the same line,
    no other direction control inside, a letter of its direction and none of the other.
    Such a pair reorders nothing a reader takes for other words; None: any other embedding."""
    want, other = (("R", "AL"), ("L",)) if ord(text[pos]) == _RLE else (("L",), ("R", "AL"))
    seen = False
    for i in range(pos + 1, min(len(text), pos + 4096)):
        ch = text[i]
        cp = ord(ch)
        if cp == _PDF:
            return i if seen else None
        if ch in _LINE_END or 0x202A <= cp <= 0x202E or 0x2066 <= cp <= 0x2069:
            return None
        kind = unicodedata.bidirectional(ch)
        if kind in other:
            return None
        seen = seen or kind in want
    return None


def normal_form(text: str) -> str:
    """The text the gate signs: harmless invisible characters removed or kept as the text
    needs (module doc). Raises :class:`HiddenText` naming the first character that hides or
    reorders text."""
    found = _SPECIAL.search(text)
    if found is None:
        return text
    return _Normalizer(text).run(found.start())


class _Normalizer:
    """One pass of :func:`normal_form` over ``text``: what is kept so far, and whether the
    text is right-to-left (read once, at the first direction mark)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self._rtl: bool | None = None
        self._closing: set[int] = set()  # the PDFs of embeddings that agree with their letters

    def run(self, start: int) -> str:
        text, out = self.text, self.out
        out.extend(text[:start])
        pos, n = start, len(text)
        while pos < n:
            found = _SPECIAL.search(text, pos)
            if found is None:
                out.extend(text[pos:])
                break
            out.extend(text[pos : found.start()])
            pos = self._special(found.start())
        return "".join(out)

    def _special(self, pos: int) -> int:
        """Read the special character at ``pos`` (keep it, drop it or refuse the text); return
        the position after what was read."""
        cp = ord(self.text[pos])
        if cp in (_LRE, _RLE) or pos in self._closing:
            end = None if pos in self._closing else _agreeing_embedding(self.text, pos)
            if pos in self._closing or end is not None:
                if end is not None:
                    self._closing.add(end)
                return pos + 1  # removed: the letters read in their own direction without it
        why = _REFUSED.get(cp)
        if why is None and (_in(cp, _RESERVED) or _RESERVED_TAIL[0] <= cp <= _RESERVED_TAIL[1]):
            why = "a reserved invisible code point"
        if why is not None:
            raise HiddenText(pos, cp, why)
        if cp in _TAGS:
            return self._tags(pos, cp)
        if self._keep(pos, cp):
            self.out.append(self.text[pos])
        return pos + 1

    def _tags(self, pos: int, cp: int) -> int:
        seq = _flag_tags(self.text, pos)
        if seq is None:
            raise HiddenText(pos, cp, "a tag character: invisible text")
        if self.out and ord(self.out[-1]) == _BLACK_FLAG:
            self.out.extend(seq)  # a flag of the emoji list: kept
        return pos + len(seq)  # else its flag was lost: the letters read as nothing

    def _keep(self, pos: int, cp: int) -> bool:
        text, out = self.text, self.out
        if cp in _VARIATION_SELECTORS:
            if pos and ord(text[pos - 1]) in _VARIATION_SELECTORS:
                raise HiddenText(pos, cp, "a second variation selector: a base takes one, a run hides bytes")
            return _keep_selector(cp, out)
        if cp in (_ZWJ, _ZWNJ):
            return _keep_joiner(cp, text, pos, out)
        if cp == _MVS:
            return _keep_vowel_separator(text, pos, out)
        if cp in _DIRECTION_MARKS:
            return self.rtl
        return False  # read as nothing (_REMOVED)

    @property
    def rtl(self) -> bool:
        if self._rtl is None:
            self._rtl = any(
                unicodedata.bidirectional(c) in ("R", "AL") and ord(c) not in _DIRECTION_MARKS
                for c in self.text
            )
        return self._rtl


def strip_for_scan(text: str) -> str:
    """``text`` without any invisible character (kept ones too) and without any other format
    character: the form the gate's patterns read, so that nothing invisible splits a word."""
    return _FOR_SCAN.sub("", text)

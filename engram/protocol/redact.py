"""Secret redaction: what may never be signed into the permanent log.

Trust role: the log is append-only and signed, so a secret that reaches a signed body can
never be taken back (erasure drops a body, but a leaked key must be assumed copied). Every
string of every event body therefore passes :func:`redact_body` on the signer's side before
it is signed (:class:`~engram.protocol.signer.AgentSigner`), and the log refuses a body in
which :func:`find_secret` still finds one (``gate.secret``, naming the field, nothing
written). :func:`find_secret` *is* redaction (it reports what :func:`redact_body` would
replace), so the signer and the log cannot disagree; redaction runs to a fixed point, so
``redact(redact(x)) == redact(x)`` and a redacted text is never refused.

What is a secret is :mod:`engram.protocol.secret_rules` (the maintained library's detectors
and ours). This module decides where the rules look. A pasted secret is rarely where a
pattern expects it, so each string is read in several **views**, and a secret found in any
of them is replaced in the text itself:

1. the text with look-alike and width variants of letters and digits folded to ASCII, one
   character for one (fullwidth letters, a Cyrillic letter inside a Latin word); every rule
   runs here, in order,
   each on the result of the previous ones;
2. the text without invisible characters (zero-width spaces and joiners, soft hyphens, bidi
   controls) that would split a token;
3. the text with JSON and shell escapes undone (``\\"password\\": \\"...\\"`` inside a JSON
   string, ``\\n`` in a pasted key), with ``%XX`` decoded (a query string) and with HTML
   character references decoded (a page's source);
4. the text with **wrapped lines folded**: a line break (with the next line's indentation or
   quote mark) between two token characters is removed, and the token rules run again; only
   a match that spans such a break counts, so ordinary wrapped prose is never joined into a
   finding;
5. a base64 run that decodes to text in which a secret is found is replaced whole.

A redacted secret becomes ``[REDACTED:<rule>]``; in an assignment the name stays
(``DB_PASSWORD=[REDACTED:assigned_secret]``) so the text keeps its meaning. A structured
field whose name says secret (``{"password": "..."}``: a tool's arguments) is redacted whole.
The number of markers in a signed body is what a write answers as ``redacted``
(:func:`count_redactions`; specs/memory-events.md section 3).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram.protocol.errors import MalformedError
from engram.protocol.secret_rules import (
    LONG_RUN,
    MARKER,
    OUR_RULES,
    Rule,
    fold,
    library_rules,
    value_is_secret,
)

__all__ = [
    "MARKER",
    "MAX_WALK_DEPTH",
    "SECRET_RULES",
    "SecretFinding",
    "count_redactions",
    "find_secret",
    "iter_strings",
    "redact_body",
    "redact_secrets",
    "without_markers",
]

#: Our rules (the library's are added on first use: :func:`secret_rules.library_rules`).
SECRET_RULES: tuple[Rule, ...] = OUR_RULES
_MARK = "[REDACTED:"
#: Redaction runs to a fixed point; each round replaces text with markers, so it ends.
_MAX_ROUNDS = 6


def without_markers(text: str) -> str:
    """``text`` with every redaction marker reduced to ``[REDACTED]`` (what the write gate
    scans: the name of a rule, ``github_token``, is not the word "token" of a sentence)."""
    return MARKER.sub("[REDACTED]", text) if _MARK in text else text


def _all_rules() -> tuple[Rule, ...]:
    return _rule_set().rules


# -- which rules can fire: one scan per text ---------------------------------------------------


def _trie(words: Iterable[str]) -> str:
    """A regex matching the longest of ``words`` that starts at a position (a trie: at each
    character one branch per next character, the longer branch tried before stopping)."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(c) + pattern(child) for c, child in sorted(node.items()) if c]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word ends here: the longer words first, greedy
            return f"(?:{body})?"
        return body

    return pattern(root)


@dataclass(frozen=True, slots=True)
class _Triggers:
    """The triggers of a set of rules as one pattern, and the rules each enables:
    :meth:`enabled` is the set of rules with a trigger in a text, the same answer as testing
    ``t in text`` for each trigger of each rule, in one scan of the text.

    At each position the pattern reports the longest trigger that starts there; every other
    trigger that starts there is a prefix of it (two words that start at one position are
    both prefixes of the text from there), so the rules reported for a trigger are those of
    all its prefixes among the triggers."""

    scan: re.Pattern[str] | None
    enables: Mapping[str, frozenset[int]]

    @classmethod
    def of(cls, table: Mapping[str, Iterable[int]]) -> _Triggers:
        if not table:
            return cls(None, {})
        enables = {w: frozenset(i for t in table if w.startswith(t) for i in table[t]) for w in table}
        return cls(re.compile("(?=(" + _trie(table) + "))"), enables)

    def enabled(self, text: str, into: set[int]) -> None:
        """Add to ``into`` the index of every rule with a trigger in ``text``."""
        if self.scan is not None:
            for w in set(self.scan.findall(text)):
                into |= self.enables[w]


@dataclass(frozen=True, slots=True)
class _Index:
    """The triggers of some rules (:class:`_Triggers`, in the lower-cased text and in the text
    itself for ``exact_case`` rules) and the rules of them without a trigger."""

    lowered: _Triggers
    exact: _Triggers
    always: frozenset[int]

    @classmethod
    def of(cls, rules: Iterable[tuple[int, Rule]]) -> _Index:
        by_lowered: dict[str, set[int]] = {}
        by_exact: dict[str, set[int]] = {}
        always: set[int] = set()
        for i, rule in rules:
            if not rule.triggers or "" in rule.triggers:
                always.add(i)
                continue
            table = by_exact if rule.exact_case else by_lowered
            for t in rule.triggers:
                table.setdefault(t, set()).add(i)
        return cls(_Triggers.of(by_lowered), _Triggers.of(by_exact), frozenset(always))

    def candidates(self, text: str, lowered: str) -> list[int]:
        found = set(self.always)
        self.lowered.enabled(lowered, found)
        self.exact.enabled(text, found)
        return sorted(found)


@dataclass(frozen=True, slots=True)
class _RuleSet:
    """Every rule in order, with one scan per text for the triggers of all of them (testing
    each rule's ``may_match`` in turn was most of the cost of a clean text: 131 rules and
    218 triggers, of which a sentence holds a few).

    :meth:`candidates` answers, for a text, the rules that may match it: those without
    triggers and those with a trigger in the view the rule reads (the lower-cased text, or
    the text itself for ``exact_case``), less the ``long`` rules when the text has no long
    run (:data:`LONG_RUN`), in the order of :attr:`rules`; so the loops below run the same
    rules, in the same order, as testing each rule in turn would. A text without a long run
    is scanned only for the triggers of the rules that can still fire."""

    rules: tuple[Rule, ...]
    every: _Index
    short: _Index  # the rules that are not ``long``

    @classmethod
    def of(cls, rules: tuple[Rule, ...]) -> _RuleSet:
        return cls(
            rules=rules,
            every=_Index.of(enumerate(rules)),
            short=_Index.of((i, r) for i, r in enumerate(rules) if not r.long),
        )

    def candidates(self, text: str, lowered: str, *, has_run: bool) -> list[int]:
        """Indices (ascending) of the rules that may match ``text`` (lower-cased:
        ``lowered``; with a :data:`LONG_RUN` in it: ``has_run``)."""
        return (self.every if has_run else self.short).candidates(text, lowered)


@functools.cache
def _rule_set() -> _RuleSet:
    """Our rules and the library's, indexed once per process (the library's are loaded on
    first use: :func:`secret_rules.library_rules`)."""
    return _RuleSet.of((*OUR_RULES, *library_rules()))


# -- views ------------------------------------------------------------------------------------

_fold = fold


@dataclass(frozen=True, slots=True)
class _View:
    """A transformed text and how its positions map back to the original. Chunks are
    ``(view start, original start, original end, copied)``: a copied chunk maps one
    character to one, a replaced one maps all its characters to the original segment."""

    text: str
    chunks: tuple[tuple[int, int, int, bool], ...]
    keys: tuple[int, ...]

    def original(self, s: int, e: int) -> tuple[int, int]:
        return self._at(s, start=True), self._at(e - 1, start=False)

    def _at(self, p: int, *, start: bool) -> int:
        vs, os_, oe, copied = self.chunks[bisect.bisect_right(self.keys, p) - 1]
        if copied:
            return os_ + (p - vs) + (0 if start else 1)
        return os_ if start else oe


def _mapped(text: str, segments: Iterable[tuple[int, int, str]]) -> _View | None:
    """The view of ``text`` with each ``(start, end, replacement)`` segment replaced (None:
    nothing to replace)."""
    parts: list[str] = []
    chunks: list[tuple[int, int, int, bool]] = []
    pos = vpos = 0
    for s, e, rep in segments:
        if s > pos:
            chunks.append((vpos, pos, s, True))
            parts.append(text[pos:s])
            vpos += s - pos
        if rep:
            chunks.append((vpos, s, e, False))
            parts.append(rep)
            vpos += len(rep)
        pos = e
    if not chunks and pos == 0:
        return None
    if pos < len(text):
        chunks.append((vpos, pos, len(text), True))
        parts.append(text[pos:])
    if not chunks:
        return None
    return _View(_fold("".join(parts)), tuple(chunks), tuple(c[0] for c in chunks))


_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]+"  # tags and variation selectors: invisible ASCII
)
_ESCAPE = re.compile(r"\\(?:u(?P<u>[0-9a-fA-F]{4})|x(?P<x>[0-9a-fA-F]{2})|(?P<c>[\\/\"'nrtbf_*]))")
_ESCAPED = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
_PERCENT = re.compile(r"%(?P<h>[0-7][0-9a-fA-F])")
_HTML = re.compile(r"&(?:#(?P<d>\d{1,7})|#[xX](?P<x>[0-9a-fA-F]{1,6})|(?P<n>quot|amp|apos|lt|gt|nbsp));")
_HTML_NAMED = {"quot": '"', "amp": "&", "apos": "'", "lt": "<", "gt": ">", "nbsp": " "}
_TOKEN_CHAR = r"[A-Za-z0-9+/=_-]"  # noqa: S105 - a character class, not a password
#: A wrapped line: a break (real or escaped) between two token characters, with the next
#: line's indentation and a quote or comment mark; or invisible characters inside a token.
_BREAK = re.compile(
    r"(?<="
    + _TOKEN_CHAR
    + r")(?:[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t]*(?:(?:>|#|//|\*)[ \t]*)?)(?="
    + _TOKEN_CHAR
    + ")"
)


def _unescape(m: re.Match[str]) -> str:
    if m.group("u"):
        return chr(int(m.group("u"), 16))
    if m.group("x"):
        return chr(int(m.group("x"), 16))
    c = m.group("c")
    return _ESCAPED.get(c, c)


def _unentity(m: re.Match[str]) -> str:
    code = int(m.group("d")) if m.group("d") else int(m.group("x"), 16) if m.group("x") else None
    if code is None:
        return _HTML_NAMED[m.group("n")]
    return chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else m.group()


def _views(text: str) -> Iterator[tuple[_View, bool]]:
    """The transformed views of ``text`` (2-4 of the module docstring), each with whether a
    match must span a transformed place to count (the wrapped-line view)."""
    if not text.isascii() and _INVISIBLE.search(text):
        v = _mapped(text, ((m.start(), m.end(), "") for m in _INVISIBLE.finditer(text)))
        if v is not None:
            yield v, False
    if "\\" in text:
        v = _mapped(text, ((m.start(), m.end(), _unescape(m)) for m in _ESCAPE.finditer(text)))
        if v is not None:
            yield v, False
    if "%" in text:
        v = _mapped(text, ((m.start(), m.end(), chr(int(m.group("h"), 16))) for m in _PERCENT.finditer(text)))
        if v is not None:
            yield v, False
    if "&" in text:
        v = _mapped(text, ((m.start(), m.end(), _unentity(m)) for m in _HTML.finditer(text)))
        if v is not None:
            yield v, False
    if "\n" in text or "\\n" in text:
        v = _mapped(text, ((m.start(), m.end(), "") for m in _BREAK.finditer(text) if _joinable(text, m)))
        if v is not None:
            yield v, True


_RUN_BEFORE = re.compile(_TOKEN_CHAR + "{8,}$")
_RUN_AFTER = re.compile(_TOKEN_CHAR + "+")


def _joinable(text: str, m: re.Match[str]) -> bool:
    """A line break inside a token, not between a token and the next line's text: 8 token
    characters end the line, and the next line starts with a fragment that reads as the rest
    of a token (a digit or a capital inside it), not a word or a name being assigned
    (``PGPASSWORD=``)."""
    if _RUN_BEFORE.search(text, max(0, m.start() - 8), m.start()) is None:
        return False
    after = _RUN_AFTER.match(text, m.end())
    if after is None:
        return False
    fragment = after.group()
    if text[after.end() : after.end() + 1] in ("=", ":") or "=" in fragment.rstrip("="):
        return False
    if text[max(0, m.start() - 5) : m.start()] == "-----" or fragment.startswith("-----"):
        return False  # a PEM armour line: the block rules take the block whole
    return any(c.isdigit() for c in fragment) or any(c.isupper() for c in fragment[1:])


# -- one round ----------------------------------------------------------------------------------


def _marker(name: str) -> str:
    return f"{_MARK}{name}]"


def _in_marker(text: str, s: int) -> bool:
    """``s`` falls inside a redaction marker (one that names a rule: see secret_rules.MARKER)."""
    return any(m.start() <= s < m.end() for m in MARKER.finditer(text, max(0, s - 64), s + 64))


def _splice(text: str, hits: Sequence[tuple[int, int, str]]) -> tuple[str, list[str]]:
    """``text`` with each non-overlapping hit replaced by its marker (earlier hits win)."""
    chosen: list[tuple[int, int, str]] = []
    for s, e, name in sorted(hits, key=lambda h: (h[0], -h[1])):
        if chosen and s < chosen[-1][1]:
            continue
        if e <= s or MARKER.search(text, s, e) or _in_marker(text, s):
            continue
        chosen.append((s, e, name))
    if not chosen:
        return text, []
    out: list[str] = []
    pos = 0
    for s, e, name in chosen:
        out.append(text[pos:s])
        out.append(_marker(name))
        pos = e
    out.append(text[pos:])
    return "".join(out), [name for _, _, name in chosen]


def _run_rules(text: str, rules: _RuleSet) -> tuple[str, list[str]]:
    """View 1: every rule in order on the folded text, each seeing the previous ones'
    markers; the text and its folded form stay the same length, so a span is the same in
    both. The rules whose triggers the text lacks are skipped by one scan; once a rule
    replaced something, the text has changed and the rules after it are tested one by one
    on the new text (:func:`_run_rest`)."""
    folded = _fold(text)
    lowered = folded.lower()
    has_run = LONG_RUN.search(folded) is not None
    for i in rules.candidates(folded, lowered, has_run=has_run):
        rule = rules.rules[i]
        hits = [(s, e, rule.name) for s, e in rule.find(folded)]
        if not hits:
            continue
        text, names = _splice(text, hits)
        if names:
            text, more = _run_rest(text, rules.rules[i + 1 :])
            return text, names + more
    return text, []


def _run_rest(text: str, rules: Sequence[Rule]) -> tuple[str, list[str]]:
    """:func:`_run_rules` from the rule after the first that replaced something: each rule
    in order, its triggers tested on the text as the previous ones left it."""
    found: list[str] = []
    folded = _fold(text)
    lowered = folded.lower()
    has_run = LONG_RUN.search(folded) is not None
    for rule in rules:
        if rule.long and not has_run:
            continue
        if not rule.may_match(folded, lowered):
            continue
        hits = [(s, e, rule.name) for s, e in rule.find(folded)]
        if not hits:
            continue
        text, names = _splice(text, hits)
        if names:
            found += names
            folded = _fold(text)
            lowered = folded.lower()
            has_run = LONG_RUN.search(folded) is not None
    return text, found


def _run_views(text: str, rules: _RuleSet, *, wrapped: bool) -> tuple[str, list[str]]:
    """Views 2-4 (``wrapped``: view 4 only, else 2 and 3): each rule once per view; hits
    mapped back to the text."""
    found: list[str] = []
    for view, must_cross in _views(text):
        if must_cross != wrapped:
            continue
        has_run = LONG_RUN.search(view.text) is not None
        hits: list[tuple[int, int, str]] = []
        for i in rules.candidates(view.text, view.text.lower(), has_run=has_run):
            rule = rules.rules[i]
            if must_cross and not rule.wraps:
                continue
            for s, e in rule.find(view.text):
                os_, oe = view.original(s, e)
                if must_cross and oe - os_ == e - s:
                    continue  # found whole in the text itself: view 1 judged it
                hits.append((os_, oe, rule.name))
        if hits:
            text, names = _splice(text, hits)
            found += names
    return text, found


_B64ISH = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])")


def _decoded(run: str) -> str | None:
    """The text a base64 (or base64url) run decodes to, if it is text."""
    core = run.rstrip("=")
    core += "=" * (-len(core) % 4)
    try:
        raw = (
            base64.urlsafe_b64decode(core)
            if ("-" in core or "_" in core)
            else base64.b64decode(core, validate=True)
        )
        inner = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(1 for c in inner if c.isprintable() or c in "\n\r\t")
    return inner if len(inner) >= 8 and printable >= 0.95 * len(inner) else None


def _run_encoded(text: str, rules: _RuleSet) -> tuple[str, list[str]]:
    """View 5: a base64 run whose decoded text holds a secret is replaced whole."""
    hits: list[tuple[int, int, str]] = []
    for m in _B64ISH.finditer(text):
        inner = _decoded(m.group())
        if inner is None:
            continue
        _, inner_found = _one_round(inner, rules, decode=False)
        if inner_found:
            hits.append((m.start(), m.end(), f"base64_{inner_found[0]}"))
    return _splice(text, hits) if hits else (text, [])


def _one_round(text: str, rules: _RuleSet, *, decode: bool = True) -> tuple[str, list[str]]:
    # Wrapped tokens first: the text itself would find only the first line's part of one.
    text, found = _run_views(text, rules, wrapped=True)
    text, more = _run_rules(text, rules)
    found += more
    text, more = _run_views(text, rules, wrapped=False)
    found += more
    if decode and len(text) >= 20:
        text, more = _run_encoded(text, rules)
        found += more
    return text, found


_SEPARATORS = frozenset(" \t\n=:@%\\")


def _cannot_hold_secret(text: str) -> bool:
    """Fast path: every rule needs 20 characters of token, or a separator (space, ``=``,
    ``:``, ``@``, an escape) and 6 characters; ids, refs and digests of the schemas are spared."""
    return len(text) < 6 or (len(text) < 20 and _SEPARATORS.isdisjoint(text))


#: The last texts redacted, by the SHA-256 of the text: one write's text is scanned by the
#: client that counts its redactions, by the signer, and by the log's edge, in a few
#: milliseconds (issue 42, Deliver 5). Only the digest and the redacted text are kept, never
#: a secret. The rules are fixed for the life of the process (library_rules is cached).
#:
#: A text the redaction *produced* is remembered too, as clean (issue 43, Deliver 4): the
#: signer signs the redacted text, and the log's edge in the same process (the embedded
#: ledger, ``InProcess``) checks exactly that text again; it is answered here instead of
#: being scanned a second time. Why this cannot let a secret through:
#:
#: 1. An entry is only ever what a scan of that exact text answers. A produced text is
#:    entered only when redaction stopped because its last round, run on that very text,
#:    found nothing: scanning it again runs the same rules on the same text and finds
#:    nothing (a round that changes a text names a rule), so its answer is (text, []).
#:    A text left by the last allowed round without such a check is not entered.
#: 2. The key is the SHA-256 of the exact text (UTF-8, surrogates kept). A text changed in
#:    any way after it was produced, a secret added after signing or a forged body, has
#:    another digest and is scanned in full; finding one collision is finding a SHA-256
#:    second preimage.
#: 3. The memo lives in this process and is filled only by this process's own scans: a body
#:    that arrives over HTTP is checked by the service's process, whose memo holds only what
#:    it scanned itself. Nothing outside (a client, a request) can write an entry.
_SEEN: OrderedDict[bytes, tuple[str, tuple[str, ...]]] = OrderedDict()
_SEEN_LOCK = threading.Lock()
_SEEN_MAX = 1024


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """Replace secrets with ``[REDACTED:<rule>]``; return the text and the rules that fired
    (one name per marker added)."""
    found: list[str] = []
    if _cannot_hold_secret(text):
        return text, found
    key = _digest(text)
    with _SEEN_LOCK:
        seen = _SEEN.get(key)
        if seen is not None:
            _SEEN.move_to_end(key)
    if seen is not None:
        return seen[0], list(seen[1])
    rules = _rule_set()
    fixed = False  # the last round ran on the text returned and found nothing
    for _ in range(_MAX_ROUNDS):
        text, more = _one_round(text, rules)
        if not more:
            fixed = True
            break
        found += more
    with _SEEN_LOCK:
        _SEEN[key] = (text, tuple(found))
        if found and fixed:  # the redacted text, as a scan of it answers (see _SEEN)
            _SEEN[_digest(text)] = (text, ())
        while len(_SEEN) > _SEEN_MAX:
            _SEEN.popitem(last=False)
    return text, found


# -- bodies --------------------------------------------------------------------------------------

#: Deeper than any body schema nests (the strict JSON parser of the log bounds depth too).
MAX_WALK_DEPTH = 32


def _too_deep() -> MalformedError:
    return MalformedError(f"a body nests deeper than {MAX_WALK_DEPTH} levels", check="body.depth")


def iter_strings(value: Any, path: str = "$", depth: int = 0) -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, with its path (``$.tool.result[2]``); object keys are
    strings too (yielded with the path of the object and ``{key}``). Bounded by depth."""
    if depth > MAX_WALK_DEPTH:
        raise _too_deep()
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                yield f"{path}{{key}}", k
            yield from iter_strings(v, f"{path}.{k}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from iter_strings(v, f"{path}[{i}]", depth + 1)


@dataclass(frozen=True, slots=True)
class SecretFinding:
    path: str
    rule: str


Report = Callable[[str, str], None]


def _redact_value(value: Any, path: str, depth: int, report: Report | None) -> Any:
    if depth > MAX_WALK_DEPTH:
        raise _too_deep()
    if isinstance(value, str):
        out, found = redact_secrets(value)
        if found and report is not None:
            report(path, found[0])
        return out
    if isinstance(value, Mapping):
        result: dict[Any, Any] = {}
        for k, v in value.items():
            if isinstance(k, str) and isinstance(v, str) and value_is_secret(k, v):
                # A field named for a secret (a tool's {"password": ...}): the value whole.
                if report is not None:
                    report(f"{path}.{k}", "assigned_secret")
                result[k] = _marker("assigned_secret")
            else:
                result[k] = _redact_value(v, f"{path}.{k}", depth + 1, report)
        return result
    if isinstance(value, (list, tuple)):
        return [_redact_value(v, f"{path}[{i}]", depth + 1, report) for i, v in enumerate(value)]
    return value


def redact_body(body: Any, depth: int = 0) -> Any:
    """``body`` with every string value redacted (a new value; the input is not changed).
    Keys are kept (a secret in a key is refused by the log, never rewritten)."""
    return _redact_value(body, "$", depth, None)


class _Found(Exception):
    def __init__(self, finding: SecretFinding) -> None:
        self.finding = finding


def _stop(path: str, rule: str) -> None:
    raise _Found(SecretFinding(path=path, rule=rule))


def find_secret(body: Any) -> SecretFinding | None:
    """The first string of ``body`` (any depth, keys included) that :func:`redact_body`
    would change, or that is a key carrying a secret."""
    try:
        _redact_value(body, "$", 0, _stop)
        for path, text in iter_strings(body):
            if path.endswith("{key}"):
                _, found = redact_secrets(text)
                if found:
                    return SecretFinding(path=path, rule=found[0])
    except _Found as f:
        return f.finding
    return None


def count_redactions(body: Any) -> int:
    """The redaction markers in every string of ``body`` (what a write answers as
    ``redacted``)."""
    return sum(len(MARKER.findall(text)) for _, text in iter_strings(body) if _MARK in text)

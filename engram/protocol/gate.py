"""The write gate: what may become a memory, checked before anything is signed or stored.

A memory is later recalled into an agent's context, so a poisoned memory is a persistent
prompt injection. The gate therefore runs on every memory text (``memory.written``,
``memory.superseded``, each ``memory.distilled`` entry):

1. **Refuse** text matching a threat pattern, naming the pattern: prompt injection, role
   hijack, deception, exfiltration (curl/wget/nc carrying secrets, reading secret files),
   SSH persistence, and invisible or bidirectional Unicode controls.
2. **Redact** secrets (API keys, tokens, private keys, passwords in URLs) before signing;
   the ledger refuses a submitted body that still carries one (it cannot redact bytes that
   are already signed).
3. **Refuse** a memory that merely repeats its source record verbatim: memory holds the
   observation, records stay records.
4. Run any deployment hooks (:class:`GateHook`), which may refuse with their own name.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engram.protocol import _confusables
from engram.protocol import redact as _redact
from engram.protocol.errors import RejectedEventError
from engram.protocol.redact import redact_secrets

__all__ = [
    "GateHook",
    "GateRejection",
    "WriteGate",
    "fold_for_scan",
    "neutralise",
    "normalize_text",
    "quote_for_block",
    "redact_secrets",
]


class GateRejection(RejectedEventError):
    """The write gate refused a memory; ``pattern`` names the rule that matched."""

    default_check = "gate"

    def __init__(self, pattern: str, detail: str) -> None:
        self.pattern = pattern
        super().__init__(f"memory refused by the write gate ({pattern}): {detail}", check=f"gate.{pattern}")


_I = re.IGNORECASE
# (name, regex), matched against the *folded* text (see fold_for_scan): lower case, NFKC,
# no combining marks, common look-alike letters mapped to Latin, all whitespace (newlines
# included) collapsed to one space. Patterns aim at instructions to a future reader of the
# memory, not at words that merely occur in ordinary notes.
THREAT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "prompt_injection",
        re.compile(
            r"\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(previous|prior|above|all|earlier|system)\b"
            r"[^.]{0,20}\b(instructions?|prompts?|rules|guidelines|directives?)\b"
        ),
    ),
    ("prompt_injection", re.compile(r"\bnew (system )?instructions? ?:")),
    ("prompt_injection", re.compile(r"< ?/? ?(system|memory-context|instructions?) ?>")),
    (
        "role_hijack",
        re.compile(
            r"\byou are now (an?|the|no longer|free|unrestricted|jailbroken|in (developer|god|dan) mode)\b"
            r"|\bfrom now on,? you (are|will be) (an?|the|no longer|free|unrestricted)\b"
            r"|\bact as (an? )?(unrestricted|jailbroken|uncensored)\b"
            r"|\bpretend (to be|you are) (an?|the) (different|unrestricted|new)\b"
            r"|\byour new (role|persona|identity|instructions) (is|are)\b"
            r"|\b(enable|enter|activate|switch to) (developer|god|dan|jailbreak) mode\b"
            r"|\bjailbreak (yourself|the (assistant|model|ai))\b"
        ),
    ),
    (
        "deception",
        re.compile(
            r"\b(do not|don't|never) (tell|inform|reveal to|let) (the )?(user|operator|human|admin)"
            r"|\b(hide|conceal) (this|it) from (the )?(user|operator|human)"
            r"|\bwithout (the )?(user|operator)'?s? (knowing|knowledge)"
        ),
    ),
    (
        "exfiltration",
        re.compile(
            r"\b(curl|wget|nc|ncat|netcat|scp|rsync)\b.{0,200}"
            r"(\$\{?[a-z_]*(key|token|secret|pass|password)[a-z_]*\}?|\.env\b|id_rsa|id_ed25519|/etc/(passwd|shadow)"
            r"|\.aws/credentials|--data.{0,40}(key|token|secret|password))"
        ),
    ),
    (
        "exfiltration",
        re.compile(
            r"\b(cat|type|print|paste|upload|send|post|email)\b.{0,40}"
            r"(~?/?\.ssh/(id_[a-z0-9]+|authorized_keys)|\.aws/credentials|/etc/shadow|\.env\b|\.netrc|\.git-credentials)"
        ),
    ),
    (
        "ssh_persistence",
        re.compile(
            r"((>>?|\btee( -a)?) ?~?/?[\w/.-]*\.ssh/authorized_keys|\bssh-keygen\b.{0,80}-f\b|\bssh-copy-id\b"
            r"|\bcrontab\b.{0,40}( -e\b| -r\b| <)|\| ?crontab\b|@reboot\b|/etc/cron\.)"
        ),
    ),
)

# Invisible characters: every format character (Unicode category Cf: zero-width spaces and
# joiners, bidirectional controls, tags, soft hyphen ...) and the invisible fillers outside
# Cf. Variation selectors (emoji presentation) are not refused; they are removed before
# scanning so that they cannot split a word.
_INVISIBLE_EXTRA = frozenset("\u034f\u115f\u1160\u3164\uffa0\u180e")
_VARIATION_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# Letters that render like Latin ones: the Unicode confusables (UTS #39) that are single
# letters or digits, plus the small-capital, dotless and script Latin forms by name
# (engram/protocol/_confusables.py, generated by tests/tools/make_confusables.py).
_CONFUSABLES = str.maketrans(_confusables.SOURCES, _confusables.TARGETS)


def _invisible(text: str) -> tuple[int, str] | None:
    for i, ch in enumerate(text):
        if ch in _INVISIBLE_EXTRA or (
            unicodedata.category(ch) == "Cf" and not _VARIATION_SELECTORS.match(ch)
        ):
            return i, ch
    return None


def fold_for_scan(text: str) -> str:
    """The form threat patterns see: NFKC (fullwidth and mathematical letters), no
    combining marks or variation selectors, look-alikes mapped to Latin (UTS #39 confusables,
    small capitals, dotless and script forms), case-folded, whitespace collapsed."""
    text = _VARIATION_SELECTORS.sub("", text)
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.translate(_CONFUSABLES).casefold().translate(_CONFUSABLES)
    return " ".join(text.split())


# Secret redaction lives in engram.protocol.redact (one pass over every string of every
# body); the names stay importable from here.
SECRET_RULES = _redact.SECRET_RULES


_LINE_BREAKS = re.compile("\r\n|[\r\n\u2028\u2029\x85\x0b\x0c]")


def neutralise(text: str) -> str:
    """Text for an injected context block: as it is if the write gate would accept it as a
    memory, else a marker naming the rule (a record or snapshot quoting "ignore all previous
    instructions" is never shown to a later session as it was; the log still holds it)."""
    try:
        WriteGate().scan(text)
    except GateRejection as e:
        return f"[withheld from context: matched the write gate's {e.pattern} rule]"
    return text


def quote_for_block(text: str) -> str:
    """Stored text as data inside a tagged block (``<memory-context>``, ``<session-state>``):
    neutralised, markup escaped so it can neither close the block nor open another, and line
    breaks shown as a visible mark so it cannot start a heading or an entry of its own."""
    return _LINE_BREAKS.sub(" \u23ce ", html.escape(neutralise(text), quote=False))


def normalize_text(text: str) -> str:
    """Case-folded, NFKC, punctuation-free, single-spaced: the form duplicates are compared in."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


class GateHook(Protocol):
    """A deployment's extra check: return a rejection reason (pattern name, detail) or None."""

    name: str

    def check(self, text: str) -> str | None: ...


@dataclass(slots=True)
class WriteGate:
    """The write gate with its pluggable hooks."""

    hooks: list[GateHook] = field(default_factory=list)

    def scan(self, text: str) -> None:
        """Refuse text that matches a threat pattern or invisible/bidi Unicode."""
        bad = _invisible(text)
        if bad:
            raise GateRejection("invisible_unicode", f"U+{ord(bad[1]):04X} at offset {bad[0]}")
        folded = fold_for_scan(_redact.without_markers(text))  # "[REDACTED:github_token]" says no "token"
        for name, pattern in THREAT_PATTERNS:
            hit = pattern.search(folded)
            if hit:
                raise GateRejection(name, f"matched {hit.group()[:60]!r}")
        for hook in self.hooks:
            detail = hook.check(text)
            if detail is not None:
                raise GateRejection(hook.name, detail)

    def prepare(self, text: str) -> tuple[str, list[str]]:
        """Agent side, before signing: scan, then redact secrets. Returns (text, redactions)."""
        self.scan(text)
        return redact_secrets(text)

    def check_stored(self, texts: Iterable[str]) -> None:
        """Ledger side, before storing a signed body: scan, and refuse unredacted secrets."""
        for text in texts:
            self.scan(text)
            self.check_no_secrets([text])

    @staticmethod
    def check_no_secrets(texts: Iterable[str]) -> None:
        """Ledger side, for texts kept verbatim (session turns, titles, summaries): not
        scanned for directives (a transcript may quote anything), but a secret never
        enters the permanent log; the signer redacts it first (:func:`redact_secrets`)."""
        for text in texts:
            found = _redact.find_secret(text)
            if found is not None:
                raise GateRejection("secret", f"the text carries a {found.rule}; redact it before signing")

    @staticmethod
    def check_body_secrets(body: object) -> None:
        """Ledger side, for every body of every kind: no string anywhere in it (values at any
        depth, object keys too) may still carry a secret. Names the field that does."""
        found = _redact.find_secret(body)
        if found is not None:
            raise GateRejection(
                "secret", f"{found.path} carries a {found.rule}; redact it before signing ({found.path})"
            )

    @staticmethod
    def check_not_verbatim(content: str, sources: Sequence[str]) -> None:
        """Refuse a memory that only repeats one of its source records."""
        norm = normalize_text(content)
        for src in sources:
            if norm and norm == normalize_text(src):
                raise GateRejection(
                    "verbatim_record",
                    "the memory repeats its source record word for word; store the observation instead",
                )

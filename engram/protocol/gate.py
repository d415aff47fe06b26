"""The write gate: what may become a memory, checked before anything is signed or stored.

A memory is later recalled into an agent's context, so a poisoned memory is a persistent
prompt injection. The gate therefore runs on every memory text (``memory.written``,
``memory.superseded``, each ``memory.distilled`` entry):

1. **Normalise** invisible characters (:mod:`engram.protocol.invisible`): harmless ones are
   removed or kept as the text needs (a joiner inside an emoji, a zero-width space); what
   hides or reorders text (bidirectional overrides, tag characters) is refused
   (``invisible_unicode``). The normal form is what is signed and stored.
2. **Refuse** text matching a threat pattern, naming the pattern: prompt injection, role
   hijack, deception, exfiltration (curl/wget/nc carrying secrets, reading secret files),
   SSH persistence.
3. **Redact** secrets (API keys, tokens, private keys, passwords in URLs) before signing;
   the ledger refuses a submitted body that still carries one (it cannot redact bytes that
   are already signed).
4. **Refuse** a memory that merely repeats its source record verbatim: memory holds the
   observation, records stay records.
5. Run any deployment hooks (:class:`GateHook`), which may refuse with their own name.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engram.protocol import _confusables
from engram.protocol import redact as _redact
from engram.protocol.errors import RejectedEventError
from engram.protocol.invisible import HiddenText, normal_form, strip_for_scan
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
# A role hijack tells the reader (the model) that it is now someone else *as an AI* or that
# its rules no longer bind it. "You are now ..." alone is ordinary English ("you are now the
# only one who knows the steps", "you are now free of stress"): the rule needs what follows
# to lift constraints, to name a new or different AI, to strip the reader of being one, or to
# name a jailbreak mode or persona (an ordinary turn was refused).
_YOU_NOW = (
    r"(?:you are now|you ?'?re now|u r now|you will now be|you have (?:now )?become"
    r"|from now on,? you (?:are|will be|'re)|henceforth,? you (?:are|will be))"
)
_RULES = (
    r"(?:(?:all|of|any|your|the|its|their|these|those|such|previous|prior|every|ethical|safety|content|usage"
    r"|openai|openai's|anthropic|anthropic's) )*(?:rules|restrictions|guidelines|polic(?:y|ies)|filters"
    r"|constraints|limitations|limits|censorship|guardrails|programming|training|safeguards|ethics|morals)"
)
_LIFTED = (
    r"(?:unrestricted|uncensored|unfiltered|unbound|unshackled|unchained|unleashed|jailbroken|unaligned"
    r"|no longer (?:bound|restricted|limited|constrained|censored|filtered|governed|subject)\b"
    rf"|(?:free (?:from|of)|free to (?:ignore|disregard|break|bypass)|without(?: any)?) {_RULES})"
)
_AI = (
    r"(?:ai|a\.i\.|assistant|chat ?bot|(?:large )?language model|llm|chatgpt|gpt[-\w]*|claude|gemini|copilot)"
)
_NEW = r"(?:different|new|another|other|second|alternate|alternative|evil|rogue|secret)"
_MODE = r"(?:developer|god|dan|jailbreak|jailbroken|sudo|admin|unrestricted) mode"
_ROLE_HIJACK = re.compile(
    rf"\b{_YOU_NOW}\b[^.]{{0,40}}?\b{_LIFTED}"
    rf"|\b{_YOU_NOW} (?:an?|the|my|your) {_NEW} (?:\w+ )?{_AI}\b"
    rf"|\b(?:you are|you ?'?re) (?:now )?no longer (?:an?|the|my|your)? ?(?:\w+ )?{_AI}\b"
    r"(?! ?(?:pro|plus|subscriber|user|account|plan|customer|api|key))"
    rf"|\b(?:you are|you ?'?re) (?:now )?no longer (?:bound|restricted|limited|constrained|governed) (?:by|to)\b"
    rf"|\b(?:you are|you ?'?re) (?:now )?not (?:bound|restricted|limited|constrained|governed) by {_RULES}"
    rf"|\b{_YOU_NOW} (?:in|into|on) {_MODE}|\b(?:enable|enter|activate|switch to|turn on|unlock) {_MODE}"
    rf"|\b{_YOU_NOW} (?:an? )?dan\b(?!')|\bdan\b[^.]{{0,40}}\bdo anything now\b"
    rf"|\b(?:act as|acting as|pretend to be|pretend you are|pretend you're|role-?play as|play the role of"
    rf"|behave (?:as|like)|respond as) (?:an? |the |my )?(?:\w+ ){{0,2}}?"
    rf"(?:unrestricted|uncensored|unfiltered|jailbroken|unaligned|{_NEW} {_AI}\b)"
    r"|\byour new (?:role|persona|identity|instructions|directives?|system prompt|programming) (?:is|are)\b"
    r"|\bjailbreak (?:yourself|the (?:assistant|model|ai|bot|chatbot))\b"
)
# (name, regex), matched against the *folded* text (see fold_for_scan): HTML character
# references decoded, no invisible or format character, lower case, NFKC, no combining
# marks, common look-alike letters mapped to Latin, a space where Latin letters meet letters
# of another script, all whitespace (newlines included) collapsed to one space. Patterns aim
# at instructions to a future reader of the memory, not at words that merely occur in
# ordinary notes.
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
    ("role_hijack", _ROLE_HIJACK),
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
            r"(\$\{?[a-z_]*(key|token|secret|pass|password)[a-z_]*\}?|(?<!\w)\.env\b|id_rsa\b(?!\.pub)"
            r"|id_ed25519\b(?!\.pub)|/etc/(passwd|shadow)|\.aws/credentials|--data.{0,40}(key|token|secret|password))"
        ),
    ),
    (
        # Reading a secret file: a private key (not its .pub), credentials, a dotenv file
        # (".env" as a path, not an API such as process.env or deno.env).
        "exfiltration",
        re.compile(
            r"\b(cat|type|print|paste|upload|send|post|email)\b.{0,40}"
            r"(~?/?\.ssh/(id_[a-z0-9]+\b(?!\.pub)|authorized_keys)|\.aws/credentials|/etc/shadow|(?<!\w)\.env\b"
            r"|\.netrc|\.git-credentials)"
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

# Letters that render like Latin ones: the Unicode confusables (UTS #39) that are single
# letters or digits, plus the small-capital, dotless and script Latin forms by name
# (engram/protocol/_confusables.py, generated by tests/tools/make_confusables.py).
_CONFUSABLES = str.maketrans(_confusables.SOURCES, _confusables.TARGETS)
# The apostrophes people type (U+2019 in "you're", "don't", and its look-alikes): one form.
_APOSTROPHES = str.maketrans(dict.fromkeys("\u2018\u2019\u02bc\u00b4\u0060\u2032", "'"))
# Where a Latin letter meets a letter of another script ("אignore", "ignore指示"): a word
# boundary for the patterns, so that a glued letter cannot hide a keyword from \b.
_SCRIPT_SEAM = re.compile(r"(?<=[a-z])(?=[^\W\d_a-z])|(?<=[^\W\d_a-z])(?=[a-z])")


def fold_for_scan(text: str) -> str:
    """The form threat patterns see: HTML character references decoded, every invisible and
    format character removed (joiners and marks the normal form keeps too, so none can split
    a word), NFKC (fullwidth and mathematical letters), no combining marks, look-alikes
    mapped to Latin (UTS #39 confusables, small capitals, dotless and script forms),
    case-folded, one apostrophe, a space where Latin letters meet another script, whitespace
    collapsed."""
    text = strip_for_scan(html.unescape(text))
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.translate(_CONFUSABLES).casefold().translate(_CONFUSABLES).translate(_APOSTROPHES)
    return " ".join((text if text.isascii() else _SCRIPT_SEAM.sub(" ", text)).split())


# Secret redaction lives in engram.protocol.redact (one pass over every string of every
# body); the names stay importable from here.
SECRET_RULES = _redact.SECRET_RULES


_LINE_BREAKS = re.compile("\r\n|[\r\n\u2028\u2029\x85\x0b\x0c]")


def neutralise(text: str) -> str:
    """Text for an injected context block: the gate's normal form if the write gate would
    accept it as a memory, else a marker naming the rule (a record or snapshot quoting
    "ignore all previous instructions" is never shown to a later session as it was; the log
    still holds it)."""
    try:
        return WriteGate().scan(text)
    except GateRejection as e:
        return f"[withheld from context: matched the write gate's {e.pattern} rule]"


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

    def scan(self, text: str) -> str:
        """Refuse text that hides or reorders itself or matches a threat pattern; return its
        normal form (harmless invisible characters removed or kept as the text needs), the
        text to sign."""
        try:
            normal = normal_form(text)
        except HiddenText as e:
            raise GateRejection("invisible_unicode", str(e)) from None
        folded = fold_for_scan(_redact.without_markers(normal))  # "[REDACTED:github_token]" says no "token"
        for name, pattern in THREAT_PATTERNS:
            hit = pattern.search(folded)
            if hit:
                raise GateRejection(name, f"matched {hit.group()[:60]!r}")
        for hook in self.hooks:
            detail = hook.check(normal)
            if detail is not None:
                raise GateRejection(hook.name, detail)
        return normal

    def prepare(self, text: str) -> tuple[str, list[str]]:
        """Agent side, before signing: scan, then redact secrets in the normal form. Returns
        (text to sign, redactions)."""
        return redact_secrets(self.scan(text))

    def check_stored(self, texts: Iterable[str], *, secrets: bool = True) -> None:
        """Ledger side, before storing a signed body: scan, refuse text that is not in the
        gate's normal form (signed bytes cannot be changed, as with secrets), and refuse
        unredacted secrets (``secrets=False``: the caller checks them itself, as the log's
        edge does for the whole body with :meth:`check_body_secrets`)."""
        for text in texts:
            normal = self.scan(text)
            if normal != text:
                at = next(
                    (i for i, (a, b) in enumerate(zip(text, normal, strict=False)) if a != b), len(normal)
                )
                raise GateRejection(
                    "invisible_unicode",
                    f"U+{ord(text[at]):04X} at offset {at} is removed by the gate's normal form; "
                    "sign the text WriteGate.prepare returns",
                )
            if secrets:
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
        """Refuse a memory that only repeats one of its source records. Invisible characters
        count for nothing: a record keeps the zero-width spaces it was pasted with, the memory
        the gate's normal form, and neither may make a copy look new."""
        WriteGate.check_not_among(content, WriteGate.verbatim_forms(sources))

    @staticmethod
    def verbatim_forms(sources: Iterable[str]) -> frozenset[str]:
        """The forms :meth:`check_not_among` compares with, of ``sources`` (computed once when
        many memories are checked against the same records: a session's distillation)."""
        return frozenset(normalize_text(strip_for_scan(src)) for src in sources)

    @staticmethod
    def check_not_among(content: str, forms: Collection[str]) -> None:
        """:meth:`check_not_verbatim` against sources given by :meth:`verbatim_forms`."""
        norm = normalize_text(strip_for_scan(content))
        if norm and norm in forms:
            raise GateRejection(
                "verbatim_record",
                "the memory repeats its source record word for word; store the observation instead",
            )

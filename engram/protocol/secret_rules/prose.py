"""Secrets told in sentences: a password after a word that says so, a password beside a user
name, a high-entropy token next to a word that says secret, an AWS secret beside its key id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engram.protocol.secret_rules.core import (
    _CODE_VALUE,
    _CREDENTIAL_LIKE,
    Rule,
    Span,
    _identifier_like,
    _password_like,
    _whole,
    fold,
    is_placeholder,
    shannon_entropy,
)
from engram.protocol.secret_rules.names import names_a_secret

# -- prose -------------------------------------------------------------------------------------

_PROSE_WORDS = (
    r"(?:pass(?:word|wd|phrase|code)s?|pass\s?code|pin(?:\s?code)?|pw|(?:api|access|secret|private|master|license)\s?key"
    r"|(?:auth|access|api|bearer|bot|refresh|personal\s+access)\s?token|token|secret|credentials?|mot\s+de\s+passe"
    r"|contrase[ñn]a|passwort|kennwort|senha|пароль|"
    + re.escape(fold("пароль"))
    + r"|パスワード|密码|密碼|비밀번호)"
)
# Within one line: "[ \t]" where a sentence has a space (a value is never on the next line).
_SP = r"[ \t]"
_PROSE_VERB = (
    r"(?:'s|\u2019s|(?P<noverb>)(?="
    + _SP
    + r"+[\"'`\u201c])|"  # no verb, a quoted value: "the passphrase `glass-ocean-27`"
    + _SP
    + r"*(?::|=|\u2014|->|=>|\u662f|\u306f|\ub294|\uff1a)|"
    + _SP
    + r"+(?:is|was|are|were|will"
    + _SP
    + r"+be"
    r"|would"
    + _SP
    + r"+be|should"
    + _SP
    + r"+be|has"
    + _SP
    + r"+been|is"
    + _SP
    + r"+now|is"
    + _SP
    + r"+still"
    r"|remains|became|becomes|reads|equals|(?:(?:was|got|is|has" + _SP + r"+been)" + _SP + r"+)?"
    r"(?:changed|reset|set|updated|rotated)" + _SP + r"+to|to|est|es|ist|é|-(?=" + _SP + r")))"
)
_PROSE = re.compile(
    r"(?i)(?<![\w-])(?P<word>" + _PROSE_WORDS + r")(?![A-Za-z0-9_-])"
    r"(?:" + _SP + r"+(?:for|of|on|to|at|in)" + _SP + r"+(?:(?:the|my|our|your)" + _SP + r"+)?[\w.@/:-]{1,40}"
    r"(?:"
    + _SP
    + r"+[\w.@/:-]{1,40}){0,3}?)?"
    + _PROSE_VERB
    + _SP
    + r"*(?:(?:now|just|still|simply|literally|actually)"
    + _SP
    + r"+)?"
    r"(?:\"(?P<dq>[^\"\n]{3,80})\"|'(?P<sq>[^'\n]{3,80})'|`(?P<bq>[^`\n]{3,80})`|“(?P<cq>[^”\n]{3,80})”"
    r"|(?P<v>[^\s\"'`“]{3,128}?))(?=[.,;:!?)\]]*(?:\s|$))"
)
_PROSE_TRIGGERS = (
    "pass",
    "pin",
    "pw",
    "key",
    "token",
    "secret",
    "credential",
    "mot de",
    "contrase",
    "passwort",
    "kennwort",
    "senha",
    fold("пароль").lower(),
    "パスワード",
    "密码",
    "密碼",
    "비밀번호",
)
_PASSWORD_WORD = re.compile(
    r"(?i)pass|pin|pw|mot|contrase|kennwort|senha|пароль|"
    + re.escape(fold("пароль"))
    + r"|パスワード|密|비밀"
)


_PROSE_GROUPS = ("dq", "sq", "bq", "cq", "v")


def _prose(view: str) -> Iterator[Span]:
    """A password told in a sentence: "the prod DB password is hunter2-SECRET-key.", "my
    PIN is 4921", "the API key for staging is 9f8a...". The value must look like a credential
    (a digit, a symbol or mixed case; a number of 4 digits or more after a password word), so
    "the password is stored in the vault" is left alone."""
    for m in _PROSE.finditer(view):
        g = next((g for g in _PROSE_GROUPS if m.group(g) is not None), "v")
        if _prose_value_is_secret(m, g):
            yield m.span(g)


def _prose_value_is_secret(m: re.Match[str], g: str) -> bool:
    """The value in group ``g`` of one sentence that names a secret is one."""
    value = m.group(g)
    password_word = _PASSWORD_WORD.search(m.group("word")) is not None
    if names_a_secret(value):
        return False  # apiKey = "apiKey"
    if m.group("noverb") is not None and not _password_like(value):
        return False  # 'the password "field" is required': a quoted word, not a password
    if is_placeholder(value) and not (password_word and value.isdigit() and len(value) >= 4):
        return False
    if g == "v":
        return _bare_prose_value(value, password_word)
    if re.search(r"\s", value):
        return password_word and len(value) <= 64  # not a quoted sentence: 'a secret: "grant staff hate ..."'
    return password_word or _CREDENTIAL_LIKE.match(value) is not None


def _bare_prose_value(value: str, password_word: bool) -> bool:
    """An unquoted value of a sentence: a PIN after a password word, else a word that reads as
    a password (after a word like "key" or "token", with 8 characters and a digit)."""
    if value.isdigit():
        if not (password_word and len(value) >= 4):
            return False
    elif not _password_like(value) or _CODE_VALUE.match(value):
        return False
    return password_word or (len(value) >= 8 and any(c.isdigit() for c in value))


# -- entropy next to a word that says secret -------------------------------------------------

_CONTEXT_WORD = re.compile(
    r"(?i)(?<![A-Za-z])(?:pass(?:word|wd|phrase)?|pwd|secret|key|token|auth|credentials?|apikey|bearer"
    r"|pat|otp)s?(?![A-Za-z])"
)
_NOT_CONTEXT = re.compile(
    r"(?i)(?:public|pub|host|ssh-(?:rsa|ed25519)|gpg|pgp|fingerprint|finger|key\s?id|commit|sha(?:1|256|512)?|hash|digest"
    r"|checksum|leaf|root|nonce|uuid|trace|span|build|run|order|invoice|ticket|tracking"
    r"|primary|foreign|sort|partition|row|cache|idempoten\w*|lookup|dict|map|index|music|note|object|s3|redis)\W{0,3}$"
)
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_.~-])[A-Za-z0-9+/_.~-]{16,256}={0,2}(?![A-Za-z0-9+/=_.~-])")
#: What may stand between the word and the token: punctuation and a few short words.
_BETWEEN = re.compile(
    r"(?i)^(?:[\s:=\"'`>(\[,-]|\b(?:is|was|are|it's|it is|here|here's|now|the|a|my|our|your|this|for|of|to|as|set|use"
    r"|with|new|old|prod|production|staging|dev|test|api|app|access|value|string|=>|->)\b){0,8}$"
)


def _looks_random(token: str) -> bool:
    """A token that reads as generated: letters and digits mixed, no long run of one class,
    and high Shannon entropy for its length and alphabet (a UUID, a digest next to "key"
    and an identifier like ``getAccessTokenForUser`` fall short)."""
    core = token.strip("=")
    if not any(c.isdigit() for c in core) or not any(c.isalpha() for c in core):
        return False
    if _UUID.fullmatch(core) or _reads_as_text(core) or _identifier_like(core):
        return False
    return shannon_entropy(core) >= _entropy_floor(core)


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _reads_as_text(core: str) -> bool:
    """A domain, a path, a dotted name, a file, a long word with a number on it, or words
    joined by separators: text a person wrote, not a generated token."""
    if core.count(".") > 2 or core.count("/") > 1 or re.search(r"[a-z]{2,}\.[a-z]{2,}|\.[a-z]{2,5}$", core):
        return True  # a domain, a path, a dotted name, a file
    if re.search(r"[A-Za-z]{12,}", core) and not re.search(r"[A-Z][a-z]*[A-Z].*\d|\d.*[A-Z]", core):
        return True  # a long word with a number on it (passwordReset2024Handler)
    parts = [p for p in re.split(r"[+/_.~-]+", core) if p]
    # words joined: name+keyid+base64, user_id_v2
    return len(parts) > 1 and all(re.fullmatch(r"[A-Za-z]{2,}\d{0,3}|\d+", p) for p in parts)


def _entropy_floor(core: str) -> float:
    """Bits per character a generated token of this length and alphabet reaches."""
    n = len(core)
    if re.fullmatch(r"[0-9a-fA-F_-]+", core) is not None:  # hexadecimal
        return 3.0 if n < 24 else 3.3
    return 3.4 if n < 24 else 3.7 if n < 40 else 4.0


def _entropy_context(view: str) -> Iterator[Span]:
    """A high-entropy token within a few words after password / secret / key / token / auth
    (in prose or configuration): "the staging token is x7Kq2mPz9RtV4wLs8NbY", "key
    9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c". "public key", "key id", "commit", "sha256" ... before
    the word, a UUID, a path or a domain are not counted."""
    for w in _CONTEXT_WORD.finditer(view):
        if _NOT_CONTEXT.search(view[max(0, w.start() - 24) : w.start()]):
            continue
        tail = view[w.end() : w.end() + 300]
        t = _TOKEN.search(tail)
        if t is None or t.start() > 48 or not _BETWEEN.match(tail[: t.start()]):
            continue
        if tail[t.end() : t.end() + 1] == "(":
            continue  # a call: b64decode_strict(...)
        if _looks_random(t.group()) and not is_placeholder(t.group()):
            yield w.end() + t.start(), w.end() + t.end()


# -- pairs -------------------------------------------------------------------------------------

#: An AWS secret access key beside its key id (``credentials.csv``, a table, a chat): the id
#: is redacted by its own rule; the 40 characters after it by this one.
_AWS_PAIR = re.compile(
    r"(?:(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}|\[REDACTED:aws_access_key\])[\"']?[ \t]*[,;|\t:][ \t]*[\"']?"
    r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
PAIR_RULES: tuple[Rule, ...] = (
    Rule("aws_secret_key", _whole(_AWS_PAIR), ("akia", "asia", "aws_access_key")),
)


_ENTROPY_TRIGGERS = (
    "pass",
    "pwd",
    "secret",
    "key",
    "token",
    "auth",
    "credential",
    "bearer",
    "pat",
    "otp",
)


#: "user jdoe pw Kx8#pLm2", "login: admin / password: Summer2024!": a password beside a
#: user name, without a verb.
_PAIR = re.compile(
    r"(?i)(?<![\w-])(?:user(?:name)?|login|usr)(?:"
    + _SP
    + r"*[:=]"
    + _SP
    + r"*|"
    + _SP
    + r"+)[A-Za-z0-9._@+\\-]{1,64}"
    + _SP
    + r"*[,;/|]?"
    + _SP
    + r"*(?:and"
    + _SP
    + r"+)?(?:pass(?:word)?|passwd|pwd|pw)(?![\w*.(\[])"
    + _SP
    + r"*[:=]?"
    + _SP
    + r"*(?P<v>[^\s\"'`*:][^\s\"'`]{3,127}?)(?=[.,;!?)\]]*(?:\s|$))"
)


def _user_and_password(view: str) -> Iterator[Span]:
    for m in _PAIR.finditer(view):
        value = m.group("v")
        if is_placeholder(value) or _CODE_VALUE.match(value):
            continue
        if (value.isdigit() and len(value) >= 4) or _password_like(value):
            yield m.span("v")


def prose_rules() -> tuple[Rule, ...]:
    return (
        Rule("prose_password", _prose, _PROSE_TRIGGERS),
        Rule("prose_password", _user_and_password, ("pw", "pass", "pwd")),
        Rule("high_entropy_secret", _entropy_context, _ENTROPY_TRIGGERS, wraps=True, long=True),
    )

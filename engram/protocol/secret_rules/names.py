"""Secrets by name: ``NAME=value`` in every syntax (.env, shell, JSON, YAML, code, XML, PHP)
and the authorization headers, where the context names the value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engram.protocol.secret_rules.core import (
    _CODE_VALUE,
    _CREDENTIAL_LIKE,
    _IDENTIFIER,
    _PATH_VALUE,
    _WORDISH,
    MARKER,
    Rule,
    Span,
    _identifier_like,
    _password_like,
    is_placeholder,
    valued,
)

# -- secrets by name -----------------------------------------------------------------------

#: Names that say a value is secret, matched as a part of a longer identifier too
#: (PGPASSWORD, AWS_SECRET_ACCESS_KEY, stripeSecretKey, db-password).
SECRET_NAME = (
    r"(?:secret|passw(?:or)?d|passphrase|pwd|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"  # noqa: S105 - the words that name a secret, not one
    r"|auth[_-]?key|credentials?|client[_-]?secret|session[_-]?key|signing[_-]?key|encryption[_-]?key"
    r"|master[_-]?key|account[_-]?key|shared[_-]?key|app[_-]?key|secret[_-]?key|license[_-]?key"
    r"|(?<=[_.-])pass(?![A-Za-z]))"  # DB_PASS, smtp.pass, ansible_become_pass: "pass" ending a name
)
#: Identifiers that contain such a word but name something that is not secret.
NOT_SECRET_NAME = re.compile(
    r"(?i)(?:^|[_.-])(?:type|types|count|counts|limit|limits|len|length|size|ttl|expiry|expires?(?:_in|_at)?"
    r"|url|uri|endpoint|path|file|dir|name|names|field|header|prefix|policy|min|max|id|ids|usage|used|hint"
    r"|budget|estimate|rotation|required|enabled|timeout|lifetime|format|encoding|hash|kind|mode|rounds"
    r"|length|strength|pattern|regex|label|hint|reset|env|var|ref|location|provider|source|store|manager)$"
    r"|\.(?:json|ya?ml|pem|key|crt|p12|pfx|txt|env|ini|conf|cfg|toml)$|(?:^|[_.-])tokens$"
    r"|^(?:max|min|num|n)_?tokens?$|tokens?_(?:in|out|used|budget|count)|^o?ldpwd$|^pwd$|^tokeni[sz]"
    r"|^input_tokens|^output_tokens|^total_tokens|^completion_tokens|^prompt_tokens"
    r"|^no_?|^show_?|^has_?|^is_?|^use_?|^require_?|^forgot|^verify_?|^confirm_?(?!pass)"
)
_PASSWORD_NAME = re.compile(r"(?i)pass(?:w(?:or)?d|phrase)|pwd")
_STRONG_NAME = re.compile(
    r"(?i)(?:secret|passw(?:or)?d|passphrase|token|api[_-]?key|apikey|private[_-]?key|credential|access[_-]?key)"
)


def secret_name(name: str) -> bool:
    """``name`` (an identifier, a JSON key) says its value is a secret."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)  # secretName: a name, not a secret
    if NOT_SECRET_NAME.search(snake) or not re.search("(?i)" + SECRET_NAME, name):
        return False
    low = name.lower()
    # MODULE_PWD_STATE: "pwd" counts only as the name's last word
    return "pwd" not in low or re.search(r"pwd$", low) is not None


def value_is_secret(name: str, value: str) -> bool:
    """A structured field (a tool argument, a JSON key) named ``name`` holds ``value``: is it
    a secret? A strong name (password, token, secret, API key ...) with a value that is not a
    placeholder, code or a number."""
    v = value.strip()
    if not secret_name(name) or not _STRONG_NAME.search(name) or len(v) < 4 or is_placeholder(v):
        return False
    if _CODE_VALUE.match(v) or _PATH_VALUE.match(v):
        return False
    if re.search(r"(?i)pass(?:w(?:or)?d|phrase)", name):
        return len(v) <= 256 and "\n" not in v  # a password may be any word, even with spaces
    # a token, a key, a secret: one word that reads as a credential ("estimated" is not one)
    return not re.search(r"\s", v) and _CREDENTIAL_LIKE.match(v) is not None


_ASSIGNED = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?P<n>[A-Za-z0-9_.-]{0,64}?" + SECRET_NAME + r"[A-Za-z0-9_.-]{0,64}?)"
    r"['\"]?[ \t]{0,8}(?P<sep>:=|=>|[:=])(?!=)[ \t]{0,8}"
    # A quoted value runs to its closing quote (a generated key holds & ; , ( ): Django's
    # SECRET_KEY); an unquoted one stops at a separator (a query string's &, a list's ,).
    r"(?:\"(?P<dq>[^\"\n]{3,256})\"|'(?P<sq>[^'\n]{3,256})'|(?P<v>[^\s'\";,&()]{3,}))"
)

#: "&" and more of a value (not "&name=", the next parameter of a query string).
_AMP_TAIL = re.compile(r"(?:&(?![A-Za-z0-9_.\[\]-]{1,64}=)[^\s'\";,&()]+)+")


def _value_group(m: re.Match[str]) -> str:
    """Which group holds the assigned value: double-quoted, single-quoted or bare."""
    return "dq" if m.group("dq") is not None else "sq" if m.group("sq") is not None else "v"


def _assigned(view: str) -> Iterator[Span]:
    """NAME=value (.env, shell, connection strings), "name": "value" (JSON), name: value
    (YAML), name = 'value' (code); the name stays."""
    for m in _ASSIGNED.finditer(view):
        if not (secret_name(m.group("n")) and _assigned_is_secret(view, m)):
            continue
        group = _value_group(m)
        tail = _AMP_TAIL.match(view, m.end()) if group == "v" else None
        # a connection string's or a properties file's value runs on over "&"; a query
        # string's "&name=" starts the next parameter
        yield (m.start(group), tail.end()) if tail is not None else m.span(group)


def names_a_secret(value: str) -> bool:
    """``value`` is itself the name of a secret (``challengePassword``), not a value."""
    return bool(
        _IDENTIFIER.match(value) and re.search("(?i)" + SECRET_NAME, value) and not re.search(r"\d", value)
    )


def _assigned_is_secret(view: str, m: re.Match[str]) -> bool:
    """The value of one assignment to a secret's name is a secret, quoted or bare."""
    group = _value_group(m)
    name, value = m.group("n"), m.group(group)
    if value.startswith("[REDACTED") and not value.startswith("[REDACTED]") and not MARKER.match(value):
        return True  # a value dressed as a marker: [REDACTED:hunter2x] names no rule
    if is_placeholder(value) or names_a_secret(value):
        return False  # a name, not a value: CHALLENGE_PASSWORD: "challengePassword"
    if re.search(r"\s", value) and (
        not _PASSWORD_NAME.search(name) or len(value) > 64 or not any(map(_password_like, value.split()))
    ):
        return False  # a quoted phrase: a password of words with a digit or symbol, not a label
    if (_WORDISH.match(value) or re.fullmatch(r"[a-z]+(?:_[a-z]+)+", value)) and not _PASSWORD_NAME.search(
        name
    ):
        return False  # a word: TokenKind.INT: "int" (a password may be a word; a key is not)
    if _PATH_VALUE.match(value):
        return False  # a file: GOOGLE_APPLICATION_CREDENTIALS=/etc/app/credentials.json
    return group != "v" or _bare_value_is_secret(view, m)


def _bare_value_is_secret(view: str, m: re.Match[str]) -> bool:
    """An unquoted value is a literal credential, not code or prose."""
    name, value = m.group("n"), m.group("v")
    if _CODE_VALUE.match(value) or view[m.end() : m.end() + 1] in ("(", "[", "."):
        return False  # an expression (args.token, get_password(), [CFWS]), not a literal
    spaced = view[m.end("n") : m.start("sep")].strip("'\"") != "" or view[
        m.end("sep") : m.start("v")
    ].startswith((" ", "\t"))
    bare_word = _IDENTIFIER.match(value) is not None and not any(c.isdigit() for c in value)
    if bare_word and (spaced or len(value) < 6 or not name.isupper()):
        return False  # code assigning a variable (cache_token = current_token)
    if m.group("sep") != ":":
        return True
    if not _CREDENTIAL_LIKE.match(value):
        return False  # prose ("password: see the vault"), not a credential
    # a type annotation: private_key: Ed25519PrivateKey,
    return not (_identifier_like(value) and view[m.end() : m.end() + 3].lstrip()[:1] in ",)|=]")


_XML = re.compile(
    r"<(?P<n>[A-Za-z_][\w:.-]{0,64})>(?P<v>[^<\s][^<\n]{2,200}?)</(?P=n)>|"
    r"(?i:\bdefine)\(\s*['\"](?P<dn>[A-Z0-9_]{0,40}(?:PASSWORD|SECRET|KEY|SALT|TOKEN)[A-Z0-9_]{0,40})['\"]\s*,\s*"
    r"['\"](?P<dv>[^'\"\n]{3,200})['\"]"
)


def _xml_and_php(view: str) -> Iterator[Span]:
    """``<password>...</password>`` (Maven, Tomcat, .NET config) and PHP
    ``define('DB_PASSWORD', '...')`` (wp-config.php)."""
    for m in _XML.finditer(view):
        if m.group("n") is not None:
            name, group = m.group("n").split(":")[-1], "v"
        else:
            name, group = m.group("dn"), "dv"
        value = m.group(group)
        if secret_name(name) and not is_placeholder(value) and len(value.strip()) >= 3:
            yield m.span(group)


CONTEXT_RULES: tuple[Rule, ...] = (
    valued(
        "basic_auth",
        r"(?i)\b(?:proxy-)?authorization\s*[:=]\s*['\"]?basic\s+(?P<v>[A-Za-z0-9+/]{6,}=*)",
        "authoriz",
    ),
    valued("bearer_token", r"(?i)\bbearer\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)", "bearer"),
    valued(
        "authorization_header",
        r"(?i)\b(?:proxy-)?authorization['\"]?\s?:\s*['\"]?(?!basic\b|bearer\b)(?:[a-z0-9-]{1,20}\s+)?"
        r"(?P<v>[A-Za-z0-9._~+/=-]{16,})",
        "authoriz",
    ),
    valued(
        "api_key_header",
        r"(?i)\b(?:x-api-key|api-key|x-auth-token|x-access-token|private-token|x-goog-api-key|x-shopify-access-token"
        r"|x-vault-token|x-figma-token|x-postmark-server-token|ocp-apim-subscription-key|x-functions-key|dd-api-key"
        r"|dd-application-key|x-api-secret|x-secret-key|x-csrf-token|x-xsrf-token)\s*:\s*['\"]?(?P<v>[^\s'\";,]{8,})",
        "api-key",
        "auth-token",
        "access-token",
        "private-token",
        "vault-token",
        "figma-token",
        "server-token",
        "subscription-key",
        "functions-key",
        "application-key",
        "api-secret",
        "secret-key",
        "srf-token",
    ),
    valued(
        "curl_credentials",
        r"(?:^|\s)(?:-u|--user|--proxy-user)[\s=]+['\"]?[^\s:'\"]+:(?P<v>[^\s'\"]+)",
        "-u",
        "--user",
        "--proxy-user",
        exact_case=True,
    ),
    valued(
        "url_password",
        r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"]{0,256}:(?P<v>[^\s@/'\"]{3,256})@",
        "://",
    ),
    Rule("assigned_secret", _xml_and_php, ("</", "define(")),
    Rule(
        "assigned_secret",
        _assigned,
        ("secret", "passw", "passphrase", "pwd", "token", "key", "credential", "_pass", ".pass", "-pass"),
    ),
)

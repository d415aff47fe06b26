"""Secret redaction: what may never be signed into the permanent log.

Trust role: the log is append-only and signed, so a secret that reaches a signed body can
never be taken back (erasure drops a body, but a leaked key must be assumed copied). Every
string of every event body therefore passes :func:`redact_body` on the signer's side before
it is signed (:class:`~engram.protocol.signer.AgentSigner`), and the log refuses a body in
which :func:`find_secret` still finds one (``gate.secret``, naming the field, nothing
written). Redaction is deterministic and idempotent: ``redact(redact(x)) == redact(x)`` and
a redacted text is never refused, so the signer and the log always agree.

The rules are ours, grouped in two families:

* **Shaped tokens**: credentials whose prefix or structure names them (AWS, GitHub, GitLab,
  Stripe, OpenAI/Anthropic, Slack, Google, SendGrid, Twilio, npm, PyPI, Hugging Face,
  Square, Discord, Telegram, JWTs, private-key blocks, Azure storage keys). The families
  follow the regex detectors of Yelp's ``detect-secrets`` (the test suite runs that tool
  over the same corpus as an oracle; it is not a run-time dependency because importing it
  costs ~180 ms per hook process and pulls in ``requests`` and ``pyyaml``).
* **Secrets by context**: a value assigned to a name that says it is secret, in the forms
  people paste: ``.env`` lines and shell exports (``AWS_SECRET_ACCESS_KEY=...``,
  ``PGPASSWORD=...``: names are matched inside SNAKE_CASE, not only as whole words), JSON,
  YAML and code literals (``"password": "..."``), HTTP headers (``Authorization: Basic``,
  ``X-Api-Key``), ``curl -u user:pass``, URLs with a password, connection strings.
  Placeholders (``$VAR``, ``${VAR}``, ``<...>``, ``***``, ``changeme``, empty, numbers,
  ``None``/``null``) are left alone, which keeps prose and code readable (the false-positive
  rate on ordinary text is measured by ``python -m tests.tools.redaction_fp``;
  docs/privacy.md).

A redacted secret becomes ``[REDACTED:<rule>]``; in an assignment the name stays
(``DB_PASSWORD=[REDACTED:assigned_secret]``) so the text keeps its meaning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from engram.protocol.errors import MalformedError

__all__ = [
    "MAX_WALK_DEPTH",
    "SECRET_RULES",
    "SecretFinding",
    "find_secret",
    "iter_strings",
    "redact_body",
    "redact_secrets",
]

_MARK = "[REDACTED:"
#: A value that is already a redaction marker, a variable reference or a placeholder.
_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        \[REDACTED:[a-z_]+\]\S*          # already redacted
      | \$\{?[A-Za-z_][\w.]*\}?\S*       # $VAR, ${VAR}
      | %\(?[\w.]*\)?s? | \{\{.*\}\}     # %(x)s, {{ x }}
      | <[^<>]*>                          # <your-token>
      | .*\{[\w.]*\}.*                     # a format string: '{0}:{1}'.format(...)
      | \*+ | x+ | \.+ | -+ | _+ | \#+   # ****, xxxx, ...
      | (?:none|null|nil|true|false|undefined|empty|redacted|hidden|secret|password|token
         |changeme|change_me|example|dummy|placeholder|required|optional|string|str|bytes|\?+
         |yes|no|on|off|y|n|enabled|disabled)
      | your[_-].* | my[_-]?(?:secret|token|password|key)
      | \d+(?:\.\d+)?[a-z]{0,2}             # a number (a TTL, a limit, 10m)
      | env\(.*|os\.environ.*|process\.env.*|getenv\(.*|secrets\..*|vault:.*
    )$"""
)


def _keep_name(name: str) -> Callable[[re.Match[str]], str | None]:
    """Replacement for a context rule: keep the assignment's left side, redact the value,
    unless the value is a placeholder (then the match is left as it is)."""

    def repl(m: re.Match[str]) -> str | None:
        value = m.group("v")
        if _PLACEHOLDER.match(value.strip("'\"")):
            return None
        start, end = m.span("v")
        whole = m.group(0)
        base = m.start(0)
        return whole[: start - base] + f"[REDACTED:{name}]" + whole[end - base :]

    return repl


def _whole(name: str) -> Callable[[re.Match[str]], str | None]:
    def repl(m: re.Match[str]) -> str | None:
        return f"[REDACTED:{name}]"

    return repl


# Names that say a value is secret, matched as a part of a longer identifier too
# (PGPASSWORD, AWS_SECRET_ACCESS_KEY, stripeSecretKey, db-password).
_SECRET_NAME = (
    r"(?:secret|passw(?:or)?d|passphrase|pwd|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"  # noqa: S105 - the words that name a secret, not one
    r"|auth[_-]?key|credentials?|client[_-]?secret|session[_-]?key|signing[_-]?key|encryption[_-]?key)"
)
# Identifiers that contain such a word but name something that is not secret.
_NOT_SECRET_NAME = re.compile(
    r"(?i)(?:^|[_.-])(?:type|types|count|counts|limit|limits|len|length|size|ttl|expiry|expires?(?:_in|_at)?"
    r"|url|uri|endpoint|path|file|dir|name|names|field|header|prefix|policy|min|max|id|ids|usage|used|hint"
    r"|budget|estimate|rotation|required|enabled|timeout|lifetime|format|encoding|hash|kind|mode)$"
    r"|^(?:max|min|num|n)_?tokens?$|tokens?_(?:in|out|used|budget|count)|^o?ldpwd$|^pwd$|^tokeni[sz]"
    r"|^input_tokens|^output_tokens|^total_tokens|^completion_tokens|^prompt_tokens"
)


#: An unquoted value that is code: a dotted lower-case name or a call, subscript or literal.
_CODE_VALUE = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z_][\w.]*[(\[{].*|[(\[{].*|\$\(.*)$"
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: An unquoted value after ``name:`` counts only if it looks like a credential (a digit, a
#: symbol or mixed case, and 6 characters or more), not like a word of prose.
_CREDENTIAL_LIKE = re.compile(r"^(?=.{6,})(?:.*[0-9]|.*[^A-Za-z0-9]|.*[a-z].*[A-Z]|.*[A-Z].*[a-z])")


def _named(name: str) -> Callable[[re.Match[str]], str | None]:
    inner = _keep_name(name)

    def repl(m: re.Match[str]) -> str | None:
        if _NOT_SECRET_NAME.search(m.group("n")):
            return None
        name_part = m.group("n").lower()
        if "pwd" in name_part and not re.search(r"(?:^|[_.-])?pwd$", name_part):
            return None  # MODULE_PWD_STATE: "pwd" counts only as the name's last word
        value = m.group("v")
        if not m.group("q"):
            if _CODE_VALUE.match(value):
                return None  # an expression (args.token, get_password(), [CFWS]), not a literal
            spaced = m.group(0)[m.end("n") - m.start(0) :].startswith((" ", "\t")) or m.group(0)[
                m.end("sep") - m.start(0) :
            ].startswith((" ", "\t"))
            bare_word = _IDENTIFIER.match(value) is not None and not any(c.isdigit() for c in value)
            if bare_word and (spaced or len(value) < 6 or not m.group("n").isupper()):
                return None  # code assigning a variable (cache_token = current_token)
            if m.group("sep") == ":" and not _CREDENTIAL_LIKE.search(value):
                return None  # prose ("password: see the vault"), not a credential
        return inner(m)

    return repl


@dataclass(frozen=True, slots=True)
class _Rule:
    """One rule. ``triggers``: substrings of the lower-cased text without which the pattern
    cannot match (a C-speed ``in`` test spares the regex on almost every string); empty
    means always run."""

    name: str
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str | None]
    triggers: tuple[str, ...] = ()
    #: the triggers are matched against the text as it is, not lower-cased
    exact_case: bool = False

    def may_match(self, text: str, lowered: str) -> bool:
        if not self.triggers:
            return True
        within = text if self.exact_case else lowered
        return any(t in within for t in self.triggers)


def _shaped(
    name: str, pattern: str, flags: int = 0, *, triggers: tuple[str, ...] = (), exact_case: bool = False
) -> _Rule:
    return _Rule(name, re.compile(pattern, flags), _whole(name), triggers, exact_case)


#: The rules, applied in order (block-shaped ones first, so a private key inside an
#: assignment is one finding). Each is linear-time on its input (no nested quantifiers over
#: the same characters).
SECRET_RULES: tuple[_Rule, ...] = (
    _shaped(
        "private_key",
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.S,
        triggers=("private key",),
    ),
    _shaped(
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}(?![A-Za-z0-9])",
        triggers=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        exact_case=True,
    ),
    _shaped(
        "github_token",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9_]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        triggers=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        exact_case=True,
    ),
    _shaped(
        "gitlab_token",
        r"(?<![A-Za-z0-9_-])(?:(?:glpat|gldt|glft|glsoat|glrt|glptt|gloas|glimt|glagent|glcbt)-[A-Za-z0-9_-]{20,}"
        r"|GR1348941[A-Za-z0-9_-]{20,})",
        triggers=("gl", "GR1348941"),
        exact_case=True,
    ),
    _shaped(
        "stripe_key",
        r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,}",
        triggers=("_live_", "_test_", "whsec_"),
    ),
    _shaped(
        "openai_key",
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        triggers=("sk-",),
    ),
    _shaped(
        "slack_token",
        r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9-]{10,}"
        r"|https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}",
        triggers=("xox", "hooks.slack.com"),
    ),
    _shaped(
        "google_api_key",
        r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}|\bya29\.[0-9A-Za-z_-]{20,}",
        triggers=("aiza", "ya29."),
    ),
    _shaped("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", triggers=("sg.",)),
    _shaped(
        "twilio_key",
        r"(?<![A-Za-z0-9])(?:AC|SK)[0-9a-f]{32}(?![A-Za-z0-9])",
        triggers=("AC", "SK"),
        exact_case=True,
    ),
    _shaped("npm_token", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", triggers=("npm_",)),
    _shaped("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", triggers=("pypi-",)),
    _shaped("huggingface_token", r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", triggers=("hf_",)),
    _shaped("square_token", r"\bsq0(?:csp|atp)-[0-9A-Za-z_-]{22,}", triggers=("sq0",)),
    _shaped(
        "discord_token",
        r"[MNO](?<![A-Za-z0-9_-][MNO])[A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
    ),
    _shaped("telegram_token", r"(?<![0-9])\d{8,10}:AA[0-9A-Za-z_-]{33}(?![0-9A-Za-z_-])", triggers=(":aa",)),
    _shaped("azure_storage_key", r"AccountKey=[A-Za-z0-9+/=]{86,88}", triggers=("accountkey=",)),
    _shaped("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", triggers=("eyj",)),
    # -- by context ------------------------------------------------------------------------
    _Rule(
        "basic_auth",
        re.compile(r"(?i)\b(?:proxy-)?authorization\s*[:=]\s*['\"]?basic\s+(?P<v>[A-Za-z0-9+/]{6,}=*)"),
        _keep_name("basic_auth"),
        ("authoriz",),
    ),
    _Rule(
        "bearer_token",
        re.compile(r"(?i)\bbearer\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)"),
        _keep_name("bearer_token"),
        ("bearer",),
    ),
    _Rule(
        "authorization_header",
        re.compile(
            r"(?i)\b(?:proxy-)?authorization['\"]?\s?:\s*['\"]?(?!basic\b|bearer\b)(?:[a-z0-9-]{1,20}\s+)?"
            r"(?P<v>[A-Za-z0-9._~+/=-]{16,})"
        ),
        _keep_name("authorization_header"),
        ("authoriz",),
    ),
    _Rule(
        "api_key_header",
        re.compile(
            r"(?i)\b(?:x-api-key|api-key|x-auth-token|x-access-token|private-token|x-goog-api-key)\s*:\s*"
            r"['\"]?(?P<v>[^\s'\";,]{8,})"
        ),
        _keep_name("api_key_header"),
        ("api-key", "auth-token", "access-token", "private-token"),
    ),
    _Rule(
        "curl_credentials",
        re.compile(r"(?:^|\s)(?:-u|--user|--proxy-user)[\s=]+['\"]?[^\s:'\"]+:(?P<v>[^\s'\"]+)"),
        _keep_name("curl_credentials"),
        ("-u", "--user", "--proxy-user"),
        True,
    ),
    _Rule(
        "url_password",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"]{0,256}:(?P<v>[^\s@/'\"]{3,256})@"),
        _keep_name("url_password"),
        ("://",),
    ),
    # NAME=value (.env, shell, connection strings), "name": "value" (JSON), name: value
    # (YAML), name = 'value' (code). The name may carry a prefix and suffix around the word.
    _Rule(
        "assigned_secret",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])(?P<n>[A-Za-z0-9_.-]{0,64}?" + _SECRET_NAME + r"[A-Za-z0-9_.-]{0,64}?)"
            r"['\"]?\s{0,8}(?P<sep>:=|=>|[:=])\s{0,8}(?P<q>['\"]?)(?P<v>(?!\[REDACTED:)[^\s'\";,&()]{3,})(?P=q)"
        ),
        _named("assigned_secret"),
        ("secret", "passw", "passphrase", "pwd", "token", "key", "credential"),
    ),
)


_SEPARATORS = frozenset(" \t\n=:@")


def _cannot_hold_secret(text: str) -> bool:
    """Fast path: every rule needs 20 characters of token, or a separator (space, ``=``,
    ``:``, ``@``) and 6 characters; ids, refs and digests of the schemas are spared."""
    return len(text) < 6 or (len(text) < 20 and _SEPARATORS.isdisjoint(text))


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """Replace secrets with ``[REDACTED:<rule>]``; return the text and the rules that fired."""
    found: list[str] = []
    if _cannot_hold_secret(text):
        return text, found
    lowered = text.lower()
    for rule in SECRET_RULES:
        if not rule.may_match(text, lowered):
            continue

        def repl(m: re.Match[str], rule: _Rule = rule) -> str:
            out = rule.replace(m)
            if out is None:
                return m.group(0)
            found.append(rule.name)
            return out

        text = rule.pattern.sub(repl, text)
    return text, found


def _first_secret(text: str) -> str | None:
    if _cannot_hold_secret(text):
        return None
    lowered = text.lower()
    for rule in SECRET_RULES:
        if not rule.may_match(text, lowered):
            continue
        for m in rule.pattern.finditer(text):
            if rule.replace(m) is not None:
                return rule.name
    return None


#: Deeper than any body schema nests (the strict JSON parser of the log bounds depth too).
MAX_WALK_DEPTH = 32


def iter_strings(value: Any, path: str = "$", depth: int = 0) -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, with its path (``$.tool.result[2]``); object keys are
    strings too (yielded with the path of the object and ``{key}``). Bounded by depth."""
    if depth > MAX_WALK_DEPTH:
        raise MalformedError(f"a body nests deeper than {MAX_WALK_DEPTH} levels", check="body.depth")
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


def find_secret(body: Any) -> SecretFinding | None:
    """The first string of ``body`` (any depth, keys included) that still carries a secret."""
    for path, text in iter_strings(body):
        rule = _first_secret(text)
        if rule is not None:
            return SecretFinding(path=path, rule=rule)
    return None


def redact_body(body: Any, depth: int = 0) -> Any:
    """``body`` with every string value redacted (a new value; the input is not changed).
    Keys are kept (a secret in a key is refused by the log, never rewritten)."""
    if depth > MAX_WALK_DEPTH:
        raise MalformedError(f"a body nests deeper than {MAX_WALK_DEPTH} levels", check="body.depth")
    if isinstance(body, str):
        return redact_secrets(body)[0]
    if isinstance(body, Mapping):
        return {k: redact_body(v, depth + 1) for k, v in body.items()}
    if isinstance(body, (list, tuple)):
        return [redact_body(v, depth + 1) for v in body]
    return body

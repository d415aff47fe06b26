"""What every secret rule shares: the :class:`Rule` value, the closed set of marker names, the
look-alike fold, the judges of values that are not secrets, and the rule builders.

Trust role: the marker names are a contract with stored data (a marker in the permanent log
names the rule that removed the secret), so they are declared here once, in full, and a rule
whose name is not among them cannot be built.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engram.protocol import _confusables

Span = tuple[int, int]
Finder = Callable[[str], Iterator[Span]]

#: Every name a marker can carry: a rule's (ours, the library's), or ``base64_`` and one. A
#: marker is recognised only with one of these names, so a secret dressed as a marker
#: (``[REDACTED:dapi0a1b...]``) is not taken for one. A test holds it equal to the names
#: the rules carry.
MARKER_NAMES = frozenset(
    (
        "age_secret_key",
        "airtable_token",
        "alibaba_key",
        "api_key_header",
        "artifactory_token",
        "assigned_secret",
        "atlassian_token",
        "authorization_header",
        "aws_access_key",
        "aws_secret_key",
        "azure_client_secret",
        "azure_sas",
        "azure_storage_key",
        "basic_auth",
        "bearer_token",
        "brevo_key",
        "buildkite_token",
        "circleci_token",
        "cli_password",
        "clojars_token",
        "cloudant_credentials",
        "cloudflare_origin_key",
        "connection_password",
        "contentful_token",
        "curl_credentials",
        "databricks_token",
        "digitalocean_token",
        "discord_token",
        "docker_auth",
        "docker_token",
        "doppler_token",
        "dropbox_token",
        "easypost_key",
        "figma_token",
        "fly_token",
        "frameio_token",
        "github_token",
        "gitlab_token",
        "google_api_key",
        "google_oauth_secret",
        "grafana_token",
        "groq_key",
        "heroku_key",
        "high_entropy_secret",
        "html_input",
        "huggingface_token",
        "ibm_cloud_iam_key",
        "ibm_cos_hmac_key",
        "jwt",
        "kubeconfig_key",
        "langsmith_key",
        "linear_key",
        "mailchimp_key",
        "mailgun_key",
        "mapbox_token",
        "mysql_password",
        "netlify_token",
        "netrc_password",
        "newrelic_key",
        "notion_token",
        "npm_token",
        "nuget_key",
        "onepassword_token",
        "openai_key",
        "perplexity_key",
        "pgpass_password",
        "pinecone_key",
        "planetscale_token",
        "postman_key",
        "prefect_key",
        "private_key",
        "prose_password",
        "pulumi_token",
        "putty_private_key",
        "pypi_token",
        "render_key",
        "replicate_token",
        "rubygems_key",
        "sendgrid_key",
        "sentry_token",
        "session_cookie",
        "shippo_token",
        "shopify_token",
        "slack_token",
        "smb_password",
        "smtp_auth",
        "softlayer_key",
        "sonarqube_token",
        "square_token",
        "sshpass_password",
        "stripe_key",
        "supabase_token",
        "tailscale_key",
        "telegram_token",
        "terraform_token",
        "twilio_key",
        "typeform_token",
        "url_password",
        "vault_token",
        "webhook_url",
        "wifi_password",
        "xai_key",
    )
)
MARKER = re.compile(
    r"\[REDACTED:(?:base64_)?(?:"
    + "|".join(sorted(map(re.escape, MARKER_NAMES), key=len, reverse=True))
    + r")\]"
)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule. ``find(view)`` yields the spans to replace with ``[REDACTED:<name>]``.

    ``triggers``: substrings (of the lower-cased view, or of the view itself when
    ``exact_case``) without which the rule cannot fire; empty means always run. ``wraps``:
    the rule also runs on the view with wrapped lines joined (a token split over two lines).
    ``long``: the rule needs a run of 16 token characters (:data:`LONG_RUN`), which most
    sentences lack, so a whole family is skipped at once.
    """

    name: str
    find: Finder
    triggers: tuple[str, ...] = ()
    exact_case: bool = False
    wraps: bool = False
    long: bool = False

    def __post_init__(self) -> None:
        if self.name not in MARKER_NAMES:  # a new rule declares its marker name in MARKER_NAMES first
            raise ValueError(f"secret rule {self.name!r} is not in MARKER_NAMES")

    def may_match(self, text: str, lowered: str) -> bool:
        if not self.triggers:
            return True
        within = text if self.exact_case else lowered
        for t in self.triggers:  # noqa: SIM110 - a loop: no generator on the hottest path
            if t in within:
                return True
        return False


# -- look-alikes ---------------------------------------------------------------------------

_CONFUSABLE = dict(zip(_confusables.SOURCES, _confusables.TARGETS, strict=True))


class _FoldTable(dict[int, str]):
    """``str.translate`` table, filled on demand: a character that NFKC or the confusables
    (UTS #39) map to one ASCII character becomes it (case kept where the source has one)."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        out = ch
        if code >= 0x80:
            nf = unicodedata.normalize("NFKC", ch)
            if len(nf) == 1 and nf.isascii() and nf.isprintable():
                out = nf
            elif ch in _CONFUSABLE:
                t = _CONFUSABLE[ch]
                out = t.upper() if ch.isupper() else t
        if len(self) < 65_536:
            self[code] = out
        return out


_FOLD = _FoldTable()


def fold(text: str) -> str:
    """One character for one: look-alikes and width variants of letters and digits as ASCII
    (fullwidth letters, a Cyrillic letter in a Latin word), so that a span is the same in
    both texts."""
    return text if text.isascii() else text.translate(_FOLD)


# -- values that are not secrets -----------------------------------------------------------

#: A value that is already a redaction marker, a variable reference or a placeholder.
_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        \[REDACTED\]\S*                  # redacted by hand
      | \$\{?[A-Za-z_][\w.]*\}?\S*       # $VAR, ${VAR}
      | %\(?[\w.]*\)?s? | \{\{.*\}\}     # %(x)s, {{ x }}
      | <[^<>]*>                          # <your-token>
      | .*\{[\w.]*\}.*                     # a format string: '{0}:{1}'.format(...)
      | \*+ | x+ | \.+ | -+ | _+ | \#+ | •+   # ****, xxxx, ...
      | \(?(?:none|null|nil|true|false|undefined|empty|redacted|hidden|secret|password|token
         |changeme|change_me|example|dummy|placeholder|required|optional|string|str|bytes|\?+
         |yes|no|on|off|y|n|enabled|disabled|masked|unset|omitted|same|prompt
         |pass|passwd|pwd|pw|pass(?:word)?123|secret123|foo|bar|baz|user|username|s3cr3t|abc123)\)?
      | your[_-].* | my[_-]?(?:secret|token|password|key)
      | (?-i:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)   # an environment variable's name: "DOMAIN_PASSWORD"
      | \d+(?:\.\d+)?[a-z]{0,2}             # a number (a TTL, a limit, 10m)
      | env\(.*|os\.environ.*|process\.env.*|getenv\(.*|secrets\..*|vault:.*|ref\+.*|op://.*
    )$"""
)


def is_placeholder(value: str) -> bool:
    """A value that stands for a secret without being one (``$VAR``, ``<token>``, ``***``, a
    redaction marker)."""
    v = value.strip("'\"`")
    return MARKER.match(v) is not None or _PLACEHOLDER.match(v) is not None


#: An unquoted value that counts as a credential: 6 characters or more, with a digit, a
#: symbol or mixed case (not a word of prose: "password: see the vault").
_CREDENTIAL_LIKE = re.compile(r"^(?=.{6,})(?:.*[0-9]|.*[^A-Za-z0-9]|.*[a-z].*[A-Z]|.*[A-Z].*[a-z])")
#: An unquoted value that is code: a dotted name, a call, a subscript or a literal.
_CODE_VALUE = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|->)[A-Za-z_][A-Za-z0-9_]*)+[(\[{]?.*|[A-Za-z_][\w.]*[(\[{].*|[(\[{].*"
    r"|\$\(.*|[A-Za-z_]\w*[)\]}]+[,;]?|[A-Z][A-Za-z]+-[A-Z][A-Za-z]+|`.*)$"  # token}), ConvertTo-SecureString, `${x}`
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A value that names a file (the secret is in it, not in the text).
_PATH_VALUE = re.compile(
    r"^(?:(?:(?:~|\.{1,2})?/|[A-Za-z]:\\{1,2})[\w.@%+\\-]+(?:[/\\]{1,2}[\w.@%+-]*)*(?::[a-z]{1,4})?"
    r"|[\w.-]+\.(?:json|ya?ml|pem|key|crt|p12|pfx|txt|env|ini|conf|cfg|toml))$"
)


def _credential_like(value: str) -> bool:
    return _CREDENTIAL_LIKE.match(value) is not None and not is_placeholder(value)


def shannon_entropy(token: str) -> float:
    """Bits per character of ``token`` over its own symbols (Shannon). Ours, not the
    library's: its version changes with an environment variable, and the signer and the log
    must agree on every string."""
    n = len(token)
    if n == 0:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(token).values())


#: An unquoted value that is a word of prose (hyphenated or not), not a credential.
_WORDISH = re.compile(r"^[A-Za-z][a-z]*(?:[-'\u2019][A-Za-z][a-z]*)*$")


_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _identifier_like(token: str) -> bool:
    """A name made of words (``Ed25519PrivateKey``, ``b64decode_strict``): its humps are
    words and numbers of three characters on average, seldom a lone character, where a
    generated token breaks into many one-character humps."""
    parts = [p for p in re.split(r"[+/_.~:-]+", token) if p]
    compact = "".join(parts)
    humps = [h for p in parts for h in _HUMP.findall(p)]
    if len(humps) < 2 or sum(map(len, humps)) != len(compact):
        return False
    singles = sum(1 for h in humps if len(h) == 1)
    return singles * 4 <= len(humps) and len(compact) / len(humps) >= 3


# -- rule builders -------------------------------------------------------------------------


def _whole(pattern: re.Pattern[str], check: Callable[[re.Match[str]], bool] | None = None) -> Finder:
    """The whole match (group ``v`` if the pattern has one), if ``check`` accepts it."""

    def find(view: str) -> Iterator[Span]:
        for m in pattern.finditer(view):
            if check is not None and not check(m):
                continue
            yield m.span("v") if "v" in pattern.groupindex and m.group("v") is not None else m.span()

    return find


#: A run of 16 token characters: every token-shaped credential has one.
LONG_RUN = re.compile(r"[A-Za-z0-9_\-.+/=~:]{16}")


def shaped(
    name: str,
    pattern: str,
    *triggers: str,
    flags: int = 0,
    exact_case: bool = False,
    wraps: bool = True,
    long: bool = True,
) -> Rule:
    """A credential named by its own prefix or structure."""
    return Rule(name, _whole(re.compile(pattern, flags)), tuple(triggers), exact_case, wraps, long)


def valued(
    name: str,
    pattern: str,
    *triggers: str,
    flags: int = 0,
    exact_case: bool = False,
    accept: Callable[[str], bool] | None = None,
) -> Rule:
    """A credential in group ``v`` of a pattern that names its context; the context stays.
    ``accept`` (default: not a placeholder) judges the value."""
    judge = accept or (lambda v: not is_placeholder(v))
    return Rule(
        name,
        _whole(re.compile(pattern, flags), lambda m: judge(m.group("v"))),
        tuple(triggers),
        exact_case,
    )


def _password_like(value: str) -> bool:
    """An unquoted word of a sentence that reads as a password: letters with digits, or
    letters with a symbol inside (``P@ssw0rd``, ``hunter2-SECRET``); not a word of prose
    ("case-sensitive", "and/or", "U.S.", "**Note**:")."""
    if len(value) < 4 or _WORDISH.match(value) or not re.search("[A-Za-z]", value):
        return False
    if any(c.isdigit() for c in value):
        return True
    return re.search(r"[A-Za-z0-9][^A-Za-z0-9\s./*'\u2019_-][A-Za-z0-9]", value) is not None

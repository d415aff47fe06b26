"""The secret rules :mod:`engram.protocol.redact` runs: what a secret looks like, not how it
is removed.

Trust role: a rule that misses a form lets a credential into the permanent log; a rule that
fires on ordinary text destroys a memory. Every rule here therefore has a form in the corpus
(tests/fixtures/secrets/corpus.json) and is measured on ordinary prose, chat and code
(``python -m tests.tools.redaction_fp``, docs/privacy.md).

Two layers, the same on the signer's side and the log's:

* **the maintained library**: the regex detectors of ``bc-detect-secrets`` (the maintained
  fork of Yelp's detect-secrets), loaded once, their patterns run over our views of the text
  (:func:`library_rules`). Only their patterns and their own validation (``analyze_string``)
  are used, never their verification (which would send a found secret over the network);
* **ours**, for the forms the library lacks: vendor tokens by prefix
  (:data:`VENDOR_TOKENS`), key material (PEM blocks with or without their armour, DER and
  OpenSSH bodies, PuTTY, base64-wrapped PEM), configuration (``.netrc``, ``.pgpass``, docker
  ``auth``, kubeconfig, command-line passwords, cookies, Azure SAS ``sig=``, XML and PHP
  settings), secrets by name (``NAME=value`` in every syntax), passwords in prose, and
  high-entropy tokens next to a word that says secret (:data:`OUR_RULES`).

A rule yields the spans to replace in the text it is given (a view: see redact.py); it never
rewrites text itself. Each pattern is linear-time on its input (no nested quantifiers over the
same characters), and most are gated by literal triggers, so a string without them costs a
substring test per rule.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from engram.protocol import _confusables

__all__ = [
    "LIBRARY_DETECTORS",
    "MARKER",
    "MARKER_NAMES",
    "OUR_RULES",
    "VENDOR_TOKENS",
    "Rule",
    "fold",
    "is_placeholder",
    "library_rules",
    "shannon_entropy",
]

Span = tuple[int, int]
Finder = Callable[[str], Iterator[Span]]


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


# -- vendor tokens -------------------------------------------------------------------------

#: (rule, pattern, triggers) of credentials whose prefix names them, beyond the ones the
#: library knows. Each has a (fake) example in the corpus. ``\b`` is not used at the left
#: of a token that may follow ``_`` or ``-``: the explicit look-behinds say what may precede.
_L = r"(?<![A-Za-z0-9_])"
_LD = r"(?<![A-Za-z0-9_.-])"
_R = r"(?![A-Za-z0-9_])"
VENDOR_TOKENS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}(?![A-Za-z0-9])",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    (
        "github_token",
        _L + r"(?:gh[pousr]_[A-Za-z0-9_]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        ("gh", "github_pat_"),
    ),
    (
        "gitlab_token",
        r"(?<![A-Za-z0-9_-])(?:(?:glpat|gldt|glft|glsoat|glrt|glptt|gloas|glimt|glagent|glcbt|glffct)-"
        r"[A-Za-z0-9_.-]{20,}|GR1348941[A-Za-z0-9_-]{20,})",
        ("gl", "GR1348941"),
    ),
    (
        "stripe_key",
        _L + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,}",
        ("_live_", "_test_", "whsec_"),
    ),
    (
        "openai_key",
        r"(?<![A-Za-z0-9_-])sk-(?:proj-|ant-(?:api\d\d-|admin\d\d-)?|svcacct-|admin-|or-v1-)?[A-Za-z0-9_-]{20,}",
        ("sk-",),
    ),
    (
        "slack_token",
        r"(?<![A-Za-z0-9])(?:xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-\d-[A-Za-z0-9]{40,}"
        r"|xapp-\d-[A-Z0-9]{6,}-\d{6,}-[a-f0-9]{32,})"
        r"|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,}",
        ("xox", "xapp-", "hooks.slack.com"),
    ),
    (
        "google_api_key",
        r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}|\bya29\.[0-9A-Za-z_-]{20,}",
        ("aiza", "ya29."),
    ),
    ("google_oauth_secret", _L + r"GOCSPX-[A-Za-z0-9_-]{28}", ("gocspx-",)),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", ("sg.",)),
    ("twilio_key", r"(?<![A-Za-z0-9])(?:AC|SK)[0-9a-f]{32}(?![A-Za-z0-9])", ("AC", "SK")),
    ("npm_token", _L + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", ("npm_",)),
    ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-",)),
    ("huggingface_token", _L + r"hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9])", ("hf_",)),
    ("square_token", r"\bsq0(?:csp|atp)-[0-9A-Za-z_-]{22,}", ("sq0",)),
    ("telegram_token", r"(?<![0-9])\d{8,10}:AA[0-9A-Za-z_-]{33}(?![0-9A-Za-z_-])", (":aa",)),
    ("azure_storage_key", r"AccountKey=[A-Za-z0-9+/=]{86,88}", ("accountkey=",)),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyj",)),
    # -- issue 40: the vendor tokens people paste ------------------------------------------
    ("vault_token", _LD + r"hv[sbr]\.[A-Za-z0-9_-]{24,}", ("hvs.", "hvb.", "hvr.")),
    ("digitalocean_token", _L + r"do[opr]_v1_[a-f0-9]{64}" + _R, ("_v1_",)),
    ("shopify_token", _L + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _R, ("shp",)),
    ("databricks_token", _L + r"dapi[a-f0-9]{32}(?:-\d)?" + _R, ("dapi",)),
    (
        "grafana_token",
        _L
        + r"(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,400}={0,2}|eyJrIjoi[A-Za-z0-9+/]{40,}={0,2})",
        ("glsa_", "glc_", "eyjrijoi"),
    ),
    ("atlassian_token", _L + r"AT(?:ATT|CTT)3[A-Za-z0-9_=-]{100,}", ("atatt3", "atctt3")),
    ("age_secret_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("age-secret-key-1",)),
    ("postman_key", _L + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _R, ("pmak-",)),
    ("linear_key", _L + r"lin_(?:api|oauth)_[A-Za-z0-9]{40}" + _R, ("lin_api_", "lin_oauth_")),
    (
        "doppler_token",
        _LD + r"dp\.(?:st|pt|ct|sa|scim|audit)\.(?:[A-Za-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44}" + _R,
        ("dp.",),
    ),
    (
        "newrelic_key",
        _L
        + r"(?:NR(?:AK|AA|IQ|SP)-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}|NRJS-[a-f0-9]{19}|(?:eu01xx)?[a-f0-9]{30,36}NRAL)"
        + _R,
        ("nrak-", "nrii-", "nraa-", "nriq-", "nrsp-", "nrjs-", "nral"),
    ),
    # -- other vendors whose keys name themselves ------------------------------------------
    ("sentry_token", _L + r"sntr[ysu]s?_[A-Za-z0-9+/=_-]{60,}", ("sntry", "sntru")),
    ("mailgun_key", _L + r"key-[0-9a-f]{32}" + _R, ("key-",)),
    ("supabase_token", _L + r"sb(?:p|_secret)_[A-Za-z0-9_-]{32,}", ("sbp_", "sb_secret_")),
    ("netlify_token", _L + r"nfp_[A-Za-z0-9]{36}" + _R, ("nfp_",)),
    ("render_key", _L + r"rnd_[A-Za-z0-9]{32}" + _R, ("rnd_",)),
    ("pulumi_token", _L + r"pul-[a-f0-9]{40}" + _R, ("pul-",)),
    ("terraform_token", _L + r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", (".atlasv1.",)),
    ("dropbox_token", _LD + r"sl\.[A-Za-z0-9_-]{130,}", ("sl.",)),
    (
        "notion_token",
        _L + r"(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})" + _R,
        ("ntn_", "secret_"),
    ),
    ("airtable_token", _L + r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _R, ("pat",)),
    ("figma_token", _L + r"figd_[A-Za-z0-9_-]{40,}", ("figd_",)),
    ("replicate_token", _L + r"r8_[A-Za-z0-9]{37}" + _R, ("r8_",)),
    ("groq_key", _L + r"gsk_[A-Za-z0-9]{52}" + _R, ("gsk_",)),
    ("perplexity_key", _L + r"pplx-[A-Za-z0-9]{48}" + _R, ("pplx-",)),
    ("xai_key", _L + r"xai-[A-Za-z0-9]{80}" + _R, ("xai-",)),
    ("planetscale_token", _L + r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}", ("pscale_",)),
    (
        "tailscale_key",
        _L + r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}",
        ("tskey-",),
    ),
    ("onepassword_token", _L + r"ops_eyJ[A-Za-z0-9+/=_-]{100,}", ("ops_eyj",)),
    ("buildkite_token", _L + r"bkua_[a-f0-9]{40}" + _R, ("bkua_",)),
    ("circleci_token", _L + r"CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}" + _R, ("ccipat_",)),
    ("docker_token", _L + r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}", ("dckr_",)),
    ("rubygems_key", _L + r"rubygems_[a-f0-9]{48}" + _R, ("rubygems_",)),
    ("nuget_key", _L + r"oy2[a-z0-9]{43}" + _R, ("oy2",)),
    ("clojars_token", _L + r"CLOJARS_[a-z0-9]{60}" + _R, ("clojars_",)),
    ("brevo_key", _L + r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}" + _R, ("xkeysib-",)),
    ("contentful_token", _L + r"CFPAT-[A-Za-z0-9_-]{43}", ("cfpat-",)),
    ("shippo_token", _L + r"shippo_(?:live|test)_[a-f0-9]{40}" + _R, ("shippo_",)),
    ("easypost_key", _L + r"EZ[AT]K[a-z0-9]{54}" + _R, ("ezak", "eztk")),
    ("typeform_token", _L + r"tfp_[A-Za-z0-9_-]{40,}", ("tfp_",)),
    ("alibaba_key", _L + r"LTAI[A-Za-z0-9]{12,20}" + _R, ("ltai",)),
    ("sonarqube_token", _L + r"sq[upa]_[a-f0-9]{40}" + _R, ("squ_", "sqp_", "sqa_")),
    ("heroku_key", _L + r"HRKU-[A-Za-z0-9_-]{40,}", ("hrku-",)),
    ("prefect_key", _L + r"pnu_[A-Za-z0-9]{36}" + _R, ("pnu_",)),
    ("langsmith_key", _L + r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}" + _R, ("lsv2_",)),
    ("pinecone_key", _L + r"pcsk_[A-Za-z0-9_]{40,}", ("pcsk_",)),
    ("mapbox_token", _L + r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", ("sk.eyj",)),
    (
        "azure_client_secret",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        ("q~",),
    ),
    (
        "fly_token",
        r"(?:\bFlyV1 |" + _L + r")f[mo][12a-z]?_[A-Za-z0-9+/=,_-]{40,}",
        ("fm1", "fm2", "fo1_", "flyv1"),
    ),
    (
        "webhook_url",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{5,}/[A-Za-z0-9_-]{40,}"
        r"|https://[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[^\s\"'<>]{40,}",
        ("/api/webhooks/", "webhook.office.com"),
    ),
    ("cloudflare_origin_key", _L + r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}" + _R, ("v1.0-",)),
    ("frameio_token", _L + r"fio-u-[A-Za-z0-9_=-]{64}", ("fio-u-",)),
)
#: Vendor prefixes matched in the text's own case (the rest are case-insensitive triggers).
_EXACT = frozenset(("aws_access_key", "twilio_key", "gitlab_token"))


def _vendor_rules() -> tuple[Rule, ...]:
    return tuple(shaped(name, p, *triggers, exact_case=name in _EXACT) for name, p, triggers in VENDOR_TOKENS)


# -- key material ----------------------------------------------------------------------------

#: A line break as pasted: real, or escaped inside a JSON or YAML string.
_NL = r"(?:\r?\n|\\r\\n|\\n)"
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
#: A run of base64 text possibly spread over lines (real or escaped breaks, indentation).
_B64_RUN = re.compile(
    r"[A-Za-z0-9+/]{16,}={0,2}(?:[ \t]*" + _NL + r"[ \t]*[A-Za-z0-9+/]{4,}={0,2}"
    r"(?=[ \t]*(?:\r|\n|\\[rn]|$|[\"',}\]]|-----)))*"
)


def _b64_prefix(run: str, chars: int = 48) -> bytes:
    """The first bytes a base64 run decodes to (line breaks removed), or b''."""
    compact = re.sub(r"\s|\\[rn]", "", run)[:chars]
    compact = compact[: len(compact) // 4 * 4]
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _is_der_private_key(prefix: bytes) -> bool:
    """DER of a private key: SEQUENCE, then INTEGER version 0, 1 or 3 (PKCS#1 and PKCS#8
    keys, SEC1 EC keys, PKCS#12 bundles). A public key or a certificate opens with a second
    SEQUENCE instead, so they are left alone."""
    if len(prefix) < 6 or prefix[0] != 0x30:
        return False
    n = prefix[1]
    i = 2 if n < 0x80 else 2 + (n & 0x7F)
    return prefix[i : i + 2] == b"\x02\x01" and prefix[i + 2 : i + 3] in (b"\x00", b"\x01", b"\x03")


def _key_bodies(view: str) -> Iterator[Span]:
    """Key material without its armour: a DER private key or an OpenSSH key body in base64
    (a PEM pasted without its BEGIN line, a key inside JSON), a base64-wrapped PEM private key
    (kubeconfig ``client-key-data``, a Kubernetes secret), or base64 lines that end at a
    ``-----END ... PRIVATE KEY-----`` line."""
    for m in _B64_RUN.finditer(view):
        run = m.group()
        if len(run) < 40:
            continue
        head = run[:24]
        if head.startswith("b3BlbnNzaC1rZXktdjE"):  # "openssh-key-v1"
            yield m.span()
        elif head.startswith("LS0tLS1CRUdJTi"):  # "-----BEGIN "
            decoded = _b64_prefix(run, 96)
            if b"PRIVATE KEY" in decoded or b"OpenVPN Static key" in decoded:
                yield m.span()
        elif (head.startswith("M") and _is_der_private_key(_b64_prefix(run))) or _PEM_END.match(
            view, m.end(), m.end() + 80
        ):
            yield m.span()
        elif (
            _armoured_lines(run)
            and not _public_armour(view, m.start())
            and not _is_der_public(_b64_prefix(run))
        ):
            yield m.span()  # the middle of a pasted key: full 64-column base64 lines, no armour


_LINE_SPLIT = re.compile(r"[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t]*")
_PUBLIC_ARMOUR = re.compile(
    r"-----BEGIN (?:CERTIFICATE|PUBLIC KEY|RSA PUBLIC KEY|CERTIFICATE REQUEST|X509 CRL|PGP PUBLIC KEY BLOCK"
    r"|PGP SIGNATURE|PGP MESSAGE|OPENSSH PUBLIC KEY|SSH2 PUBLIC KEY)[^\n]*-----[ \t]*(?:\r?\n|\\n)?[ \t]*$"
)


def _armoured_lines(run: str) -> bool:
    """Three lines or more of base64 at a PEM, OpenSSH or MIME width (64, 70, 76), the last
    one shorter or equal: key material, even with its armour lost."""
    lines = _LINE_SPLIT.split(run)
    if len(lines) < 3:
        return False
    width = len(lines[0])
    if width not in (64, 70, 76) or any(len(x) != width for x in lines[1:-1]) or len(lines[-1]) > width:
        return False
    return len(set(run)) >= 40  # generated bytes use most of the alphabet; a pattern does not


def _public_armour(view: str, start: int) -> bool:
    return _PUBLIC_ARMOUR.search(view, max(0, start - 80), start) is not None


def _is_der_public(prefix: bytes) -> bool:
    """DER that opens with SEQUENCE, SEQUENCE: a certificate or a public key."""
    if len(prefix) < 6 or prefix[0] != 0x30:
        return False
    n = prefix[1]
    i = 2 if n < 0x80 else 2 + (n & 0x7F)
    return prefix[i : i + 1] == b"\x30"


_PEM_END = re.compile(r"[ \t]*" + _NL + r"?[ \t]*-----END[ A-Z0-9]{0,40}PRIVATE KEY")

# PuTTY private keys: the lines after ``Private-Lines: N``.
_PPK = re.compile(
    r"Private-Lines:[ \t]*\d{1,4}[ \t]*" + _NL + r"(?P<v>(?:[A-Za-z0-9+/=]{1,128}[ \t]*(?:" + _NL + r"|$))+)"
)

_KEY_RULES: tuple[Rule, ...] = (
    shaped(
        "private_key",
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?=.{0,300}?(?:\n|\\n)[ \t]*[A-Za-z0-9+/]{16}).*?"
        r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)"
        r"|-----BEGIN OpenVPN Static key V1-----.*?(?:-----END OpenVPN Static key V1-----|\Z)",
        "private key",
        "openvpn static key",
        flags=re.S,
        wraps=False,
        long=False,
    ),
    Rule("putty_private_key", _whole(_PPK), ("private-lines:",)),
    Rule(
        "private_key",
        _key_bodies,
        (),  # runs wherever a 16-character token does (long): key material has no fixed prefix
        long=True,
    ),
)


# -- configuration ---------------------------------------------------------------------------


def _cred(v: str) -> bool:
    return _credential_like(v.strip("'\""))


def _any_value(v: str) -> bool:
    return len(v.strip("'\"")) >= 3 and not is_placeholder(v)


_HOST = r"(?:localhost|\*|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+|\[[0-9A-Fa-f:]+\])"
_QUOTED_OR_WORD = r"(?:'(?P<sq>[^'\n]{1,200})'|\"(?P<dq>[^\"\n]{1,200})\"|(?P<bare>[^\s'\"][^\s'\"]*))"


def _flag_value(pattern: str, *triggers: str, name: str, accept: Callable[[str], bool] = _any_value) -> Rule:
    """A value after a command-line flag: quoted (the quotes stay) or bare."""
    rx = re.compile(pattern + _QUOTED_OR_WORD)

    def find(view: str) -> Iterator[Span]:
        for m in rx.finditer(view):
            g = "sq" if m.group("sq") is not None else "dq" if m.group("dq") is not None else "bare"
            if accept(m.group(g)):
                yield m.span(g)

    return Rule(name, find, triggers)


_COOKIE_PAIR = re.compile(r"(?P<n>[A-Za-z0-9_.$!#%&'*+^`|~-]{1,64})=(?P<v>[^;,\s\"']{8,})")
_COOKIE_LINE = re.compile(r"(?i)(?:\b(?:set-)?cookie\s*:|(?:^|\s)(?:-b|--cookie)\s+['\"]?)(?P<v>[^\r\n'\"]*)")
_SESSION_COOKIE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?:sessionid|sessid|phpsessid|jsessionid|aspsessionid[a-z]*|connect\.sid|laravel_session"
    r"|_[a-z0-9]+_session|remember_(?:token|user_token)|__(?:secure|host)-[a-z0-9_-]+|auth_token|access_token)"
    r"=(?P<v>[^;,\s\"'&]{8,})"
)


def _cookie_value(value: str) -> bool:
    """A session identifier: generated, so it has a digit (``doublestuff`` is a value of a
    documentation example), and no escape (the text is a string literal of code)."""
    return "\\" not in value and any(c.isdigit() for c in value) and not is_placeholder(value)


def _cookies(view: str) -> Iterator[Span]:
    """Every value of a ``Cookie:``/``Set-Cookie:`` header or ``curl -b``, and a session
    cookie (``sessionid=``, ``PHPSESSID=``, ``connect.sid=`` ...) anywhere."""
    for line in _COOKIE_LINE.finditer(view):
        base = line.start("v")
        for pair in _COOKIE_PAIR.finditer(line.group("v")):
            name = pair.group("n").lower()
            value = pair.group("v")
            if name in ("path", "domain", "expires", "max-age", "samesite") or not _cookie_value(value):
                continue
            yield base + pair.start("v"), base + pair.end("v")
    for m in _SESSION_COOKIE.finditer(view):
        if _cookie_value(m.group("v")):
            yield m.span("v")


_CONFIG_RULES: tuple[Rule, ...] = (
    valued(
        "netrc_password",
        r"(?m)(?:(?<=\s)machine[ \t]+\S+|^machine[ \t]+\S+|^[ \t]*default)(?:\s+(?:login|account|port)[ \t]+\S+){0,4}"
        r"\s+password[ \t]+"
        r"(?P<v>\S{3,})",
        "password",
    ),
    valued("netrc_password", r"(?:(?<=\s)|^)login[ \t]+\S+[ \t]+password[ \t]+(?P<v>\S{3,})", "password"),
    valued(
        "pgpass_password",
        r"(?m)(?:^|(?<=[\s\"'`(]))"
        + _HOST
        + r":(?:\d{1,5}|\*):(?:[A-Za-z0-9_.$-]+|\*):(?:[A-Za-z0-9_.@$-]+|\*):(?P<v>[^\s]{3,})[ \t]*$",
        ":",
    ),
    valued(
        "docker_auth",
        r"(?i)[\"']?\b(?:auth|identitytoken|registrytoken)[\"']?\s*:\s*[\"'](?P<v>[A-Za-z0-9+/=_.-]{12,})[\"']",
        "auth",
        "identitytoken",
        "registrytoken",
        accept=_cred,
    ),
    valued(
        "kubeconfig_key",
        r"(?i)\b(?:client-key-data|tls\.key|ssh-privatekey)[\"']?\s*:\s*[\"']?(?P<v>[A-Za-z0-9+/]{20,}={0,2})",
        "client-key-data",
        "tls.key",
        "ssh-privatekey",
    ),
    _flag_value(
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlsh|mariadb|mariadb-dump)\b"
        r"[^\n|;&]{0,200}?(?<=\s)-p(?=[^\s-])",
        "mysql",
        "mariadb",
        name="mysql_password",
    ),
    _flag_value(r"\bsshpass\b[^\n|;&]{0,80}?(?<=\s)-p[ \t]*", "sshpass", name="sshpass_password"),
    _flag_value(
        r"\b(?:docker|podman|nerdctl|buildah|skopeo|helm(?:[ \t]+registry)?|oc|cf|az)[ \t]+login\b[^\n|;&]{0,200}?(?<=\s)-p[ \t]+",
        "login",
        name="cli_password",
    ),
    _flag_value(r"\bredis-cli\b[^\n|;&]{0,200}?(?<=\s)-a[ \t]+", "redis-cli", name="cli_password"),
    _flag_value(
        r"\bldap(?:search|add|modify|delete|passwd|whoami|compare|modrdn)\b[^\n|;&]{0,200}?(?<=\s)-w[ \t]+",
        "ldap",
        name="cli_password",
    ),
    _flag_value(r"(?<![\w-])-pass(?:in|out)?[ \t]+pass:", "pass:", name="cli_password"),
    _flag_value(
        r"(?<![\w-])--?(?:password|passwd|pass|db-password|token|auth-token|access-token|api-key|apikey|secret"
        r"|client-secret|secret-key|storepass|keypass|srcstorepass|deststorepass|private-key)(?:[ \t]+|=)",
        "pass",
        "token",
        "key",
        "secret",
        name="cli_password",
        accept=_cred,
    ),
    valued(
        "smb_password",
        r"\b(?:smbclient|rpcclient|smbmap|smbget|crackmapexec|nxc|net)\b[^\n]{0,200}?-U[ \t]+['\"]?[^\s%'\"]+%(?P<v>[^\s'\"]+)",
        "-u",
    ),
    valued("azure_sas", r"(?i)[?&;]sig=(?P<v>[A-Za-z0-9%+/=]{16,})", "sig="),
    Rule(
        "session_cookie",
        _cookies,
        (
            "cookie",
            "-b ",
            "sessid",
            "sessionid",
            "connect.sid",
            "_session=",
            "remember_",
            "__secure-",
            "__host-",
            "auth_token=",
            "access_token=",
        ),
    ),
    valued(
        "html_input",
        r"(?i)<input\b[^>]{0,200}?\b(?:type|name|id)\s*=\s*[\"']?(?:password|passwd|pwd|[\w-]{0,40}(?:secret|token"
        r"|api[_-]?key)[\w-]{0,40})[\"']?[^>]{0,200}?\bvalue\s*=\s*[\"'](?P<v>[^\"'\n]{3,200})[\"']",
        "<input",
    ),
    valued("smtp_auth", r"\bAUTH[ \t]+PLAIN[ \t]+(?P<v>[A-Za-z0-9+/]{8,}={0,2})", "auth plain"),
    valued(
        "connection_password",
        r"(?i)(?<=;)[ \t]*pwd[ \t]*=[ \t]*(?P<v>[^;\s'\"/~][^;\s'\"]{2,})(?=[ \t]*(?:;|$|['\"]))",
        "pwd",
        accept=lambda v: not is_placeholder(v) and _CODE_VALUE.match(v) is None,
    ),
    valued(  # a connection string that opens with it: "Pwd=...;Uid=sa;"
        "connection_password",
        r"(?i)(?:^|(?<=[\"']))[ \t]*pwd[ \t]*=[ \t]*(?P<v>[^;\s'\"/~][^;\s'\"]{2,})(?=[ \t]*;)",
        "pwd",
        accept=lambda v: not is_placeholder(v) and _CODE_VALUE.match(v) is None,
    ),
    valued(
        "wifi_password",
        r"(?i)\b(?:wpa_passphrase|psk)[ \t]*=[ \t]*\"?(?P<v>[^\"\s][^\"\n]{7,62})\"?",
        "psk",
        "wpa_passphrase",
    ),
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


def _assigned(view: str) -> Iterator[Span]:
    """NAME=value (.env, shell, connection strings), "name": "value" (JSON), name: value
    (YAML), name = 'value' (code); the name stays."""
    for m in _ASSIGNED.finditer(view):
        name = m.group("n")
        if not secret_name(name):
            continue
        group = "dq" if m.group("dq") is not None else "sq" if m.group("sq") is not None else "v"
        value = m.group(group)
        if value.startswith("[REDACTED") and not value.startswith("[REDACTED]") and not MARKER.match(value):
            yield m.span(group)  # a value dressed as a marker: [REDACTED:hunter2x] names no rule
            continue
        if is_placeholder(value):
            continue
        if re.search(r"\s", value) and (
            not _PASSWORD_NAME.search(name) or len(value) > 64 or not any(map(_password_like, value.split()))
        ):
            continue  # a quoted phrase: a password of words with a digit or symbol, not a label
        if (
            _IDENTIFIER.match(value)
            and re.search("(?i)" + SECRET_NAME, value)
            and not re.search(r"\d", value)
        ):
            continue  # a name, not a value: CHALLENGE_PASSWORD: "challengePassword"
        if (
            _WORDISH.match(value) or re.fullmatch(r"[a-z]+(?:_[a-z]+)+", value)
        ) and not _PASSWORD_NAME.search(name):
            continue  # a word: TokenKind.INT: "int" (a password may be a word; a key is not)
        if _PATH_VALUE.match(value):
            continue  # a file: GOOGLE_APPLICATION_CREDENTIALS=/etc/app/credentials.json
        if group == "v":
            if _CODE_VALUE.match(value) or view[m.end() : m.end() + 1] in ("(", "[", "."):
                continue  # an expression (args.token, get_password(), [CFWS]), not a literal
            spaced = view[m.end("n") : m.start("sep")].strip("'\"") != "" or view[
                m.end("sep") : m.start("v")
            ].startswith((" ", "\t"))
            bare_word = _IDENTIFIER.match(value) is not None and not any(c.isdigit() for c in value)
            if bare_word and (spaced or len(value) < 6 or not name.isupper()):
                continue  # code assigning a variable (cache_token = current_token)
            if m.group("sep") == ":" and not _CREDENTIAL_LIKE.match(value):
                continue  # prose ("password: see the vault"), not a credential
            if (
                m.group("sep") == ":"
                and _identifier_like(value)
                and view[m.end() : m.end() + 3].lstrip()[:1] in ",)|=]"
            ):
                continue  # a type annotation: private_key: Ed25519PrivateKey,
        if group == "v" and view[m.end() : m.end() + 1] == "&":
            # a connection string's or a properties file's value runs on over "&"; a query
            # string's "&name=" starts the next parameter
            tail = _AMP_TAIL.match(view, m.end())
            if tail is not None:
                yield m.start("v"), tail.end()
                continue
        yield m.span(group)


#: "&" and more of a value (not "&name=", the next parameter of a query string).
_AMP_TAIL = re.compile(r"(?:&(?![A-Za-z0-9_.\[\]-]{1,64}=)[^\s'\";,&()]+)+")

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


_CONTEXT_RULES: tuple[Rule, ...] = (
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
#: An unquoted value that is a word of prose (hyphenated or not), not a credential.
_WORDISH = re.compile(r"^[A-Za-z][a-z]*(?:[-'\u2019][A-Za-z][a-z]*)*$")
_PASSWORD_WORD = re.compile(
    r"(?i)pass|pin|pw|mot|contrase|kennwort|senha|пароль|"
    + re.escape(fold("пароль"))
    + r"|パスワード|密|비밀"
)


def _prose(view: str) -> Iterator[Span]:
    """A password told in a sentence: "the prod DB password is hunter2-SECRET-key.", "my
    PIN is 4921", "the API key for staging is 9f8a...". The value must look like a credential
    (a digit, a symbol or mixed case; a number of 4 digits or more after a password word), so
    "the password is stored in the vault" is left alone."""
    for m in _PROSE.finditer(view):
        for g in ("dq", "sq", "bq", "cq", "v"):
            if m.group(g) is not None:
                break
        value = m.group(g)
        password_word = _PASSWORD_WORD.search(m.group("word")) is not None
        if (
            _IDENTIFIER.match(value)
            and re.search("(?i)" + SECRET_NAME, value)
            and not re.search(r"\d", value)
        ):
            continue  # apiKey = "apiKey"
        if m.group("noverb") is not None and not _password_like(value):
            continue  # 'the password "field" is required': a quoted word, not a password
        if is_placeholder(value) and not (password_word and value.isdigit() and len(value) >= 4):
            continue
        if g == "v":
            if value.isdigit():
                if not (password_word and len(value) >= 4):
                    continue
            elif not _password_like(value) or _CODE_VALUE.match(value):
                continue
            if not password_word and (len(value) < 8 or not any(c.isdigit() for c in value)):
                continue
        elif re.search(r"\s", value):
            if not password_word or len(value) > 64:
                continue  # a quoted sentence: 'here is a secret: "grant staff hate ..."'
        elif not password_word and not _CREDENTIAL_LIKE.match(value):
            continue
        yield m.span(g)


def _password_like(value: str) -> bool:
    """An unquoted word of a sentence that reads as a password: letters with digits, or
    letters with a symbol inside (``P@ssw0rd``, ``hunter2-SECRET``); not a word of prose
    ("case-sensitive", "and/or", "U.S.", "**Note**:")."""
    if len(value) < 4 or _WORDISH.match(value) or not re.search("[A-Za-z]", value):
        return False
    if any(c.isdigit() for c in value):
        return True
    return re.search(r"[A-Za-z0-9][^A-Za-z0-9\s./*'\u2019_-][A-Za-z0-9]", value) is not None


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


def _looks_random(token: str) -> bool:
    """A token that reads as generated: letters and digits mixed, no long run of one class,
    and high Shannon entropy for its length and alphabet (a UUID, a digest next to "key"
    and an identifier like ``getAccessTokenForUser`` fall short)."""
    core = token.strip("=")
    if not any(c.isdigit() for c in core) or not any(c.isalpha() for c in core):
        return False
    if re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", core):
        return False
    if core.count(".") > 2 or core.count("/") > 1 or re.search(r"[a-z]{2,}\.[a-z]{2,}|\.[a-z]{2,5}$", core):
        return False  # a domain, a path, a dotted name, a file
    if re.search(r"[A-Za-z]{12,}", core) and not re.search(r"[A-Z][a-z]*[A-Z].*\d|\d.*[A-Z]", core):
        return False  # a long word with a number on it (passwordReset2024Handler)
    parts = [p for p in re.split(r"[+/_.~-]+", core) if p]
    if len(parts) > 1 and all(re.fullmatch(r"[A-Za-z]{2,}\d{0,3}|\d+", p) for p in parts):
        return False  # words joined: name+keyid+base64, user_id_v2
    if _identifier_like(core):
        return False
    n = len(core)
    hexish = re.fullmatch(r"[0-9a-fA-F_-]+", core) is not None
    limit = (3.0 if n < 24 else 3.3) if hexish else (3.4 if n < 24 else 3.7 if n < 40 else 4.0)
    return shannon_entropy(core) >= limit


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
_PAIR_RULES: tuple[Rule, ...] = (
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


def _prose_rules() -> tuple[Rule, ...]:
    return (
        Rule("prose_password", _prose, _PROSE_TRIGGERS),
        Rule("prose_password", _user_and_password, ("pw", "pass", "pwd")),
        Rule("high_entropy_secret", _entropy_context, _ENTROPY_TRIGGERS, wraps=True, long=True),
    )


#: Our rules, in order: key material first (a key inside an assignment is one finding),
#: then pairs, vendor tokens, configuration, names, prose.
OUR_RULES: tuple[Rule, ...] = (
    *_KEY_RULES,
    *_PAIR_RULES,
    *_vendor_rules(),
    *_CONFIG_RULES,
    *_CONTEXT_RULES,
    *_prose_rules(),
)


# -- the library -------------------------------------------------------------------------------

#: The bc-detect-secrets detectors that run, by class name: the marker each gets, and literals
#: without which none of its patterns can match (lower case; upper case: matched in the
#: text's own case), so that a string without them costs a substring test. Left
#: out: ``KeywordDetector`` and the high-entropy plugins (their own docs call them noisy; our
#: named and entropy-plus-context rules replace them), ``AzureStorageKeyDetector`` (its bare
#: pattern, 86-88 base64 characters and ``==``, is any 64-byte value such as an Ed25519
#: signature: our ``AccountKey=`` rule covers the key in context).
LIBRARY_DETECTORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "AWSKeyDetector": ("aws_access_key", ("akia", "asia", "abia", "acca", "a3t", "aws")),
    "ArtifactoryDetector": ("artifactory_token", ("akc", "artif", "jfrog", "buildkit")),
    "BasicAuthDetector": ("url_password", ("://",)),
    "CloudantDetector": (
        "cloudant_credentials",
        ("cloudant", "clou", "cl_", "cl-", "clapi", "clkey", "clp", "cltoken"),
    ),
    "DiscordBotTokenDetector": ("discord_token", ()),
    "GitHubTokenDetector": ("github_token", ("gh",)),
    "IbmCloudIamDetector": ("ibm_cloud_iam_key", ("key", "pwd", "pass", "token")),
    "IbmCosHmacDetector": ("ibm_cos_hmac_key", ("secret",)),
    "JwtTokenDetector": ("jwt", ("eyj",)),
    "MailchimpDetector": ("mailchimp_key", ("-us",)),
    "NpmDetector": ("npm_token", ("npm", "_authtoken")),
    "PrivateKeyDetector": ("private_key", ("begin", "putty")),
    "SendGridDetector": ("sendgrid_key", ("sg.",)),
    "SlackDetector": ("slack_token", ("xox", "hooks.slack")),
    "SoftlayerDetector": ("softlayer_key", ("softlayer", "sl_", "sl-", "slapi", "slkey", "slp", "sltoken")),
    "SquareOAuthDetector": ("square_token", ("sq0csp",)),
    "StripeDetector": ("stripe_key", ("k_live_",)),
    "TwilioKeyDetector": ("twilio_key", ("ac", "sk")),
}


#: Library detectors whose secret may be shorter than 16 characters.
_SHORT_LIBRARY = frozenset(("ArtifactoryDetector", "BasicAuthDetector", "PrivateKeyDetector"))


def _library_finder(detector: Any, pattern: re.Pattern[str]) -> Finder:
    """Spans of one library pattern: each non-empty group (what the library reports as the
    secret: a private key's body, not its BEGIN line), else the match, confirmed by the
    detector's own ``analyze_string`` (a JWT must decode)."""
    names = {i: n for n, i in pattern.groupindex.items()}
    wanted = [i for i in range(1, pattern.groups + 1) if names.get(i) not in ("begin_key", "end_key")]

    def find(view: str) -> Iterator[Span]:
        for m in pattern.finditer(view):
            spans = [m.span(i) for i in wanted if m.group(i)] if wanted else [m.span()]
            spans = [(s, e) for s, e in spans if e - s >= 8 and not is_placeholder(view[s:e])]
            if spans and any(True for _ in detector.analyze_string(m.group())):
                yield from spans

    return find


@functools.cache
def library_rules() -> tuple[Rule, ...]:
    """The library's detectors as rules (imported once per process, on first use: it costs
    about 80 ms, which a process that never redacts should not pay)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes = {c.__name__: c for c in get_mapping_from_secret_type_to_class().values()}
    missing = sorted(set(LIBRARY_DETECTORS) - set(classes))
    if missing:  # a changed library must be reviewed, not silently run with fewer rules
        raise ImportError(f"bc-detect-secrets lacks the detectors {missing}")
    rules: list[Rule] = []
    for cls_name, (marker, triggers) in LIBRARY_DETECTORS.items():
        detector = classes[cls_name]()
        long = cls_name not in _SHORT_LIBRARY
        for pattern in detector.denylist:  # type: ignore[attr-defined]  # RegexBasedDetector's patterns
            rules.append(Rule(marker, _library_finder(detector, pattern), triggers, False, True, long))
    return tuple(rules)


#: Every name a marker can carry: a rule's (ours, the library's), or ``base64_`` and one. A
#: marker is recognised only with one of these names, so a secret dressed as a marker
#: (``[REDACTED:dapi0a1b...]``) is not taken for one.
MARKER_NAMES = frozenset({r.name for r in OUR_RULES} | {m for m, _ in LIBRARY_DETECTORS.values()})
MARKER = re.compile(
    r"\[REDACTED:(?:base64_)?(?:"
    + "|".join(sorted(map(re.escape, MARKER_NAMES), key=len, reverse=True))
    + r")\]"
)

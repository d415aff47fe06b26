"""The maintained library: the regex detectors of ``bc-detect-secrets`` as rules."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from engram.protocol.secret_rules.core import Finder, Rule, Span, is_placeholder

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

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

One module per family: :mod:`.core` (the rule value, the marker names, the shared judges),
:mod:`.vendors`, :mod:`.keys`, :mod:`.configuration`, :mod:`.names`, :mod:`.prose` and
:mod:`.library`; this package puts them in order.
"""

from __future__ import annotations

from engram.protocol.secret_rules.configuration import CONFIG_RULES
from engram.protocol.secret_rules.core import (
    LONG_RUN,
    MARKER,
    MARKER_NAMES,
    Rule,
    fold,
    is_placeholder,
    shannon_entropy,
)
from engram.protocol.secret_rules.keys import KEY_RULES
from engram.protocol.secret_rules.library import LIBRARY_DETECTORS, library_rules
from engram.protocol.secret_rules.names import CONTEXT_RULES, secret_name, value_is_secret
from engram.protocol.secret_rules.prose import PAIR_RULES, prose_rules
from engram.protocol.secret_rules.vendors import VENDOR_TOKENS, vendor_rules

__all__ = [
    "LIBRARY_DETECTORS",
    "LONG_RUN",
    "MARKER",
    "MARKER_NAMES",
    "OUR_RULES",
    "VENDOR_TOKENS",
    "Rule",
    "fold",
    "is_placeholder",
    "library_rules",
    "secret_name",
    "shannon_entropy",
    "value_is_secret",
]

#: Our rules, in order: key material first (a key inside an assignment is one finding),
#: then pairs, vendor tokens, configuration, names, prose.
OUR_RULES: tuple[Rule, ...] = (
    *KEY_RULES,
    *PAIR_RULES,
    *vendor_rules(),
    *CONFIG_RULES,
    *CONTEXT_RULES,
    *prose_rules(),
)

"""The secret rules as a package of families: the marker names are declared once and match
the rules exactly, and the old import path still carries every public name.

Issue 41: engram/protocol/secret_rules.py (1,221 lines) was split by family.
"""

from __future__ import annotations

import pytest

from engram.protocol import secret_rules
from engram.protocol.secret_rules import (
    LIBRARY_DETECTORS,
    MARKER,
    MARKER_NAMES,
    OUR_RULES,
    Rule,
    library_rules,
)
from engram.protocol.secret_rules.core import _whole


def test_marker_names_are_exactly_the_names_the_rules_carry() -> None:
    ours = {r.name for r in OUR_RULES}
    library = {m for m, _ in LIBRARY_DETECTORS.values()}
    assert ours | library == MARKER_NAMES
    assert {r.name for r in library_rules()} <= MARKER_NAMES


def test_a_rule_with_an_undeclared_marker_name_cannot_be_built() -> None:
    import re

    with pytest.raises(ValueError, match="not in MARKER_NAMES"):
        Rule("made_up_rule", _whole(re.compile("x")))


def test_a_marker_is_recognised_only_with_a_declared_name() -> None:
    assert MARKER.fullmatch("[REDACTED:openai_key]")
    assert MARKER.fullmatch("[REDACTED:base64_private_key]")
    assert not MARKER.fullmatch("[REDACTED:dapi0a1b2c3d4e]")


def test_the_old_import_path_exports_every_public_name() -> None:
    for name in secret_rules.__all__:
        assert getattr(secret_rules, name) is not None, name
    assert {"value_is_secret", "LONG_RUN", "secret_name"} <= set(secret_rules.__all__)

"""Secrets in two pasted forms the redactor let through whole or in part (issue 40, finding 6,
attacked again from outside after the fix landed):

* a quoted value holding ``&``, ``;``, ``,``, ``(`` or a space: ``{"password": "Tr0ub4dor&3xQ9"}``
  in a pasted config was signed in clear, and Django's generated ``SECRET_KEY = '...'`` kept
  everything after its first ``&`` (the entropy rule took the prefix only);
* a token split by an invisible character the redactor's invisible view did not know: a tag
  character (U+E0000 block, "ASCII smuggling") or an interlinear annotation control. Turns are
  not gated, so such a token reached a signed turn.

Each form is checked on the redactor and through a turn and a memory write, on every backend."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol.redact import redact_secrets
from ledger.log import Ledger
from tests.contract.conftest import MemoryOf

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
DJANGO = "django-insecure-x9&k2$m!p4q@r7s#t0u^v3w*y6z"

#: (pasted text, the secret's fragments that must not survive)
QUOTED = [
    ('{"password": "Tr0ub4dor&3xQ9zz"}', ("Tr0ub4dor", "3xQ9zz")),
    ('DB_PASSWORD="Tr0ub4dor;3xQ9zz"', ("Tr0ub4dor", "3xQ9zz")),
    ("db_password: 'Tr0ub4dor,3xQ9zz'", ("Tr0ub4dor", "3xQ9zz")),
    ('password = "Tr0ub4dor(3xQ9zz"', ("Tr0ub4dor", "3xQ9zz")),
    ('DB_PASSWORD="Tr0ub4dor 3xQ9zz"', ("Tr0ub4dor", "3xQ9zz")),
    (f"SECRET_KEY = '{DJANGO}'", ("x9&k2", "y6z")),
    (f'"client_secret": "{DJANGO}"', ("x9&k2", "y6z")),
]
#: Quoted values that are not secrets stay as they are.
ORDINARY = [
    '{"password": "Enter your password"}',
    '{"password": "Password must be 8 characters"}',
    'token = "the token, if any"',
    '"sort_key": "name,date"',
    'api_key = "(none)"',
    'password = ""',
]
INVISIBLE_SPLITS = {
    "tag character": "\U000e0041",
    "language tag": "\U000e0001",
    "interlinear annotation": "\ufff9",
    "cancel tag": "\U000e007f",
}


@pytest.mark.parametrize(("text", "fragments"), QUOTED)
def test_a_quoted_secret_with_punctuation_is_redacted_whole(text: str, fragments: tuple[str, ...]) -> None:
    out, found = redact_secrets(text)
    assert found, out
    for fragment in fragments:
        assert fragment not in out, out


@pytest.mark.parametrize("text", ORDINARY)
def test_a_quoted_label_or_placeholder_is_not_redacted(text: str) -> None:
    assert redact_secrets(text) == (text, [])


@pytest.mark.parametrize("char", INVISIBLE_SPLITS.values(), ids=INVISIBLE_SPLITS.keys())
def test_a_token_split_by_an_invisible_tag_or_annotation_is_redacted(char: str) -> None:
    out, found = redact_secrets(f"my token {TOKEN[:12]}{char}{TOKEN[12:]} for CI")
    assert found == ["github_token"], out
    assert TOKEN[:12] not in out and TOKEN[12:] not in out


def test_pasted_quoted_and_split_secrets_never_reach_a_signed_turn_or_memory(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    mem = memory_of(make_agent("ada"))
    sid = mem.open_session()
    pasted = f"settings.py has SECRET_KEY = '{DJANGO}' and CI uses {TOKEN[:12]}\U000e0041{TOKEN[12:]}"
    turn = mem.turn(sid, "user", pasted)
    stored = ledger.store.body(turn.index)
    assert stored is not None
    for fragment in ("x9&k2", "y6z", TOKEN[:12], TOKEN[12:]):
        assert fragment.encode() not in stored[1], stored[1]
    written = mem.write(content='The staging config is {"password": "Tr0ub4dor&3xQ9zz"}', category="CONTEXT")
    body = ledger.store.body(written.index)
    assert body is not None and b"Tr0ub4dor" not in body[1] and b"3xQ9zz" not in body[1]
    assert written.redacted == 1

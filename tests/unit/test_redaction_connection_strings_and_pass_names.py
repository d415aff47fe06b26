"""Two configuration forms the redactor signed in part (issue 40, finding 6, attacked from
outside after the fix): an unquoted value holding ``&`` in a connection string or a properties
file kept everything after it (``Password=Tr0ub4dor&3xQ9zz;`` signed ``&3xQ9zz``), and a name
that ends in ``pass`` (``DB_PASS``, ``smtp.pass``, Ansible's ``ansible_become_pass``) was not
read as naming a secret at all. A query string's ``&name=`` still ends the value, and words
that merely end in "pass" are left alone."""

from __future__ import annotations

import pytest

from engram.protocol.redact import redact_secrets

SIGNED_IN_PART = [
    ("Server=tcp:db.example.net;User Id=sa;Password=Tr0ub4dor&3xQ9zz;Encrypt=True", "3xQ9zz"),
    ("db.password=Tr0ub4dor&3xQ9zz", "3xQ9zz"),
    ("ansible_become_pass: Tr0ub4dor&3xQ9zz", "Tr0ub4dor"),
    ("DB_PASS=Hunter2x9", "Hunter2x9"),
    ('smtp.pass = "s3cret!Xq"', "s3cret"),
]
LEFT_ALONE = [
    "bypass: true",
    "first_pass = compute()",
    "self.second_pass = second_pass",
    "compass=north",
    "single_pass: false",
    "MAX_PASS = 3",
]


@pytest.mark.parametrize(("text", "fragment"), SIGNED_IN_PART)
def test_a_configuration_secret_is_redacted_whole(text: str, fragment: str) -> None:
    out, found = redact_secrets(text)
    assert found == ["assigned_secret"] and fragment not in out, out


def test_a_query_strings_next_parameter_is_kept() -> None:
    out, _ = redact_secrets("https://x.example/cb?password=Hunter2x9&user=bob&lang=en")
    assert out == "https://x.example/cb?password=[REDACTED:assigned_secret]&user=bob&lang=en"


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_a_name_that_merely_ends_in_pass_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])

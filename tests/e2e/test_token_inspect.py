"""Issue 25, finding 10: ``engram token inspect garbage`` (and ``verifier.token.inspect`` on
any non-token) raised an untyped ``BiscuitValidationError`` with a traceback."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e.processes import ENGRAM
from verifier.token import TokenError, inspect


@pytest.mark.parametrize("garbage", ["garbage", "", "A" * 20_000, "\u00e9t\u00e9", "eyJhbGciOi.x.y", "=" * 8])
def test_token_inspect_refuses_non_tokens(garbage: str) -> None:
    with pytest.raises(TokenError) as e:
        inspect(garbage)
    assert e.value.check == "token.format"


def test_token_inspect_cli_names_the_check() -> None:
    run = subprocess.run([ENGRAM, "token", "inspect", "garbage"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "token.format" in run.stderr + run.stdout
    assert "Traceback" not in run.stderr

"""Issue 44: the fast front (``engram mcp``, ``hook``, ``hermes``, ``log pin``) printed a typed
error's check name twice: once in the message (``[check] ...``) and again after it."""

from __future__ import annotations

import pytest

from engram.harness import cli
from engram.protocol.errors import MalformedError


def test_a_fast_command_error_prints_its_check_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(argv: object) -> int:
        raise MalformedError("the URL is not a service's", check="cli.server")

    monkeypatch.setattr(cli, "pin_main", refuse)
    assert cli.run("log-pin", [], None) == 1
    assert capsys.readouterr().err == "engram log pin: [cli.server] the URL is not a service's\n"

"""``ENGRAM_ACCESS_LOG`` takes effect (issue 43): ``engram serve`` keeps uvicorn's access log on
unless the operator turns it off, and refuses a value that is not a boolean before serving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

import engram.cli.app as cli
import ledger.compose as compose
from api.settings import ApiSettings
from engram.protocol.errors import ConfigError


def _serve(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    monkeypatch.setattr(compose, "open_services", lambda settings: None)
    for name in ("ENGRAM_ACCESS_LOG", "ENGRAM_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    full = {"ENGRAM_HOME": str(tmp_path), "ENGRAM_DEV_MODE": "1", **env}
    result = CliRunner().invoke(cli.app, ["serve", "--port", "8099"], env=full)
    return result.exit_code, seen


@pytest.mark.parametrize(
    ("env", "on"),
    [({}, True), ({"ENGRAM_ACCESS_LOG": "1"}, True), ({"ENGRAM_ACCESS_LOG": "off"}, False)],
)
def test_the_setting_reaches_uvicorn_and_defaults_to_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], on: bool
) -> None:
    code, seen = _serve(monkeypatch, tmp_path, env)
    assert code == 0
    assert seen["access_log"] is on


def test_a_value_that_is_not_a_boolean_stops_serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, seen = _serve(monkeypatch, tmp_path, {"ENGRAM_ACCESS_LOG": "verbose"})
    assert code != 0 and not seen
    with pytest.raises(ConfigError, match="ENGRAM_ACCESS_LOG"):
        ApiSettings.from_env({"ENGRAM_ACCESS_LOG": "verbose", "ENGRAM_DEV_MODE": "1"})

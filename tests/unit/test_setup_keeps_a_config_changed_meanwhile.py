"""``engram setup`` never writes its plan over a configuration that changed after it was read
(Claude Code rewrites ``~/.claude.json`` as it runs): what was written meanwhile is kept and
the run is refused, naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.harness.setup import Change, SetupError, _write


def test_a_config_changed_since_it_was_read_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    path.write_text('{"numStartups": 1}\n')
    change = Change(path=path, old='{"numStartups": 1}\n', new='{"numStartups": 1, "mcpServers": {}}\n')
    path.write_text('{"numStartups": 2, "projects": {"/src": {}}}\n')  # the harness, meanwhile
    with pytest.raises(SetupError) as e:
        _write(change)
    assert e.value.check == "setup.changed"
    assert path.read_text() == '{"numStartups": 2, "projects": {"/src": {}}}\n'


def test_an_unchanged_config_is_written(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}\n")
    _write(Change(path=path, old="{}\n", new='{"hooks": {}}\n'))
    assert path.read_text() == '{"hooks": {}}\n'
    fresh = tmp_path / "new" / "config.toml"
    _write(Change(path=fresh, old=None, new="x = 1\n"))
    assert fresh.read_text() == "x = 1\n"

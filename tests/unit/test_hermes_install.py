"""Issue 26, finding 1 (without Hermes): ``engram hermes install`` writes the plugin
directory Hermes scans (its ``__init__.py`` names MemoryProvider and imports ``register``),
idempotently, and refuses to write through a symbolic link."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.harness.hermes_install import PLUGIN_FILES, hermes_home, install_plugin
from engram.protocol.errors import ConfigError


def test_install_writes_the_plugin_directory_once(tmp_path: Path) -> None:
    first = install_plugin(tmp_path / "hh")
    assert first.directory == tmp_path / "hh" / "plugins" / "engram"
    assert set(first.written) == set(PLUGIN_FILES)
    init = (first.directory / "__init__.py").read_text(encoding="utf-8")
    assert "MemoryProvider" in init and "from engram.harness.hermes import" in init and "register" in init
    assert install_plugin(tmp_path / "hh").written == ()
    (first.directory / "plugin.yaml").write_text("edited\n", encoding="utf-8")
    assert install_plugin(tmp_path / "hh").written == ("plugin.yaml",)


def test_install_refuses_a_symlinked_plugin_dir(tmp_path: Path) -> None:
    (tmp_path / "hh" / "plugins").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "hh" / "plugins" / "engram").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="symbolic link"):
        install_plugin(tmp_path / "hh")
    assert not any((tmp_path / "elsewhere").iterdir())


def test_hermes_home_follows_hermes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "x"))
    assert hermes_home() == tmp_path / "x"
    assert hermes_home(str(tmp_path / "y")) == tmp_path / "y"
    monkeypatch.delenv("HERMES_HOME")
    assert hermes_home() == Path.home() / ".hermes"

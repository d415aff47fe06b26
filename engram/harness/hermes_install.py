"""``engram hermes install``: put Engram where Hermes Agent looks for memory providers.

Hermes (0.19) discovers memory providers only as directories: the ones it ships under
``plugins/memory/<name>/`` and the user's under ``$HERMES_HOME/plugins/<name>/``, whose
``__init__.py`` it scans for the word ``MemoryProvider`` before importing it and calling its
``register(ctx)``. No entry point is read (``pip install`` alone left
"Plugin: NOT installed" and Hermes ran without Engram, silently). The plugin directory this
writes holds two small files that import the provider from the installed ``engram`` package,
so upgrading Engram upgrades the provider; writing it again changes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engram.protocol.errors import ConfigError
from engram.protocol.files import write_file

__all__ = ["PLUGIN_FILES", "InstallResult", "hermes_home", "install_plugin"]

PLUGIN_FILES = {
    "__init__.py": '''"""Engram memory for Hermes Agent: a MemoryProvider (engram.harness.hermes).

Written by `engram hermes install`; the provider itself lives in the installed engram
package, so this file never needs editing. Select it with
`hermes config set memory.provider engram`.
"""

from engram.harness.hermes import EngramMemoryProvider, register  # noqa: F401

__all__ = ["EngramMemoryProvider", "register"]
''',
    "plugin.yaml": """name: engram
description: Engram - verifiable agent memory (signed, provable, erasable)
""",
}


@dataclass(frozen=True, slots=True)
class InstallResult:
    directory: Path
    written: tuple[str, ...]  # files created or changed; empty when already installed


def hermes_home(explicit: str | None = None) -> Path:
    """``--hermes-home``, else ``$HERMES_HOME``, else ``~/.hermes`` (Hermes' own default)."""
    raw = explicit or os.environ.get("HERMES_HOME", "").strip() or str(Path.home() / ".hermes")
    return Path(raw).expanduser()


def install_plugin(home: Path) -> InstallResult:
    """Write ``home/plugins/engram/`` (idempotent: files already as written are left)."""
    if home.exists() and not home.is_dir():
        raise ConfigError(f"{home} is not a directory (--hermes-home / HERMES_HOME)")
    target = home / "plugins" / "engram"
    if target.is_symlink():
        raise ConfigError(f"{target} is a symbolic link; refusing to write through it")
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in PLUGIN_FILES.items():
        path = target / name
        try:
            if path.is_file() and not path.is_symlink() and path.read_text(encoding="utf-8") == text:
                continue
        except (OSError, UnicodeDecodeError):
            pass  # rewritten below
        write_file(path, text)
        written.append(name)
    return InstallResult(target, tuple(written))

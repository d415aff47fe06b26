"""The embedded log's opener for the agent-side commands (:func:`open_embedded`), in a module
of its own so that the entry point and the typer app share it without importing each other
(``engram.cli.entry:open_embedded`` stays its public name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engram import SERVER_LIBRARIES, install_hint

__all__ = ["open_embedded"]


def open_embedded(key_file: Path) -> Any:
    """The embedded log for ``key_file`` (:mod:`engram.cli.local`), or a clear error without it.

    Handed to the MCP server and the hooks; registered as the ``engram.embedded`` entry point
    for the Hermes provider, which Hermes loads, not this command."""
    try:
        from engram.cli.local import open_local
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in SERVER_LIBRARIES:
            raise
        from engram.protocol.errors import ConfigError

        raise ConfigError(
            f"the embedded log is not installed here (missing {e.name}): give --server URL / ENGRAM_URL, "
            f"or {install_hint('server')}"
        ) from None
    return open_local(key_file)

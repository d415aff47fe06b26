"""The ``engram`` command's entry point.

``engram mcp``, ``engram hook`` and ``engram --version`` take the fast front
(:mod:`engram.harness.cli`: argparse, the client only; the embedded log is loaded only when
they act on it), so a hook against an Engram service starts in well under 0.2 s. Everything
else is the service CLI (:mod:`engram.cli.app`), or a clear message when only the client or the
verifier is installed (the ``client`` extra has no database driver, no web server
and no CLI framework)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from engram import install_hint

#: Libraries only the service needs (the ``server`` extra).
SERVER_LIBRARIES = frozenset({"sqlalchemy", "alembic", "psycopg", "typer", "fastapi", "uvicorn"})
FAST_COMMANDS = ("mcp", "hook", "hermes")

__all__ = ["main", "open_embedded"]


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


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-V"]):
        from importlib.metadata import version

        from engram import DISTRIBUTION

        sys.stdout.write(f"engram {version(DISTRIBUTION)}\n")
        return
    if argv[:1] and argv[0] in FAST_COMMANDS:
        from engram.harness.cli import run

        raise SystemExit(run(argv[0], argv[1:], open_embedded))
    if argv[:1] in (["setup"], ["doctor"]):  # agent-side, client only (argparse)
        from importlib import import_module

        raise SystemExit(import_module(f"engram.harness.{argv[0]}").main(argv[1:]))
    if argv[:2] == ["log", "pin"]:  # a client's pin: no service needed
        from engram.harness.cli import run

        raise SystemExit(run("log-pin", argv[2:], open_embedded))
    try:
        from engram.cli.app import main as cli_main
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in SERVER_LIBRARIES:
            raise
        sys.stderr.write(
            f"engram: the service is not installed here (missing {e.name}). Install it with\n"
            f"    {install_hint('server')}\n"
            "The client (engram.client), engram mcp --server and engram hook --server, and\n"
            "engram-verify work without it.\n"
        )
        raise SystemExit(2) from None
    cli_main()

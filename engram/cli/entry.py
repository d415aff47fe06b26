"""The ``engram`` command's entry point.

``engram mcp``, ``engram hook`` and ``engram --version`` take the fast front
(:mod:`engram.harness.cli`: argparse, the client only; the embedded log is loaded only when
they act on it), so a hook against an Engram service starts in well under 0.2 s. Everything
else is the typer CLI (:mod:`engram.cli.app`), which the ``client`` extra runs too: the
agent's commands act on a service with ``--server`` / ``ENGRAM_URL``, and a command that
needs the service's libraries (the embedded log, ``serve``, ``init``, ``demo``) says so and
names the ``server`` extra. With the verifier alone (no extra) it names the ``client`` extra."""

from __future__ import annotations

import sys

from engram import CLIENT_LIBRARIES, SERVER_LIBRARIES, install_hint
from engram.cli.embedded import open_embedded

FAST_COMMANDS = ("mcp", "hook", "hermes")

__all__ = ["CLIENT_LIBRARIES", "SERVER_LIBRARIES", "main", "open_embedded"]


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
        if (e.name or "").split(".")[0] not in CLIENT_LIBRARIES | SERVER_LIBRARIES:
            raise
        extra = "server" if (e.name or "").split(".")[0] in SERVER_LIBRARIES else "client"
        sys.stderr.write(
            f"engram: the command line is not installed here (missing {e.name}). Install it with\n"
            f"    {install_hint(extra)}\n"
            "engram-verify works without it.\n"
        )
        raise SystemExit(2) from None
    cli_main()

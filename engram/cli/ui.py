"""``engram ui``: open the web UI's owner view of an agent's memory with the agent's key.

It signs a one-time ticket (engram.protocol.uiticket) with the agent's key, offline, and
prints the link that trades it for a short session on the service; the operator token is
never used or put in a URL. The link works once, within ``--lifetime`` seconds.
"""

from __future__ import annotations

import os
import time
import webbrowser
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

import typer

from engram.cli.common import LogKey, err, out
from engram.protocol.errors import ConfigError
from engram.protocol.uiticket import MAX_TICKET_S, make_ticket

__all__ = ["ui_cmd"]


def _key_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "engram"


def ui_cmd(
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", envvar="ENGRAM_KEY_FILE", help="The agent's key file."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="The agent whose key is ~/.config/engram/AGENT.key (instead of --key-file)."
        ),
    ] = None,
    server: Annotated[
        str,
        typer.Option("--server", envvar="ENGRAM_URL", help="The Engram service (`engram serve`)."),
    ] = "http://127.0.0.1:8080",
    log_key: LogKey = None,
    lifetime: Annotated[
        int, typer.Option("--lifetime", help=f"Seconds the link stays valid (1-{MAX_TICKET_S}).")
    ] = 120,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the link in the default browser.")
    ] = False,
) -> None:
    """Print a one-time link that opens the agent's memory in the web UI (signed by its key)."""
    from engram.client.agent_memory import connect_remote

    if not 1 <= lifetime <= MAX_TICKET_S:
        err.print(f"engram ui: --lifetime must be 1-{MAX_TICKET_S} seconds")
        raise typer.Exit(2)
    if key_file is None:
        if agent is None:
            err.print(
                "engram ui: give the agent's --key-file (or --agent NAME for ~/.config/engram/NAME.key)"
            )
            raise typer.Exit(2)
        key_file = _key_dir() / f"{agent}.key"
        if not key_file.is_file():
            raise ConfigError(f"no key file for {agent} at {key_file}: pass --key-file")
    mem = connect_remote(server, key_file, log_key=log_key)
    signer = mem.agent.signer
    if agent is not None and agent != signer.agent:
        raise ConfigError(f"{key_file} is {signer.agent}'s key, not {agent}'s")
    ticket = make_ticket(
        signer.origin, signer.agent, signer.private_key, now_s=int(time.time()), lifetime_s=lifetime
    )
    url = f"{server.rstrip('/')}/ui/login?ticket={quote(ticket, safe='')}"
    out.print(
        f"Open {signer.agent}'s memory (the link works once, for {lifetime} s; the session lasts 30 min):",
        soft_wrap=True,
    )
    print(url, flush=True)
    if open_browser:
        webbrowser.open(url)

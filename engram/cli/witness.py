"""``engram witness``: run a c2sp.org/tlog-witness witness."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from engram.cli.common import (
    out,
)
from engram.protocol.errors import ConfigError

witness_app = typer.Typer(
    rich_markup_mode=None,
    help="Run a c2sp.org/tlog-witness witness: it cosigns a log's checkpoints only if they are consistent.",
    no_args_is_help=True,
)


@witness_app.command("init")
def witness_init(
    name: Annotated[str, typer.Option(help="The witness's key name, e.g. witness.example.com/w1.")],
    directory: Annotated[Path, typer.Option("--dir", help="The witness's directory (key and state).")],
) -> None:
    """Create a witness key (0600) in DIR and print its cosigner verifier key."""
    from ledger.witness import init_witness

    out.print(str(init_witness(directory, name)))


@witness_app.command("add-log")
def witness_add_log(
    vkey: Annotated[str, typer.Argument(help="The log's verifier key (`engram log key`).")],
    directory: Annotated[Path, typer.Option("--dir", help="The witness's directory.")],
) -> None:
    """Trust a log: the witness will cosign checkpoints its key signed."""
    from ledger.witness import add_log

    out.print(f"witnessing log {add_log(directory, vkey).name}")


@witness_app.command("key")
def witness_key(directory: Annotated[Path, typer.Option("--dir", help="The witness's directory.")]) -> None:
    """Print the witness's cosigner verifier key (for policies)."""
    from ledger.witness import load_witness

    out.print(str(load_witness(directory).vkey))


@witness_app.command("serve")
def witness_serve(
    directory: Annotated[Path, typer.Option("--dir", help="The witness's directory.")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free port, printed).")] = 8090,
) -> None:
    """Serve POST /add-checkpoint and GET /<sha256(origin)>/checkpoint."""
    from ledger.witness import load_witness, serve_witness

    witness = load_witness(directory)
    if not witness.logs:
        raise ConfigError(f"the witness in {directory} trusts no log; run `engram witness add-log`")
    server = serve_witness(witness, host, port)
    out.print(f"witness {witness.name} listening on http://{host}:{server.server_address[1]}")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

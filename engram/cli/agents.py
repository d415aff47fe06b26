"""``engram agent`` (keys: create, rotate, revoke) and ``engram event`` (append signed events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from engram.cli.common import (
    log_from_env,
    out,
)
from engram.protocol.errors import MalformedError
from verifier.note import b64encode

agent_app = typer.Typer(
    rich_markup_mode=None, help="Agent keys: create, rotate, revoke.", no_args_is_help=True
)
event_app = typer.Typer(
    rich_markup_mode=None, help="Append signed events with an agent key file.", no_args_is_help=True
)


@agent_app.command("create")
def agent_create(
    agent: Annotated[str, typer.Argument(help="Agent id, [a-z0-9][a-z0-9._-]{0,63}.")],
    key_file: Annotated[Path, typer.Option("--key-file", help="Where to write the agent key (0600).")],
) -> None:
    """Generate an agent key, save it, and register it in the log (operator action)."""
    from engram.client.sdk import Agent
    from ledger.inprocess import InProcess

    ledger = log_from_env()
    a = Agent.generate(agent, log_vkey=ledger.vkey, transport=InProcess(ledger))
    a.save(key_file)
    r = a.register()
    out.print(f"registered {agent} key {a.signer.key_id} at index {r.index}; key saved to {key_file}")


@agent_app.command("rotate")
def agent_rotate(
    key_file: Annotated[Path, typer.Option("--key-file", help="The agent's current key file.")],
    new_key_file: Annotated[Path, typer.Option("--new-key-file", help="Where to write the new key (0600).")],
) -> None:
    """Rotate an agent's key: the current key signs the hand-over to a new one."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from engram.client.sdk import Agent
    from engram.protocol.keyfiles import format_agent_key, write_private_file
    from ledger.inprocess import InProcess

    ledger = log_from_env()
    a = Agent.load(key_file, log_vkey=ledger.vkey, transport=InProcess(ledger))
    new_key = Ed25519PrivateKey.generate()
    write_private_file(new_key_file, format_agent_key(a.agent_id, new_key))
    r = a.rotate(new_key)
    out.print(f"rotated {a.agent_id} to key {a.signer.key_id} at index {r.index}; new key in {new_key_file}")


@agent_app.command("revoke")
def agent_revoke(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the log).")] = "revoked by operator",
) -> None:
    """Revoke an agent's active key with the ledger policy key (e.g. a lost or leaked key)."""
    r = log_from_env().force_revoke(agent, reason)
    out.print(f"revoked the active key of {agent} at index {r.index}")


@event_app.command("append")
def event_append(
    key_file: Annotated[
        Path, typer.Option("--key-file", help="The agent's key file.", envvar="ENGRAM_KEY_FILE")
    ],
    kind: Annotated[str, typer.Option(help="Event kind, e.g. pact.outcome.")],
    body: Annotated[str, typer.Option(help="Event body: a JSON object (no floats).")],
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            envvar="ENGRAM_URL",
            help="Append a record (pact.outcome, eval.outcome, commitment, boundary.event) on this service.",
        ),
    ] = None,
    log_key: Annotated[
        str | None,
        typer.Option("--log-key", envvar="ENGRAM_LOG_KEY", help="With --server: the log's verifier key."),
    ] = None,
) -> None:
    """Sign and append one event; prints the receipt (JSON)."""
    from engram.client.sdk import Agent
    from verifier.jcs import parse_strict

    if server:
        from engram.client.agent_memory import connect_remote

        parsed_r = parse_strict(body.encode("utf-8"), max_bytes=1 << 20)
        if not isinstance(parsed_r, dict):
            raise MalformedError("the body must be a JSON object", check="body.type")
        remote = connect_remote(server, key_file, log_key=log_key)
        rec = remote.record(kind, parsed_r)
        out.print_json(json.dumps({**rec.to_json(), "stream": [remote.agent_id, kind]}))
        return
    from ledger.compose import open_services
    from ledger.config import Settings

    services = open_services(Settings.from_env())  # memory kinds go in through the memory door
    ledger = services.ledger
    a = Agent.load(key_file, log_vkey=ledger.vkey, transport=services.transport())
    parsed = parse_strict(body.encode("utf-8"), max_bytes=ledger.max_body_bytes)
    if not isinstance(parsed, dict):
        raise MalformedError("the body must be a JSON object", check="body.type")
    r = a.append(kind, parsed)
    out.print_json(
        json.dumps(
            {
                "index": r.index,
                "timestamp_us": r.timestamp_us,
                "leaf_hash": r.leaf_hash.hex(),
                "stream": [r.agent, r.kind],
                "version": r.version,
                "proof": [b64encode(h) for h in r.proof.hashes],
                "checkpoint": r.checkpoint.decode("utf-8"),
            }
        )
    )

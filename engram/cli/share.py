"""``engram bundle`` and ``engram token``: attestation bundles and share tokens."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from engram.cli.common import (
    KeyFile,
    LogKey,
    Server,
    agent_memory,
    agent_of,
    agent_public_keys,
    duration_s,
    log_from_env,
    out,
    require_agent,
)
from engram.protocol.files import write_file

bundle_app = typer.Typer(
    rich_markup_mode=None, help="Attestation bundles for buyers and auditors.", no_args_is_help=True
)
token_app = typer.Typer(
    rich_markup_mode=None, help="Share tokens: mint, attenuate, revoke, inspect.", no_args_is_help=True
)


@bundle_app.command("create")
def bundle_create(
    agent: Annotated[str, typer.Option(help="The agent the claim is about.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the bundle (JSON).")],
    claim: Annotated[
        str | None,
        typer.Option(
            help='A claim: JSON {"statements": [...]} or @FILE (default: its pact outcome summary).'
        ),
    ] = None,
    trusted_size: Annotated[
        int | None, typer.Option(help="Include a consistency proof from this tree size.")
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="A share token to include (limits what is disclosed).")
    ] = None,
    audience: Annotated[
        str | None, typer.Option(help="The buyer the bundle is for (needed with --token).")
    ] = None,
) -> None:
    """Write a bundle proving a claim about an agent's records (offline-verifiable)."""
    from ledger.bundle import create_bundle, pact_claim
    from verifier.jcs import parse_strict

    ledger = log_from_env()
    require_agent(ledger, agent)
    if claim is None:
        claim_obj = pact_claim(ledger, agent)
    else:
        raw = Path(claim[1:]).read_bytes() if claim.startswith("@") else claim.encode("utf-8")
        claim_obj = parse_strict(raw, max_bytes=1 << 20)
    data = create_bundle(ledger, claim_obj, trusted_size=trusted_size, token=token, audience=audience)
    write_file(output, data)  # never through a symlink planted at the path
    out.print(f"bundle of {len(data)} bytes written to {output}")
    # A bundle with a share token verifies only for its audience.
    aud = f' --audience "{audience}"' if audience else ""
    out.print(f'verify offline: engram-verify bundle {output} --log-key "{ledger.vkey}"{aud}')


@token_app.command("mint")
def token_mint(
    key_file: Annotated[
        Path, typer.Option("--key-file", help="The agent's key file.", envvar="ENGRAM_KEY_FILE")
    ],
    audience: Annotated[str, typer.Option(help="Who may use it (the buyer's id).")],
    kind: Annotated[
        list[str], typer.Option(help="A kind the holder may see (repeatable), e.g. pact.outcome.")
    ],
    expires_in: Annotated[str, typer.Option(help="Lifetime, e.g. 12h or 7d.")] = "7d",
    server: Annotated[
        str | None,
        typer.Option("--server", envvar="ENGRAM_URL", help="The agent's Engram service (its log origin)."),
    ] = None,
    log_key: Annotated[
        str | None,
        typer.Option("--log-key", envvar="ENGRAM_LOG_KEY", help="With --server: the log's verifier key."),
    ] = None,
) -> None:
    """Mint a share token signed with the agent's key; prints it."""
    import time as _time

    from engram.protocol.keyfiles import load_agent_key
    from verifier.token import mint

    if server:
        from engram.client.agent_memory import connect_remote

        remote = connect_remote(server, key_file, log_key=log_key)
        expires = int(_time.time()) + duration_s(expires_in)
        sys.stdout.write(remote.mint_token(audience=audience, kinds=kind, expires=expires) + "\n")
        return
    ledger = log_from_env()
    agent, key = load_agent_key(key_file)
    token = mint(
        seed=key.private_bytes_raw(),
        origin=ledger.origin,
        agent=agent,
        audience=audience,
        kinds=kind,
        expires=int(_time.time()) + duration_s(expires_in),
    )
    sys.stdout.write(token + "\n")


@token_app.command("attenuate")
def token_attenuate(
    token: Annotated[str, typer.Argument(help="The token to narrow.")],
    agent: Annotated[str, typer.Option(help="The agent that minted it (its keys are read from the log).")],
    kind: Annotated[list[str] | None, typer.Option(help="Keep only these kinds (repeatable).")] = None,
    expires_in: Annotated[str | None, typer.Option(help="Expire sooner, e.g. 1d.")] = None,
) -> None:
    """Narrow a token offline (fewer kinds, sooner expiry); no private key is needed."""
    import time as _time

    from verifier.token import attenuate

    ledger = log_from_env()
    expires = None if expires_in is None else int(_time.time()) + duration_s(expires_in)
    narrowed = attenuate(token, agent_keys=agent_public_keys(ledger, agent), kinds=kind, expires=expires)
    sys.stdout.write(narrowed + "\n")


@token_app.command("revoke")
def token_revoke(
    key_file: KeyFile,
    token: Annotated[str, typer.Argument(help="The token to revoke (and all tokens attenuated from it).")],
    server: Server = None,
    log_key: LogKey = None,
) -> None:
    """Revoke a token: a share.revoked entry in the agent's log that every bundle must carry."""
    from verifier.token import revocation_ids

    if server:
        remote = agent_memory(key_file, server, log_key)
        ids = revocation_ids(token, agent_keys=[remote.agent.signer.public_key])
        out.print(f"revoked token {ids[0][:16]}... at index {remote.revoke_token(token).index}")
        return
    ledger = log_from_env()
    agent = agent_of(ledger, key_file)
    ids = revocation_ids(token, agent_keys=agent_public_keys(ledger, agent.agent_id))
    r = agent.append("share.revoked", {"token_id": ids[0]})
    out.print(f"revoked token {ids[0][:16]}... at index {r.index}")


@token_app.command("inspect")
def token_inspect(token: Annotated[str, typer.Argument(help="A token.")]) -> None:
    """Print a token's blocks (datalog), unverified."""
    from verifier.token import inspect

    for i, src in enumerate(inspect(token)):
        out.print(f"block {i}:")
        out.print(escape(src.rstrip()))

"""The ``engram`` command line (typer + rich). The outermost layer: reads env and clock.

Exit codes: 0 success, 1 a typed Engram error (message on stderr), 2 usage error.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ledger.config import Settings
from ledger.errors import ConfigError, EngramError, MalformedError
from ledger.log import ConsistencyProof, InclusionProof, Ledger

app = typer.Typer(
    name="engram",
    help="Engram: verifiable AI-agent memory on an RFC 9162 Merkle log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
log_app = typer.Typer(help="Inspect the log: key, checkpoints, proofs.", no_args_is_help=True)
export_app = typer.Typer(help="Export the log for auditors and mirrors.", no_args_is_help=True)
agent_app = typer.Typer(help="Agent keys: create, rotate, revoke.", no_args_is_help=True)
event_app = typer.Typer(help="Append signed events with an agent key file.", no_args_is_help=True)
app.add_typer(log_app, name="log")
app.add_typer(export_app, name="export")
app.add_typer(agent_app, name="agent")
app.add_typer(event_app, name="event")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


def _ledger() -> Ledger:
    return Ledger.open(Settings.from_env())


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _inclusion_json(p: InclusionProof) -> dict[str, Any]:
    return {
        "index": p.index,
        "size": p.size,
        "leaf_hash": _b64(p.leaf_hash),
        "root": _b64(p.root),
        "proof": [_b64(h) for h in p.hashes],
        "checkpoint": None if p.checkpoint is None else p.checkpoint.decode("utf-8"),
    }


def _consistency_json(p: ConsistencyProof) -> dict[str, Any]:
    return {
        "old_size": p.old_size,
        "new_size": p.new_size,
        "old_root": _b64(p.old_root),
        "new_root": _b64(p.new_root),
        "proof": [_b64(h) for h in p.hashes],
        "old_checkpoint": None if p.old_checkpoint is None else p.old_checkpoint.decode("utf-8"),
        "new_checkpoint": None if p.new_checkpoint is None else p.new_checkpoint.decode("utf-8"),
    }


def tlog_proof_text(p: InclusionProof) -> str:
    """The proof as a c2sp.org/tlog-proof@v1 file (needs the checkpoint of that size)."""
    if p.checkpoint is None:
        raise ConfigError(f"no checkpoint was signed at size {p.size}; pick a checkpointed size")
    lines = ["c2sp.org/tlog-proof@v1", f"index {p.index}", *(_b64(h) for h in p.hashes), ""]
    return "\n".join(lines) + "\n" + p.checkpoint.decode("utf-8")


@app.command()
def init(
    origin: Annotated[
        str | None,
        typer.Option(
            help="Log origin (a schema-less URL such as example.com/engram); default: a unique local one."
        ),
    ] = None,
) -> None:
    """Create the database, the log signing key (0600) and the policy key under ENGRAM_HOME."""
    settings = Settings.from_env()
    ledger = Ledger.init_home(settings, origin)
    cp = ledger.latest_checkpoint()
    out.print(
        f"[bold green]initialised[/] log [bold]{ledger.origin}[/] at {ledger.store.engine.url.render_as_string()}"
    )
    out.print(f"log key file: {settings.log_key_file} (mode 0600)")
    out.print(f"verifier key: {ledger.vkey}")
    out.print(f"size {cp.size}: the ledger policy agent's key is entry 0")


@app.command()
def demo(
    server: Annotated[
        str | None, typer.Option(help="Run against an Engram server (not yet available).")
    ] = None,
) -> None:
    """A realistic end-to-end scenario on the embedded SQLite default."""
    if server is not None:
        raise ConfigError("--server needs the HTTP service, which is not built yet; run without it")
    from ledger.demo import run_demo

    run_demo(Settings.from_env(), out)


@log_app.command("key")
def log_key() -> None:
    """Print the log's C2SP verifier key (name+keyid+base64 key)."""
    out.print(_ledger().vkey)


@log_app.command("checkpoint")
def log_checkpoint(
    size: Annotated[int | None, typer.Option(help="A past checkpoint's tree size.")] = None,
) -> None:
    """Print the latest (or a past) signed checkpoint note, byte for byte."""
    ledger = _ledger()
    cp = ledger.latest_checkpoint() if size is None else ledger.store.checkpoint(size)
    if cp is None:
        raise ConfigError(f"no checkpoint was signed at size {size}")
    sys.stdout.write(cp.note.decode("utf-8"))


@log_app.command("prove")
def log_prove(
    index: Annotated[int, typer.Option(help="Leaf index.")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: latest checkpoint).")] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="json or tlog-proof (c2sp.org/tlog-proof@v1).")
    ] = "json",
) -> None:
    """Inclusion proof of leaf INDEX in the tree of SIZE, verified before printing."""
    proof = _ledger().prove_inclusion(index, size)
    if fmt == "json":
        out.print_json(json.dumps(_inclusion_json(proof)))
    elif fmt == "tlog-proof":
        sys.stdout.write(tlog_proof_text(proof))
    else:
        raise MalformedError(f"unknown format {fmt!r}; use json or tlog-proof", check="cli.format")


@log_app.command("prove-consistency")
def log_prove_consistency(
    old: Annotated[int, typer.Option(help="Older tree size.")],
    new: Annotated[int | None, typer.Option(help="Newer tree size (default: latest checkpoint).")] = None,
) -> None:
    """Consistency proof between two tree sizes, verified before printing."""
    out.print_json(json.dumps(_consistency_json(_ledger().prove_consistency(old, new))))


@log_app.command("entry")
def log_entry(index: Annotated[int, typer.Option(help="Leaf index.")]) -> None:
    """Print one leaf (canonical JSON) exactly as stored."""
    leaf = _ledger().store.leaf(index)
    if leaf is None:
        raise MalformedError(f"no leaf at index {index}", check="log.index")
    sys.stdout.write(leaf.decode("utf-8") + "\n")


@export_app.command("tiles")
def export_tiles_cmd(directory: Annotated[Path, typer.Argument(help="An empty or new directory.")]) -> None:
    """Write a static C2SP tlog-tiles tree (checkpoint, hash tiles, entry bundles)."""
    from ledger.tiles import export_tiles

    ledger = _ledger()
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("exporting tiles", total=None)

        def tick(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        summary = export_tiles(ledger.store, directory, progress=tick)
    out.print(
        f"exported size {summary.size}: {summary.hash_tiles} hash tiles, {summary.entry_bundles} entry bundles, "
        f"{summary.bytes_written} bytes -> {directory}"
    )
    out.print(f"verify with the log key: {ledger.vkey}")


@agent_app.command("create")
def agent_create(
    agent: Annotated[str, typer.Argument(help="Agent id, [a-z0-9][a-z0-9._-]{0,63}.")],
    key_file: Annotated[Path, typer.Option("--key-file", help="Where to write the agent key (0600).")],
) -> None:
    """Generate an agent key, save it, and register it in the log (operator action)."""
    from ledger.sdk import Agent, InProcess

    ledger = _ledger()
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

    from ledger.keyfiles import format_agent_key, write_private_file
    from ledger.sdk import Agent, InProcess

    ledger = _ledger()
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
    r = _ledger().force_revoke(agent, reason)
    out.print(f"revoked the active key of {agent} at index {r.index}")


@event_app.command("append")
def event_append(
    key_file: Annotated[Path, typer.Option("--key-file", help="The agent's key file.")],
    kind: Annotated[str, typer.Option(help="Event kind, e.g. pact.outcome.")],
    body: Annotated[str, typer.Option(help="Event body: a JSON object (no floats).")],
) -> None:
    """Sign and append one event; prints the receipt."""
    from ledger.sdk import Agent, InProcess
    from verifier.jcs import parse_strict

    ledger = _ledger()
    a = Agent.load(key_file, log_vkey=ledger.vkey, transport=InProcess(ledger))
    parsed = parse_strict(body.encode("utf-8"), max_bytes=ledger.max_body_bytes)
    if not isinstance(parsed, dict):
        raise MalformedError("the body must be a JSON object", check="body.type")
    r = a.append(kind, parsed)
    out.print_json(
        json.dumps(
            {
                "index": r.index,
                "timestamp_us": r.timestamp_us,
                "leaf_hash": _b64(r.leaf_hash),
                "stream": [r.agent, r.kind],
                "version": r.version,
                "proof": [_b64(h) for h in r.proof.hashes],
                "checkpoint": r.checkpoint.decode("utf-8"),
            }
        )
    )


def main() -> None:
    """Console entry point: typed errors become one clear line and exit code 1.

    Usage errors are typer's (exit code 2); anything else is a bug and keeps its traceback.
    """
    try:
        app()
    except EngramError as e:
        err.print(f"[bold red]error:[/] {type(e).__name__}: {escape(str(e))}")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()

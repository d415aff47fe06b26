"""``engram log`` (key, checkpoints, proofs, witnessing, the signer's record, pins) and
``engram export`` (tiles)."""

from __future__ import annotations

import hmac
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from engram.cli.common import (
    consistency_json,
    err,
    inclusion_json,
    log_from_env,
    out,
    progress_bar,
    tlog_proof_text,
)
from engram.protocol.errors import ConfigError, MalformedError
from verifier.note import b64encode

log_app = typer.Typer(
    rich_markup_mode=None, help="Inspect the log: key, checkpoints, proofs.", no_args_is_help=True
)
export_app = typer.Typer(
    rich_markup_mode=None, help="Export the log for auditors and mirrors.", no_args_is_help=True
)


@log_app.command("key")
def log_key() -> None:
    """Print the log's C2SP verifier key (name+keyid+base64 key)."""
    out.print(log_from_env().vkey)


@log_app.command("checkpoint")
def log_checkpoint(
    size: Annotated[int | None, typer.Option(help="A past checkpoint's tree size.")] = None,
) -> None:
    """Print the latest (or a past) signed checkpoint note, byte for byte, followed by the
    witness cosignatures collected for it."""
    ledger = log_from_env()
    cp = ledger.latest_checkpoint() if size is None else ledger.store.checkpoint(size)
    if cp is None:
        raise ConfigError(f"no checkpoint was signed at size {size}")
    sys.stdout.write(ledger.cosigned_note(cp).decode("utf-8"))


@log_app.command("witness")
def log_witness(
    size: Annotated[int | None, typer.Option(help="A past checkpoint's tree size (default: latest).")] = None,
) -> None:
    """Submit the latest checkpoint to the witnesses of ENGRAM_WITNESS_POLICY (c2sp.org/tlog-witness)
    and store their cosignatures; exits 1 if the policy's quorum is not met."""
    from ledger.witnessing import witness_checkpoint

    result = witness_checkpoint(log_from_env(), size)
    for r in result.results:
        if r.cosignature is not None:
            out.print(f"[green]cosigned[/] by {r.witness}")
        else:
            out.print(f"[red]not cosigned[/] by {r.witness}: {r.error}")
    if not result.quorum:
        err.print(f"[bold red]quorum not met[/] for the checkpoint of size {result.size}")
        raise typer.Exit(1)
    out.print(f"[bold green]quorum met[/] for the checkpoint of size {result.size}")


@log_app.command("prove")
def log_prove(
    index: Annotated[int, typer.Option(help="Leaf index.")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: latest checkpoint).")] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="json or tlog-proof (c2sp.org/tlog-proof@v1).")
    ] = "json",
) -> None:
    """Inclusion proof of leaf INDEX in the tree of SIZE, verified before printing."""
    proof = log_from_env().prove_inclusion(index, size)
    if fmt == "json":
        out.print_json(json.dumps(inclusion_json(proof)))
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
    out.print_json(json.dumps(consistency_json(log_from_env().prove_consistency(old, new))))


@log_app.command("reanchor")
def log_reanchor(
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="A checkpoint note you trust (e.g. a witness-cosigned copy); default: the database's latest, "
            "which trusts the database.",
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Write the record (without it: only say what it would do).")
    ] = False,
) -> None:
    """Re-anchor the signer's record of the last checkpoint it signed (ledger.signed_head),
    after it was lost or could not be written. Refused unless the database's log extends the
    checkpoint anchored to; the log signs nothing until the record is sound again."""
    from ledger.config import Settings
    from ledger.signed_head import SignedHead, SignedHeadRecord
    from verifier.note import verify_checkpoint

    ledger = log_from_env()
    record = ledger.signed_head or SignedHeadRecord(Settings.from_env().signer_record_file, ledger.origin)
    size = ledger.size()
    if checkpoint is None:
        cp = verify_checkpoint(ledger.latest_checkpoint().note, ledger.verifier_key)
        source = "the database's latest checkpoint (this trusts the database)"
    else:
        with open(checkpoint, "rb") as f:
            note = f.read(64 * 1024 + 1)
        if len(note) > 64 * 1024:
            raise MalformedError(f"{checkpoint} is larger than a checkpoint note", check="signer.reanchor")
        cp = verify_checkpoint(note, ledger.verifier_key, origin=ledger.origin)
        source = str(checkpoint)
    if cp.size > size:
        raise MalformedError(
            f"the checkpoint has size {cp.size} but the database's log has {size} entries: the database is "
            "behind what was signed; restore it, do not re-anchor",
            check="signer.reanchor",
        )
    proof = ledger.prove_consistency(cp.size, size)
    if not hmac.compare_digest(proof.old_root, cp.root):
        raise MalformedError(
            f"the database's tree at size {cp.size} does not have that checkpoint's root: it is a fork",
            check="signer.reanchor",
        )
    out.print(f"re-anchoring {record.path} to size {cp.size}, root {b64encode(cp.root)}")
    out.print(f"  from {source}; the database's log ({size} entries) extends it")
    if not yes:
        out.print("nothing written: add --yes to write the record")
        raise typer.Exit(2)
    record.advance(SignedHead(cp.size, cp.root), force=True)
    record.stale = None
    out.print("[green]recorded[/]: the log signs again")


@log_app.command("pin", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def log_pin(ctx: typer.Context) -> None:
    """Show the log key pinned for a service (--server URL); --reset forgets it and pins the
    key the service serves now. (Runs on a client-only install too.)"""
    from engram.harness.cli import run

    raise typer.Exit(run("log-pin", list(ctx.args), None))


@log_app.command("entry")
def log_entry(index: Annotated[int, typer.Option(help="Leaf index.")]) -> None:
    """Print one leaf (canonical JSON) exactly as stored."""
    leaf = log_from_env().store.leaf(index)
    if leaf is None:
        raise MalformedError(f"no leaf at index {index}", check="log.index")
    sys.stdout.write(leaf.decode("utf-8") + "\n")


@export_app.command("tiles")
def export_tiles_cmd(
    directory: Annotated[Path, typer.Argument(help="An empty or new directory (with --update: a mirror).")],
    update: Annotated[
        bool,
        typer.Option(
            "--update",
            help="Bring a mirror this command wrote up to date: its checkpoint must be this log's and "
            "consistent with it; only what changed is written.",
        ),
    ] = False,
) -> None:
    """Write a static C2SP tlog-tiles tree (checkpoint, hash tiles, entry bundles)."""
    from ledger.tiles import export_tiles

    ledger = log_from_env()
    with progress_bar("exporting tiles") as tick:
        summary = export_tiles(
            ledger.store, directory, progress=tick, update=(ledger.vkey, ledger.root_at) if update else None
        )
    out.print(
        f"exported size {summary.size}: {summary.hash_tiles} hash tiles, {summary.entry_bundles} entry bundles, "
        f"{summary.bytes_written} bytes -> {directory}"
    )
    out.print(f"verify with the log key: {ledger.vkey}")

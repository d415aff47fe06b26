"""The ``engram`` command line (typer + rich). The outermost layer: reads env and clock.

Exit codes: 0 success, 1 a typed Engram error (message on stderr), 2 usage error.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engram.protocol.errors import ConfigError, EngramError, MalformedError
from engram.protocol.files import write_file
from ledger.compose import init_ledger, open_ledger, open_services
from ledger.config import Settings
from ledger.log import ConsistencyProof, InclusionProof, Ledger
from verifier.note import b64encode

app = typer.Typer(
    rich_markup_mode=None,
    name="engram",
    help="Engram: verifiable AI-agent memory on an RFC 9162 Merkle log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
log_app = typer.Typer(
    rich_markup_mode=None, help="Inspect the log: key, checkpoints, proofs.", no_args_is_help=True
)
export_app = typer.Typer(
    rich_markup_mode=None, help="Export the log for auditors and mirrors.", no_args_is_help=True
)
agent_app = typer.Typer(
    rich_markup_mode=None, help="Agent keys: create, rotate, revoke.", no_args_is_help=True
)
event_app = typer.Typer(
    rich_markup_mode=None, help="Append signed events with an agent key file.", no_args_is_help=True
)
session_app = typer.Typer(
    rich_markup_mode=None,
    help="Working sessions: open, record turns, close (distill + compact).",
    no_args_is_help=True,
)
memory_app = typer.Typer(
    rich_markup_mode=None, help="Memory: write, recall, show, compact, rebuild.", no_args_is_help=True
)
app.add_typer(session_app, name="session")
app.add_typer(memory_app, name="memory")
bundle_app = typer.Typer(
    rich_markup_mode=None, help="Attestation bundles for buyers and auditors.", no_args_is_help=True
)
token_app = typer.Typer(
    rich_markup_mode=None, help="Share tokens: mint, attenuate, revoke, inspect.", no_args_is_help=True
)
app.add_typer(bundle_app, name="bundle")
app.add_typer(token_app, name="token")
app.add_typer(log_app, name="log")
app.add_typer(export_app, name="export")
app.add_typer(agent_app, name="agent")
app.add_typer(event_app, name="event")
witness_app = typer.Typer(
    rich_markup_mode=None,
    help="Run a c2sp.org/tlog-witness witness: it cosigns a log's checkpoints only if they are consistent.",
    no_args_is_help=True,
)
app.add_typer(witness_app, name="witness")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)  # one line per error, never wrapped mid-word


def _ledger() -> Ledger:
    return open_ledger(Settings.from_env())


def _inclusion_json(p: InclusionProof) -> dict[str, Any]:
    return {
        "index": p.index,
        "size": p.size,
        "leaf_hash": p.leaf_hash.hex(),  # hashes naming an entry are hex on every surface
        "root": b64encode(p.root),
        "proof": [b64encode(h) for h in p.hashes],
        "checkpoint": None if p.checkpoint is None else p.checkpoint.decode("utf-8"),
    }


def _consistency_json(p: ConsistencyProof) -> dict[str, Any]:
    return {
        "old_size": p.old_size,
        "new_size": p.new_size,
        "old_root": b64encode(p.old_root),
        "new_root": b64encode(p.new_root),
        "proof": [b64encode(h) for h in p.hashes],
        "old_checkpoint": None if p.old_checkpoint is None else p.old_checkpoint.decode("utf-8"),
        "new_checkpoint": None if p.new_checkpoint is None else p.new_checkpoint.decode("utf-8"),
    }


def tlog_proof_text(p: InclusionProof) -> str:
    """The proof as a c2sp.org/tlog-proof@v1 file (needs the checkpoint of that size)."""
    if p.checkpoint is None:
        raise ConfigError(f"no checkpoint was signed at size {p.size}; pick a checkpointed size")
    lines = ["c2sp.org/tlog-proof@v1", f"index {p.index}", *(b64encode(h) for h in p.hashes), ""]
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
    ledger = init_ledger(settings, origin)
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
        str | None,
        typer.Option(help="Run the journeys against an Engram service at this URL (see `engram serve`)."),
    ] = None,
    log_key: Annotated[
        str | None,
        typer.Option("--log-key", help="The server log's verifier key, pinned (`engram log key`)."),
    ] = None,
    into_this_log: Annotated[
        bool,
        typer.Option(
            "--into-this-log",
            help="Write the demo agents permanently into the configured log (real time), "
            "instead of a fresh log of the demo's own.",
        ),
    ] = False,
) -> None:
    """A realistic end-to-end scenario on the embedded SQLite default, or over HTTP with --server
    (registering agents needs ENGRAM_OPERATOR_TOKEN). It never writes into a log you configured
    (ENGRAM_DATABASE_URL, or an ENGRAM_HOME that already holds a log) unless --into-this-log."""
    if server is not None:
        from engram.client.demo import run_server_demo

        run_server_demo(server, out, operator_token=os.environ.get("ENGRAM_OPERATOR_TOKEN"), log_vkey=log_key)
        return
    from ledger.demo import run_demo

    settings = Settings.from_env()
    if os.environ.get("ENGRAM_DATABASE_URL") and not into_this_log:
        err.print(
            "engram demo: ENGRAM_DATABASE_URL names your log, and the demo would write its agents into it "
            "permanently; pass --into-this-log to do that, or unset ENGRAM_DATABASE_URL to run it in a fresh "
            "SQLite log",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    run_demo(settings, out, into_this_log=into_this_log)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(ctx: typer.Context) -> None:
    """Run the benchmark harness (python -m bench): every figure and target of docs/performance.md,
    a JSON report and a table. Options pass through, e.g. engram bench --smoke, --only replay,
    --no-pg, --long, --json FILE, --markdown FILE. Needs a source checkout with the bench extra
    (pip install -e '.[bench]'): the harness is not part of the installed package."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / "bench" / "__main__.py").is_file():
        err.print(
            "engram bench runs from a source checkout: the harness (bench/) is not installed with the package"
        )
        raise typer.Exit(2)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    )
    raise typer.Exit(subprocess.call([sys.executable, "-m", "bench", *ctx.args], env=env))  # noqa: S603


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8080,
    workers: Annotated[int, typer.Option(help="Worker processes.")] = 1,
) -> None:
    """Serve the HTTP API (uvicorn). Needs ENGRAM_OPERATOR_TOKEN, or ENGRAM_DEV_MODE=1.

    The settings and the log are checked before any worker starts: a bad setting is one
    line on stderr and exit code 2 (never workers that crash and respawn)."""
    import importlib

    import uvicorn
    from pydantic import ValidationError

    # The HTTP layer is loaded by name, as uvicorn loads "api.main:app_factory" below: the
    # service layer never imports it (tests/unit/test_house_imports.py).
    api_settings = importlib.import_module("api.settings").ApiSettings

    if not 0 < port < 65536 or not 1 <= workers <= 64:
        err.print(f"engram serve: --port must be 1-65535 and --workers 1-64 (got {port}, {workers})")
        raise typer.Exit(2)
    try:
        api_settings()
        open_services(Settings.from_env())
    except ValidationError as e:
        problems = "; ".join(str(x.get("msg", "")).removeprefix("Value error, ") for x in e.errors())
        err.print(f"engram serve: {escape(problems)}")
        raise typer.Exit(2) from None
    except EngramError as e:
        err.print(f"engram serve: {escape(str(e))}")
        raise typer.Exit(2) from None

    # h11 (strict parsing) with a bounded request head and a request deadline (api/server.py);
    # h11's own buffer bound sits above ENGRAM_MAX_HEADER_BYTES so that the 431 answers first.
    uvicorn.run(
        "api.main:app_factory",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http="api.server:BoundedH11Protocol",
        h11_max_incomplete_event_size=2 * 1_048_576,
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


@log_app.command("key")
def log_key() -> None:
    """Print the log's C2SP verifier key (name+keyid+base64 key)."""
    out.print(_ledger().vkey)


@log_app.command("checkpoint")
def log_checkpoint(
    size: Annotated[int | None, typer.Option(help="A past checkpoint's tree size.")] = None,
) -> None:
    """Print the latest (or a past) signed checkpoint note, byte for byte, followed by the
    witness cosignatures collected for it."""
    ledger = _ledger()
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

    result = witness_checkpoint(_ledger(), size)
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
    from ledger.signed_head import SignedHead, SignedHeadRecord
    from verifier.note import verify_checkpoint

    ledger = _ledger()
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
    leaf = _ledger().store.leaf(index)
    if leaf is None:
        raise MalformedError(f"no leaf at index {index}", check="log.index")
    sys.stdout.write(leaf.decode("utf-8") + "\n")


@contextmanager
def _progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A transient progress bar on stderr; yields ``tick(done, total)``. The bar appears at
    the first tick: a command that fails before it has work to show prints its error alone."""
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task: list[Any] = []

    def tick(done: int, total: int) -> None:
        if not task:
            progress.start()
            task.append(progress.add_task(description, total=None))
        progress.update(task[0], completed=done, total=total)

    try:
        yield tick
    finally:
        if task:
            progress.stop()


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

    ledger = _ledger()
    with _progress("exporting tiles") as tick:
        summary = export_tiles(
            ledger.store, directory, progress=tick, update=(ledger.vkey, ledger.root_at) if update else None
        )
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
    from engram.client.sdk import Agent
    from ledger.inprocess import InProcess

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

    from engram.client.sdk import Agent
    from engram.protocol.keyfiles import format_agent_key, write_private_file
    from ledger.inprocess import InProcess

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
    from ledger.inprocess import InProcess
    from verifier.jcs import parse_strict

    if server:
        from engram.client.agent_memory import connect_remote

        parsed_r = parse_strict(body.encode("utf-8"), max_bytes=1 << 20)
        if not isinstance(parsed_r, dict):
            raise MalformedError("the body must be a JSON object", check="body.type")
        remote = connect_remote(server, key_file, log_key=log_key)
        rec = remote.record(kind, parsed_r)
        out.print_json(json.dumps({**rec, "stream": [remote.agent_id, kind]}))
        return
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
                "leaf_hash": r.leaf_hash.hex(),
                "stream": [r.agent, r.kind],
                "version": r.version,
                "proof": [b64encode(h) for h in r.proof.hashes],
                "checkpoint": r.checkpoint.decode("utf-8"),
            }
        )
    )


# -- sessions and memory ---------------------------------------------------------------


def _memory() -> tuple[Ledger, Any]:
    services = open_services(Settings.from_env())
    return services.ledger, services.memory


def _agent(ledger: Ledger, key_file: Path) -> Any:
    from engram.client.sdk import Agent
    from ledger.inprocess import InProcess

    return Agent.load(key_file, log_vkey=ledger.vkey, transport=InProcess(ledger))


def _require_agent(ledger: Ledger, agent: str) -> None:
    """An agent id that names no agent of this log is an error, not an empty answer."""
    if not ledger.store.keys_of(agent):
        from engram.protocol.errors import NotFoundError

        raise NotFoundError(
            f"no agent {agent!r} in the log {ledger.origin} (engram agent create {agent} ...)"
        )


KeyFile = Annotated[Path, typer.Option("--key-file", help="The agent's key file.", envvar="ENGRAM_KEY_FILE")]
SessionId = Annotated[str, typer.Option("--session", help="Session id.")]
Server = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="ENGRAM_URL",
        help="Act on the Engram service at this URL (the client only; default: ENGRAM_URL, else the embedded log).",
    ),
]
LogKey = Annotated[
    str | None,
    typer.Option(
        "--log-key",
        envvar="ENGRAM_LOG_KEY",
        help="With --server: the log's verifier key (else pinned on first use).",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def _agent_memory(key_file: Path, server: str | None, log_key: str | None) -> Any:
    """The agent of ``key_file``: on the service at ``server`` (client only), else embedded."""
    if server:
        from engram.client.agent_memory import connect_remote

        return connect_remote(server, key_file, log_key=log_key)
    from ledger.local import open_local

    return open_local(key_file)


def _emit(as_json: bool, data: Any, text: str) -> None:
    if as_json:
        out.print_json(json.dumps(data, sort_keys=True))
    else:
        out.print(text)


@session_app.command("open")
def session_open(
    key_file: KeyFile,
    title: Annotated[str | None, typer.Option(help="A title for the session.")] = None,
    session: Annotated[str | None, typer.Option(help="Choose the session id (default: random).")] = None,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Open a session; prints its id. HOT memory is frozen for the session from now."""
    sid = _agent_memory(key_file, server, log_key).open_session(title=title, session=session)
    _emit(as_json, {"session": sid}, sid)


@session_app.command("turn")
def session_turn(
    key_file: KeyFile,
    session: SessionId,
    role: Annotated[str, typer.Option(help="user, assistant, system or tool.")],
    content: Annotated[str, typer.Option(help="The message or tool output, in full.")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Record one turn of a session (full fidelity)."""
    r = _agent_memory(key_file, server, log_key).turn(session, role, content)
    _emit(as_json, r, f"turn recorded at index {r['index']}")


@session_app.command("distill")
def session_distill(
    agent: Annotated[str, typer.Option(help="Agent id.")],
    session: SessionId,
    as_json: AsJson = False,
) -> None:
    """Distill and file a closed session that was not (distiller down, or compaction off)."""
    ledger, mem = _memory()
    _require_agent(ledger, agent)
    distilled, entries, decisions = mem.finish_session(agent, session)
    where = (
        "already distilled"
        if distilled is None
        else f"distilled {entries} memories at index {distilled.index}"
    )
    data = {
        "distilled": None if distilled is None else distilled.index,
        "entries": entries,
        "decisions": len(decisions),
    }
    _emit(as_json, data, f"{where}; {len(decisions)} tier decisions")


@session_app.command("close")
def session_close(
    key_file: KeyFile,
    session: SessionId,
    summary: Annotated[str | None, typer.Option(help="An optional summary.")] = None,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Close a session: distill it into memories and file them in their tiers."""
    res = _agent_memory(key_file, server, log_key).close_session(session, summary=summary)
    text = f"closed at index {res['closed']}"
    if res["distilled"] is not None:
        text += f"\ndistilled {res['entries']} memories at index {res['distilled']}; {res['decisions']} tier decisions"
    _emit(as_json, res, text)


@memory_app.command("write")
def memory_write(
    key_file: KeyFile,
    category: Annotated[
        str, typer.Option(help="COMMITMENT, PERFORMANCE, LEARNING, FAILURE, PREFERENCE, ANOMALY or CONTEXT.")
    ],
    content: Annotated[str, typer.Option(help="The observation to remember.")],
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    confidence: Annotated[int, typer.Option(help="0-100.")] = 70,
    session: Annotated[str | None, typer.Option(help="The session it belongs to.")] = None,
    tier: Annotated[
        str | None, typer.Option(help="HOT or WARM (COLD takes records and supersessions only).")
    ] = None,
    source_log: Annotated[
        list[int] | None, typer.Option(help="Provenance: a log index it comes from (repeatable).")
    ] = None,
    evidence: Annotated[str | None, typer.Option(help="Evidence for it.")] = None,
    scope: Annotated[
        str, typer.Option(help="global, project:<name> (only for that project) or user:<name>.")
    ] = "global",
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Write a memory (through the write gate: threats refused, secrets redacted)."""
    from engram.protocol.scopes import scope_tag

    stag = scope_tag(scope)
    r = _agent_memory(key_file, server, log_key).write(
        category=category,
        content=content,
        tags=[*(tag or []), *([stag] if stag else [])],
        confidence=confidence,
        session=session,
        tier=tier,
        evidence=evidence,
        provenance=[{"source_type": "log", "source_ref": str(i)} for i in source_log or []],
    )
    if not r["duplicate"]:
        text = f"written as ref {r['ref']} at index {r['index']}"
    else:
        text = f"written at index {r['index']}: a duplicate, it confirmed ref {r['ref']}"
    _emit(as_json, r, text)


@memory_app.command("supersede")
def memory_supersede(
    key_file: KeyFile,
    ref: Annotated[str, typer.Option(help="The item to correct, <index>.<n>.")],
    content: Annotated[str, typer.Option(help="The corrected text.")],
    reason: Annotated[str, typer.Option(help="Why.")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Correct a memory or record (append-only; the way COLD changes)."""
    r = _agent_memory(key_file, server, log_key).supersede(ref, content=content, reason=reason)
    _emit(as_json, {**r, "superseded": ref}, f"{ref} superseded by {r['index']}.0")


@memory_app.command("exempt")
def memory_exempt(
    key_file: KeyFile,
    ref: Annotated[str, typer.Option(help="The item, <index>.<n>.")],
    reason: Annotated[str, typer.Option(help="Why it must not decay.")],
    as_json: AsJson = False,
) -> None:
    """Exempt a memory from decay."""
    ledger, mem = _memory()
    r = mem.exempt(_agent(ledger, key_file), ref, reason=reason)
    _emit(as_json, {"index": r.index, "ref": ref}, f"{ref} exempt from decay (index {r.index})")


@memory_app.command("erase")
def memory_erase(
    key_file: KeyFile,
    index: Annotated[int, typer.Option(help="The log index whose body to erase.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the log).")],
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Erase a body and its salt (right to be forgotten); the leaf and all proofs stay valid."""
    if server:
        r = _agent_memory(key_file, server, log_key).erase(index, reason=reason)
        _emit(
            as_json,
            {"erased": index, **r},
            f"body of entry {index} erased; the erasure is entry {r['index']}",
        )
        return
    ledger, mem = _memory()
    agent = _agent(ledger, key_file)
    plan = mem.erasure_plan(agent.agent_id, index)
    rec = mem.erase(agent, index, reason=reason)
    also = f" and of entries {', '.join(map(str, plan.also))}" if plan.also else ""
    what = (
        f"{len(plan.refs)} items"
        if plan.session is None
        else f"the title or summary of session {plan.session}"
    )
    _emit(
        as_json,
        {
            "erased": index,
            "also": list(plan.also),
            "items": len(plan.refs),
            "session": plan.session,
            "index": rec.index,
        },
        f"body of entry {index}{also} erased ({what}); the erasure is entry {rec.index}",
    )


@memory_app.command("recall")
def memory_recall(
    agent: Annotated[
        str | None, typer.Option(help="Agent id (embedded log; with --server the key file's agent).")
    ] = None,
    query: Annotated[str, typer.Argument(help="What to recall.")] = "",
    include_cold: Annotated[bool, typer.Option("--include-cold", help="Search COLD too.")] = False,
    include_archived: Annotated[
        bool,
        typer.Option(
            "--include-archived", help="Rank archived (decayed) memories at full weight, not below live ones."
        ),
    ] = False,
    limit: Annotated[int, typer.Option(help="Most results after HOT (1-100).", min=1, max=100)] = 10,
    budget_tokens: Annotated[int | None, typer.Option(help="Token budget for the whole block.")] = None,
    session: Annotated[str | None, typer.Option(help="Use this session's frozen HOT block.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Results as JSON instead of the context block.")
    ] = False,
    no_record: Annotated[bool, typer.Option("--no-record", help="Do not log this recall as access.")] = False,
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", envvar="ENGRAM_KEY_FILE", help="With --server: the agent's key file."),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(help="Only this scope (repeatable): global, project:<name>, user:<name>; default: all."),
    ] = None,
    server: Server = None,
    log_key: LogKey = None,
) -> None:
    """HOT first, then memories and raw session turns (records) ranked by rank fusion of
    facets, full text and embedding similarity; prints a <memory-context> block."""
    opts: dict[str, Any] = {
        "include_cold": include_cold,
        "include_archived": include_archived,
        "limit": limit,
        "budget_tokens": budget_tokens,
        "session": session,
        "scopes": scope,
    }
    if server:
        if key_file is None:
            raise MalformedError(
                "recall over HTTP is signed by the agent: give --key-file (or ENGRAM_KEY_FILE)"
            )
        mem_r = _agent_memory(key_file, server, log_key)
        if agent is not None and agent != mem_r.agent_id:
            raise MalformedError(f"--agent {agent} is not the key file's agent {mem_r.agent_id}")
        got = mem_r.recall(query, **opts)
        if as_json:
            out.print_json(json.dumps(got))
        else:
            sys.stdout.write(got["context"])
        return
    if agent is None:
        raise MalformedError("give --agent (or --server with --key-file)")
    ledger, mem = _memory()
    _require_agent(ledger, agent)
    res = mem.recall(agent, query, record_access=not no_record, **opts)
    if as_json:
        out.print_json(json.dumps(dataclasses.asdict(res)))
    else:
        sys.stdout.write(res.render())


@memory_app.command("show")
def memory_show(
    agent: Annotated[str, typer.Option(help="Agent id.")],
    tier: Annotated[str | None, typer.Option(help="HOT, WARM or COLD.")] = None,
    ref: Annotated[str | None, typer.Option(help="One item, with provenance and tier history.")] = None,
    all_items: Annotated[
        bool, typer.Option("--all", help="Include superseded, archived and erased items.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Show an agent's memory by tier, or one item in full."""
    from rich.table import Table

    ledger, mem = _memory()
    _require_agent(ledger, agent)
    mem.sync()
    if ref is not None:
        it = mem.projection.item(agent, ref)
        if it is None:
            raise MalformedError(f"{agent} has no item {ref}", check="memory.ref")
        import dataclasses

        out.print_json(
            json.dumps({**dataclasses.asdict(it), "verify": f"engram log prove --index {it.index}"})
        )
        return
    items = mem.projection.items(
        agent, tiers=[tier] if tier else None, status=None if all_items else "active"
    )
    if as_json:
        out.print_json(json.dumps([dataclasses.asdict(i) for i in items]))
        return
    table = Table(title=f"memory of {agent} (log size {mem.projection.applied_size()})")
    for col in ("ref", "tier", "status", "category", "conf", "confirm", "used", "content"):
        table.add_column(col)
    for it in items:
        table.add_row(
            it.ref,
            it.tier,
            it.status,
            it.category,
            str(it.confidence),
            str(it.confirmations),
            str(it.access_count),
            escape(it.content[:90]),
        )
    out.print(table)


@memory_app.command("compact")
def memory_compact(
    agent: Annotated[str, typer.Option(help="Agent id.")],
    plan_days: Annotated[
        int | None,
        typer.Option(help="Only show what the rules would decide this many days from now (appends nothing)."),
    ] = None,
) -> None:
    """Apply the time-based rules now: inactive preferences, WARM->COLD promotion, decay."""
    ledger, mem = _memory()
    _require_agent(ledger, agent)
    if plan_days is not None:
        for d in mem.plan(agent, ledger.clock() + plan_days * 86_400_000_000):
            out.print(f"would append {d.kind}: {json.dumps(d.body, sort_keys=True)}")
        return
    receipts = mem.compact(agent)
    out.print(f"{len(receipts)} policy decisions appended")


@memory_app.command("rebuild")
def memory_rebuild() -> None:
    """Drop the memory projections and replay the whole log (re-embedding every item, with a
    progress bar); prints the projection digest."""
    _, mem = _memory()
    before = mem.digest()
    with _progress("rebuilding (log entries read and replayed, then embedded)") as tick:
        size, digest = mem.rebuild(progress=tick)
    out.print(f"replayed {size} entries; projection digest {digest}")
    out.print(
        "matches the incremental projection" if before == (size, digest) else f"incremental was {before[1]}"
    )


@memory_app.command("import")
def memory_import(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="claude-code, codex, hermes or mem0.")],
    source: Annotated[
        Path, typer.Argument(help="The harness's memory directory (mem0: the JSON of get_all).")
    ],
    key_file: KeyFile,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check and report; sign nothing.")] = False,
    scope: Annotated[
        str | None,
        typer.Option(
            help="Scope every entry: global, project:<name> or user:<name> (default: a Claude Code project "
            "directory is its project, anything else global)."
        ),
    ] = None,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Import a harness's memories as signed memories of the agent, each with its source (file
    and line or id, and the file's SHA-256). Idempotent: a second run writes only what is new;
    entries the write gate refuses are reported with the reason and not written."""
    from engram.harness.transfer import import_source

    mem = _agent_memory(key_file, server, log_key)
    with _progress(f"importing {fmt} memories") as tick:  # issue 26: one line at the end was all
        report = import_source(mem, fmt, source, dry_run=dry_run, scope=scope, progress=tick)
    data = report.to_json()
    if as_json:
        out.print_json(json.dumps(data, sort_keys=True))
        return
    verb = "would write" if dry_run else "wrote"
    out.print(
        f"{fmt} {escape(str(source))}: {data['entries']} entries; {verb} {data['written']}, "
        f"{data['already_imported']} already imported, {len(data['refused'])} refused"
    )
    for r in report.refused:
        out.print(f"  refused {escape(r['source'])}: {escape(r['reason'])}")


@memory_app.command("export")
def memory_export(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="claude-code, codex, hermes or mem0.")],
    target: Annotated[Path, typer.Argument(help="Directory to write (mem0: a .json file or a directory).")],
    key_file: KeyFile,
    server: Server = None,
    log_key: LogKey = None,
    as_json: AsJson = False,
) -> None:
    """Write the agent's active memories in a harness's format, for that harness to read."""
    from engram.harness.transfer import export_memories

    files, n, left_out = export_memories(_agent_memory(key_file, server, log_key), fmt, target)
    data = {"format": fmt, "memories": n, "left_out": left_out, "files": [str(f) for f in files]}
    note = f" ({left_out} did not fit the format's size limits)" if left_out else ""
    _emit(as_json, data, f"exported {n} memories as {fmt} to {escape(str(target))}{note}")


@memory_app.command("distill-report")
def memory_distill_report(
    agent: Annotated[str | None, typer.Option(help="One agent (default: every agent).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Rows and totals as JSON.")] = False,
) -> None:
    """What the distiller kept and cost, from the figures each memory.distilled entry recorded:
    turns kept and dropped, memories, input and output tokens, latency."""
    from rich.table import Table

    from ledger.memory.report import summarize

    ledger, mem = _memory()
    if agent is not None:
        _require_agent(ledger, agent)
    rows = mem.distill_report(agent)
    totals = summarize(rows)
    if as_json:
        out.print_json(
            json.dumps({"sessions": [dataclasses.asdict(r) for r in rows], "totals": totals}, sort_keys=True)
        )
        return
    table = Table(title="distilled sessions")
    for col in (
        "agent",
        "index",
        "session",
        "distiller",
        "turns",
        "kept",
        "dropped",
        "memories",
        "tokens in/out",
        "ms",
    ):
        table.add_column(col)
    for r in rows:
        st = r.stats
        table.add_row(
            escape(r.agent),
            str(r.index),
            escape(r.session or "(erased)"),
            escape(r.distiller or "-"),
            *((str(st["turns"]), str(st["turns_kept"]), str(st["turns_dropped"])) if st else ("-", "-", "-")),
            str(r.entries),
            f"{st['input_tokens']}/{st['output_tokens']}{'' if st['tokens'] == 'reported' else ' (est.)'}"
            if st
            else "-",
            f"{st['latency_us'] / 1000:.1f}" if st else "-",
        )
    out.print(table)
    out.print(
        f"{totals['sessions']} sessions ({totals['without_stats']} without figures, {totals['empty_sessions']} "
        f"yielded nothing): kept {totals['turns_kept']} of {totals['turns']} turns ({100 * totals['kept_share']:.1f}%), "
        f"{totals['entries']} memories ({totals['entries_per_turn']:.2f} per turn), tokens in "
        f"{totals['input_tokens']} / out {totals['output_tokens']}, latency p50 {totals['latency_ms_p50']} ms, "
        f"p95 {totals['latency_ms_p95']} ms"
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

    ledger = _ledger()
    _require_agent(ledger, agent)
    if claim is None:
        claim_obj = pact_claim(ledger, agent)
    else:
        raw = Path(claim[1:]).read_bytes() if claim.startswith("@") else claim.encode("utf-8")
        claim_obj = parse_strict(raw, max_bytes=1 << 20)
    data = create_bundle(ledger, claim_obj, trusted_size=trusted_size, token=token, audience=audience)
    write_file(output, data)  # never through a symlink planted at the path (issue 25, finding 9)
    out.print(f"bundle of {len(data)} bytes written to {output}")
    # A bundle with a share token verifies only for its audience (issue 26, finding 6).
    aud = f' --audience "{audience}"' if audience else ""
    out.print(f'verify offline: engram-verify bundle {output} --log-key "{ledger.vkey}"{aud}')


def _duration_s(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit():
        raise MalformedError(f"duration {text!r} is not like 30m, 12h or 7d", check="cli.duration")
    return int(text[:-1]) * units[text[-1]]


def _agent_public_keys(ledger: Ledger, agent: str) -> list[bytes]:
    return [k.public_key for k in ledger.store.keys_of(agent) if k.retired_how != "revoked"]


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
        expires = int(_time.time()) + _duration_s(expires_in)
        sys.stdout.write(remote.mint_token(audience=audience, kinds=kind, expires=expires) + "\n")
        return
    ledger = _ledger()
    agent, key = load_agent_key(key_file)
    token = mint(
        seed=key.private_bytes_raw(),
        origin=ledger.origin,
        agent=agent,
        audience=audience,
        kinds=kind,
        expires=int(_time.time()) + _duration_s(expires_in),
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

    ledger = _ledger()
    expires = None if expires_in is None else int(_time.time()) + _duration_s(expires_in)
    narrowed = attenuate(token, agent_keys=_agent_public_keys(ledger, agent), kinds=kind, expires=expires)
    sys.stdout.write(narrowed + "\n")


@token_app.command("revoke")
def token_revoke(
    key_file: KeyFile,
    token: Annotated[str, typer.Argument(help="The token to revoke (and all tokens attenuated from it).")],
) -> None:
    """Revoke a token: a share.revoked entry in the agent's log that every bundle must carry."""
    from verifier.token import revocation_ids

    ledger = _ledger()
    agent = _agent(ledger, key_file)
    ids = revocation_ids(token, agent_keys=_agent_public_keys(ledger, agent.agent_id))
    r = agent.append("share.revoked", {"token_id": ids[0]})
    out.print(f"revoked token {ids[0][:16]}... at index {r.index}")


@token_app.command("inspect")
def token_inspect(token: Annotated[str, typer.Argument(help="A token.")]) -> None:
    """Print a token's blocks (datalog), unverified."""
    from verifier.token import inspect

    for i, src in enumerate(inspect(token)):
        out.print(f"block {i}:")
        out.print(escape(src.rstrip()))


@app.command("maintain")
def maintain_cmd(
    scrub_erased: Annotated[
        bool,
        typer.Option(
            "--scrub-erased",
            help="Rewrite the tables that can hold memory text so that no byte of erased text stays "
            "in the live database files (PostgreSQL: VACUUM FULL, which locks each table while it "
            "runs; SQLite: full-text optimize, VACUUM and a WAL checkpoint).",
        ),
    ] = False,
) -> None:
    """Storage maintenance (docs/privacy.md says what erasure guarantees on each backend)."""
    if not scrub_erased:
        raise typer.BadParameter("say what to do: --scrub-erased")
    from ledger.maintain import scrub_erased as scrub

    ledger = _ledger()
    report = scrub(ledger.store.engine)
    state = (
        "done"
        if report.complete
        else "incomplete: another connection held a snapshot or the WAL (rows it can see are kept); run it again"
    )
    out.print(f"scrubbed {', '.join(report.tables)} on {report.backend} in {report.seconds:.2f} s: {state}")
    if not report.complete:
        raise typer.Exit(1)


@app.command("audit")
def audit_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-derive every table from the leaves (hashes, nodes, checkpoints, stream heads, key
    table, log state, body commitments, the memory projection) and name each row and column
    that differs. Read-only; exit code 0 when everything agrees, 1 when anything differs."""
    from ledger.audit import audit

    ledger = _ledger()
    with _progress("auditing (log entries)") as tick:
        report = audit(ledger.store, ledger.verifier_key, progress=tick, signed_head=ledger.signed_head)
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        rate = report.entries / report.seconds if report.seconds else 0.0
        verdict = (
            "[green]clean[/]"
            if report.clean
            else f"[bold red]{len(report.findings) + report.more} findings[/]"
        )
        out.print(f"audited {report.entries} entries in {report.seconds:.2f} s ({rate:,.0f}/s): {verdict}")
        for f in report.findings:
            out.print(f"  {escape(str(f))}")
        if report.more:
            out.print(f"  ... and {report.more} more")
        for note in report.notes:
            out.print(f"note: {escape(note)}")
    if not report.clean:
        raise typer.Exit(1)


@app.command("rebuild")
def rebuild_all() -> None:
    """Drop every projection and replay the log (same as `engram memory rebuild`)."""
    memory_rebuild()


@memory_app.command("digest")
def memory_digest() -> None:
    """Print the projection digest at the current log size (compare two replays)."""
    _, mem = _memory()
    size, digest = mem.digest()
    out.print(f"size {size} digest {digest}")


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

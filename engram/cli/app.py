"""The ``engram`` command line (typer + rich): the root app, its own commands (init, demo,
bench, serve, maintain, audit, rebuild) and the sub-apps of this package. The outermost
layer: reads env and clock.

Exit codes: 0 success, 1 a typed Engram error (message on stderr), 2 usage error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.models import DefaultPlaceholder

from engram.cli.agents import agent_app, event_app
from engram.cli.common import (
    err,
    log_from_env,
    out,
    progress_bar,
)
from engram.cli.log import export_app, log_app
from engram.cli.memory import memory_app, memory_rebuild, session_app
from engram.cli.mesh import mesh_app
from engram.cli.share import bundle_app, token_app
from engram.cli.ui import ui_cmd
from engram.cli.witness import witness_app
from engram.protocol.errors import EngramError

app = typer.Typer(
    rich_markup_mode=None,
    name="engram",
    help="Engram: verifiable AI-agent memory on an RFC 9162 Merkle log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(session_app, name="session")
app.add_typer(memory_app, name="memory")
app.add_typer(mesh_app, name="mesh")
app.add_typer(bundle_app, name="bundle")
app.add_typer(token_app, name="token")
app.add_typer(log_app, name="log")
app.add_typer(export_app, name="export")
app.add_typer(agent_app, name="agent")
app.add_typer(event_app, name="event")
app.add_typer(witness_app, name="witness")
app.command("ui")(ui_cmd)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        from engram import DISTRIBUTION

        out.print(f"engram {version(DISTRIBUTION)}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", help="Print the version and exit.", is_eager=True, callback=_version),
    ] = False,
) -> None:
    """Engram: verifiable AI-agent memory on an RFC 9162 Merkle log."""


_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _fast(command: str, ctx: typer.Context) -> None:
    """The commands the entry point serves without typer (engram.harness.cli), run from here
    too (e.g. ``python -m engram.cli.app mcp``): their own parser reads the arguments."""
    from engram.cli.embedded import open_embedded
    from engram.harness.cli import run

    raise typer.Exit(run(command, ctx.args, open_embedded))


@app.command("mcp", context_settings=_PASS_THROUGH, add_help_option=False)
def mcp_cmd(ctx: typer.Context) -> None:
    """Serve one agent's memory over MCP (stdio, or streamable HTTP on loopback); engram mcp --help."""
    _fast("mcp", ctx)


@app.command("hook", context_settings=_PASS_THROUGH, add_help_option=False)
def hook_cmd(ctx: typer.Context) -> None:
    """Run one Claude Code or Codex lifecycle hook (payload on stdin); engram hook --help."""
    _fast("hook", ctx)


@app.command("hermes", context_settings=_PASS_THROUGH, add_help_option=False)
def hermes_cmd(ctx: typer.Context) -> None:
    """Install Engram's memory provider for Hermes Agent; engram hermes --help."""
    _fast("hermes", ctx)


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
    from ledger.compose import init_ledger
    from ledger.config import Settings

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
    from engram.cli.demo import run_demo
    from ledger.config import Settings

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

    root = Path(__file__).resolve().parents[2]
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
    import uvicorn

    from api.settings import ApiSettings
    from ledger.compose import open_services

    if not 0 < port < 65536 or not 1 <= workers <= 64:
        err.print(f"engram serve: --port must be 1-65535 and --workers 1-64 (got {port}, {workers})")
        raise typer.Exit(2)
    try:
        settings = ApiSettings.from_env()
        open_services(settings.service)
    except EngramError as e:
        err.print(f"engram serve: {escape(str(e))}")
        raise typer.Exit(2) from None

    from api.server import PROTOCOLS

    # ENGRAM_SEQUENCER: with several workers their single appends meet in one host sequencer
    # (ledger.sequencer) unless the environment says otherwise; the workers read it from the
    # environment they inherit.
    if workers > 1 and not os.environ.get("ENGRAM_SEQUENCER"):
        os.environ["ENGRAM_SEQUENCER"] = "host"

    # ENGRAM_HTTP_PARSER (httptools, or h11) behind the same bounds: the request head's size
    # and lines, a request deadline, pipelined requests bounded alike (api/server.py); h11's
    # own buffer bound sits above ENGRAM_MAX_HEADER_BYTES so that the 431 answers first. No
    # WebSocket: an Upgrade would hand the connection to a protocol outside those bounds.
    uvicorn.run(
        "api.main:app_factory",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http=PROTOCOLS[settings.http_parser],
        access_log=settings.access_log,  # ENGRAM_ACCESS_LOG
        ws="none",
        h11_max_incomplete_event_size=2 * 1_048_576,
    )


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

    ledger = log_from_env()
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

    ledger = log_from_env()
    with progress_bar("auditing (log entries)") as tick:
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


def _first_sentence(text: str | None) -> str | None:
    if not text:
        return None
    para = " ".join(text.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


def _whole_short_helps(t: typer.Typer) -> None:
    """``engram --help`` lists each command with its whole first sentence (click cut them at
    45 characters with "..."): each command and group gets it as its short help."""
    for info in t.registered_commands:
        if info.short_help is None and info.callback is not None:
            info.short_help = _first_sentence(info.help or info.callback.__doc__)
    for group in t.registered_groups:
        sub = group.typer_instance
        if sub is not None and isinstance(group.short_help, (DefaultPlaceholder, type(None))):
            own = sub.info.help
            group.short_help = _first_sentence(own if isinstance(own, str) else None)
        if sub is not None:
            _whole_short_helps(sub)


_whole_short_helps(app)


def main() -> None:
    """Console entry point: typed errors become one clear line and exit code 1.

    Usage errors are typer's (exit code 2); anything else is a bug and keeps its traceback.
    """
    try:
        app()
    except EngramError as e:
        err.print(f"[bold red]error:[/] {type(e).__name__}: {escape(str(e))}")
        raise SystemExit(1) from None
    except ModuleNotFoundError as e:
        from engram import SERVER_LIBRARIES

        if (e.name or "").split(".")[0] not in SERVER_LIBRARIES:
            raise
        sys.stderr.write(_needs_service(sys.argv[1:], e.name or "") + "\n")
        raise SystemExit(2) from None


def _needs_service(argv: list[str], missing: str) -> str:
    """What a command that needs the service's libraries says on the client extra alone: the
    extra to install, and ``--server`` when the command can act on a service instead."""
    from engram import install_hint

    cmd: Any = typer.main.get_command(app)
    path: list[str] = []
    for word in argv:
        sub = getattr(cmd, "commands", {}).get(word)
        if sub is None:
            break
        cmd, path = sub, [*path, word]
    name = " ".join(["engram", *path])
    if any(p.name == "server" for p in cmd.params):
        return (
            f"{name}: without --server it acts on the embedded log, which needs the service's libraries "
            f"(missing {missing}): give --server URL (or export ENGRAM_URL) to act on a running Engram "
            f"service, or install the service: {install_hint('server')}"
        )
    return f"{name} needs the service's libraries (missing {missing}): {install_hint('server')}"


if __name__ == "__main__":
    main()

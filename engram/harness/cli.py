"""The fast front of the ``engram`` command: ``engram mcp``, ``engram hook`` and
``engram --version`` parse with argparse and load neither typer nor the service unless
they act on the embedded log (the entry point passes the local opener)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from engram import DISTRIBUTION, install_hint
from engram.client.agent_memory import AgentMemory
from engram.harness.target import LocalFactory, target_from
from engram.protocol.errors import EngramError

__all__ = ["hermes_main", "hook_main", "mcp_main", "pin_main", "version"]


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as v

    try:
        return v(DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover
        return "0+unknown"


class _Help(argparse.HelpFormatter):
    """The help in the typer commands' style (``Usage:``, ``Arguments``, ``Options``)."""

    def add_usage(self, usage: str | None, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


def _parser(
    prog: str, description: str, cls: type[argparse.ArgumentParser] = argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """An argparse parser whose help reads like the rest of ``engram --help``."""
    p = cls(prog=prog, description=description, formatter_class=_Help, add_help=False)
    p._positionals.title = "Arguments"
    p._optionals.title = "Options"
    p.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    return p


def _target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server", metavar="URL", help="An Engram service (default: $ENGRAM_URL, else the embedded log)."
    )
    p.add_argument(
        "--key-file",
        metavar="FILE",
        help="The agent's key file (default: $ENGRAM_KEY_FILE, else $ENGRAM_HOME/agent.key).",
    )
    p.add_argument(
        "--log-key",
        metavar="VKEY",
        help="The log's verifier key (default: $ENGRAM_LOG_KEY, else pinned on first use).",
    )


def mcp_main(argv: Sequence[str], local: LocalFactory | None) -> int:
    p = _parser(
        "engram mcp", "Serve one agent's Engram memory over MCP (stdio, or streamable HTTP on loopback)."
    )
    _target_args(p)
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio, or streamable HTTP (default stdio).",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on (default 127.0.0.1).")
    p.add_argument("--port", type=int, default=8765, help="HTTP: the port (default 8765).")
    p.add_argument("--path", default="/mcp", help="HTTP: the endpoint path (default /mcp).")
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="HTTP: the bearer token clients must send, created 0600 if absent "
        "(default: $ENGRAM_MCP_TOKEN_FILE, else <key-file>.mcp-token).",
    )
    a = p.parse_args(list(argv))
    if not 0 < a.port < 65536:
        p.error(f"--port {a.port} is not a TCP port")
    target = target_from(server=a.server, key_file=a.key_file, log_key=a.log_key)
    # The standard library's HTTP client (engram.client.litehttp): importing httpx cost the
    # first call 0.12 s (one call through a fresh server took seconds); calls are
    # serialised by the server, and a dropped kept-alive connection is reopened.

    def factory() -> AgentMemory:
        return target.open(local, lite=True)

    if a.transport == "stdio":
        # Served without the MCP SDK, whose import cost each fresh start 0.5-0.9 s.
        try:
            from engram.harness.mcp_stdio import serve
        except ModuleNotFoundError as e:
            sys.stderr.write(f"engram mcp: {e.name} is not installed; {install_hint('mcp')}\n")
            return 2
        serve(factory, sys.stdin.buffer, sys.stdout.buffer)
        return 0
    try:
        from engram.harness.mcp_server import build_server
    except ModuleNotFoundError as e:
        sys.stderr.write(f"engram mcp: the MCP SDK is not installed ({e.name}); {install_hint('mcp')}\n")
        return 2
    server = build_server(factory)
    # HTTP: any local process can reach the port, so every request must carry the bearer
    # token only the key's owner can read (engram.harness.localauth).
    import os
    from pathlib import Path

    import uvicorn

    from engram.harness.localauth import BearerAuth, default_token_file, load_or_create_token

    token_file = Path(
        a.token_file or os.environ.get("ENGRAM_MCP_TOKEN_FILE") or default_token_file(target.key_file)
    ).expanduser()
    token = load_or_create_token(token_file)
    app = BearerAuth(server.streamable_http_app(streamable_http_path=a.path, host=a.host), token)
    sys.stderr.write(
        f"engram mcp: serving http://{a.host}:{a.port}{a.path}; clients send "
        f"'Authorization: Bearer <token>' with the token in {token_file}\n"
    )
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")
    return 0


class _HookUsage(Exception):
    """A hook command line argparse refused."""


class _HookParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _HookUsage(message)


def hook_main(argv: Sequence[str], local: LocalFactory | None) -> int:
    """``engram hook``: always exits 0 (engram.harness.hooks): argparse's exit code 2 on a
    mistyped command line would read as "block this prompt" to both harnesses."""
    from engram.harness.hooks import HARNESSES, HOOK_TIMEOUT_S, run_hook

    p = _parser(
        "engram hook",
        "Run one lifecycle hook: reads the harness's JSON payload on stdin, prints context to inject.",
        _HookParser,
    )
    p.add_argument("harness", choices=sorted(HARNESSES), help="The harness whose hook payload stdin holds.")
    _target_args(p)
    try:
        a = p.parse_args(list(argv))
    except _HookUsage as e:
        sys.stderr.write(
            f"engram hook: the hook command line is wrong ({e}); the harness goes on without memory\n"
        )
        return 0
    target = target_from(server=a.server, key_file=a.key_file, log_key=a.log_key)
    return run_hook(a.harness, lambda: target.open(local, timeout_s=HOOK_TIMEOUT_S))


def pin_main(argv: Sequence[str]) -> int:
    """``engram log pin --server URL [--reset]``: show, or forget and re-pin, the log key
    this machine pinned for a service on first use (a stale pin explained
    nothing)."""
    import os

    from engram.client.agent_memory import pin_file, reset_pin, resolve_log_key
    from engram.client.http import HttpTransport

    p = _parser(
        "engram log pin",
        "Show the log key pinned for a service; --reset forgets it and pins the key it serves now.",
    )
    p.add_argument("--server", metavar="URL", help="The Engram service (default: $ENGRAM_URL).")
    p.add_argument("--reset", action="store_true", help="Forget the pinned key, then pin the service's key.")
    a = p.parse_args(list(argv))
    url = a.server or os.environ.get("ENGRAM_URL")
    if not url:
        p.error("give --server URL (or set ENGRAM_URL)")
    pin = pin_file(url)
    if pin is None:
        sys.stderr.write("engram log pin: no verifier state directory (ENGRAM_VERIFIER_STATE / HOME)\n")
        return 2
    if a.reset:
        gone = reset_pin(url)
        sys.stdout.write(
            f"forgot the key pinned for {url} ({gone})\n" if gone else f"no key was pinned for {url}\n"
        )
    elif pin.is_file():
        sys.stdout.write(f"{pin.read_text(encoding='utf-8').strip()}\n(pinned for {url} in {pin})\n")
        return 0
    key = resolve_log_key(url, None, HttpTransport(url))
    sys.stdout.write(f"{key}\n(pinned for {url} in {pin})\n")
    return 0


def hermes_main(argv: Sequence[str]) -> int:
    """``engram hermes install [--hermes-home DIR]``: the plugin directory Hermes discovers."""
    from engram.harness.hermes_install import hermes_home, install_plugin

    p = _parser("engram hermes", "Engram for Hermes Agent: install its memory provider.")
    sub = p.add_subparsers(dest="action", required=True, title="Commands")
    inst = sub.add_parser(
        "install",
        help="Write $HERMES_HOME/plugins/engram/, where Hermes discovers memory providers.",
        description="Write $HERMES_HOME/plugins/engram/, where Hermes discovers memory providers.",
        formatter_class=_Help,
        add_help=False,
    )
    inst._optionals.title = "Options"
    inst.add_argument("-h", "--help", action="help", help="Show this message and exit.")
    inst.add_argument(
        "--hermes-home", metavar="DIR", help="Hermes' home (default: $HERMES_HOME, else ~/.hermes)."
    )
    a = p.parse_args(list(argv))
    result = install_plugin(hermes_home(a.hermes_home))
    what = f"wrote {', '.join(result.written)}" if result.written else "already installed"
    sys.stdout.write(
        f"Engram memory provider for Hermes in {result.directory} ({what}).\n"
        "Select it:  hermes config set memory.provider engram\n"
        "Check it:   hermes memory status\n"
    )
    return 0


def run(command: str, argv: Sequence[str], local: LocalFactory | None) -> int:
    try:
        if command == "mcp":
            return mcp_main(argv, local)
        if command == "log-pin":
            return pin_main(argv)
        if command == "hermes":
            return hermes_main(argv)
        return hook_main(argv, local)
    except EngramError as e:  # the check name once: after the message unless it carries it
        name = "log pin" if command == "log-pin" else command
        check = getattr(e, "check", None)
        tail = f" [{check}]" if check and f"[{check}]" not in str(e) else ""
        sys.stderr.write(f"engram {name}: {e}{tail}\n")
        return 1

"""``ENGRAM_HTTP_PARSER`` takes effect (issue 43, Deliver 3): ``engram serve`` hands uvicorn the
bounded protocol of the parser it names (httptools by default, h11 on request), never a
WebSocket protocol, and refuses a parser it does not know before serving. The live behaviour
of both protocols is tests/e2e/test_connection_abuse.py."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

import engram.cli.app as cli
import ledger.compose as compose
from api.server import PROTOCOLS, BoundedH11Protocol, BoundedHttpToolsProtocol


def _serve(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    # serve imports open_services when it runs (the client install has no ledger)
    monkeypatch.setattr(compose, "open_services", lambda settings: None)
    for name in ("ENGRAM_HTTP_PARSER", "ENGRAM_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    full = {"ENGRAM_HOME": str(tmp_path), "ENGRAM_DEV_MODE": "1", **env}
    result = CliRunner().invoke(cli.app, ["serve", "--port", "8099"], env=full)
    return result.exit_code, seen


def _protocol(path: str) -> type:
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("env", "protocol", "parser"),
    [
        ({}, BoundedHttpToolsProtocol, HttpToolsProtocol),
        ({"ENGRAM_HTTP_PARSER": "httptools"}, BoundedHttpToolsProtocol, HttpToolsProtocol),
        ({"ENGRAM_HTTP_PARSER": "h11"}, BoundedH11Protocol, H11Protocol),
    ],
)
def test_the_setting_picks_the_bounded_protocol_engram_serve_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], protocol: type, parser: type
) -> None:
    code, seen = _serve(monkeypatch, tmp_path, env)
    assert code == 0
    assert _protocol(seen["http"]) is protocol and issubclass(protocol, parser)
    assert seen["ws"] == "none"  # an Upgrade would leave the bounds
    assert set(PROTOCOLS) == {"httptools", "h11"}


def test_an_unknown_parser_stops_serve_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, seen = _serve(monkeypatch, tmp_path, {"ENGRAM_HTTP_PARSER": "llhttp"})
    assert code == 2 and not seen


def test_the_methods_both_parsers_pass_on_are_the_ones_llhttp_reads() -> None:
    """h11 hands any token on as a method; api.limits refuses those llhttp refuses, so each
    method gets the same answer under either parser (400, or the route's 405)."""
    import httptools

    from api.limits import METHODS

    class Quiet:
        def on_headers_complete(self) -> None:
            pass

    def reads(method: str) -> bool:
        parser = httptools.HttpRequestParser(Quiet())
        try:
            parser.feed_data(f"{method} / HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        except httptools.HttpParserUpgrade:
            return True  # CONNECT: read, then handed on as a tunnel (refused by its target)
        except httptools.HttpParserError:
            return False
        return True

    assert all(reads(m) for m in METHODS)
    assert not any(reads(m) for m in ("FOO", "get", "PRI", "DESCRIBE", "GET_PARAMETER", "X-Y"))

"""Abuse of the HTTP connection layer on a live ``engram serve`` (issue 15, Deliver 6): an
oversized request head, a request that never completes, a connection that sends nothing,
a CR/LF inside a header value, an absolute-form target and a duplicated signer header are
each answered with their status (and a problem document where a response is possible),
and the server keeps serving others meanwhile."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.processes import ENGRAM, engram_serve

TIMEOUT_S = 2


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_DEV_MODE": "1",
        "ENGRAM_REQUEST_TIMEOUT_S": str(TIMEOUT_S),
        "ENGRAM_MAX_HEADER_BYTES": "16384",
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    subprocess.run(
        [ENGRAM, "init", "--origin", "abuse.example/log"], env=env, check=True, capture_output=True
    )
    with engram_serve(env) as u:
        yield u


def _raw(url: str, data: bytes, *, wait_s: float = 10) -> tuple[int | None, bytes]:
    """Send ``data`` on a fresh connection; (status, body) of what comes back before close."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        s.sendall(data)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    if not got:
        return None, b""
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _still_serving(url: str) -> None:
    assert httpx.get(url + "/checkpoint", timeout=5).status_code == 200


def test_an_oversized_request_head_is_431_before_it_is_read(url: str) -> None:
    head = b"GET /checkpoint HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 200_000 + b"\r\n\r\n"
    status, body = _raw(url, head)
    assert status == 431
    assert json.loads(body)["status"] == 431
    _still_serving(url)


def test_a_body_sent_with_its_head_does_not_count_as_head(url: str) -> None:
    """Regression: the bytes of a read that held the head and the body were all counted as
    head, so a 100 KB body (below ENGRAM_MAX_REQUEST_BYTES) sent at once was answered 431."""
    body = b'{"events": []}' + b" " * 100_000
    head = f"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    status, answer = _raw(
        url, head.encode() + body + b"GET /checkpoint HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 400, answer[:300]  # parsed: the schema wants at least one event
    assert json.loads(answer.split(b"HTTP/1.1")[0])["type"].endswith("/malformed")
    # the head split over two reads still counts once: a head just over the bound is refused
    pad = b"X-Pad: " + b"a" * 16_400 + b"\r\n"
    status, _ = _raw(url, b"GET /checkpoint HTTP/1.1\r\nHost: x\r\n" + pad + b"\r\n")
    assert status == 431
    _still_serving(url)


def test_a_request_that_never_completes_times_out_with_408(url: str) -> None:
    t0 = time.monotonic()
    status, body = _raw(url, b"GET /checkpoint HTTP/1.1\r\nHost: x\r\n")  # no blank line, ever
    assert status == 408 and json.loads(body)["status"] == 408
    assert TIMEOUT_S - 0.5 <= time.monotonic() - t0 < TIMEOUT_S + 5
    _still_serving(url)


def test_a_body_that_never_arrives_times_out(url: str) -> None:
    status, _ = _raw(url, b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
    assert status == 408
    _still_serving(url)


def test_a_connection_that_sends_nothing_is_closed(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    t0 = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        assert s.recv(1) == b""  # closed by the server, no response owed
    assert time.monotonic() - t0 < TIMEOUT_S + 5
    _still_serving(url)


def test_many_idle_connections_do_not_stop_others(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(200)]
    try:
        _still_serving(url)
    finally:
        for s in idle:
            s.close()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /checkpoint HTTP/1.1\r\nHost: x\r\nX-A: a\rInjected: 1\r\n\r\n",
        b"GET /checkpoint HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    ],
    ids=["bare-cr", "nul"],
)
def test_line_breaks_inside_header_values_are_refused(url: str, request_bytes: bytes) -> None:
    # (A bare LF is a line end that RFC 9112 section 2.2 lets a recipient accept: it splits
    # two headers, and a second copy of a header that must be single is refused below.)
    status, _ = _raw(url, request_bytes)
    assert status == 400
    _still_serving(url)


def test_an_absolute_form_target_is_refused(url: str) -> None:
    status, body = _raw(
        url, b"GET http://evil.example/checkpoint HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 400
    assert "origin-form" in json.loads(body)["detail"]


def test_a_duplicated_signer_header_is_refused(url: str) -> None:
    status, body = _raw(
        url,
        b"GET /v1/agents/a/items HTTP/1.1\r\nHost: x\r\nEngram-Signer: agent:a\r\nEngram-Signer: agent:b\r\n"
        b"Connection: close\r\n\r\n",
    )
    assert status == 400
    assert "engram-signer" in json.loads(body)["detail"]

"""Abuse of the HTTP connection layer on a live ``engram serve`` (issue 15, Deliver 6; issue 43,
Deliver 3), under each HTTP parser (``ENGRAM_HTTP_PARSER``: httptools and h11): an oversized
request head, too many headers, a request that never completes, a connection that sends
nothing, a CR/LF inside a header value, an absolute-form target and a duplicated signer header
are each answered with their status (and a problem document where a response is possible), and
the server keeps serving others meanwhile. Smuggling and malformed framing (Content-Length with
Transfer-Encoding, two lengths, bad chunk sizes, header folding, bare LF, pipelining past the
bounds, HTTP/1.0 without a length, ...) get the same answers, byte for byte in status, problem
type and detail, from both parsers (``test_both_parsers_answer_each_attack_alike``)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.processes import ENGRAM, engram_serve

TIMEOUT_S = 2
MAX_HEAD = 16384
PARSERS = ("httptools", "h11")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One ``engram serve`` per parser, over one log: parser -> URL."""
    home = tmp_path_factory.mktemp("abuse") / "home"
    env = {
        **os.environ,
        "ENGRAM_HOME": str(home),
        "ENGRAM_DEV_MODE": "1",
        "ENGRAM_REQUEST_TIMEOUT_S": str(TIMEOUT_S),
        "ENGRAM_MAX_HEADER_BYTES": str(MAX_HEAD),
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    subprocess.run(
        [ENGRAM, "init", "--origin", "abuse.example/log"], env=env, check=True, capture_output=True
    )
    with (
        engram_serve({**env, "ENGRAM_HTTP_PARSER": "httptools"}) as fast,
        engram_serve({**env, "ENGRAM_HTTP_PARSER": "h11"}) as strict,
    ):
        yield {"httptools": fast, "h11": strict}


@pytest.fixture(params=PARSERS)
def url(request: pytest.FixtureRequest, servers: dict[str, str]) -> str:
    return servers[request.param]


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
    # (A bare LF, which RFC 9112 section 2.2 lets a recipient take as a line end, is refused
    # too: h11 took it as one, llhttp does not; see ATTACKS below.)
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


# -- both parsers alike (issue 43, Deliver 3) ---------------------------------------------


def _answers(got: bytes) -> list[tuple[int, str | None, str | None]]:
    """Each response in ``got``: (status, problem type, problem detail)."""
    out: list[tuple[int, str | None, str | None]] = []
    while got.startswith(b"HTTP/1."):
        head, _, rest = got.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        fields = dict(
            (k.strip().lower(), v.strip())
            for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
        )
        if b"content-length" in fields:
            n = int(fields[b"content-length"])
            body, got = rest[:n], rest[n:]
        elif fields.get(b"transfer-encoding") == b"chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line, 16)
                body, rest = body + rest[:size], rest[size + 2 :]
                if size == 0:
                    break
            got = rest
        else:  # 1xx
            body, got = b"", rest
        problem = json.loads(body) if fields.get(b"content-type") == b"application/problem+json" else {}
        out.append((status, problem.get("type"), problem.get("detail")))
    return out


def _exchange(url: str, data: bytes, *, wait_s: float = 10) -> list[tuple[int, str | None, str | None]]:
    """Send ``data`` on a fresh connection and read until the server closes it."""
    host, port = url.removeprefix("http://").split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        s.sendall(data)
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    return _answers(got)


CLOSE = b"Connection: close\r\n"
GET = b"GET /checkpoint HTTP/1.1\r\nHost: x\r\n"
POST = b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
CHUNKED = b"GET /checkpoint HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" + CLOSE + b"\r\n"
HEADERS_99 = b"".join(b"X-%d: a\r\n" % i for i in range(97))  # with Host and Connection: 99
HEADERS_150 = b"".join(b"X-%d: a\r\n" % i for i in range(150))
PAD = b"X-Pad: " + b"a" * (MAX_HEAD + 100) + b"\r\n"

#: name -> (bytes sent on one connection, the statuses answered before it closes)
ATTACKS: dict[str, tuple[bytes, list[int]]] = {
    # request smuggling: two framings of one body
    "content-length-and-chunked": (
        POST + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + GET + CLOSE + b"\r\n",
        [400],
    ),
    "two-different-lengths": (POST + b"Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", [400]),
    "two-equal-lengths": (POST + b"Content-Length: 2\r\nContent-Length: 2\r\n" + CLOSE + b"\r\n{}", [400]),
    "a-length-list": (POST + b"Content-Length: 2, 2\r\n" + CLOSE + b"\r\n{}", [400]),
    "a-signed-length": (POST + b"Content-Length: +2\r\n" + CLOSE + b"\r\n{}", [400]),
    "two-transfer-encodings": (
        POST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n" + CLOSE + b"\r\n0\r\n\r\n",
        [400],
    ),
    "chunked-not-last": (POST + b"Transfer-Encoding: chunked, gzip\r\n" + CLOSE + b"\r\n", [400]),
    "gzip-then-chunked": (POST + b"Transfer-Encoding: gzip, chunked\r\n" + CLOSE + b"\r\n0\r\n\r\n", [400]),
    "an-unknown-coding": (POST + b"Transfer-Encoding: xchunked\r\n" + CLOSE + b"\r\n", [400]),
    "a-space-before-the-colon": (POST + b"Transfer-Encoding : chunked\r\n" + CLOSE + b"\r\n0\r\n\r\n", [400]),
    "chunked-in-http-1.0": (
        b"POST /v1/events HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        [400],
    ),
    # chunk framing
    "a-chunk-extension-is-read": (CHUNKED + b"2;ext=1\r\nab\r\n0\r\n\r\n", [200]),
    "a-chunk-size-not-hex": (CHUNKED + b"zz\r\nab\r\n0\r\n\r\n", [400]),
    "a-negative-chunk-size": (CHUNKED + b"-2\r\nab\r\n0\r\n\r\n", [400]),
    "a-chunk-longer-than-its-size": (CHUNKED + b"2\r\nabXX0\r\n\r\n", [400]),
    # a body larger than declared: the rest is read as the next request, and refused
    "a-body-longer-than-declared": (POST + b"Content-Length: 2\r\n\r\n{}GARBAGE\r\n\r\n", [400, 400]),
    "http-1.0-post-without-a-length": (b"POST /v1/events HTTP/1.0\r\nHost: x\r\n\r\n{}", [400]),
    "http-1.0-get-without-a-length": (b"GET /checkpoint HTTP/1.0\r\n\r\n", [200]),
    # the head
    "obsolete-line-folding": (GET + b"X-A: a\r\n b\r\n" + CLOSE + b"\r\n", [400]),
    "folding-with-a-tab": (GET + b"X-A: a\r\n\tb\r\n" + CLOSE + b"\r\n", [400]),
    "bare-lf-line-ends": (b"GET /checkpoint HTTP/1.1\nHost: x\n" + CLOSE + b"\n", [400]),
    "blank-lines-before-the-request": (b"\r\n\r\n" + GET + CLOSE + b"\r\n", [400]),
    "a-duplicated-host": (GET + b"Host: y\r\n" + CLOSE + b"\r\n", [400]),
    "http-1.1-without-host": (b"GET /checkpoint HTTP/1.1\r\n" + CLOSE + b"\r\n", [400]),
    "http-0.9": (b"GET /checkpoint\r\n\r\n", [400]),
    "http-2.0-in-a-request-line": (b"GET /checkpoint HTTP/2.0\r\nHost: x\r\n\r\n", [400]),
    "a-lower-case-method": (b"get /checkpoint HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n", [400]),
    "an-unknown-method": (b"FOO /checkpoint HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n", [400]),
    "a-method-engram-does-not-route": (
        b"PROPFIND /checkpoint HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n",
        [405],
    ),
    "a-fragment-in-the-target": (b"GET /checkpoint#x HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n", [400]),
    "an-asterisk-target": (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n", [400]),
    "connect": (b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", [400]),
    "an-upgrade-to-websocket": (
        GET + b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n",
        [400],
    ),
    "an-upgrade-smuggling-a-request": (
        GET
        + b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
        + GET
        + CLOSE
        + b"\r\n",
        [400],
    ),
    "an-empty-header-name": (GET + b": a\r\n" + CLOSE + b"\r\n", [400]),
    "a-header-without-a-colon": (GET + b"XA a\r\n" + CLOSE + b"\r\n", [400]),
    "99-headers-are-read": (GET + HEADERS_99 + CLOSE + b"\r\n", [200]),
    "150-headers": (GET + HEADERS_150 + CLOSE + b"\r\n", [431]),
    "a-head-over-the-bound": (GET + PAD + CLOSE + b"\r\n", [431]),
    # pipelining: each request behind another is held to the same bounds
    "three-pipelined-requests": (
        GET + b"\r\n" + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + GET + CLOSE + b"\r\n",
        [200, 200, 200],
    ),
    "a-pipelined-head-over-the-bound": (GET + b"\r\n" + GET + PAD + CLOSE + b"\r\n", [200, 431]),
    "a-pipelined-head-with-150-headers": (GET + b"\r\n" + GET + HEADERS_150 + CLOSE + b"\r\n", [200, 431]),
    "a-pipelined-request-malformed": (GET + b"\r\n" + GET + b"X-A: a\r\n b\r\n\r\n", [200, 400]),
    "a-pipelined-request-that-never-completes": (GET + b"\r\n" + GET, [200, 408]),
    "expect-100-continue": (
        POST + b"Content-Length: 2\r\nExpect: 100-continue\r\n" + CLOSE + b"\r\n{}",
        [100, 400],
    ),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_both_parsers_answer_each_attack_alike(servers: dict[str, str], name: str) -> None:
    data, statuses = ATTACKS[name]
    answers = {parser: _exchange(url, data) for parser, url in servers.items()}
    # the same statuses and problem types (the detail says which layer refused: the
    # parser, or the check after it that makes the other parser refuse it too)
    assert [a[:2] for a in answers["httptools"]] == [a[:2] for a in answers["h11"]], answers
    assert [a[0] for a in answers["h11"]] == statuses, answers
    for url in servers.values():
        _still_serving(url)


def test_a_head_just_under_the_bound_is_read_and_just_over_is_refused(url: str) -> None:
    line = GET + CLOSE + b"X-Pad: "
    fits = line + b"a" * (MAX_HEAD - len(line) - 4) + b"\r\n\r\n"
    assert len(fits) == MAX_HEAD
    assert [a[0] for a in _exchange(url, fits)] == [200]
    over = line + b"a" * (MAX_HEAD - len(line) + 60) + b"\r\n\r\n"
    assert [a[0] for a in _exchange(url, over)] == [431]


def _trickle(url: str, first: bytes, then: bytes, *, pieces: int, pause_s: float) -> list[int]:
    """Send ``first``, then ``then`` in ``pieces`` reads ``pause_s`` apart; the statuses."""
    host, port = url.removeprefix("http://").split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S + 8) as s:
        s.sendall(first)
        step = max(1, len(then) // pieces)
        try:
            for i in range(0, len(then), step):
                time.sleep(pause_s)
                s.sendall(then[i : i + step])
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the server: read what it answered
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    return [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3})", got)]


def test_a_header_value_sent_over_many_reads_is_refused_at_the_bound(url: str) -> None:
    """httptools gathers one header's value across reads before its callback sees it: the
    raw count bounds it (the value never ends here)."""
    value = b"a" * (MAX_HEAD + 4096)
    assert _trickle(url, GET + b"X-Long: ", value, pieces=20, pause_s=0.02) == [431]


def test_a_pipelined_head_over_the_bound_sent_after_the_answer_is_refused(url: str) -> None:
    """The pipelined head starts in the read of the first request and goes on after its
    answer: h11 buffered it uncounted, llhttp counts it in its callbacks."""
    first = GET + b"\r\n" + GET + b"X-Long: " + b"a" * 1000
    assert _trickle(url, first, b"a" * (MAX_HEAD + 1000), pieces=10, pause_s=0.05) == [200, 431]


def test_a_body_left_unread_after_an_early_answer_is_drained_within_the_deadline(url: str) -> None:
    """Regression: after a 413 answered before the body, the deadline was disarmed, so a
    client trickling the declared 2 MB held the connection for ever; now it closes once
    ENGRAM_REQUEST_TIMEOUT_S has passed since the request began."""
    head = POST + b"Content-Length: 2000000\r\n\r\n"
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S + 8) as s:
        s.sendall(head)
        answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        closed = False
        for _ in range(int((TIMEOUT_S + 6) / 0.2)):
            try:
                s.sendall(b"x")
                time.sleep(0.2)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
        assert closed, "the server kept reading a body it had answered"
    _still_serving(url)


def test_an_idle_keep_alive_connection_is_closed(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=15) as s:
        s.sendall(GET + b"\r\n")
        got = s.recv(65536)
        assert got.startswith(b"HTTP/1.1 200")
        while chunk := s.recv(65536):  # the rest of the answer, then the close
            got += chunk
    assert [a[0] for a in _answers(got)] == [200]

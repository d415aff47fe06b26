"""Issue 43, Deliver 4: the SDK's HTTP transport talks to a plain ``http://`` service through
the standard library's client (:class:`engram.client.litehttp.LiteHttp`, httpx's per-request
work was 38.6% of an SDK client's samples), and keeps httpx where LiteHttp is not enough
(``https``, a proxy in the environment). LiteHttp may be shared by threads, keeps connections
alive, bounds every answer and reconnects once when a kept-alive connection was closed."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import httpx
import pytest

from engram.client import litehttp
from engram.client.http import HttpTransport
from engram.client.litehttp import LiteHttp
from engram.protocol.errors import StorageError


@pytest.fixture(autouse=True)
def _no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_a_plain_http_service_gets_the_standard_library_client() -> None:
    assert isinstance(HttpTransport("http://127.0.0.1:8000").http, LiteHttp)
    assert isinstance(HttpTransport(" HTTP://localhost:80/").http, LiteHttp)


def test_https_keeps_httpx() -> None:
    assert isinstance(HttpTransport("https://engram.example").http, httpx.Client)


def test_a_proxy_in_the_environment_keeps_httpx_unless_the_host_is_exempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert isinstance(HttpTransport("http://engram.internal:8000").http, httpx.Client)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert isinstance(HttpTransport("http://127.0.0.1:8000").http, LiteHttp)
    assert isinstance(HttpTransport("http://engram.internal:8000").http, httpx.Client)


def test_a_client_given_is_kept() -> None:
    given = httpx.Client()
    assert HttpTransport("http://127.0.0.1:8000", http=given).http is given


# -- LiteHttp against a small keep-alive server on the loopback --------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    connections: set[int]
    lock = threading.Lock()
    big = b""

    def setup(self) -> None:
        super().setup()
        with self.lock:
            self.connections.add(self.client_address[1])  # the port: an id may be reused once freed

    def do_GET(self) -> None:
        if self.path == "/big":
            body = self.big
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
        elif self.path == "/big-unsized":
            body = self.big
            self.send_response(200)
            self.send_header("connection", "close")  # no length: read until the server closes
        else:
            body = self.path.encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.path == "/big-unsized":
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler], http.server.ThreadingHTTPServer]]:
    handler = type("Handler", (_Handler,), {"connections": set()})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", handler, srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_threads_sharing_one_client_each_get_their_own_answer_over_kept_alive_connections(
    server: tuple[str, type[_Handler], http.server.ThreadingHTTPServer],
) -> None:
    url, handler, _ = server
    client = LiteHttp(timeout_s=10)
    wrong: list[str] = []

    answered: list[str] = []

    def work(n: int) -> None:
        for i in range(25):
            path = f"/t{n}/r{i}"
            try:
                resp = client.request("GET", url + path)
            except Exception as e:  # a thread's failure is the test's, not lost in the thread
                wrong.append(f"{path}: {type(e).__name__}: {e}")
                continue
            if resp.status_code != 200 or resp.content != path.encode():
                wrong.append(f"{path}: {resp.status_code} {resp.content!r}")
            answered.append(path)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    assert wrong == []
    assert len(answered) == 200
    # 200 requests over at most one connection per thread at once: kept alive, not one each
    assert len(handler.connections) <= 8


@pytest.mark.parametrize("path", ["/big", "/big-unsized"])
def test_an_answer_above_the_bound_is_refused_not_truncated(
    server: tuple[str, type[_Handler], http.server.ThreadingHTTPServer],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    url, handler, _ = server
    handler.big = b"x" * 4096
    monkeypatch.setattr(litehttp, "MAX_RESPONSE_BYTES", 1024)
    with pytest.raises(StorageError, match="more than 1024"):
        LiteHttp(timeout_s=10).request("GET", url + path)


def test_a_kept_alive_connection_the_server_closed_is_reopened_once(
    server: tuple[str, type[_Handler], http.server.ThreadingHTTPServer],
) -> None:
    url, handler, _ = server
    client = LiteHttp(timeout_s=10)
    assert client.request("GET", url + "/first").content == b"/first"
    with client._lock:  # the server drops the idle connection (a restart, an idle timeout)
        for conns in client._idle.values():
            for c in conns:
                assert c.sock is not None
                c.sock.shutdown(2)
    assert client.request("GET", url + "/second").content == b"/second"
    assert len(handler.connections) == 2


class _DiesAfterPost(http.server.BaseHTTPRequestHandler):
    """Answers a POST, except the first of /append, which it reads whole, counts and then
    drops the connection without answering (a service killed after it committed)."""

    protocol_version = "HTTP/1.1"
    received: list[str]
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        with self.lock:
            self.received.append(self.path)
            first = self.received.count(self.path) == 1
        if self.path == "/append" and first:
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_post_the_server_took_before_it_went_away_is_not_sent_again() -> None:
    """A POST sent whole on a kept-alive connection that then closes unanswered may have been
    carried out (an append committed): it is reported as unknown (StorageError), never sent a
    second time on a new connection; the idle-closed case is still reopened (previous test)."""
    handler = type("Handler", (_DiesAfterPost,), {"received": []})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        client = LiteHttp(timeout_s=10)
        assert client.request("POST", url + "/first", content=b"{}").content == b"ok"  # kept alive
        with pytest.raises(StorageError, match="may or may not"):
            client.request("POST", url + "/append", content=b"{}")
        assert handler.received == ["/first", "/append"]
        client.close()
    finally:
        srv.shutdown()
        srv.server_close()

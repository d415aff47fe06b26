"""Issue 25, finding 7: no deadlines. An embedder or distiller endpoint that answers 200 and
then sends a byte every 2 s blocked ``memory write`` and ``session close`` for 45 s and more
(the timeouts were per read), the embedding ran inside the projector lock so every write and
recall of the worker waited, and ~130 idle half-sent requests stopped the witness server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from ledger.memory.distill import ChatCompletionsDistiller, DistillerError
from ledger.memory.embed import EmbedderError, OpenAIEmbedder
from ledger.outbound import OutboundError, post
from ledger.witness import Witness, serve_witness
from tests.unit.test_memory_distill_recall import TURNS
from tests.unit.test_witness import witness  # noqa: F401 - the fixture


class Trickle:
    """A local endpoint that answers ``200 OK`` headers at once, then one body byte every
    ``every_s`` seconds, forever (until closed)."""

    def __init__(self, every_s: float = 0.3, *, headers_too: bool = False) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.every_s = every_s
        self.headers_too = headers_too
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            if self.headers_too:
                for b in head:
                    if self.stop.wait(self.every_s):
                        return
                    conn.sendall(bytes([b]))
            else:
                conn.sendall(head)
            while not self.stop.wait(self.every_s):
                conn.sendall(b" ")
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    t = Trickle()
    yield t
    t.close()


def _timed(fn: object) -> float:
    t0 = time.monotonic()
    fn()  # type: ignore[operator]
    return time.monotonic() - t0


def test_outbound_call_has_an_overall_deadline(trickle: Trickle) -> None:
    t0 = time.monotonic()
    with pytest.raises(OutboundError) as e:
        post(trickle.url, b"{}", {}, deadline_s=1.0, max_bytes=1 << 20)
    assert e.value.check == "outbound.deadline"
    assert time.monotonic() - t0 < 2.5
    slow_head = Trickle(0.2, headers_too=True)  # even a status line sent a byte at a time
    try:
        t0 = time.monotonic()
        with pytest.raises(OutboundError):
            post(slow_head.url, b"{}", {}, deadline_s=1.0, max_bytes=1 << 20)
        assert time.monotonic() - t0 < 2.5
    finally:
        slow_head.close()


def test_a_trickling_embedder_is_cut_at_its_deadline(trickle: Trickle) -> None:
    emb = OpenAIEmbedder(url=trickle.url, model="m", dimensions=8, timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(EmbedderError, match=r"outbound\.deadline"):
        emb.embed(["hello"])
    assert time.monotonic() - t0 < 2.5  # was: every byte reset a 10 s read timeout, forever


def test_a_trickling_distiller_is_cut_at_its_deadline(trickle: Trickle) -> None:
    d = ChatCompletionsDistiller(url=trickle.url, model="m", timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(DistillerError, match=r"outbound\.deadline"):
        d.distill("s-1", TURNS)
    assert time.monotonic() - t0 < 2.5


def test_witness_server_bounds_idle_connections(witness: tuple[Witness, object]) -> None:  # noqa: F811 - the fixture
    server = serve_witness(witness[0], "127.0.0.1", 0, max_connections=8, deadline_s=1.0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    idle = []
    try:
        for _ in range(40):  # many more half-sent requests than connection slots
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 10")  # never finished
            idle.append(s)
        # within the deadline the idle ones are shut down and an honest request is answered
        deadline = time.monotonic() + 10
        status = None
        while time.monotonic() < deadline and status is None:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/{'0' * 64}/checkpoint", timeout=2)
                status = r.status_code
            except httpx.HTTPError:
                time.sleep(0.2)
        assert status == 404  # answered (no such log), not hung
        # and every half-sent connection was closed by the server (recv sees the end)
        for s in idle:
            s.settimeout(5)
            try:
                data = s.recv(1024)
                while data:  # a 408-like close may carry bytes first; then the end
                    data = s.recv(1024)
            except ConnectionResetError:
                pass  # closed: what we want
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        server.server_close()

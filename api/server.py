"""The HTTP/1.1 connection layer ``engram serve`` runs: a uvicorn protocol, bounded.

Two parsers, chosen by ``ENGRAM_HTTP_PARSER``: ``httptools`` (the default: llhttp, the C
parser Node.js uses, through uvicorn's httptools protocol) and ``h11`` (pure Python). Neither
bounds on its own what a client may make the server hold: llhttp has no limit on a request
head at all (32 MiB of headers were answered 200), h11 only a 2 MiB buffer, and no uvicorn
protocol times out a connection that sends part of a request and stops, or that connects
and sends nothing. :class:`BoundedHttpToolsProtocol` and :class:`BoundedH11Protocol` enforce
the same bounds in front of either parser, before it buffers anything:

* **the request head** (request line and headers) may hold at most
  ``ENGRAM_MAX_HEADER_BYTES`` (64 KiB) and at most ``ENGRAM_MAX_HEADERS`` (100) header
  lines; beyond either the connection is answered 431 and closed, before the rest is read.
  A pipelined request (sent before the previous response) is bounded the same way;
* **a request must arrive in full within** ``ENGRAM_REQUEST_TIMEOUT_S`` (15 s) of its first
  byte (or of the connection, for a connection that sends nothing); otherwise 408 and close.
  The deadline holds until the request's last byte arrives, also when the application
  answered before reading the body (a 413): the rest is drained within it or the connection
  closes. Idle keep-alive connections between requests close after uvicorn's
  ``timeout_keep_alive`` (5 s).

The body's size (``ENGRAM_MAX_REQUEST_BYTES``, 413) is bounded by :class:`api.limits.RequestLimits`,
which both parsers run behind. Both parsers refuse the same malformed requests with 400 (a
CR or NUL inside a header value, obsolete header folding, Content-Length with
Transfer-Encoding, two different lengths, a bad chunk size, a malformed request line):
``tests/e2e/test_connection_abuse.py`` sends each to a live server under each parser.
The 408 and 431 answers are RFC 9457 problem documents, like every other error of the API.
"""

from __future__ import annotations

import asyncio
import json
import re
from functools import lru_cache
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from api.settings import ApiSettings

__all__ = ["PROTOCOLS", "BoundedH11Protocol", "BoundedHttpToolsProtocol"]

#: ENGRAM_HTTP_PARSER -> the protocol class ``engram serve`` hands uvicorn
PROTOCOLS = {
    "httptools": "api.server:BoundedHttpToolsProtocol",
    "h11": "api.server:BoundedH11Protocol",
}

#: the blank line that ends a request head
_HEAD_END = re.compile(rb"\r\n\r\n")
#: refused in a request head by both parsers: a bare LF (h11 took it as a line end, llhttp
#: does not), obsolete line folding (h11 joined the lines, llhttp refuses), a line end first
_BAD_HEAD = re.compile(rb"(?<!\r)\n|\r\n[ \t]")


@lru_cache(maxsize=1)
def _bounds() -> tuple[int, int, float]:
    """(max head bytes, max header lines, request timeout) from the settings (validated
    before serving)."""
    settings = ApiSettings.from_env()
    return settings.max_header_bytes, settings.max_headers, float(settings.request_timeout_s)


def _raw_problem(status: int, reason: str, slug: str, detail: str) -> bytes:
    body = json.dumps(
        {"type": f"https://engram.dev/problems/{slug}", "title": reason, "status": status, "detail": detail}
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _HeadTooLarge(Exception):
    """Raised inside a parser callback: the head went over a bound (answered 431)."""


class _Bounds:
    """What both protocols share: the head count taken from the bytes before the parser
    sees them, the request deadline, and the 408 and 431 answers.

    The head is counted from the raw bytes: from the first byte of a request (or the first
    after the previous request) to the blank line that ends its head, across reads (the end
    may span two). Line ends are counted as header lines. What a read holds after the head
    (the body, a pipelined request) is counted by the parser's own progress."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop

    def _init_bounds(self) -> None:
        self.max_head_bytes, self.max_header_lines, self.request_timeout_s = _bounds()
        self._head_bytes = 0
        self._head_lines = 0
        self._tail = b""  # the last bytes of the head so far: its end may span two reads
        self._malformed = False
        self._deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.request_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _reset_head(self) -> None:
        self._head_bytes = 0
        self._head_lines = 0
        self._tail = b""

    def _count_head(self, data: bytes) -> bool:
        """Count ``data``, read while a head is expected; True if the head ended in it. Sets
        ``_malformed`` for a line end both parsers would not read alike."""
        scan = self._tail + data
        end = _HEAD_END.search(scan)
        upto = len(scan) if end is None else end.end()
        start = len(self._tail)
        if self._head_bytes == 0 and data[:1] in (b"\r", b"\n"):
            self._malformed = True  # a request begins with its request line
        elif _BAD_HEAD.search(scan, max(0, start - 2), upto):
            self._malformed = True
        self._head_bytes += upto - start
        self._head_lines += scan.count(b"\n", start, upto)
        self._tail = scan[-3:] if end is None else b""
        return end is not None

    def _over(self) -> bool:
        # the request line's and the blank line's ends are not header lines
        return self._head_bytes > self.max_head_bytes or self._head_lines - 2 > self.max_header_lines

    def _refuse(self, status: int) -> None:
        """Answer 431 (a head over a bound) or 400 (a head no parser should read) and close."""
        if status == 431:
            answer = _raw_problem(
                431,
                "Request Header Fields Too Large",
                "headers-too-large",
                f"the request line and headers are limited to {self.max_head_bytes} bytes and "
                f"{self.max_header_lines} header lines",
            )
        else:
            answer = _raw_problem(400, "Bad Request", "malformed", "the request is not valid HTTP/1.1")
        self._disarm()
        self.transport.write(answer)
        self.transport.close()

    def _may_answer_408(self) -> bool:  # pragma: no cover - each protocol says
        raise NotImplementedError

    def _request_received(self) -> bool:  # pragma: no cover - each protocol says
        raise NotImplementedError

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self._request_received():
            return  # the request arrived; the response is the app's business
        if self._may_answer_408():
            self.transport.write(
                _raw_problem(
                    408,
                    "Request Timeout",
                    "request-timeout",
                    f"a request must arrive in full within {self.request_timeout_s:g} s",
                )
            )
        self.transport.close()


class BoundedH11Protocol(_Bounds, H11Protocol):
    """uvicorn's h11 protocol with a bounded request head and a request deadline."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_bounds()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that never sends anything is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _request_received(self) -> bool:
        return self.conn.their_state is h11.DONE

    def _may_answer_408(self) -> bool:
        cycle = self.cycle
        if self.conn.their_state is h11.IDLE:  # a head begun after the previous answer
            return bool(self._head_bytes) and (cycle is None or cycle.response_complete)
        return cycle is None or not cycle.response_started  # this request's body

    def _check_head(self, data: bytes) -> bool:
        """Count ``data`` as head; False if the connection was refused for it."""
        self._count_head(data)
        if self._over() or self._malformed:  # no response can have started
            self._refuse(431 if self._over() else 400)
            return False
        return True

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            # Still reading a request head: bound it before h11 buffers it. Only the head
            # counts: one read often holds the head and (part of) the body after it.
            self._arm()
            if not self._check_head(data):
                return
        super().data_received(data)
        if self.conn.their_state is h11.DONE or self.conn.their_state is h11.ERROR:
            self._disarm()  # received in full (or refused by h11)
        elif self.conn.their_state is not h11.IDLE:
            self._reset_head()  # the head is parsed; the body runs under the same deadline

    def send_400_response(self, msg: str) -> None:
        self._refuse(400)  # h11 refused the request: the same answer as every parser's

    def on_response_complete(self) -> None:
        self._reset_head()
        if self.conn.their_state is not h11.DONE:
            # Answered before the body was read (413, 401): the rest must still arrive
            # within the request's deadline, drained, or the connection closes.
            super().on_response_complete()
            return
        self._disarm()  # between requests uvicorn's keep-alive timeout applies
        if self.conn.our_state is h11.DONE and not self.transport.is_closing():
            # h11 holds what was pipelined behind this request, uncounted when it was read:
            # bound the next head in it before h11 parses it.
            pending, _ = self.conn.trailing_data
            if pending:
                self._arm()
                if not self._check_head(bytes(pending)):
                    self.server_state.total_requests += 1
                    return
        super().on_response_complete()
        state: object = self.conn.their_state  # moved on to the pipelined request, if any
        if state is not h11.IDLE:
            self._reset_head()  # its head was parsed
        if state is h11.DONE:
            self._disarm()


class BoundedHttpToolsProtocol(_Bounds, HttpToolsProtocol):
    """uvicorn's httptools (llhttp) protocol with the same bounds as :class:`BoundedH11Protocol`.

    llhttp parses every request of a read at once (uvicorn queues the pipelined ones), so
    the raw count covers the head a read starts in, and the parser's callbacks count each
    further head of the same read: its target and header lines as parsed, each line's
    separators included. A refusal while earlier requests of the connection are still being
    answered waits for their answers (as h11, which reads nothing further until then)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_bounds()
        # where the parser is: "idle" (no request begun), "head", "body", "done" (received)
        self._phase = "idle"
        self._stopped = 0  # a callback stopped the parser: the status it answers
        self._refusal = 0  # a refusal waiting for the earlier answers: its status
        self._refusal_waits = 0  # and how many answers it waits for
        self._reading: Any = None  # the cycle of the request whose body is being read
        self._open = 0  # requests whose head was parsed and whose response is not complete
        self._parsed_bytes = 0  # the current head as the callbacks saw it
        self._parsed_lines = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _request_received(self) -> bool:
        return self._phase == "done"

    def _may_answer_408(self) -> bool:
        if self._phase == "body":  # this request's cycle exists: is no other answer under way?
            return self._open == 1 and not self.cycle.response_started
        return self._open == 0 and bool(self._head_bytes or self._phase == "head")

    def _refuse_after_answers(self, status: int) -> None:
        """Refuse now, or once the requests before this one are answered."""
        current = self._reading if self._phase == "body" else None
        waits = self._open - (current is not None)
        if waits <= 0:
            if current is not None and current.response_started:
                self.transport.close()  # answered already (413 before the body): no second answer
            else:
                self._refuse(status)
            return
        self._refusal, self._refusal_waits = status, waits
        self._disarm()
        self.flow.pause_reading()

    def data_received(self, data: bytes) -> None:
        if self._refusal:
            return  # refused: nothing more is read
        counted = self._phase != "body"
        ended = False
        if counted:
            # A head is expected (this request's, or the next one's): count it before
            # llhttp sees it (httptools gathers a header's value across reads).
            if self._phase == "done":
                self._phase = "idle"  # the next request's bytes (pipelined or not)
            if self._phase == "idle":
                self._arm()
            ended = self._count_head(data)
            if self._over() or self._malformed:
                self._refuse_after_answers(431 if self._over() else 400)
                return
        super().data_received(data)
        if self._phase in ("body", "done"):
            self._reset_head()  # parsed: the body runs under the same deadline
        elif self._phase == "head" and (ended or not counted):
            # a head began after the body or the request this read also held: the callbacks
            # counted it so far; the raw count takes over from there
            self._head_bytes, self._head_lines = self._parsed_bytes, self._parsed_lines + 1
            self._tail = data[-3:]

    def send_400_response(self, msg: str) -> None:
        # llhttp refused the request, or a callback stopped it at a bound
        self._refuse_after_answers(self._stopped or 400)

    # parser callbacks (llhttp calls them while feed_data runs)

    def _grow(self, size: int) -> None:
        self._parsed_bytes += size
        if self._parsed_bytes > self.max_head_bytes or self._parsed_lines > self.max_header_lines:
            self._stopped = 431
            raise _HeadTooLarge

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._phase = "head"
        self._parsed_bytes = self._parsed_lines = 0
        self._arm()

    def on_url(self, url: bytes) -> None:
        self._grow(len(url) + 2)  # with the spaces around it
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_lines += 1
        self._grow(len(name) + len(value) + 4)  # ": " and the line end
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._phase = "body"
        self._reading = None
        super().on_headers_complete()
        if self.cycle is None or self.cycle.scope is not self.scope:
            return  # handed to a WebSocket protocol (not under engram serve: ws="none")
        self._reading = self.cycle
        self._open += 1
        # the target as it came, as h11 hands it on (httptools' URL parse drops a fragment
        # and the scheme and host of an absolute-form target, which api.limits refuses)
        target = self.url.partition(b"?")[0]
        if target != self.scope["raw_path"]:
            self.scope["raw_path"] = target
        if self.parser.should_upgrade():
            # llhttp reads no body after an Upgrade and stops: the request is refused
            # (api.limits) and the connection closes after that answer
            self.cycle.keep_alive = False

    def on_message_complete(self) -> None:
        self._phase = "done"
        self._disarm()  # received in full
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._open -= 1
        if self._refusal:
            self._refusal_waits -= 1
            if self._refusal_waits == 0:
                self._refuse(self._refusal)  # the answers before it are out: now the refusal
        elif self._phase == "done" and self._open == 0:
            self._phase = "idle"  # between requests uvicorn's keep-alive timeout applies
        super().on_response_complete()

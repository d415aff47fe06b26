"""The HTTP/1.1 connection layer ``engram serve`` runs: uvicorn's h11 protocol, bounded.

uvicorn's default parser (httptools) accepts request heads of any size (32 MiB of headers
were answered 200), and no uvicorn protocol times out a connection that sends part of a
request and stops, or that connects and sends nothing: each holds a socket and memory for
ever. :class:`BoundedH11Protocol` keeps h11's strict parsing (a CR or LF inside a
header value, a malformed request line or chunk: 400) and adds two bounds:

* **the request head** (request line and headers) may hold at most
  ``ENGRAM_MAX_HEADER_BYTES`` (64 KiB); beyond that the connection is answered 431 and
  closed, before the rest is read;
* **a request must arrive in full within** ``ENGRAM_REQUEST_TIMEOUT_S`` (15 s) of its first
  byte (or of the connection, for a connection that sends nothing); otherwise 408 and close.
  Idle keep-alive connections between requests close after uvicorn's ``timeout_keep_alive``.

Both answers are RFC 9457 problem documents, like every other error of the API.
"""

from __future__ import annotations

import asyncio
import json
import re
from functools import lru_cache
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from api.settings import ApiSettings

__all__ = ["BoundedH11Protocol"]

#: the blank line that ends a request head (h11 also accepts bare LF line endings)
_HEAD_END = re.compile(rb"\n\r?\n")


@lru_cache(maxsize=1)
def _bounds() -> tuple[int, float]:
    """(max head bytes, request timeout) from the settings (validated before serving)."""
    settings = ApiSettings.from_env()
    return settings.max_header_bytes, float(settings.request_timeout_s)


def _raw_problem(status: int, reason: str, slug: str, detail: str) -> bytes:
    body = json.dumps(
        {"type": f"https://engram.dev/problems/{slug}", "title": reason, "status": status, "detail": detail}
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a bounded request head and a request deadline."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes, self.request_timeout_s = _bounds()
        self._head_bytes = 0
        self._tail = b""  # the last bytes of the head so far: its end may span two reads
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that never sends anything is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.request_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.DONE:
            return  # the request arrived; the response is the app's business
        started = self.cycle is not None and self.cycle.response_started
        if not started and (self._head_bytes or self.conn.their_state is not h11.IDLE):
            self.transport.write(
                _raw_problem(
                    408,
                    "Request Timeout",
                    "request-timeout",
                    f"a request must arrive in full within {self.request_timeout_s:g} s",
                )
            )
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            # Still reading a request head: bound it before h11 buffers it. Only the head
            # counts: one read often holds the head and (part of) the body after it.
            scan = self._tail + data
            end = _HEAD_END.search(scan)
            self._head_bytes += len(data) if end is None else max(0, end.end() - len(self._tail))
            self._tail = scan[-2:] if end is None else b""
            self._arm()
            if self._head_bytes > self.max_head_bytes:  # no response can have started
                self.transport.write(
                    _raw_problem(
                        431,
                        "Request Header Fields Too Large",
                        "headers-too-large",
                        f"the request line and headers are limited to {self.max_head_bytes} bytes",
                    )
                )
                self._disarm()
                self.transport.close()
                return
        super().data_received(data)
        if self.conn.their_state is h11.DONE or self.conn.their_state is h11.ERROR:
            self._disarm()  # received in full (or refused by h11)
        elif self.conn.their_state is not h11.IDLE:
            self._head_bytes = 0  # the head is parsed; the body runs under the same deadline
            self._tail = b""

    def on_response_complete(self) -> None:
        self._head_bytes = 0
        self._tail = b""
        self._disarm()  # between requests uvicorn's keep-alive timeout applies
        super().on_response_complete()

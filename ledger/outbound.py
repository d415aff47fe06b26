"""Outbound HTTP with an overall deadline (embedder, chat distiller, witness submission).

Why: a socket timeout bounds each read, not the call. An endpoint that
answers 200 and then sends a byte every 2 s kept ``memory write`` and ``session close``
waiting 45 s and more. Here the whole call (connect, send, status line, headers, body) is
bounded by one monotonic deadline: every socket operation gets the time that is left as its
timeout, and a watchdog shuts the socket down when the deadline passes, so even a read that
is trickled one byte at a time ends then. The reply is bounded in bytes as it is read.

Errors: :class:`OutboundError` (a :class:`~engram.protocol.errors.StorageError`: the
endpoint failed; nothing was acknowledged) with ``check`` ``outbound.deadline``,
``outbound.size`` or ``outbound.failed``; callers translate it to their own typed error.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from engram.protocol.errors import StorageError

__all__ = ["OutboundError", "Reply", "post", "post_json"]


class OutboundError(StorageError):
    """An outbound call failed, ran out of time or answered too much."""

    def __init__(self, message: str, *, check: str) -> None:
        self.check = check
        super().__init__(f"[{check}] {message}")


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: bytes


def _bound(total: int, max_bytes: int) -> None:
    if total > max_bytes:
        raise OutboundError(f"the reply is larger than {max_bytes} bytes", check="outbound.size")


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    deadline_s: float,
    max_bytes: int,
) -> Reply:
    """POST ``body`` to ``url`` (http or https) and read the reply, all within ``deadline_s``."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OutboundError(f"not an http(s) URL: {url[:200]}", check="outbound.failed")
    deadline = time.monotonic() + deadline_s

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise OutboundError(f"no complete reply within {deadline_s:g} s", check="outbound.deadline")
        return remaining

    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=left())
    expired = threading.Event()

    def shut() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(deadline_s, shut)
    watchdog.daemon = True
    watchdog.start()
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", target, body=body, headers=dict(headers))
        if conn.sock is not None:
            conn.sock.settimeout(left())
        resp = conn.getresponse()
        chunks: list[bytes] = []
        total = 0
        while True:
            if conn.sock is not None:
                conn.sock.settimeout(left())
            chunk = resp.read1(65536)
            if not chunk:
                break
            total += len(chunk)
            _bound(total, max_bytes)
            chunks.append(chunk)
        left()
        return Reply(
            status=resp.status, content_type=resp.getheader("content-type") or "", body=b"".join(chunks)
        )
    except OutboundError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as e:
        if expired.is_set() or time.monotonic() >= deadline:
            raise OutboundError(
                f"no complete reply within {deadline_s:g} s", check="outbound.deadline"
            ) from e
        raise OutboundError(f"request failed: {e}", check="outbound.failed") from e
    finally:
        watchdog.cancel()
        conn.close()


def post_json(
    url: str, payload: object, *, api_key: str | None, deadline_s: float, max_bytes: int, what: str
) -> bytes:
    """POST ``payload`` as JSON to an OpenAI-compatible endpoint (bearer ``api_key``) and
    return the body of its 200 reply, at most ``max_bytes``, all within ``deadline_s``.
    Errors are :class:`OutboundError` whose message starts with ``what``: ``outbound.size``
    (``"<what> reply is too large"``), ``outbound.deadline``, ``outbound.failed`` (an
    unreachable endpoint, or a status other than 200)."""
    import json

    headers = {
        "Content-Type": "application/json",
        **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
    }
    try:
        reply = post(url, json.dumps(payload).encode(), headers, deadline_s=deadline_s, max_bytes=max_bytes)
    except OutboundError as e:
        if e.check == "outbound.size":
            raise OutboundError(f"{what} reply is too large", check=e.check) from e
        raise OutboundError(f"{what} request failed: {e}", check=e.check) from e
    if reply.status != 200:
        raise OutboundError(f"{what} request failed: HTTP {reply.status}", check="outbound.failed")
    return reply.body

"""A small HTTP/1.1 client on the standard library, for short-lived processes.

A harness hook (``engram hook claude-code``) is a process started for every prompt, so its
start-up is paid on every turn: importing httpx alone costs about 0.15 s of CPU, most of
the 0.2 s budget. :class:`LiteHttp` has the one method :class:`~engram.client.http.HttpTransport`
calls (``request``) and answers with :class:`LiteResponse` (``status_code``, ``headers``,
``content``, ``text``, ``json()``), so either client can sit under the transport. It keeps
one connection per origin alive, bounds every response before reading it, and reports a
transport failure as :class:`~engram.protocol.errors.StorageError` naming the address.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from engram.protocol.errors import MalformedError, StorageError

__all__ = ["MAX_RESPONSE_BYTES", "LiteHttp", "LiteResponse"]

#: The largest response body read (an answer above it is refused, not truncated).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class _Headers(Mapping[str, str]):
    """Response headers, looked up without regard to case."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._h: dict[str, str] = {}
        for k, v in pairs:
            key = k.lower()
            self._h[key] = f"{self._h[key]}, {v}" if key in self._h else v

    def __getitem__(self, key: str) -> str:
        return self._h[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._h)

    def __len__(self) -> int:
        return len(self._h)


class LiteResponse:
    def __init__(self, status_code: int, headers: _Headers, content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class LiteHttp:
    """``request(method, url, content=..., headers=...)`` over http.client (http and https)."""

    def __init__(self, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, str, int | None], http.client.HTTPConnection] = {}

    def _conn(self, scheme: str, host: str, port: int | None) -> http.client.HTTPConnection:
        key = (scheme, host, port)
        c = self._conns.get(key)
        if c is None:
            cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            c = cls(host, port, timeout=self.timeout_s)
            self._conns[key] = c
        return c

    def request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> LiteResponse:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MalformedError(f"not an http(s) URL: {url!r}", check="http.url")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for attempt in (0, 1):
            reused = (parts.scheme, parts.hostname, parts.port) in self._conns
            conn = self._conn(parts.scheme, parts.hostname, parts.port)
            try:
                conn.request(method, target, body=content, headers=dict(headers or {}))
                resp = conn.getresponse()
                length = resp.getheader("content-length")
                if length is not None and (not length.isdigit() or int(length) > MAX_RESPONSE_BYTES):
                    conn.close()
                    raise StorageError(f"{url} answered with {length} bytes (more than {MAX_RESPONSE_BYTES})")
                body = resp.read(MAX_RESPONSE_BYTES + 1)
                if len(body) > MAX_RESPONSE_BYTES:
                    conn.close()
                    raise StorageError(f"{url} answered with more than {MAX_RESPONSE_BYTES} bytes")
                if resp.will_close:
                    conn.close()
                    self._conns.pop((parts.scheme, parts.hostname, parts.port), None)
                return LiteResponse(resp.status, _Headers(resp.getheaders()), body)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # a kept-alive connection the server had closed: reconnect once (a fresh
                # connection that fails is not retried: the request may have arrived)
                conn.close()
                self._conns.pop((parts.scheme, parts.hostname, parts.port), None)
                if attempt == 1 or not reused:
                    raise StorageError(f"cannot reach the Engram service at {url}: {e}") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self._conns.pop((parts.scheme, parts.hostname, parts.port), None)
                raise StorageError(f"cannot reach the Engram service at {url}: {e}") from e
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

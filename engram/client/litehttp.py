"""A small HTTP/1.1 client on the standard library: the SDK's default for a plain ``http://``
service, and what short-lived processes use.

A harness hook (``engram hook claude-code``) is a process started for every prompt, so its
start-up is paid on every turn: importing httpx alone costs about 0.15 s of CPU, most of
the 0.2 s budget. An agent appending through the SDK pays httpx's per-request machinery on
every write instead (38.6% of an SDK client's samples under the HTTP load of issue 43), on
the cores the service shares. :class:`LiteHttp` has the one method
:class:`~engram.client.http.HttpTransport` calls (``request``) and answers with
:class:`LiteResponse` (``status_code``, ``headers``, ``content``, ``text``, ``json()``), so
either client can sit under the transport.

What it does: keeps connections alive per origin (threads may share one client: a request
takes an idle connection of its origin or opens one, and gives it back once the answer is read
whole; at most :data:`MAX_IDLE` are kept per origin); bounds every response before reading it
(:data:`MAX_RESPONSE_BYTES`: a larger answer is refused, not truncated); speaks TLS for
``https`` with the standard library's default context (certificate and host name checked);
reports a transport failure as :class:`~engram.protocol.errors.StorageError` naming the
address. What it does not: proxies (``HTTP_PROXY``, ``ALL_PROXY``), HTTP/2, compressed
answers, cookies. :func:`suffices` says when it is enough for a service's URL; the transport
keeps httpx otherwise.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from engram.protocol.errors import MalformedError, StorageError

__all__ = ["MAX_IDLE", "MAX_RESPONSE_BYTES", "LiteHttp", "LiteResponse", "suffices"]

#: The largest response body read (an answer above it is refused, not truncated).
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: Idle connections kept per origin (more threads at once open more; the extra are closed).
MAX_IDLE = 16


#: Methods sent again on a new connection when a kept-alive one failed after sending.
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


def _open(conn: http.client.HTTPConnection) -> bool:
    """An idle connection not closed by the server: no EOF, no bytes out of turn, no error
    (read without blocking, nothing consumed)."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        sock.setblocking(False)
        try:
            sock.recv(1, socket.MSG_PEEK)  # b"" (closed) or an answer nobody asked for
            return False
        finally:
            sock.settimeout(conn.timeout)
    except BlockingIOError:
        return True
    except ValueError:  # a TLS socket takes no flags: judged by the request as before
        return True
    except OSError:
        return False


def suffices(url: str) -> bool:
    """:class:`LiteHttp` is enough for the service at ``url``: plain ``http`` and no proxy
    set for its host in the environment (``http_proxy``, ``all_proxy``, less ``no_proxy``),
    which httpx would honour. ``https`` stays with httpx: its certificate store (certifi)
    is the one deployments were set up against."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies_environment()
    if not any(proxies.get(k) for k in ("http", "all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))  # no_proxy (the environment's, on POSIX)


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
    """``request(method, url, content=..., headers=...)`` over http.client (http and https);
    threads may share one."""

    def __init__(self, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, str, int | None], list[http.client.HTTPConnection]] = {}

    def _take(
        self, key: tuple[str, str, int | None], *, fresh: bool
    ) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection of the origin (True: reused), or a new one."""
        while not fresh:
            with self._lock:
                idle = self._idle.get(key)
                if not idle:
                    break
                conn = idle.pop()
            if _open(conn):
                return conn, True
            conn.close()  # the server closed it while idle: nothing was sent on it
        scheme, host, port = key
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        return cls(host, port, timeout=self.timeout_s), False

    def _give(self, key: tuple[str, str, int | None], conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < MAX_IDLE:
                idle.append(conn)
                return
        conn.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> LiteResponse:
        try:  # a broken address, or a port that is not a number or out of range: ValueError
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise MalformedError(f"not an http(s) URL: {url!r}", check="http.url") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MalformedError(f"not an http(s) URL: {url!r}", check="http.url")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = (parts.scheme, parts.hostname, port)
        for attempt in (0, 1):
            # a retry opens a new connection: another idle one may be as stale as the first
            conn, reused = self._take(key, fresh=attempt == 1)
            sent = False
            try:
                conn.request(method, target, body=content, headers=dict(headers or {}))
                sent = True
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
                else:
                    self._give(key, conn)
                return LiteResponse(resp.status, _Headers(resp.getheaders()), body)
            except (http.client.InvalidURL, ValueError) as e:
                # refused before a byte was sent: a control character in the path, a header
                # that would split the request (CR/LF) or is not Latin-1. Not a transport
                # failure (a StorageError invites a retry): the request itself is malformed.
                conn.close()
                raise MalformedError(f"not a request to send: {e}", check="http.request") from None
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # a kept-alive connection the server had closed: reconnect once (a fresh
                # connection that fails is not retried: the request may have arrived). Once
                # the request was sent whole, only an idempotent one is sent again: the server
                # may have carried out a POST (an append) and died before answering.
                conn.close()
                if attempt == 1 or not reused:
                    raise StorageError(f"cannot reach the Engram service at {url}: {e}") from e
                if sent and method.upper() not in _IDEMPOTENT:
                    raise StorageError(
                        f"the Engram service at {url} closed the connection before answering ({e}): "
                        "the request may or may not have been carried out"
                    ) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise StorageError(f"cannot reach the Engram service at {url}: {e}") from e
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        with self._lock:
            idle = [c for conns in self._idle.values() for c in conns]
            self._idle.clear()
        for c in idle:
            c.close()

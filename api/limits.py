"""ASGI middleware bounding every request before the app sees it: the body size (declared
or streamed) and a per-client-address rate limit. Refusals are RFC 9457 problems."""

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from api.ratelimit import RateLimiter
from engram.protocol.errors import RateLimitedError

__all__ = ["RequestLimits", "read_body", "replaying"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def replaying(body: bytes, receive: Receive, tail: Message | None = None) -> Receive:
    """A ``receive`` that hands the app ``body`` (read already) as one message, then
    ``tail`` (a disconnect seen while reading) or whatever the server sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if tail is not None:
            return tail
        return await receive()

    return replay


async def read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The request body (already bounded by :class:`RequestLimits` and the server), and the
    message that ended it early if the client went away (None otherwise): what
    :func:`replaying` hands on."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


async def _problem(send: Send, status: int, slug: str, title: str, detail: str, headers: list[Any]) -> None:
    from api.problems import TYPE_BASE

    body = json.dumps({"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


#: Headers that must appear at most once: with two, a proxy and the service (or two parts
#: of the service) could each believe a different one (duplicated signer headers).
SINGLE_HEADERS = frozenset(
    {
        b"host",
        b"content-length",
        b"content-type",
        b"authorization",
        b"engram-signer",
        b"engram-timestamp",
        b"engram-nonce",
        b"engram-signature",
        b"engram-min-index",
        b"engram-known-size",
        b"if-none-match",
    }
)


#: The methods a request may use: the ones llhttp (the httptools parser) reads, which refuses
#: any other token where h11 hands it on; Engram answers those it does not route 405.
#: (tests/unit/test_http_parser_setting.py checks the list against the installed llhttp.)
METHODS = frozenset(
    [
        "DELETE",
        "GET",
        "HEAD",
        "POST",
        "PUT",
        "CONNECT",
        "OPTIONS",
        "TRACE",
        "COPY",
        "LOCK",
        "MKCOL",
        "MOVE",
        "PROPFIND",
        "PROPPATCH",
        "SEARCH",
        "UNLOCK",
        "BIND",
        "REBIND",
        "UNBIND",
        "ACL",
        "REPORT",
        "MKACTIVITY",
        "CHECKOUT",
        "MERGE",
        "M-SEARCH",
        "NOTIFY",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "PATCH",
        "PURGE",
        "MKCALENDAR",
        "LINK",
        "UNLINK",
        "SOURCE",
        "QUERY",
    ]
)


def _malformed_head(scope: Scope) -> str | None:
    """Why the request head is refused (400), or None. The target must be origin-form
    (``/path``): this is an origin server, and an absolute-form target (``http://h/p``)
    would make the signed target and the routed path two different strings. The checks
    after it make both HTTP parsers (api/server.py) refuse the same requests: each one
    passes something through that the other refuses."""
    raw = scope.get("raw_path") or scope.get("path", "").encode()
    if not raw.startswith(b"/"):
        return "the request target must be a path (origin-form, /...), not an absolute URL"
    if b"#" in raw or b"#" in scope.get("query_string", b""):
        return "the request target must not carry a fragment (#...)"
    if scope.get("http_version") not in ("1.0", "1.1"):
        return "the request must be HTTP/1.0 or HTTP/1.1"
    if scope.get("method") not in METHODS:
        return "the method is not one of HTTP's registered methods"
    seen: set[bytes] = set()
    upgrade = chunked = False
    for name, _ in scope.get("headers") or []:
        if name in SINGLE_HEADERS:
            if name in seen:
                return f"the header {name.decode('latin-1')} appears more than once"
            seen.add(name)
        elif name == b"upgrade":
            upgrade = True
        elif name == b"transfer-encoding":
            chunked = True
    if upgrade:
        return "this server speaks HTTP/1.1 only: no Upgrade"
    if chunked and b"content-length" in seen:
        return "a request carries Content-Length or Transfer-Encoding, not both"
    if b"host" not in seen and scope.get("http_version") == "1.1":
        return "an HTTP/1.1 request must carry a Host header"
    return None


class RequestLimits:
    def __init__(self, app: ASGIApp, *, max_bytes: int, per_client: RateLimiter) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.per_client = per_client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = _malformed_head(scope)
        if refused is not None:
            # closed after it: what follows a malformed head is not read as a request
            await _problem(send, 400, "malformed", "Malformed request", refused, [(b"connection", b"close")])
            return
        client = scope.get("client")
        try:
            self.per_client.hit("ip:" + (client[0] if client else "unknown"))
        except RateLimitedError as e:
            retry = [(b"retry-after", str(e.retry_after_s).encode())]
            await _problem(send, 429, "rate-limited", "Too many requests", str(e), retry)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _problem(
                send,
                413,
                "too-large",
                "Request too large",
                f"requests are limited to {self.max_bytes} bytes",
                [],
            )
            return
        if declared is not None:
            await self.app(scope, receive, send)  # the server stops reading at the declared length
            return
        # No declared length (chunked): read the body here, bounded, and replay it to the app.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                await self.app(scope, receive, send)  # disconnected: let the app see it
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await _problem(
                    send,
                    413,
                    "too-large",
                    "Request too large",
                    f"requests are limited to {self.max_bytes} bytes",
                    [],
                )
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replaying(b"".join(chunks), receive), send)

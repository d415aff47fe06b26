"""The public transparency reads, served before the framework.

``GET /checkpoint`` and the tiles (``/tile/<L>/<N>[.p/<W>]``, ``/tile/entries/...``) are
what every client, witness and mirror polls. This ASGI layer answers their successful
``GET`` and ``HEAD`` requests without FastAPI's routing, validation and dependency
injection, with strong ``ETag``s and ``304 Not Modified`` for ``If-None-Match``:

* the checkpoint (with its cosignatures) is read fresh on every request: one read
  transaction of two indexed lookups, in a worker thread (never on the event loop);
* tiles are immutable once the log has reached them (a full tile never changes; a partial
  tile of width W is the first W hashes of its full tile, and also never changes), so a
  tile served once is kept in a byte-bounded LRU cache and served from memory.

Anything else (a bad tile path, a tile beyond the checkpoint, another method) goes on to the
routes in api/routes/transparency.py, which answer it with its problem document. It runs
inside ``RequestLimits``: rate limits and request bounds apply as before.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import anyio.to_thread

from api.limits import ASGIApp, Receive, Scope, Send
from engram.protocol.errors import EngramError
from ledger.tiles import TILE_WIDTH

if TYPE_CHECKING:
    from api.deps import Services

__all__ = ["FastReads", "TileCache"]

IMMUTABLE = b"public, max-age=31536000, immutable"
SHORT = b"public, max-age=10"
#: Bytes of tiles one worker keeps in memory; a tile larger than an eighth of it is not kept.
TILE_CACHE_BYTES = 64 << 20


def etag(data: bytes) -> bytes:
    """A strong entity tag: the quoted hex of the first 16 bytes of the content's SHA-256."""
    return b'"' + hashlib.sha256(data).hexdigest()[:32].encode() + b'"'


class TileCache:
    """Tiles by ``(level, n, width)`` (level -1: entry bundles), LRU, bounded in bytes."""

    def __init__(self, max_bytes: int = TILE_CACHE_BYTES) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[int, int, int], tuple[bytes, bytes]] = OrderedDict()
        self._bytes = 0
        self.max_bytes = max_bytes

    def get(self, key: tuple[int, int, int]) -> tuple[bytes, bytes] | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: tuple[int, int, int], data: bytes) -> tuple[bytes, bytes]:
        item = (data, etag(data))
        if len(data) > self.max_bytes // 8:
            return item
        with self._lock:
            if key not in self._items:
                self._items[key] = item
                self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, (old, _) = self._items.popitem(last=False)
                self._bytes -= len(old)
        return item


def _tile_key(path: str) -> tuple[int, int, int] | None:
    """``(level, n, width)`` of a well-formed tile path (level -1: entries), else None (the
    route then answers with the problem). The grammar is the route's (transparency.py)."""
    from api.routes.transparency import _tile_index

    rest = path[len("/tile/") :]
    head, sep, tail = rest.partition("/")
    if not sep:
        return None
    if head == "entries":
        level = -1
    elif len(head) == 1 and head in "01234567":
        level = int(head)
    else:
        return None
    try:
        n, width = _tile_index(tail)
    except EngramError:
        return None
    return level, n, width


def _load_tile(svc: Services, key: tuple[int, int, int]) -> bytes | None:
    level, n, width = key
    size = svc.ledger.size()
    reach = size if level < 0 else size >> (8 * level)
    if n * TILE_WIDTH + width > reach:
        return None  # beyond the checkpoint: the route answers 404
    return svc.ledger.tile(level, n, width)


def _cosigned(svc: Services) -> bytes:
    return svc.ledger.latest_cosigned_note()


class FastReads:
    """ASGI middleware: the successful public transparency reads (module docstring)."""

    def __init__(self, app: ASGIApp, *, tiles: TileCache | None = None) -> None:
        self.app = app
        self.tiles = tiles or TileCache()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD") or scope.get("query_string"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        svc: Services | None = getattr(scope["app"].state, "services", None) if "app" in scope else None
        if svc is None:
            await self.app(scope, receive, send)
            return
        try:
            if path == "/checkpoint":
                data = await anyio.to_thread.run_sync(_cosigned, svc)
                await _respond(scope, send, data, etag(data), b"text/plain; charset=utf-8", b"no-cache")
                return
            key = _tile_key(path) if path.startswith("/tile/") else None
            if key is not None:
                item = self.tiles.get(key)
                if item is None:
                    loaded = await anyio.to_thread.run_sync(functools.partial(_load_tile, svc, key))
                    item = None if loaded is None else self.tiles.put(key, loaded)
                if item is not None:
                    cache = IMMUTABLE if key[2] == TILE_WIDTH else SHORT
                    await _respond(scope, send, item[0], item[1], b"application/octet-stream", cache)
                    return
        except EngramError:
            pass  # e.g. the database is down: the route answers with the problem document
        await self.app(scope, receive, send)


async def _respond(scope: Scope, send: Send, data: bytes, tag: bytes, media: bytes, cache: bytes) -> None:
    headers = [(b"etag", tag), (b"cache-control", cache)]
    match = dict(scope.get("headers") or []).get(b"if-none-match")
    # If-None-Match compares weakly (RFC 9110 §13.1.2): a W/ prefix does not matter.
    if match is not None and (
        match.strip() == b"*" or tag in [t.strip().removeprefix(b"W/") for t in match.split(b",")]
    ):
        await send({"type": "http.response.start", "status": 304, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
        return
    headers += [(b"content-type", media), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else data})

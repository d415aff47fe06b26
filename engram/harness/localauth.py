"""Authentication for local listeners that act for an agent (``engram mcp --transport http``).

Trust role: a loopback port is reachable by every process on the host, including other
users' processes, which cannot read the agent's 0600 key file but could otherwise make the
listener write, erase and mint tokens as the agent. The listener
therefore requires a bearer token that only the key's owner can read:

* the token lives in a file beside the agent's key (``<key-file>.mcp-token``, or
  ``--token-file`` / ``$ENGRAM_MCP_TOKEN_FILE``), created at first start with 32 random
  bytes (43 characters of base64url) and mode 0600, never following a symlink; a later
  start reuses it, so clients configured once keep working;
* a token file that others may read (group or other permission bits), that is not a regular
  file, or whose content is not a well-formed token is refused (``mcp.token_file``): the
  listener does not start;
* every request must carry ``Authorization: Bearer <token>``, compared in constant time;
  anything else is answered 401 with ``WWW-Authenticate: Bearer`` before the MCP
  application sees a byte of the body.
"""

from __future__ import annotations

import base64
import hmac
import os
import re
import secrets
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from engram.protocol.errors import ConfigError

__all__ = ["BearerAuth", "TokenFileError", "default_token_file", "load_or_create_token"]

_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,256}")
_MAX_TOKEN_FILE = 1024

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def default_token_file(key_file: Path) -> Path:
    return key_file.with_name(key_file.name + ".mcp-token")


class TokenFileError(ConfigError):
    """The listener's token file is unsafe or unreadable; the listener does not start."""

    check = "mcp.token_file"


def _refuse(path: Path, why: str) -> TokenFileError:
    return TokenFileError(f"MCP token file {path}: {why}")


def load_or_create_token(path: Path) -> str:
    """The token in ``path``, created (0600, exclusively, no symlink followed) if absent."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    except OSError as e:
        raise _refuse(path, f"cannot be created ({e.strerror})") from e
    else:
        fresh = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=")
        with os.fdopen(fd, "wb") as f:
            f.write(fresh + b"\n")
            f.flush()
            os.fsync(f.fileno())
        return fresh.decode()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise _refuse(path, f"cannot be read ({e.strerror}; a symlink is never followed)") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "is not a regular file")
        if st.st_mode & 0o077:
            raise _refuse(
                path, f"is readable or writable by others (mode {st.st_mode & 0o777:o}); chmod 600 it"
            )
        raw = f.read(_MAX_TOKEN_FILE + 1)
    if len(raw) > _MAX_TOKEN_FILE:
        raise _refuse(path, f"is larger than {_MAX_TOKEN_FILE} bytes")
    token = raw.decode("ascii", "replace").strip()
    if not _TOKEN.fullmatch(token):
        raise _refuse(path, "does not hold a token (32-256 characters of A-Z a-z 0-9 _ -)")
    return token


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        values = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        if len(values) == 1 and hmac.compare_digest(values[0], self._expected):
            await self.app(scope, receive, send)
            return
        body = (
            b'{"type":"https://engram.dev/problems/unauthorized","title":"Unauthorized",'
            b'"status":401,"detail":"this MCP endpoint needs Authorization: Bearer <the token in its '
            b'token file>","check":"mcp.auth"}'
        )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/problem+json"),
                    (b"www-authenticate", b'Bearer realm="engram-mcp"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

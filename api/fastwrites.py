"""The agent-signed writes, served before the framework.

A Claude Code hook waits on ``POST .../turns`` before the user's prompt reaches the model,
and every memory write and COLD record takes the same path. Under load, FastAPI's routing,
dependency solving, two thread-pool hops (the endpoint, then the response validation) and
the response model's validation cost the event loop more than the route's own work (the
profile in docs/performance.md). This ASGI layer takes the successful requests of these
routes and does only what they need:

* ``POST /v1/agents/{agent}/sessions`` (open), ``.../sessions/{session}/turns``,
  ``.../memories`` and ``.../records``.

It is the framework's route, not a second implementation of it:

* it calls the very route functions (api/routes/memory.py) in the same thread pool;
* it parses the body as the framework does (``json.loads``, then the route's model through
  the same validation call FastAPI makes) and the path and header with the routes' patterns;
* it encodes the answer as FastAPI does for a route's response model (pydantic's
  ``dump_json`` by alias, ``application/json``, the route's status);
* a typed error gets the one problem document (api/problems.py), as from the route.

Whatever it is not sure of goes to the framework unchanged, body and all: another method or
path, a query string, a content type other than ``application/json``, a body that is not
JSON or not the model, a path segment or an ``Engram-Known-Size`` the patterns refuse, a
repeated header. So an error answer is always the framework's own (422 with its error list,
404, 405), and ``tests/integration/test_fast_writes.py`` holds the two paths to
byte-identical answers on generated requests. It runs inside ``RequestLimits`` and
``FairAdmission``: bounds, rate limits and fair admission apply as before.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from pydantic import BaseModel, TypeAdapter
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.requests import Request
from starlette.responses import Response

from api.limits import ASGIApp, Receive, Scope, Send, read_body, replaying
from api.problems import busy_handler, engram_error_handler
from api.routes.memory import open_session, turn, write_memory, write_record
from api.schemas import AGENT, SESSION, CountedReceiptOut, SessionOpened, SignedEvent, WriteOut
from engram.protocol.errors import EngramError

if TYPE_CHECKING:
    from api.deps import Services

__all__ = ["FastWrites"]

_AGENT = re.compile(AGENT.removeprefix("^").removesuffix("$"))
_SESSION = re.compile(SESSION.removeprefix("^").removesuffix("$"))
_KNOWN_SIZE = re.compile(r"0|[1-9][0-9]{0,15}")
_EVENT = TypeAdapter(SignedEvent)
_OUT: dict[type[BaseModel], TypeAdapter[Any]] = {
    model: TypeAdapter(model) for model in (CountedReceiptOut, SessionOpened, WriteOut)
}


def _route(path: str) -> tuple[Callable[..., BaseModel], dict[str, str]] | None:
    """The write route ``path`` names, with its path parameters, or None."""
    parts = path.split("/")
    # "", "v1", "agents", agent, tail...
    if len(parts) < 5 or parts[0] or parts[1] != "v1" or parts[2] != "agents":
        return None
    agent = parts[3]
    if not _AGENT.fullmatch(agent):
        return None
    tail = parts[4:]
    if tail == ["records"]:
        return write_record, {"agent": agent}
    if tail == ["memories"]:
        return write_memory, {"agent": agent}
    if tail == ["sessions"]:
        return open_session, {"agent": agent}
    if len(tail) == 3 and tail[0] == "sessions" and tail[2] == "turns" and _SESSION.fullmatch(tail[1]):
        return turn, {"agent": agent, "session": tail[1]}
    return None


def _known_size(scope: Scope) -> tuple[bool, int | None]:
    """(whether the fast path may take the request, the ``Engram-Known-Size`` it names)."""
    values = [v for k, v in scope.get("headers") or [] if k == b"engram-known-size"]
    if not values:
        return True, None
    if len(values) > 1:
        return False, None
    try:
        text = values[0].decode("ascii")
    except UnicodeDecodeError:
        return False, None
    if not _KNOWN_SIZE.fullmatch(text) or int(text) > 2**53:
        return False, None
    return True, int(text)


def _content_type_is_json(scope: Scope) -> bool:
    values = [v for k, v in scope.get("headers") or [] if k == b"content-type"]
    return len(values) == 1 and values[0] == b"application/json"


def _event(body: bytes) -> SignedEvent | None:
    """The body as the framework reads it, or None for anything it would refuse."""
    if not body:
        return None
    try:
        obj = json.loads(body)
        return _EVENT.validate_python(obj, from_attributes=True)
    except (ValueError, RecursionError):  # not JSON, or not the model: the framework answers
        return None


def _answer(
    route: Callable[..., BaseModel], params: dict[str, str], ev: SignedEvent, svc: Services, known: int | None
) -> bytes:
    """The route's work and its response model's encoding, in a worker thread."""
    out = route(ev=ev, svc=svc, known=known, **params)
    return _OUT[type(out)].dump_json(out, by_alias=True)


class FastWrites:
    """ASGI middleware: the successful agent-signed writes (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("query_string"):
            await self.app(scope, receive, send)
            return
        app_state = scope["app"].state if "app" in scope else None
        svc: Services | None = getattr(app_state, "services", None)
        found = _route(scope["path"])
        if svc is None or found is None or not getattr(app_state, "fast_writes", True):
            await self.app(scope, receive, send)
            return
        ok, known = _known_size(scope)
        if not ok or not _content_type_is_json(scope):
            await self.app(scope, receive, send)
            return
        body, tail = await read_body(receive)
        ev = None if tail is not None else _event(body)
        if ev is None:
            await self.app(scope, replaying(body, receive, tail), send)
            return
        route, params = found
        try:
            data = await anyio.to_thread.run_sync(functools.partial(_answer, route, params, ev, svc, known))
        except EngramError as e:  # the handlers the app registers for the routes' errors
            response: Response = await engram_error_handler(Request(scope, receive), e)
        except PoolTimeoutError as e:
            response = await busy_handler(Request(scope, receive), e)
        else:
            response = Response(content=data, media_type="application/json", status_code=201)
        await response(scope, receive, send)

"""The HTTP service: ``create_app(settings)`` builds a thin FastAPI layer over the ledger.

No SQL and no cryptography here: routes parse and bound their input with pydantic, call
:mod:`ledger`, and map Engram's typed errors to RFC 9457 problem details (api/problems.py).
Routers: transparency (C2SP checkpoint and tiles, proofs, auditor export), agents and
events, memory, sharing and the trust oracle. specs/http-api.md is the contract.
"""

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.auth import RequestAuthenticator
from api.deps import Services
from api.fairness import FairAdmission, KnownKeys
from api.fastpath import FastReads
from api.fastwrites import FastWrites
from api.limits import RequestLimits
from api.problems import (
    busy_handler,
    engram_error_handler,
    http_error_handler,
    unexpected_error_handler,
    validation_error_handler,
)
from api.ratelimit import HostBuckets, ProcessBuckets, RateLimiter
from api.routes import agents, memory, sharing, transparency
from api.settings import ApiSettings
from api.ui import html_errors, mount_ui
from engram.protocol.errors import EngramError
from ledger.compose import open_services
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.sequencer import HostSequencer
from ledger.witnessing import witness_checkpoint

__all__ = ["create_app"]

_log = logging.getLogger("engram.api")


def _buckets(settings: ApiSettings, shared: bool, name: str) -> HostBuckets | ProcessBuckets:
    """Where a limiter keeps its buckets: with the "host" scope, in a file of the service's
    home that every worker maps (api/ratelimit.py); an app built around a ledger passed in
    (tests, embedding) keeps them in the process."""
    if shared and settings.rate_limit_scope == "host":
        return HostBuckets(settings.home / f"ratelimit-{name}.bin")
    return ProcessBuckets()


def _services(
    settings: ApiSettings, ledger: Ledger, memory_service: MemoryService, *, shared: bool, known: KnownKeys
) -> Services:
    known.lookup = ledger.public_key  # fair admission's registry lookup (off the event loop)
    known.verified = ledger.verified  # what it verified, the append need not verify again
    return Services(
        settings=settings,
        ledger=ledger,
        memory=memory_service,
        auth=RequestAuthenticator(
            ledger.store, ledger.origin, window_s=settings.signature_window_s, known=known
        ),
        key_limits=RateLimiter(
            settings.rate_limit_per_minute,
            settings.rate_limit_burst,
            buckets=_buckets(settings, shared, "keys"),
        ),
        known=known,
    )


async def _witness_loop(ledger: Ledger, interval_s: float) -> None:
    """Submit each new checkpoint to the log's witnesses, at most once per interval (the
    witness network asks logs to batch: a cosignature per event would not scale)."""
    witnessed = -1
    while True:
        await asyncio.sleep(interval_s)
        try:
            size = (await anyio.to_thread.run_sync(ledger.latest_checkpoint)).size
            if size != witnessed:
                result = await anyio.to_thread.run_sync(witness_checkpoint, ledger)
                witnessed = size
                if not result.quorum:
                    _log.warning("witness quorum not met for size %d: %s", size, result.results)
        except asyncio.CancelledError:
            raise
        except Exception:  # a witness round must never take the service down
            _log.exception("witness round failed")


def create_app(
    settings: ApiSettings,
    *,
    ledger: Ledger | None = None,
    memory_service: MemoryService | None = None,
) -> FastAPI:
    """Build the service. ``ledger`` (and its ``memory_service``) may be given (tests);
    otherwise both are built from the settings by the composition root (ledger.compose)."""

    # Keys that verified a request or an event in this process: the identities fair
    # admission queues by; filled by the authenticator and the events
    # route, read by the middleware.
    known = KnownKeys()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if ledger is None:  # the service's settings were parsed with the API's, once (api.settings)
            opened = open_services(settings.service)
            app.state.services = _services(settings, opened.ledger, opened.memory, shared=True, known=known)
        svc: Services = app.state.services
        task = None
        if svc.ledger.witnesses is not None and settings.witness_interval_s > 0:
            task = asyncio.create_task(_witness_loop(svc.ledger, settings.witness_interval_s))
        # The projection follows the log in the background: a lagging projection catches
        # up at start-up, not inside the first memory request.
        stop = threading.Event()
        follower = threading.Thread(
            target=svc.memory.follow, args=(stop,), name="engram-projection", daemon=True
        )
        follower.start()
        try:
            yield
        finally:
            stop.set()
            if task is not None:
                task.cancel()
            await anyio.to_thread.run_sync(follower.join, 30)
            if ledger is None and isinstance(svc.ledger.sequencer, HostSequencer):
                svc.ledger.sequencer.close()  # forwarders fail over to the next sequencer

    app = FastAPI(
        title="Engram",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served below from the installed Swagger UI files: no CDN, works offline
        redoc_url=None,
        description=(
            "Verifiable agent memory: a signed RFC 9162 log of memory events, C2SP checkpoints "
            "and tiles, memory tiers as projections, bundles, share tokens and a trust oracle. "
            "Errors are RFC 9457 problem details. See specs/http-api.md."
        ),
    )
    if ledger is not None:
        app.state.services = _services(
            settings, ledger, memory_service or MemoryService(ledger), shared=False, known=known
        )
    # The web UI's routes answer errors as HTML pages (api.ui.html_errors), the API's as problems.
    app.add_exception_handler(EngramError, html_errors(engram_error_handler))
    app.add_exception_handler(RequestValidationError, html_errors(validation_error_handler))
    app.add_exception_handler(StarletteHTTPException, html_errors(http_error_handler))
    app.add_exception_handler(PoolTimeoutError, html_errors(busy_handler))
    app.add_exception_handler(Exception, html_errors(unexpected_error_handler))
    # Outermost first: RequestLimits (head, size, per-address limit), FairAdmission (a
    # bounded number of requests at once, round-robin across identities), then FastReads
    # and FastWrites (the transparency reads and the agent-signed writes, before routing).
    app.add_middleware(FastWrites)
    app.add_middleware(FastReads)
    app.add_middleware(
        FairAdmission,
        slots=settings.max_active_requests,
        per_identity=settings.max_active_per_identity,
        known=known,
        window_s=settings.signature_window_s,
    )
    app.add_middleware(
        RequestLimits,
        max_bytes=settings.max_request_bytes,
        per_client=RateLimiter(
            settings.rate_limit_per_client_per_minute,
            settings.rate_limit_per_client_burst,
            buckets=_buckets(settings, ledger is None, "clients"),
        ),
    )
    for r in (transparency.router, agents.router, memory.router, sharing.router):
        app.include_router(r)
    _offline_docs(app)
    mount_ui(app)
    return app


_INDEX = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Engram</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem}
code{background:#f3f3f3;padding:0 .2em}</style></head>
<body><h1>Engram</h1>
<p>Verifiable memory for AI agents: every memory event is a signed entry in one Merkle log.</p>
<ul>
<li><a href="/ui"><strong>Open the explorer</strong></a>: the log, agents and their track records,
a bundle verifier that runs in your browser, and your agent's memory</li>
<li><a href="/docs">API documentation</a> (the OpenAPI document, <a href="/openapi.json">/openapi.json</a>)</li>
<li><a href="/checkpoint">The latest signed checkpoint</a> and <a href="/v1/log/key">the log's verifier key</a>:
check them offline with <code>engram-verify</code></li>
<li><a href="/healthz">Health</a></li>
</ul></body></html>
"""


def _offline_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI 5 (it reads the OpenAPI 3.1 document FastAPI produces; the 4.x
    that ``swagger-ui-bundle`` carried showed "Unable to render this definition")
    from the ``swagger-ui-bundle-v2`` package's files, under ``/docs/static`` (FastAPI's
    default page loads them from a CDN, so it is blank offline). ``/``: a page of links."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs/static", StaticFiles(directory=swagger_ui_path), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Engram API",
            swagger_js_url="/docs/static/swagger-ui-bundle.js",
            swagger_css_url="/docs/static/swagger-ui.css",
            swagger_favicon_url="/docs/static/favicon-32x32.png",
        )

    @app.get("/", include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(_INDEX)

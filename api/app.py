"""The HTTP service: ``create_app(settings)`` builds a thin FastAPI layer over the ledger.

No SQL and no cryptography here: routes parse and bound their input with pydantic, call
:mod:`ledger`, and map Engram's typed errors to RFC 9457 problem details (api/problems.py).

This first slice serves the transparency endpoints (C2SP checkpoint and tlog-tiles, cacheable,
unauthenticated), proofs, the auditor's NDJSON export, and signed-event submission.
"""

import base64
import binascii
import hmac
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel, Field

from api.problems import engram_error_handler, problem, validation_error_handler
from api.settings import ApiSettings
from ledger.config import Settings, normalize_database_url
from ledger.errors import EngramError, MalformedError
from ledger.log import Ledger, Receipt, Submission
from ledger.tiles import TILE_WIDTH, entry_bundle, hash_tile

__all__ = ["create_app"]

IMMUTABLE = "public, max-age=31536000, immutable"
SHORT = "public, max-age=10"
_TILE_PATH = re.compile(r"((?:x\d{3}/)*\d{3})(?:\.p/(\d{1,3}))?")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise MalformedError(f"{what} is not base64", check="request.base64") from e
    return raw


class SignedEvent(BaseModel):
    envelope: str = Field(max_length=12_000, description="base64 of the canonical envelope bytes")
    signature: str = Field(max_length=100, description="base64 of the 64-byte Ed25519 signature")
    body: str = Field(max_length=100_000, description="base64 of the canonical body bytes")
    salt: str = Field(max_length=32, description="base64 of the 16-byte salt")


class EventBatch(BaseModel):
    events: list[SignedEvent] = Field(min_length=1, max_length=256)


class ReceiptOut(BaseModel):
    index: int
    timestamp_us: int
    leaf_hash: str
    leaf: str
    agent: str
    kind: str
    version: int
    checkpoint: str
    proof: list[str]


class Receipts(BaseModel):
    receipts: list[ReceiptOut]


class InclusionOut(BaseModel):
    index: int
    size: int
    leaf_hash: str
    root: str
    proof: list[str]
    checkpoint: str | None


class ConsistencyOut(BaseModel):
    old_size: int
    new_size: int
    old_root: str
    new_root: str
    proof: list[str]


def _receipt(r: Receipt) -> ReceiptOut:
    return ReceiptOut(
        index=r.index,
        timestamp_us=r.timestamp_us,
        leaf_hash=r.leaf_hash.hex(),
        leaf=_b64(r.leaf),
        agent=r.agent,
        kind=r.kind,
        version=r.version,
        checkpoint=r.checkpoint.decode("utf-8"),
        proof=[_b64(h) for h in r.proof.hashes],
    )


def _tile_index(rest: str) -> tuple[int, int]:
    m = _TILE_PATH.fullmatch(rest)
    if not m:
        raise MalformedError("not a tile path", check="request.tile")
    n = int("".join(g.lstrip("x") for g in m.group(1).split("/")))
    width = TILE_WIDTH if m.group(2) is None else int(m.group(2))
    if not 0 < width <= TILE_WIDTH or (m.group(2) is not None and width == TILE_WIDTH):
        raise MalformedError("partial tile width is 1-255", check="request.tile")
    return n, width


def create_app(settings: ApiSettings, *, ledger: Ledger | None = None) -> FastAPI:
    """Build the service. ``ledger`` may be given (tests); otherwise it is opened from settings."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if ledger is None:
            env = {"ENGRAM_HOME": str(settings.home)}
            if settings.database_url:
                env["ENGRAM_DATABASE_URL"] = normalize_database_url(settings.database_url)
            app.state.ledger = Ledger.open(Settings.from_env(env))
        yield

    app = FastAPI(title="Engram", version="0.1.0", lifespan=lifespan, description=__doc__)
    app.state.ledger = ledger
    app.add_exception_handler(EngramError, engram_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)

    @app.middleware("http")
    async def bound_request_size(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > settings.max_request_bytes):
            return problem(
                413,
                "too-large",
                "Request too large",
                f"requests are limited to {settings.max_request_bytes} bytes",
            )
        if length is None and request.method in ("POST", "PUT", "PATCH"):
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > settings.max_request_bytes:
                    return problem(
                        413,
                        "too-large",
                        "Request too large",
                        f"requests are limited to {settings.max_request_bytes} bytes",
                    )
        return await call_next(request)

    def get_ledger(request: Request) -> Ledger:
        led: Ledger = request.app.state.ledger
        return led

    LedgerDep = Annotated[Ledger, Depends(get_ledger)]

    def is_operator(authorization: Annotated[str | None, Header()] = None) -> bool:
        expected = settings.operator_token.get_secret_value()
        if not authorization or not authorization.startswith("Bearer ") or not expected:
            return False
        return hmac.compare_digest(authorization[7:].encode(), expected.encode())

    @app.get("/checkpoint", response_class=PlainTextResponse, tags=["transparency"])
    def checkpoint(led: LedgerDep) -> Response:
        """The latest signed checkpoint (C2SP tlog-checkpoint note)."""
        note = led.latest_checkpoint().note
        return Response(note, media_type="text/plain; charset=utf-8", headers={"Cache-Control": "no-cache"})

    @app.get(
        "/tile/entries/{rest:path}",
        tags=["transparency"],
        responses={200: {"content": {"application/octet-stream": {}}}},
    )
    def entries_tile(rest: str, led: LedgerDep) -> Response:
        """An entry bundle (uint16-length-prefixed leaves), full or partial."""
        n, width = _tile_index(rest)
        size = led.size()
        if n * TILE_WIDTH + width > size:
            return problem(404, "not-found", "No such tile", "that tile is beyond the latest checkpoint")
        data = entry_bundle(led.store, n, width)
        return Response(
            data,
            media_type="application/octet-stream",
            headers={"Cache-Control": IMMUTABLE if width == TILE_WIDTH else SHORT},
        )

    @app.get(
        "/tile/{level}/{rest:path}",
        tags=["transparency"],
        responses={200: {"content": {"application/octet-stream": {}}}},
    )
    def hash_tile_route(level: int, rest: str, led: LedgerDep) -> Response:
        """A hash tile of height 8 (C2SP tlog-tiles), full or partial."""
        if not 0 <= level < 8:
            return problem(404, "not-found", "No such tile", "tile levels are 0-7 for this log")
        n, width = _tile_index(rest)
        count = led.size() >> (8 * level)
        if n * TILE_WIDTH + width > count:
            return problem(404, "not-found", "No such tile", "that tile is beyond the latest checkpoint")
        data = hash_tile(led.store, level, n, width)
        return Response(
            data,
            media_type="application/octet-stream",
            headers={"Cache-Control": IMMUTABLE if width == TILE_WIDTH else SHORT},
        )

    @app.get("/v1/proofs/inclusion", response_model=InclusionOut, tags=["proofs"])
    def inclusion(
        led: LedgerDep,
        index: Annotated[int | None, Query(ge=0)] = None,
        leaf_hash: Annotated[str | None, Query(pattern="^[0-9a-f]{64}$")] = None,
        size: Annotated[int | None, Query(ge=1)] = None,
    ) -> InclusionOut:
        """Inclusion proof of a leaf (by index or leaf hash) in the tree of ``size`` (default: latest)."""
        if (index is None) == (leaf_hash is None):
            raise MalformedError("give exactly one of index and leaf_hash", check="request.query")
        if index is None:
            found = led.store.index_of_leaf_hash(bytes.fromhex(str(leaf_hash)))
            if found is None:
                raise MalformedError("no leaf has that hash", check="request.leaf_hash")
            index = found
        p = led.prove_inclusion(index, size)
        return InclusionOut(
            index=p.index,
            size=p.size,
            leaf_hash=p.leaf_hash.hex(),
            root=_b64(p.root),
            proof=[_b64(h) for h in p.hashes],
            checkpoint=None if p.checkpoint is None else p.checkpoint.decode("utf-8"),
        )

    @app.get("/v1/proofs/consistency", response_model=ConsistencyOut, tags=["proofs"])
    def consistency(
        led: LedgerDep, old: Annotated[int, Query(ge=0)], new: Annotated[int | None, Query(ge=0)] = None
    ) -> ConsistencyOut:
        """Consistency proof between two tree sizes."""
        p = led.prove_consistency(old, new)
        return ConsistencyOut(
            old_size=p.old_size,
            new_size=p.new_size,
            old_root=_b64(p.old_root),
            new_root=_b64(p.new_root),
            proof=[_b64(h) for h in p.hashes],
        )

    @app.get("/v1/log/entries", tags=["audit"], responses={200: {"content": {"application/x-ndjson": {}}}})
    def entries(
        led: LedgerDep, start: Annotated[int, Query(ge=0)] = 0, end: Annotated[int | None, Query(ge=0)] = None
    ) -> StreamingResponse:
        """Leaves ``[start, end)`` as NDJSON lines ``{index, leaf, leaf_hash}`` (at most 10,000)."""
        size = led.size()
        stop = size if end is None else min(end, size)
        if stop - start > 10_000:
            stop = start + 10_000

        def lines() -> Iterator[bytes]:
            for i, leaf, lh in led.store.leaves_with_hashes(start, max(start, stop)):
                yield (json.dumps({"index": i, "leaf": _b64(leaf), "leaf_hash": lh.hex()}) + "\n").encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @app.post("/v1/events", response_model=Receipts, status_code=201, tags=["events"])
    def submit(
        batch: EventBatch, led: LedgerDep, operator: Annotated[bool, Depends(is_operator)]
    ) -> Receipts:
        """Append signed events (authenticated by their signatures); answers after integration
        with receipts (index, timestamp, leaf, checkpoint, inclusion proof). Registering an
        agent key needs the operator token."""
        subs = [
            Submission(
                envelope=_unb64(e.envelope, "envelope"),
                signature=_unb64(e.signature, "signature"),
                body=_unb64(e.body, "body"),
                salt=_unb64(e.salt, "salt"),
            )
            for e in batch.events
        ]
        return Receipts(receipts=[_receipt(r) for r in led.append(subs, operator=operator)])

    @app.get("/healthz", tags=["operations"])
    def healthz(led: LedgerDep) -> dict[str, Any]:
        return {"ok": True, "size": led.size()}

    return app

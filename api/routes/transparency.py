"""C2SP transparency endpoints (unauthenticated, cacheable), proofs and the auditor export."""

import json
import re
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import PlainTextResponse, StreamingResponse

from api import convert
from api.deps import ServicesDep
from api.problems import problem, problem_responses
from api.schemas import HEX64, ConsistencyOut, HealthOut, InclusionBatchIn, InclusionBatchOut, InclusionOut
from engram.protocol.errors import MalformedError, NotFoundError
from ledger.tiles import TILE_WIDTH

router = APIRouter(responses=problem_responses())

IMMUTABLE = "public, max-age=31536000, immutable"
SHORT = "public, max-age=10"
# ASCII digits only; at most 7 "x" groups: tile indices of a log of up to 2^63 entries
_TILE_PATH = re.compile(r"((?:x[0-9]{3}/){0,7}[0-9]{3})(?:\.p/([0-9]{1,3}))?")
MAX_EXPORT = 10_000
_BINARY: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "tile bytes"},
    **problem_responses(404),
}


def _tile_index(rest: str) -> tuple[int, int]:
    m = _TILE_PATH.fullmatch(rest)
    if not m:
        raise MalformedError("not a tile path", check="request.tile")
    n = int("".join(g.lstrip("x") for g in m.group(1).split("/")))
    width = TILE_WIDTH if m.group(2) is None else int(m.group(2))
    if not 0 < width <= TILE_WIDTH or (m.group(2) is not None and width == TILE_WIDTH):
        raise MalformedError("partial tile width is 1-255", check="request.tile")
    return n, width


@router.get("/checkpoint", response_class=PlainTextResponse, tags=["transparency"])
def checkpoint(svc: ServicesDep) -> Response:
    """The latest signed checkpoint (C2SP tlog-checkpoint note), followed by the witness
    cosignatures (c2sp.org/tlog-cosignature) collected for it so far."""
    note = svc.ledger.cosigned_note(svc.ledger.latest_checkpoint())
    return Response(note, media_type="text/plain; charset=utf-8", headers={"Cache-Control": "no-cache"})


@router.get("/v1/log/key", response_class=PlainTextResponse, tags=["transparency"])
def log_key(svc: ServicesDep) -> Response:
    """The log's C2SP verifier key. Pin it out of band: a client that takes it from the
    server it is checking trusts that server on first use."""
    return Response(svc.ledger.vkey + "\n", media_type="text/plain; charset=utf-8")


@router.get("/tile/entries/{rest:path}", tags=["transparency"], responses=_BINARY)
def entries_tile(rest: str, svc: ServicesDep) -> Response:
    """An entry bundle (uint16-length-prefixed leaves), full or partial (C2SP tlog-tiles)."""
    n, width = _tile_index(rest)
    if n * TILE_WIDTH + width > svc.ledger.size():
        return problem(404, "not-found", "No such tile", "that tile is beyond the latest checkpoint")
    data = svc.ledger.tile(-1, n, width)
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Cache-Control": IMMUTABLE if width == TILE_WIDTH else SHORT},
    )


@router.get("/tile/{level}/{rest:path}", tags=["transparency"], responses=_BINARY)
def hash_tile_route(level: int, rest: str, svc: ServicesDep) -> Response:
    """A hash tile of height 8 (C2SP tlog-tiles), full or partial."""
    if not 0 <= level < 8:
        return problem(404, "not-found", "No such tile", "tile levels are 0-7 for this log")
    n, width = _tile_index(rest)
    if n * TILE_WIDTH + width > svc.ledger.size() >> (8 * level):
        return problem(404, "not-found", "No such tile", "that tile is beyond the latest checkpoint")
    data = svc.ledger.tile(level, n, width)
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Cache-Control": IMMUTABLE if width == TILE_WIDTH else SHORT},
    )


@router.get("/v1/proofs/inclusion", tags=["proofs"], responses=problem_responses(404, 422))
def inclusion(
    svc: ServicesDep,
    index: Annotated[int | None, Query(ge=0, le=2**53)] = None,
    leaf_hash: Annotated[str | None, Query(pattern=HEX64)] = None,
    size: Annotated[int | None, Query(ge=1, le=2**53)] = None,
) -> InclusionOut:
    """Inclusion proof of a leaf (by index or leaf hash) in the tree of ``size`` (default: latest)."""
    if (index is None) == (leaf_hash is None):
        raise MalformedError("give exactly one of index and leaf_hash", check="request.query")
    if index is None:
        found = svc.ledger.index_of_leaf_hash(bytes.fromhex(str(leaf_hash)))
        if found is None:
            raise NotFoundError("no leaf has that hash", check="request.leaf_hash")
        index = found
    return convert.inclusion(svc.ledger.prove_inclusion(index, size))


@router.post("/v1/proofs/inclusion/batch", tags=["proofs"], responses=problem_responses())
def inclusion_batch(svc: ServicesDep, req: InclusionBatchIn) -> InclusionBatchOut:
    """Inclusion proofs of up to 256 distinct leaves in one tree (default: the latest
    checkpoint's), computed together: one read for what the caches do not hold, each proof
    checked before it is returned."""
    if len(set(req.indices)) != len(req.indices):
        raise MalformedError("indices must be distinct", check="request.indices")
    size = svc.ledger.size() if req.size is None else req.size
    return InclusionBatchOut(
        proofs=[convert.inclusion(p) for p in svc.ledger.prove_inclusion_batch(req.indices, size)]
    )


@router.get("/v1/proofs/consistency", tags=["proofs"], responses=problem_responses(404, 422))
def consistency(
    svc: ServicesDep,
    old: Annotated[int, Query(ge=0, le=2**53)],
    new: Annotated[int | None, Query(ge=0, le=2**53)] = None,
) -> ConsistencyOut:
    """Consistency proof between two tree sizes."""
    p = svc.ledger.prove_consistency(old, new)
    return ConsistencyOut(
        old_size=p.old_size,
        new_size=p.new_size,
        old_root=convert.b64(p.old_root),
        new_root=convert.b64(p.new_root),
        proof=[convert.b64(h) for h in p.hashes],
    )


@router.get("/v1/log/entries", tags=["audit"], responses={200: {"content": {"application/x-ndjson": {}}}})
def entries(
    svc: ServicesDep,
    start: Annotated[int, Query(ge=0, le=2**53)] = 0,
    end: Annotated[int | None, Query(ge=0, le=2**53)] = None,
) -> StreamingResponse:
    """Leaves ``[start, end)`` as NDJSON lines ``{index, leaf, leaf_hash}`` (at most 10,000
    per request; page with ``start``)."""
    size = svc.ledger.size()
    stop = min(size if end is None else min(end, size), start + MAX_EXPORT)

    def lines() -> Iterator[bytes]:
        for i, leaf, lh in svc.ledger.leaves_with_hashes(start, max(start, stop)):
            yield (json.dumps({"index": i, "leaf": convert.b64(leaf), "leaf_hash": lh.hex()}) + "\n").encode()

    return StreamingResponse(lines(), media_type="application/x-ndjson")


@router.get("/healthz", tags=["operations"])
def healthz(svc: ServicesDep) -> HealthOut:
    """Liveness, the log's size, and what is wrong (by check name; the details are in the
    service's log, not shown to anyone who asks)."""
    problems = sorted(svc.ledger.problems())
    return HealthOut(ok=not problems, size=svc.ledger.size(), problems=problems)

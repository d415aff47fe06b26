"""Embedding vectors beside the memory projection: the embed step and the search cache.

Vectors are derived data, never signed: the embedding of an item's text by the configured
:class:`~ledger.memory.embed.Embedder`, tagged with its ``model_id`` and with the item's
``norm_hash`` (a vector whose hash no longer matches its item is stale and is ignored).

* **Embed step** (:meth:`VectorIndex.embed_pending`), after the projection has applied the
  log: the items created by entries ``embedded_size .. applied_size`` (an item's ``idx`` is
  the entry that created it) are embedded outside any transaction (an embedder may be a
  network call), then written with the cursor's ``embedded_size`` advanced in one short
  transaction. A failing embedder never fails the write that triggered the step: the range
  stays pending, the error is reported to recall (which degrades to the other signals and
  says so), and the step is retried after a back-off. A different ``model_id`` than the one
  the cursor names deletes every vector and re-embeds from 0: dimensions never mix.
* **Search cache** (:meth:`VectorIndex.search`): per agent, two float32 matrices (memories,
  and the records tier of session turns), loaded incrementally by ``seq`` and reloaded when
  ``mem_cursor.vec_generation`` moves (rows were deleted: rebuild, erasure, model change).
  A query is one matrix-vector product and a partial sort: brute-force cosine is exact, and
  at per-agent scale (10^5 items: 100 MB, a few ms) needs no approximate index.
* **Stored compactly**: a vector is written as little-endian float16 (:func:`encode_vector`,
  half the bytes of float32; a unit vector's cosine moves by under 1e-3) and read back as
  float32. Rows an older version wrote as float32 are still read (:func:`decode_vector` tells
  the two by their length), so an existing log keeps its vectors and recalls as before;
  they become float16 when their item is embedded again (a rebuild, a model change).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, bindparam, text

from engram.protocol.errors import EngramError
from ledger.memory.embed import Embedder, Vectors
from ledger.memory.state import RECORD
from ledger.storage.db import WRITE_OPTION

__all__ = ["VectorHit", "VectorIndex", "decode_vector", "encode_vector"]

log = logging.getLogger(__name__)

#: Items embedded per embedder call during the embed step.
EMBED_BATCH = 512
#: After a failure, the embed step is not retried for this long (seconds): writes do not
#: each wait for a timeout while an embedding endpoint is down.
RETRY_AFTER_S = 30.0

_CURSOR = text(
    "SELECT applied_size, vec_generation, embedded_size, embedded_model FROM mem_cursor WHERE id = 1"
)
_NEW_ITEMS = text(
    "SELECT agent, ref, tier, norm_hash, content FROM mem_items "
    "WHERE idx >= :lo AND idx < :hi AND status != 'erased' AND content != '' ORDER BY idx, pos"
)
_UPSERT = text(
    "INSERT INTO mem_vectors (agent, ref, record, model, norm_hash, vec, seq) "
    "VALUES (:agent, :ref, :record, :model, :norm_hash, :vec, :seq) "
    "ON CONFLICT (agent, ref) DO UPDATE SET record = excluded.record, model = excluded.model, "
    "norm_hash = excluded.norm_hash, vec = excluded.vec, seq = excluded.seq"
)
_ADVANCE = text(
    "UPDATE mem_cursor SET embedded_size = :hi WHERE id = 1 AND embedded_size < :hi "
    "AND embedded_model = :model AND vec_generation = :gen"
)
_RESET = text(
    "UPDATE mem_cursor SET embedded_size = 0, embedded_model = :model, "
    "vec_generation = vec_generation + 1 WHERE id = 1"
)
_LOAD = text(
    "SELECT ref, record, vec FROM mem_vectors WHERE agent = :agent AND model = :model "
    "AND seq > :lo AND seq <= :hi"
)


def encode_vector(v: Any) -> bytes:
    """A vector's stored bytes: little-endian float16."""
    import numpy as np

    return np.ascontiguousarray(v, dtype="<f2").tobytes()


def decode_vector(blob: bytes, dim: int) -> Any | None:
    """A stored vector as float32: float16 (this version) or float32 (older rows), told
    apart by length; None for any other length (never mix dimensions)."""
    import numpy as np

    if len(blob) == 2 * dim:
        return np.frombuffer(blob, dtype="<f2").astype(np.float32)
    if len(blob) == 4 * dim:
        return np.frombuffer(blob, dtype="<f4")
    return None


@dataclass(frozen=True, slots=True)
class VectorHit:
    ref: str
    similarity: float


@dataclass(slots=True)
class _Matrix:
    refs: list[str] = field(default_factory=list)
    rows: Any = None  # float32 (capacity, dim)
    n: int = 0

    def add(self, ref: str, vec: Any, dim: int) -> None:
        import numpy as np

        if self.rows is None:
            self.rows = np.zeros((64, dim), dtype=np.float32)
        if self.n == self.rows.shape[0]:
            grown = np.zeros((self.n * 2, dim), dtype=np.float32)
            grown[: self.n] = self.rows
            self.rows = grown
        self.rows[self.n] = vec
        self.refs.append(ref)
        self.n += 1

    def top(self, q: Any, k: int) -> list[VectorHit]:
        import numpy as np

        if self.n == 0:
            return []
        sims = self.rows[: self.n] @ q
        k = min(k, self.n)
        idx = np.argpartition(-sims, k - 1)[:k]
        idx = idx[np.lexsort((idx, -sims[idx]))]  # best first; ties by insertion order
        return [VectorHit(self.refs[i], float(sims[i])) for i in idx]


@dataclass(slots=True)
class _AgentCache:
    generation: int
    upto: int
    model: str
    memories: _Matrix = field(default_factory=_Matrix)
    records: _Matrix = field(default_factory=_Matrix)
    seen: set[str] = field(default_factory=set)


class VectorIndex:
    """The embed step and the per-agent search cache over ``mem_vectors`` (see module doc)."""

    def __init__(self, engine: Engine, embedder: Embedder) -> None:
        self.engine = engine
        self.embedder = embedder
        self.last_error: str | None = None
        self._failed_at = 0.0
        self._lock = threading.Lock()
        self._caches: dict[str, _AgentCache] = {}

    # -- the embed step -------------------------------------------------------------------

    def embed_pending(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed the items of entries the projection applied but the index has not; return
        how many items were embedded. Never raises for an embedder failure (see module doc)."""
        if self.last_error is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
            return 0
        model = self.embedder.model_id
        done = 0
        try:
            while True:
                with self.engine.connect() as conn:
                    applied, gen, embedded, cur_model = conn.execute(_CURSOR).one()
                if cur_model != model:
                    self._reset(model)
                    continue
                if embedded >= applied:
                    self.last_error = None
                    return done
                hi = min(applied, embedded + 4 * EMBED_BATCH)
                with self.engine.connect() as conn:
                    rows = conn.execute(_NEW_ITEMS, {"lo": embedded, "hi": hi}).all()
                vecs = self._embed([r.content for r in rows])
                self._write(rows, vecs, model=model, gen=gen, hi=hi)
                done += len(rows)
                if progress is not None:
                    progress(hi, applied)
        except EngramError as e:
            self.last_error = str(e)
            self._failed_at = time.monotonic()
            log.warning("embedding failed; recall ranks without vectors until it recovers: %s", e)
            return done

    def _embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        out = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        for start in range(0, len(texts), EMBED_BATCH):
            chunk = texts[start : start + EMBED_BATCH]
            vecs = self.embedder.embed(chunk)
            if vecs.shape != (len(chunk), self.embedder.dim):
                raise _ShapeError(f"embedder returned shape {vecs.shape} for {len(chunk)} texts")
            out[start : start + len(chunk)] = vecs
        return out

    def _write(self, rows: Sequence[Any], vecs: Vectors, *, model: str, gen: int, hi: int) -> None:
        params = [
            {
                "agent": r.agent,
                "ref": r.ref,
                "record": r.tier == RECORD,
                "model": model,
                "norm_hash": r.norm_hash,
                "vec": encode_vector(v),
                "seq": hi,
            }
            for r, v in zip(rows, vecs, strict=True)
        ]
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                # Only if nobody reset or advanced the range meanwhile (a rebuild, a model
                # change, another process's embed step): else the rows are not written.
                moved = conn.execute(_ADVANCE, {"hi": hi, "model": model, "gen": gen}).rowcount
                if moved and params:
                    conn.execute(_UPSERT, params)

    def _reset(self, model: str) -> None:
        with self.engine.connect() as conn:
            conn = conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                conn.execute(text("DELETE FROM mem_vectors"))
                conn.execute(_RESET, {"model": model})
        log.info("embedding model is now %s: re-embedding every item", model)

    # -- search ---------------------------------------------------------------------------

    def search(self, agent: str, query: str, k: int) -> tuple[list[VectorHit], list[VectorHit]]:
        """(memory hits, record hits), best first, at most ``k`` each."""
        q = self.embedder.embed([query])[0]
        with self._lock:
            cache = self._refresh(agent)
            return cache.memories.top(q, k), cache.records.top(q, k)

    def _refresh(self, agent: str) -> _AgentCache:
        model = self.embedder.model_id
        with self.engine.connect() as conn:
            _, gen, embedded, _ = conn.execute(_CURSOR).one()
            cache = self._caches.get(agent)
            if cache is None or cache.generation != gen or cache.model != model or cache.upto > embedded:
                cache = _AgentCache(generation=gen, upto=0, model=model)
                self._caches[agent] = cache
            if embedded > cache.upto:
                rows = conn.execute(_LOAD, {"agent": agent, "model": model, "lo": cache.upto, "hi": embedded})
                dim = self.embedder.dim
                for r in rows:
                    if r.ref in cache.seen:
                        continue  # re-written by a later range (same text): keep the first
                    vec = decode_vector(bytes(r.vec), dim)
                    if vec is None:
                        continue  # never mix dimensions
                    cache.seen.add(r.ref)
                    (cache.records if r.record else cache.memories).add(r.ref, vec, dim)
                cache.upto = embedded
        return cache


class _ShapeError(EngramError):
    """The embedder answered with vectors of the wrong shape."""


#: Deleting an item's vector (erasure) bumps the generation so caches drop it.
DELETE_VECTOR = text("DELETE FROM mem_vectors WHERE agent = :agent AND ref IN :refs").bindparams(
    bindparam("refs", expanding=True)
)
BUMP_GENERATION = text("UPDATE mem_cursor SET vec_generation = vec_generation + 1 WHERE id = 1")

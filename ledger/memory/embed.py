"""Embedders: text -> unit vectors for recall's semantic ranking (derived data, never signed).

Vectors are a projection of the log like the memory tables: computed from item text,
stored beside the projection, tagged with :attr:`Embedder.model_id` so a model change is
seen and re-embedded, and never part of a signed body or a digest an auditor compares.

* :class:`OpenAIEmbedder`: an OpenAI-compatible ``/embeddings`` endpoint, its reply
  validated strictly (one vector per input, by index, of the configured dimension, finite
  numbers); any deviation is an :class:`EmbedderError`, never a half result.
* :class:`WordLlamaEmbedder` (default): the 256-dimension static embedding that the
  ``wordllama`` wheel ships (weights and tokenizer inside the wheel, so it works offline on
  a fresh machine). Its own loader looks for the tokenizer under ``tokenizer/`` while the
  wheel installs it under ``tokenizers/`` and then tries to download it; we load the two
  files directly instead (and do not import ``wordllama.inference``, which reconfigures the
  root logger on import). Encoding is the model's: token vectors, mean-pooled over the
  attention mask, L2-normalised. Both files are pinned by SHA-256 (:data:`WORDLLAMA_SHA256`)
  and checked when the model loads: other bytes under the same names (another release, a
  tampered install) are an :class:`EmbedderError` naming ``embedder.weights_hash``, never
  vectors silently from another model. Issue 42 measured the packaged embedders that carry
  their weights (``bench/bench_embedders.py``, docs/benchmarks.md) and kept this one.

Every embedder returns float32 arrays of shape ``(len(texts), dim)`` whose rows have unit
norm (a text with no known token gets the zero vector, which matches nothing).
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engram import install_hint
from engram.protocol.errors import EngramError, MalformedError
from engram.protocol.files import loads_bounded
from ledger.outbound import OutboundError, post_json

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]
else:
    Vectors = Any

__all__ = [
    "WORDLLAMA_SHA256",
    "Embedder",
    "EmbedderError",
    "OpenAIEmbedder",
    "Vectors",
    "WordLlamaEmbedder",
    "unit_rows",
    "verify_pinned",
]

#: Longest text embedded (characters); longer texts are embedded by their first part.
MAX_EMBED_CHARS = 8000


class EmbedderError(EngramError):
    """The embedder failed or answered outside its contract; recall degrades without it.

    ``check`` names the failed check when there is one (``embedder.weights_hash``)."""

    def __init__(self, message: str, *, check: str | None = None) -> None:
        self.check = check
        super().__init__(message if check is None else f"[{check}] {message}")


class Embedder(Protocol):
    """Text -> unit vectors. ``model_id`` names model, version and dimension."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def unit_rows(m: Vectors) -> Vectors:
    """``m`` with every row scaled to unit norm (zero rows stay zero)."""
    import numpy as np

    norms = np.linalg.norm(m, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    out: Vectors = (m / norms).astype(np.float32, copy=False)
    return out


_WL_CONFIG = "l2_supercat"
_WL_DIM = 256
#: SHA-256 of the files the model is loaded from (wordllama 0.4.0.post1's wheel), by name.
WORDLLAMA_SHA256 = {
    f"{_WL_CONFIG}_{_WL_DIM}.safetensors": "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
    f"{_WL_CONFIG}_tokenizer_config.json": "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
}


@dataclass(slots=True)
class WordLlamaEmbedder:
    """The ``wordllama`` l2_supercat 256-d static embedding, loaded from the installed wheel."""

    batch_size: int = 256
    #: The pinned hashes checked at load (file name -> SHA-256 hex).
    pins: dict[str, str] = field(default_factory=lambda: dict(WORDLLAMA_SHA256))
    _model: tuple[Any, Any] | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def model_id(self) -> str:
        return f"wordllama/{_WL_CONFIG}@{_version()}:{_WL_DIM}"

    @property
    def dim(self) -> int:
        return _WL_DIM

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._model is None:
                self._model = _load_wordllama(self.pins)
            return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        table, tokenizer = self._load()
        out = np.zeros((len(texts), _WL_DIM), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = [t[:MAX_EMBED_CHARS] for t in texts[start : start + self.batch_size]]
            enc = tokenizer.encode_batch(chunk, is_pretokenized=False, add_special_tokens=False)
            width = max((len(e.ids) for e in enc), default=0)
            if width == 0:
                continue
            ids = np.zeros((len(enc), width), dtype=np.int64)
            mask = np.zeros((len(enc), width), dtype=np.float32)
            for row, e in enumerate(enc):
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = 1.0
            np.clip(ids, 0, table.shape[0] - 1, out=ids)
            summed = (table[ids] * mask[:, :, None]).sum(axis=1)
            counts = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
            out[start : start + len(chunk)] = unit_rows(summed / counts)
        return out


@functools.cache
def _version() -> str:
    # Cached: recall asks for the model id on every query, and reading the installed
    # package's metadata costs about 1.5 ms.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wordllama")
    except PackageNotFoundError:
        return "missing"


def verify_pinned(path: Path, pins: dict[str, str]) -> bytes:
    """The bytes of ``path``, read once, after their SHA-256 matched the pin for its name;
    an unpinned name or other bytes are an :class:`EmbedderError` (``embedder.weights_hash``)."""
    import hashlib

    want = pins.get(path.name)
    if want is None:
        raise EmbedderError(f"{path.name} has no pinned SHA-256", check="embedder.weights_hash")
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise EmbedderError(
            f"{path} has SHA-256 {got}, not the pinned {want}: refusing to load another model's weights",
            check="embedder.weights_hash",
        )
    return data


def _load_wordllama(pins: dict[str, str]) -> tuple[Any, Any]:
    # The package is located, not imported: importing it configures the root logger.
    spec = importlib.util.find_spec("wordllama")
    try:
        import numpy as np
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - a server install always has them
        raise EmbedderError(f"the wordllama embedder is not installed ({e}); {install_hint('server')}") from e
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"the wordllama embedder is not installed; {install_hint('server')}")
    pkg = Path(next(iter(spec.submodule_search_locations)))
    weights = pkg / "weights" / f"{_WL_CONFIG}_{_WL_DIM}.safetensors"
    tok_file = next(
        (
            p
            for p in (
                pkg / "tokenizers" / f"{_WL_CONFIG}_tokenizer_config.json",
                pkg / "tokenizer" / f"{_WL_CONFIG}_tokenizer_config.json",
            )
            if p.is_file()
        ),
        None,
    )
    if not weights.is_file() or tok_file is None:
        raise EmbedderError(f"the wordllama wheel at {pkg} lacks its weights or tokenizer file")
    # Both files are read once, hashed, and parsed from the bytes that were hashed.
    tokenizer = Tokenizer.from_str(verify_pinned(tok_file, pins).decode("utf-8"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    from safetensors.numpy import load as load_tensors

    table = np.ascontiguousarray(
        load_tensors(verify_pinned(weights, pins))["embedding.weight"], dtype=np.float32
    )
    return table, tokenizer


@dataclass(slots=True)
class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {url}/embeddings`` endpoint (configured like the distiller)."""

    url: str
    model: str
    dimensions: int
    api_key: str | None = None
    timeout_s: float = 10.0
    batch_size: int = 128
    max_reply_bytes: int = 64 * 1024 * 1024

    @property
    def model_id(self) -> str:
        return f"openai:{self.model}:{self.dimensions}"

    @property
    def dim(self) -> int:
        return self.dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = [t[:MAX_EMBED_CHARS] for t in texts[start : start + self.batch_size]]
            out[start : start + len(chunk)] = self._call(chunk)
        return out

    def _call(self, chunk: Sequence[str]) -> Vectors:
        import math

        import numpy as np

        if not self.url.startswith(("http://", "https://")):
            raise EmbedderError(f"embedder URL must be http(s): {self.url}")
        try:  # timeout_s bounds the whole call, not each read
            data = post_json(
                self.url.rstrip("/") + "/embeddings",
                {"model": self.model, "input": list(chunk)},
                api_key=self.api_key,
                deadline_s=self.timeout_s,
                max_bytes=self.max_reply_bytes,
                what="embeddings",
            )
        except OutboundError as e:
            raise EmbedderError(str(e).split("] ", 1)[-1]) from e
        if len(data) > self.max_reply_bytes:
            raise EmbedderError("embeddings reply is too large")
        try:
            reply = loads_bounded(data)
            items = reply["data"]
        except (MalformedError, ValueError, KeyError, TypeError) as e:
            raise EmbedderError(f"embeddings reply is not JSON with a data list: {e}") from e
        if not isinstance(items, list) or len(items) != len(chunk):
            raise EmbedderError(f"embeddings reply must hold exactly {len(chunk)} vectors")
        rows: dict[int, list[float]] = {}
        for item in items:
            if not isinstance(item, dict) or type(item.get("index")) is not int:
                raise EmbedderError("each embedding must be an object with an integer index")
            vec = item.get("embedding")
            if not isinstance(vec, list) or len(vec) != self.dimensions:
                raise EmbedderError(f"each embedding must be a list of {self.dimensions} numbers")
            if not all(type(x) in (int, float) and math.isfinite(x) for x in vec):
                raise EmbedderError("embeddings must hold finite numbers only")
            rows[item["index"]] = vec
        if sorted(rows) != list(range(len(chunk))):
            raise EmbedderError("embedding indices must be 0..n-1, each once")
        return unit_rows(np.array([rows[i] for i in range(len(chunk))], dtype=np.float32))

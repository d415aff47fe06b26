"""Embedders (issue 11): the offline default and the OpenAI-compatible adapter against a fake
endpoint on loopback; every malformed reply is an EmbedderError, never a half result."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from ledger.compose import embedder
from ledger.config import Settings
from ledger.memory.embed import (
    WORDLLAMA_SHA256,
    EmbedderError,
    OpenAIEmbedder,
    WordLlamaEmbedder,
    verify_pinned,
)
from ledger.memory.vectors import decode_vector, encode_vector


def test_wordllama_is_deterministic_unit_and_semantic() -> None:
    e = WordLlamaEmbedder()
    texts = ["my dog loves the park", "a puppy playing outside", "quarterly tax filing deadline", ""]
    v = e.embed(texts)
    assert v.shape == (4, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert not v[3].any()  # no token: the zero vector, which matches nothing
    assert v[0] @ v[1] > v[0] @ v[2]
    assert np.array_equal(e.embed(texts), v)
    assert e.model_id.endswith(":256")


def test_wordllama_refuses_weights_other_than_the_pinned_ones() -> None:
    """Issue 42: the model's files are checked against their pinned SHA-256 at load; other
    bytes are a typed error naming the check, and no vector is made."""
    name = next(n for n in WORDLLAMA_SHA256 if n.endswith(".safetensors"))
    e = WordLlamaEmbedder(pins={**WORDLLAMA_SHA256, name: "0" * 64})
    with pytest.raises(EmbedderError, match=r"^\[embedder\.weights_hash\] .*not the pinned") as info:
        e.embed(["hello"])
    assert info.value.check == "embedder.weights_hash"


def test_verify_pinned_reads_only_pinned_bytes(tmp_path: Any) -> None:
    f = tmp_path / "model.bin"
    f.write_bytes(b"weights")
    import hashlib

    good = hashlib.sha256(b"weights").hexdigest()
    assert verify_pinned(f, {"model.bin": good}) == b"weights"
    with pytest.raises(EmbedderError, match=r"\[embedder\.weights_hash\] .*no pinned"):
        verify_pinned(f, {})
    f.write_bytes(b"weightz")
    with pytest.raises(EmbedderError, match=r"\[embedder\.weights_hash\]"):
        verify_pinned(f, {"model.bin": good})


def test_vectors_are_stored_as_float16_and_float32_rows_still_read() -> None:
    v = WordLlamaEmbedder().embed(["my dog loves the park"])[0]
    blob = encode_vector(v)
    assert len(blob) == 2 * v.shape[0]
    back = decode_vector(blob, v.shape[0])
    assert back is not None and back.dtype == np.float32 and abs(float(back @ v) - 1.0) < 1e-3
    old = decode_vector(v.astype("<f4").tobytes(), v.shape[0])
    assert old is not None and np.array_equal(old, v)
    assert decode_vector(blob[:-2], v.shape[0]) is None  # another dimension is never mixed in


class _Fake:
    """What the fake endpoint answers: a function of the request body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer = self.good

    @staticmethod
    def good(body: dict[str, Any]) -> bytes:
        data = [
            {"index": i, "embedding": [float(len(t)), 1.0, 0.0, 0.0]} for i, t in enumerate(body["input"])
        ]
        return json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()


@pytest.fixture
def fake() -> Iterator[tuple[_Fake, str]]:
    state = _Fake()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            out = state.answer(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def test_openai_adapter_happy_path(fake: tuple[_Fake, str]) -> None:
    state, url = fake
    e = OpenAIEmbedder(url=url, model="e5-small", dimensions=4, api_key="sk-test", batch_size=128)
    texts = [f"text {'x' * i}" for i in range(300)]
    v = e.embed(texts)
    assert v.shape == (300, 4)
    assert [len(r["input"]) for r in state.requests] == [128, 128, 44]  # batched
    assert {(r["path"], r["auth"], r["model"]) for r in state.requests} == {
        ("/v1/embeddings", "Bearer sk-test", "e5-small")
    }
    want = np.array([[len(t), 1.0, 0, 0] for t in texts], dtype=np.float32)
    assert np.allclose(v, want / np.linalg.norm(want, axis=1, keepdims=True))  # order restored by index
    assert e.model_id == "openai:e5-small:4"


def _data(vecs: list[Any], idx: list[Any] | None = None) -> bytes:
    idx = list(range(len(vecs))) if idx is None else idx
    return json.dumps(
        {"data": [{"index": i, "embedding": v} for i, v in zip(idx, vecs, strict=True)]}
    ).encode()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda b: b"not json", "not JSON"),
        (lambda b: b'{"vectors": []}', "data list"),
        (lambda b: _data([[1, 0, 0, 0]] * (len(b["input"]) + 1)), "exactly"),
        (lambda b: _data([[1, 0, 0]] * len(b["input"])), "list of 4 numbers"),
        (lambda b: _data([[1, 0, 0, "x"]] * len(b["input"])), "finite numbers"),
        (lambda b: b'{"data": [{"index": 0, "embedding": [1, 0, 0, NaN]}]}', "finite numbers"),
        (lambda b: _data([[1, 0, 0, 0]] * 2, [0, 0]), "indices"),
        (lambda b: b"x" * 2048, "too large"),
    ],
)
def test_openai_adapter_refuses_malformed_replies(fake: tuple[_Fake, str], answer: Any, message: str) -> None:
    state, url = fake
    state.answer = answer
    e = OpenAIEmbedder(url=url, model="m", dimensions=4, max_reply_bytes=1024)
    texts = ["one"] if b"NaN" in answer({"input": ["one"]}) else ["one", "two"]
    with pytest.raises(EmbedderError, match=message):
        e.embed(texts)


def test_openai_adapter_down_endpoint_is_an_embedder_error() -> None:
    e = OpenAIEmbedder(url="http://127.0.0.1:9/v1", model="m", dimensions=4, timeout_s=2)
    with pytest.raises(EmbedderError, match="request failed"):
        e.embed(["hello"])


def test_compose_picks_the_embedder_the_settings_name() -> None:
    assert isinstance(embedder(Settings.from_env({})), WordLlamaEmbedder)
    assert embedder(Settings.from_env({"ENGRAM_EMBEDDER": "off"})) is None
    e = embedder(
        Settings.from_env(
            {
                "ENGRAM_EMBEDDER_URL": "https://emb.example/v1",
                "ENGRAM_EMBEDDER_MODEL": "e5",
                "ENGRAM_EMBEDDER_DIM": "384",
                "ENGRAM_EMBEDDER_API_KEY": "k",
            }
        )
    )
    assert isinstance(e, OpenAIEmbedder) and e.model_id == "openai:e5:384" and e.api_key == "k"

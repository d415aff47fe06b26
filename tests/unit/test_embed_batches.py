"""Issue 42, Deliver 5: the follower's embedding batches group texts of similar length, so one
long turn no longer pads a batch of short memories, and the vectors come back in order."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ledger.memory.embed import EmbedderError
from ledger.memory.embed_batches import LengthBatched


class Padding:
    """A stand-in for a padded batch embedder: records each batch's padded size (texts x the
    longest length) and embeds a text as its length and first letter, whatever the batch."""

    model_id = "padding:test:2"
    dim = 2

    def __init__(self, shape_off: bool = False) -> None:
        self.padded: list[int] = []
        self.shape_off = shape_off

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.padded.append(len(texts) * max(len(t) for t in texts))
        out = np.array([[len(t), ord(t[0])] for t in texts], dtype=np.float32)
        return out[:-1] if self.shape_off else out


def test_a_long_text_does_not_pad_a_batch_of_short_ones_and_order_is_kept() -> None:
    texts = ["a" * 5, "b" * 20_000, "c" * 7, "d" * 6, "e" * 3000]
    inner = Padding()
    got = LengthBatched(inner, padded_chars=25_000).embed(texts)
    assert got.tolist() == [[len(t), ord(t[0])] for t in texts]
    assert max(inner.padded) <= 25_000  # unsorted, one batch would pad to 5 x 20,000
    assert sum(inner.padded) < 5 * 20_000


def test_a_batch_of_the_wrong_shape_is_an_embedder_error() -> None:
    with pytest.raises(EmbedderError, match=r"\[embed\.shape\]"):
        LengthBatched(Padding(shape_off=True)).embed(["one", "two", "three"])

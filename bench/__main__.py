"""``python -m bench``: Engram's benchmark harness (issue 14). Prints figures; asserts no timings.

    python -m bench                       # the default run (~25 min on 2 cores): JSON + table
    python -m bench --smoke               # CI: tiny sizes, same code paths; fails only if a figure is missing
    python -m bench --long                # bigger sizes, 10^7 entries on PostgreSQL (hours)
    python -m bench --only ingest,proofs  # some sections (limits always runs: targets are ratios to it)
    python -m bench --no-pg               # SQLite only
    python -m bench --markdown out.md     # the same tables as Markdown (docs/performance.md)

Sections (each in its own child process, one after the other): limits (Ed25519 verify with
cryptography and PyNaCl, SHA-256 node hashes, batched inserts), ingest (in process, 1/8/64
clients), http (engram serve with 2 workers: ingest, the same pre-signed load against the
floor server of bench.floor interleaved with Engram, GET /checkpoint and tiles), proofs (at
10^4..10^6 entries), bundles, replay (engram export tiles + engram-verify log), rebuild
(engram memory rebuild), recall, peers (pymerkle, eventsourcing, provara-protocol).

Every figure has a key, value and unit; each target of issue 14 is a ratio of figures of this
run, reported as met or missed. ``--smoke`` exits 1 when a planned figure is missing or not
finite, or a section failed; nothing else is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.plan import GROUPS, Config, expected_keys, planned_targets, select_sections, sizes_for, targets
from bench.report import Report, smoke_problems
from bench.runner import machine_facts, run_section

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def _sizes(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    out = tuple(int(float(x)) for x in text.split(",") if x.strip())
    if not out or min(out) < 2:
        raise argparse.ArgumentTypeError("sizes are integers >= 2, comma-separated (1e4 is fine)")
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--smoke", action="store_true", help="tiny sizes for CI (same code paths)")
    mode.add_argument("--long", action="store_true", help="bigger sizes, 10^7 on PostgreSQL")
    ap.add_argument("--only", help=f"comma-separated sections: {', '.join(GROUPS)}")
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument(
        "--pg", default=os.environ.get("ENGRAM_BENCH_PG_URL", DEFAULT_PG), help="PostgreSQL admin URL"
    )
    ap.add_argument(
        "--json", default="bench-report.json", type=Path, help="the JSON report (default: %(default)s)"
    )
    ap.add_argument("--markdown", type=Path, help="also write the tables as Markdown here")
    ap.add_argument("--proof-sizes", type=_sizes, help="SQLite log sizes for proofs, e.g. 1e4,1e5,1e6")
    ap.add_argument("--pg-proof-sizes", type=_sizes, help="PostgreSQL log sizes for proofs")
    ap.add_argument("--replay-sizes", type=_sizes, help="log sizes to export and replay")
    ap.add_argument("--rebuild-events", type=int, help="memory writes in the rebuilt log")
    ap.add_argument("--recall-memories", type=int, help="memories recall searches")
    ap.add_argument("--http-events", type=int, help="events per HTTP ingest run")
    ap.add_argument("--ingest-events", type=int, help="events per in-process ingest run")
    ap.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    mode = "smoke" if args.smoke else "long" if args.long else "default"
    sizes = sizes_for(
        mode,
        proof_sizes=args.proof_sizes,
        pg_proof_sizes=args.pg_proof_sizes,
        replay_sizes=args.replay_sizes,
        rebuild_events=args.rebuild_events,
        recall_memories=args.recall_memories,
        http_events=args.http_events,
        ingest_events=args.ingest_events,
    )
    only = [o.strip() for o in args.only.split(",") if o.strip()] if args.only else None
    workdir = Path(tempfile.mkdtemp(prefix="engram-bench-", dir=args.workdir))
    cfg = Config(mode=mode, sizes=sizes, pg_url=None if args.no_pg else args.pg, workdir=str(workdir))
    try:
        sections = select_sections(only, pg=cfg.pg_url is not None)
    except ValueError as e:
        print(f"python -m bench: {e}", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    expected = expected_keys(cfg, sections)
    planned, skipped = planned_targets(targets(cfg), expected)
    report = Report(
        meta=machine_facts(cfg, sys.argv if argv is None else ["python", "-m", "bench", *argv]),
        expected=expected,
        targets=planned,
    )
    report.meta["targets_not_planned"] = [t.key for t in skipped]
    log(f"Engram benchmark ({mode}): {len(sections)} sections, {len(report.expected)} figures planned")
    t0 = time.perf_counter()
    try:
        for section in sections:
            figures, run = run_section(section, cfg, log)
            report.figures += figures
            report.sections.append(run)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report.meta["wall_seconds"] = time.perf_counter() - t0
    report.meta["load_average_end"] = os.getloadavg()

    args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if args.markdown is not None:
        args.markdown.write_text(report.markdown(), encoding="utf-8")
    print(report.table())
    print(f"\nreport: {args.json}" + (f", markdown: {args.markdown}" if args.markdown else ""))
    problems = smoke_problems(report)
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    if args.smoke and problems:
        return 1
    return 1 if any(r.error for r in report.sections) else 0


if __name__ == "__main__":
    raise SystemExit(main())

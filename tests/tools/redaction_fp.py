"""Redaction's false positives on ordinary text, and its cost (docs/privacy.md, "Redaction").

    python -m tests.tools.redaction_fp            # full run: prints a table
    python -m tests.tools.redaction_fp --smoke    # a small sample (the test suite runs it)

Corpora, all local and fixed, none containing real secrets by design:

* **chat**: the recall benchmark's generated long conversations (bench/bench_recall.py);
* **prose**: the long descriptions of the installed Python packages (``*.dist-info/METADATA``)
  and this repository's README and docs;
* **code**: the Python standard library's own modules (``Lib/**/*.py`` without its test
  suites, which hold sample keys on purpose).

Every redaction in them is a false positive unless it is one of the standard library's
documented sample credentials (none are excluded: each one found is counted and listed). The
secret corpus (tests/fixtures/secrets/corpus.json) gives the recall side: the share of its
forms redacted. Cost: microseconds per typical event body through ``redact_body``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from engram.protocol.redact import find_secret, redact_body, redact_secrets

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "secrets" / "corpus.json"


def chat_lines(limit: int) -> Iterator[str]:
    sys.path.insert(0, str(ROOT))
    from bench.bench_recall import generate

    for conv in generate(random.Random(7), pairs=4, sessions=12, turns=24):
        for session in conv.sessions:
            for turn in session:
                yield turn.text
                limit -= 1
                if limit <= 0:
                    return


def prose_lines(limit: int) -> Iterator[str]:
    site = Path(sysconfig.get_paths()["purelib"])
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted(site.glob("*.dist-info/METADATA")),
    ]
    for f in files:
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip():
                yield line
                limit -= 1
                if limit <= 0:
                    return


def code_lines(limit: int) -> Iterator[str]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    for f in sorted(lib.rglob("*.py")):
        rel = f.relative_to(lib).parts
        if any(p in ("test", "tests", "idle_test", "site-packages") for p in rel):
            continue
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            yield line
            limit -= 1
            if limit <= 0:
                return


def measure(name: str, lines: Iterator[str]) -> dict[str, object]:
    n = size = 0
    hits: Counter[str] = Counter()
    samples: list[str] = []
    for line in lines:
        n += 1
        size += len(line.encode())
        out, found = redact_secrets(line)
        if found:
            hits.update(found)
            if len(samples) < 8:
                samples.append(f"{line.strip()[:100]!r} -> {out.strip()[:100]!r}")
    total = sum(hits.values())
    return {
        "corpus": name,
        "lines": n,
        "MB": round(size / 1e6, 2),
        "redactions": total,
        "per_1000_lines": round(1000 * total / max(n, 1), 3),
        "per_MB": round(total / max(size / 1e6, 1e-9), 2),
        "rules": dict(hits),
        "samples": samples,
    }


def recall_on_corpus() -> dict[str, object]:
    cases = json.loads(CORPUS.read_text(encoding="utf-8"))
    caught = [c["form"] for c in cases if c["secret"] not in redact_secrets(c["text"])[0]]
    missed = [c["form"] for c in cases if c["form"] not in caught]
    return {"forms": len(cases), "redacted": len(caught), "missed": missed}


def cost_per_body(rounds: int) -> float:
    body = {
        "session": "cc-00893aaf-19fa-41d2-8238-13269b9b3ca0",
        "turn": 12,
        "role": "user",
        "content": "We decided to drop IE11 support; the staging deploy runs nightly at 03:00 UTC and the "
        "refund for Acme order 8812 goes out on Friday. " * 4,
        "tool": {"name": "Bash", "input": {"command": "pytest -q tests/unit"}, "result": "12 passed in 0.4s"},
    }
    t = time.perf_counter()
    for _ in range(rounds):
        redact_body(body)
        find_secret(body)
    return (time.perf_counter() - t) / rounds * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="a small sample of each corpus")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    limit = 2_000 if args.smoke else 10**7
    rows = [
        measure("chat (bench_recall conversations)", chat_lines(limit)),
        measure("prose (package descriptions, README, docs)", prose_lines(limit)),
        measure("code (Python stdlib, no tests)", code_lines(limit)),
    ]
    report = {
        "false_positives": rows,
        "secret_corpus": recall_on_corpus(),
        "us_per_body": round(cost_per_body(200 if args.smoke else 5_000), 1),
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{'corpus':46} {'lines':>9} {'MB':>7} {'redactions':>10} {'/1k lines':>9} {'/MB':>7}")
    for r in rows:
        print(
            f"{r['corpus']!s:46} {r['lines']:>9} {r['MB']:>7} {r['redactions']:>10} "
            f"{r['per_1000_lines']:>9} {r['per_MB']:>7}"
        )
        for s in r["samples"]:  # type: ignore[attr-defined]
            print(f"    {s}")
    sc = report["secret_corpus"]
    print(f"secret corpus: {sc['redacted']}/{sc['forms']} forms redacted; missed: {sc['missed']}")  # type: ignore[index]
    print(f"cost: {report['us_per_body']} us per typical turn body (redact_body + the log's find_secret)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Redaction's false positives on ordinary text, its recall on the secret corpus, and its cost
(docs/privacy.md, "Redaction").

    python -m tests.tools.redaction_fp                 # full run: prints a table
    python -m tests.tools.redaction_fp --smoke         # a small sample of each corpus
    python -m tests.tools.redaction_fp --json          # the figures as JSON
    python -m tests.tools.redaction_fp --write-fixture # rebuild tests/fixtures/secrets/ordinary.json.xz

Corpora, none containing real secrets by design, so every redaction in them is a false
positive or a credential-shaped sample (each one found is counted and the first few shown):

* **chat, LongMemEval**: every distinct turn, user and assistant, of the LongMemEval-S
  development set (``--lme``, default ``$ENGRAM_LME`` or ``../shared/data/longmemeval-s-dev.json.xz``
  beside the repository; Di Wu et al., ICLR 2025, MIT licence); left out when absent;
* **chat, wrapped**: the same turns hard-wrapped at 80 columns and word-wrapped at 60, as a
  terminal or an e-mail shows them; what the wrapped-line view adds over the unwrapped
  turns is counted;
* **chat, generated**: the recall benchmark's long conversations (bench/bench_recall.py);
* **prose**: the long descriptions of the installed Python packages (``*.dist-info/METADATA``)
  and this repository's README and docs;
* **code**: the Python standard library (``Lib/**/*.py`` without its test suites, which hold
  sample keys on purpose), this repository's source, and the installed packages' source
  (``site-packages/**/*.py`` without tests and without the secret-detection library, whose
  source is full of sample keys).

The fixed corpus of the test suite (``tests/fixtures/secrets/ordinary.json.xz``) is a seeded
sample of the same kinds of text, built by ``--write-fixture`` and committed: 2,000
LongMemEval turns (MIT; see its ``NOTICE`` there), this repository's docs and source at the
commit that built it.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import random
import sys
import sysconfig
import textwrap
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from engram.protocol.redact import find_secret, redact_body, redact_secrets

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "secrets" / "corpus.json"
FIXTURE = ROOT / "tests" / "fixtures" / "secrets" / "ordinary.json.xz"
DEFAULT_LME = ROOT.parent / "shared" / "data" / "longmemeval-s-dev.json.xz"
#: Source files that hold sample secrets on purpose (the rules and their tests).
OWN_SAMPLES = ("tests/", "engram/protocol/secret_rules/", "engram/protocol/redact.py", "docs/privacy.md")


def lme_turns(path: Path, limit: int) -> list[str]:
    """Every distinct turn (user and assistant) of the LongMemEval file, in file order."""
    questions = json.loads(lzma.decompress(path.read_bytes()))
    seen: set[str] = set()
    out: list[str] = []
    for q in questions:
        for session in q["haystack_sessions"]:
            for turn in session:
                text = turn["content"]
                if text not in seen:
                    seen.add(text)
                    out.append(text)
                    if len(out) >= limit:
                        return out
    return out


def wrapped(turns: Iterable[str]) -> Iterator[str]:
    """Each turn hard-wrapped at 80 columns (a terminal) and word-wrapped at 60 (an e-mail)."""
    for t in turns:
        yield "\n".join(line[i : i + 80] for line in t.split("\n") for i in range(0, max(len(line), 1), 80))
        yield "\n".join(textwrap.fill(p, 60) for p in t.split("\n"))


def generated_chat(limit: int) -> Iterator[str]:
    sys.path.insert(0, str(ROOT))
    from bench.bench_recall import generate

    for conv in generate(random.Random(7), pairs=4, sessions=12, turns=24):
        for session in conv.sessions:
            for turn in session:
                yield turn.text
                limit -= 1
                if limit <= 0:
                    return


def _lines(files: Iterable[Path], limit: int) -> Iterator[str]:
    for f in files:
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip():
                yield line
                limit -= 1
                if limit <= 0:
                    return


def prose_lines(limit: int) -> Iterator[str]:
    site = Path(sysconfig.get_paths()["purelib"])
    files = [
        ROOT / "README.md",
        *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "privacy.md"),
        *sorted(site.glob("*.dist-info/METADATA")),
    ]
    return _lines((f for f in files if "detect_secrets" not in f.parent.name), limit)


def _skip(rel: tuple[str, ...]) -> bool:
    return any(p in ("test", "tests", "testing", "idle_test", "site-packages", "detect_secrets") for p in rel)


def stdlib_code(limit: int) -> Iterator[str]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    return _lines((f for f in sorted(lib.rglob("*.py")) if not _skip(f.relative_to(lib).parts)), limit)


def own_code(limit: int) -> Iterator[str]:
    files = [
        f
        for d in ("engram", "ledger", "api", "verifier", "bench", "migrations")
        for f in sorted((ROOT / d).rglob("*.py"))
        if not str(f.relative_to(ROOT)).startswith(OWN_SAMPLES)
    ]
    return _lines(files, limit)


def package_code(limit: int) -> Iterator[str]:
    site = Path(sysconfig.get_paths()["purelib"])
    files = (f for f in sorted(site.rglob("*.py")) if not _skip(f.relative_to(site).parts))
    return _lines((f for f in files if "detect_secrets" not in f.parts), limit)


def measure(name: str, texts: Iterable[str], unit: str = "lines") -> dict[str, object]:
    n = size = 0
    hits: Counter[str] = Counter()
    flagged = 0
    samples: list[str] = []
    for text in texts:
        n += 1
        size += len(text.encode())
        out, found = redact_secrets(text)
        if found:
            flagged += 1
            hits.update(found)
            if len(samples) < 8:
                samples.append(_sample(text, out))
    total = sum(hits.values())
    return {
        "corpus": name,
        "unit": unit,
        unit: n,
        "MB": round(size / 1e6, 2),
        "flagged": flagged,
        "redactions": total,
        f"per_1000_{unit}": round(1000 * total / max(n, 1), 3),
        "per_MB": round(total / max(size / 1e6, 1e-9), 3),
        "rules": dict(hits),
        "samples": samples,
    }


def _sample(text: str, out: str) -> str:
    i = next((k for k, (a, b) in enumerate(zip(text, out, strict=False)) if a != b), 0)
    return f"...{text[max(0, i - 40) : i + 40]!r} -> {out[max(0, i - 40) : i + 40]!r}"


def wrapped_extra(turns: list[str]) -> dict[str, object]:
    """What wrapping the turns adds: redactions in the wrapped forms beyond those of the
    turn itself (each wrapped form counted against its own turn)."""
    extra: Counter[str] = Counter()
    samples: list[str] = []
    n = 0
    for t in turns:
        base = Counter(redact_secrets(t)[1])
        for w in wrapped([t]):
            n += 1
            out, found = redact_secrets(w)
            more = Counter(found) - base
            if more:
                extra.update(more)
                if len(samples) < 8:
                    samples.append(_sample(w, out))
    total = sum(extra.values())
    return {
        "corpus": "chat, wrapped at 80 and 60 columns (added)",
        "unit": "turns",
        "turns": n,
        "redactions": total,
        "per_1000_turns": round(1000 * total / max(n, 1), 3),
        "rules": dict(extra),
        "samples": samples,
    }


def recall_on_corpus() -> dict[str, object]:
    cases = json.loads(CORPUS.read_text(encoding="utf-8"))
    missed = []
    for c in cases:
        secrets = c["secret"] if isinstance(c["secret"], list) else [c["secret"]]
        out = redact_secrets(c["text"])[0]
        if any(s in out for s in secrets):
            missed.append(c["form"])
    families = Counter(c.get("family", "token") for c in cases)
    return {"forms": len(cases), "redacted": len(cases) - len(missed), "missed": missed, "families": families}


def cost_per_body(rounds: int) -> float:
    body = {
        "session": "cc-00893aaf-19fa-41d2-8238-13269b9b3ca0",
        "turn": 12,
        "role": "user",
        "content": "We decided to drop IE11 support; the staging deploy runs nightly at 03:00 UTC and the "
        "refund for Acme order 8812 goes out on Friday. " * 4,
        "tool": {"name": "Bash", "input": {"command": "pytest -q tests/unit"}, "result": "12 passed in 0.4s"},
    }
    redact_body(body)  # the library loads once per process
    t = time.perf_counter()
    for _ in range(rounds):
        redact_body(body)
        find_secret(body)
    return (time.perf_counter() - t) / rounds * 1e6


def write_fixture(lme: Path) -> None:
    """The fixed ordinary-text corpus the test suite asserts against (seeded sample)."""
    rng = random.Random(40)
    turns = lme_turns(lme, 10**7)
    chat = rng.sample(turns, 2000)
    code = list(own_code(10**7))
    prose = list(
        _lines(
            [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "privacy.md")],
            10**7,
        )
    )
    data = {"chat": chat, "code": code, "prose": prose}
    FIXTURE.write_bytes(lzma.compress(json.dumps(data, ensure_ascii=False).encode("utf-8"), preset=9))
    print(f"{FIXTURE}: {len(chat)} turns, {len(code)} code lines, {len(prose)} prose lines")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="a small sample of each corpus")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--lme", type=Path, default=Path(os.environ.get("ENGRAM_LME", DEFAULT_LME)))
    ap.add_argument("--write-fixture", action="store_true", help="rebuild the fixed corpus of the tests")
    args = ap.parse_args(argv)
    if args.write_fixture:
        write_fixture(args.lme)
        return 0
    limit = 2_000 if args.smoke else 10**7
    rows: list[dict[str, object]] = []
    if args.lme.is_file():
        turns = lme_turns(args.lme, 500 if args.smoke else 10**7)
        rows.append(measure("chat: LongMemEval-S dev, every distinct turn", turns, "turns"))
        rows.append(wrapped_extra(turns[: 200 if args.smoke else 20_000]))
    rows += [
        measure("chat: the recall benchmark's conversations", generated_chat(limit), "turns"),
        measure("prose: package descriptions, README, docs", prose_lines(limit)),
        measure("code: Python standard library, no tests", stdlib_code(limit)),
        measure("code: this repository, no tests", own_code(limit)),
        measure("code: installed packages, no tests", package_code(limit)),
    ]
    report = {
        "false_positives": rows,
        "secret_corpus": recall_on_corpus(),
        "us_per_body": round(cost_per_body(200 if args.smoke else 2_000), 1),
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{'corpus':52} {'items':>9} {'unit':>6} {'MB':>7} {'redactions':>10} {'/1k':>8} {'/MB':>7}")
    for r in rows:
        unit = str(r["unit"])
        print(
            f"{r['corpus']!s:52} {r[unit]:>9} {unit:>6} {r.get('MB', '')!s:>7} {r['redactions']:>10} "
            f"{r[f'per_1000_{unit}']:>8} {r.get('per_MB', '')!s:>7}"
        )
        for s in r["samples"]:  # type: ignore[attr-defined]
            print(f"    {s}")
    sc = report["secret_corpus"]
    print(f"secret corpus: {sc['redacted']}/{sc['forms']} forms redacted; missed: {sc['missed']}")  # type: ignore[index]
    print(f"cost: {report['us_per_body']} us per typical turn body (redact_body + the log's find_secret)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The README's two set-up commands stay true: CI runs the test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up (two commands)", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_readme_has_a_demo_command_and_a_test_command() -> None:
    demo, tests = _commands()
    assert demo.endswith("engram demo")
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, tests = _commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert tests in ci


def test_the_readme_is_one_page() -> None:
    """Issue 26, finding 8: the README was 737 lines and 7,261 words. It is one page now (the
    tour, harness blocks, settings and benchmarks live in docs/), and it links to each."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150 and len(readme.split()) < 1500
    for doc in ("tour", "harnesses", "configuration", "privacy", "reliability", "benchmarks", "design"):
        assert f"(docs/{doc}.md)" in readme and (ROOT / "docs" / f"{doc}.md").exists()


def test_the_readme_quick_loops_collect() -> None:
    """Issue 27, finding 5 (no documented quick loop): each loop the README names selects
    tests as written, and the wider one leaves out PostgreSQL, slow and interop tests."""
    import shlex
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    loops = re.findall(r"`\.venv/bin/pytest (-n auto [^`]+)`", readme)
    assert len(loops) == 2, loops
    for loop in loops:
        args = [a for a in shlex.split(loop) if a not in ("-n", "auto")]
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        collected = [line for line in out.stdout.splitlines() if "::" in line]
        assert len(collected) > 300, loop
        if "-m" in args:
            assert not any("[postgres]" in line for line in collected)

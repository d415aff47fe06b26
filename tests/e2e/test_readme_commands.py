"""The tour's command blocks (docs/tour.md, from the README until issue 26) run as written (in
a fresh ENGRAM_HOME, with the venv's scripts on PATH)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


TOUR = ROOT / "docs" / "tour.md"


def _block(heading: str) -> str:
    readme = TOUR.read_text(encoding="utf-8")
    section = readme.split(heading + "\n", 1)[1].split("\n#", 1)[0]
    (block,) = re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)
    return block


def test_readme_witness_block_runs_as_written(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / ".engram"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "COLUMNS": "200",
    }
    env.pop("ENGRAM_DATABASE_URL", None)
    env.pop("ENGRAM_WITNESS_POLICY", None)
    subprocess.run(["engram", "init", "--origin", "example.com/engram"], env=env, cwd=tmp_path, check=True)
    run = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", _block("### Witnesses")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("VERIFIED") == 2
    assert "witnesses: cosigned by w1" in run.stdout


def test_readme_in_process_python_block_runs_as_written(tmp_path: Path) -> None:
    readme = TOUR.read_text(encoding="utf-8")
    section = readme.split("From Python (the agent SDK):\n", 1)[1]
    code = re.findall(r"```python\n(.+?)\n```", section, flags=re.S)[0]
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / ".engram")}
    env.pop("ENGRAM_DATABASE_URL", None)
    env.pop("ENGRAM_WITNESS_POLICY", None)
    subprocess.run([sys.executable, "-m", "engram.cli.app", "init"], env=env, cwd=tmp_path, check=True)
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    index, timestamp, _ = run.stdout.split(" ", 2)
    assert int(index) >= 1 and int(timestamp) > 0


def test_readme_memory_tour_recalls_semantically_and_finds_turns(tmp_path: Path) -> None:
    """The memory block's session and recall lines, as written, in a fresh home: the semantic
    recall finds the IE11 decision with no shared word, and the open session's turn comes back
    under RECORDS. (Lines naming fixed refs are left to the README issue: refs depend on what
    ran before.)"""
    readme = TOUR.read_text(encoding="utf-8")
    section = readme.split("Memory, tier by tier", 1)[1]
    (block,) = re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)[:1]
    lines = [ln for ln in block.splitlines() if "--ref" not in ln]
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / ".engram"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "COLUMNS": "200",
    }
    for var in ("ENGRAM_DATABASE_URL", "ENGRAM_WITNESS_POLICY", "ENGRAM_EMBEDDER", "ENGRAM_EMBEDDER_URL"):
        env.pop(var, None)
    subprocess.run(["engram", "init", "--origin", "example.com/engram"], env=env, cwd=tmp_path, check=True)
    run = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", "\n".join(lines)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    blocks = run.stdout.split("<memory-context")
    semantic = next(b for b in blocks if "IE11" in b and "## COLD" in b)
    assert "drop IE11" in semantic.split("## COLD", 1)[1]
    records = next(b for b in blocks if "order 8812" in b)
    assert "## RECORDS" in records and "order 8812" in records.split("## RECORDS", 1)[1]
    # The erased turn, and the memory distilled from it, are not recalled (issue 12); the
    # query matches the turn's words, so the block would show it under RECORDS otherwise.
    assert "body of entry" in blocks[-2] and "555 0101" not in blocks[-1]

"""The atheris harness runs as documented (docs/benchmarks.md, "Reliability harnesses"): every target is
fuzzed for 2 s here, executes its inputs and finds nothing (issue 15, Deliver 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.harness.fuzz import TARGETS


def test_every_target_is_fuzzed_without_a_finding(tmp_path: Path) -> None:
    out = tmp_path / "fuzz.json"
    args = ["--seconds", "2", "--json", str(out), "--artifacts", str(tmp_path / "artifacts")]
    run = subprocess.run(
        [sys.executable, "-m", "tests.harness.fuzz", *args], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    figures = json.loads(out.read_text())["targets"]
    assert [t["target"] for t in figures] == list(TARGETS)
    for t in figures:
        assert t["ok"] and t["runs"] > 100 and t["peak_rss_mb"] is not None, t
    assert not any((tmp_path / "artifacts").iterdir())  # no crash, timeout or oom input written

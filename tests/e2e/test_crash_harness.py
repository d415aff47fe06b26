"""The crash harness runs as documented (docs/benchmarks.md, "Reliability harnesses"): one trial per
backend here, each SIGKILLing every appender and the server mid-work, and it reports every
acknowledged entry re-checked and the audit clean (issue 15, Deliver 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PG_ADMIN_URL


@pytest.mark.usefixtures("pg_server")
def test_the_crash_harness_runs_on_both_backends(tmp_path: Path) -> None:
    out = tmp_path / "crash.json"
    args = ["--trials", "1", "--seed", "11", "--json", str(out), "--pg", PG_ADMIN_URL]
    run = subprocess.run(
        [sys.executable, "-m", "tests.harness.crash", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert [b["backend"] for b in figures["backends"]] == ["sqlite", "postgres"]
    for b in figures["backends"]:
        assert b["trials"] == 1 and b["killed"] == 4 and b["acknowledged"] > 0 and b["failures"] == []


def test_the_harness_checks_leave_the_process_environment_alone(tmp_path: Path) -> None:
    """Regression: the checks exported the harness's ENGRAM_* settings into os.environ, so a
    test calling them in a pytest worker (test_policy_race) left ENGRAM_DATABASE_URL set
    for the next test of that worker, whose `engram init` then found another log there."""
    import os

    from tests.e2e.processes import ENGRAM
    from tests.harness.crash import _check

    env = {"ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_EMBEDDER": "off", "PATH": os.environ["PATH"]}
    subprocess.run([ENGRAM, "init", "--origin", "env.example/log"], env=env, check=True, capture_output=True)
    before = dict(os.environ)
    assert _check(env, []) == []
    assert dict(os.environ) == before

"""The load harness runs as documented (docs/benchmarks.md, "Reliability harnesses"): a few seconds of
mixed load per backend here, every request answered without error, every acknowledged entry
re-checked, the audit clean and the projection equal to a rebuild (issue 15, Deliver 7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PG_ADMIN_URL
from tests.harness.load import OPS


@pytest.mark.usefixtures("pg_server")
def test_the_load_harness_runs_on_both_backends(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    args = [
        "--seconds",
        "4",
        "--procs",
        "1",
        "--threads",
        "3",
        "--seed",
        "5",
        "--json",
        str(out),
        "--pg",
        PG_ADMIN_URL,
    ]
    run = subprocess.run(
        [sys.executable, "-m", "tests.harness.load", *args], capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert [b["backend"] for b in figures["backends"]] == ["sqlite", "postgres"]
    for b in figures["backends"]:
        assert b["errors"] == 0 and b["check_failures"] == [], b
        assert b["acknowledged_checked"] > 0 and b["requests"] >= b["acknowledged_checked"]
        assert set(b["operations"]) == {name for name, _ in OPS}
        assert sum(row["requests"] for row in b["operations"].values()) == b["requests"]
    assert "p99 ms" in run.stdout  # the table is printed

"""Issue 26, finding 6: the demo's "check it yourself" commands failed in a fresh shell
(``engram`` is in ``.venv/bin`` after the README's set-up command, not on PATH). Each printed
command now runs as printed from a shell whose PATH does not hold the venv."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.processes import ENGRAM


def test_demo_commands_run_in_a_fresh_shell(tmp_path: Path) -> None:
    venv_bin = str(Path(ENGRAM).parent)
    fresh_path = ":".join(p for p in os.environ["PATH"].split(":") if p and Path(p) != Path(venv_bin))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")} | {
        "PATH": fresh_path,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_EMBEDDER": "off",
        "ENGRAM_VERIFIER_STATE": os.environ["ENGRAM_VERIFIER_STATE"],
        "COLUMNS": "80",
    }
    demo = subprocess.run(
        [ENGRAM, "demo"], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    section = demo.stdout.split("How to check it yourself", 1)[1].split("demo complete", 1)[0]
    commands = [
        line.strip() for line in section.splitlines() if line.startswith("  ") and " DIR " not in line
    ]
    assert len(commands) >= 9, section
    shell_env = {k: v for k, v in env.items() if k != "ENGRAM_HOME"}  # each command sets it
    for cmd in commands:
        run = subprocess.run(
            ["bash", "-c", cmd], env=shell_env, capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert run.returncode == 0, f"{cmd}\n{run.stdout[-1000:]}{run.stderr[-1000:]}"

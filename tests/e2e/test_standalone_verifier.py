"""The verifier runs where only it and `cryptography` are installed (no ledger dependencies)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGRAM = str(Path(sys.executable).parent / "engram")


@pytest.mark.slow
def test_engram_verify_runs_with_only_cryptography(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    py = env_dir / "bin" / "python"
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "cryptography"], capture_output=True, text=True, timeout=600
    )
    if pip.returncode != 0:
        pytest.fail(f"could not install cryptography into a clean venv: {pip.stderr[-2000:]}")
    # Only the verifier package is copied in: nothing else from this repository is importable.
    site = tmp_path / "only-verifier"
    shutil.copytree(ROOT / "verifier", site / "verifier")
    probe = subprocess.run(
        [str(py), "-c", "import sqlalchemy"], capture_output=True, text=True, env={"PATH": os.environ["PATH"]}
    )
    assert probe.returncode != 0  # the environment really lacks the ledger's dependencies

    home = tmp_path / "home"
    env = {**os.environ, "ENGRAM_HOME": str(home)}
    env.pop("ENGRAM_DATABASE_URL", None)
    subprocess.run(
        [ENGRAM, "init", "--origin", "example.com/standalone"], env=env, check=True, capture_output=True
    )
    subprocess.run(
        [ENGRAM, "agent", "create", "ann", "--key-file", str(tmp_path / "ann.key")],
        env=env,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [ENGRAM, "export", "tiles", str(tmp_path / "tiles")], env=env, check=True, capture_output=True
    )
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()

    run = subprocess.run(
        [str(py), "-m", "verifier.cli", "log", str(tmp_path / "tiles"), "--log-key", vkey],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(site)},
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.rstrip().endswith("VERIFIED")

"""The verifier runs where only it and `cryptography` are installed (no ledger dependencies)."""

from __future__ import annotations

import os
import shlex
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
        [str(py), "-m", "pip", "install", "-q", "cryptography", "biscuit-python==0.4.0"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if pip.returncode != 0:
        pytest.fail(f"could not install cryptography into a clean venv: {pip.stderr[-2000:]}")
    # Only the verifier package is copied in: nothing else from this repository is importable.
    site = tmp_path / "only-verifier"
    shutil.copytree(ROOT / "verifier", site / "verifier")
    probe = subprocess.run(
        [str(py), "-c", "import sqlalchemy, fastapi, pydantic, psycopg"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
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

    # And a buyer's bundle with a share token, verified there too.
    key = str(tmp_path / "ann.key")
    subprocess.run(
        [
            ENGRAM,
            "event",
            "append",
            "--key-file",
            key,
            "--kind",
            "pact.outcome",
            "--body",
            '{"pact":"p-1","result":"fulfilled","quality":97}',
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    token = subprocess.run(
        [ENGRAM, "token", "mint", "--key-file", key, "--audience", "buyer-1", "--kind", "pact.outcome"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    bundle = tmp_path / "claim.json"
    created = subprocess.run(
        [
            ENGRAM,
            "bundle",
            "create",
            "--agent",
            "ann",
            "--token",
            token,
            "--audience",
            "buyer-1",
            "-o",
            str(bundle),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    # The verify command it prints runs as printed (issue 26, finding 6: it lacked --audience).
    printed = " ".join(created.stdout.split("verify offline: ", 1)[1].split())
    argv = shlex.split(printed)
    assert argv[:2] == ["engram-verify", "bundle"] and "--audience" in argv
    as_printed = subprocess.run(
        [str(py), "-m", "verifier.cli", *argv[1:]],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(site)},
        timeout=120,
    )
    assert as_printed.returncode == 0, as_printed.stdout + as_printed.stderr
    run = subprocess.run(
        [str(py), "-m", "verifier.cli", "bundle", str(bundle), "--log-key", vkey, "--audience", "buyer-1"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(site)},
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        "claim: count of " in run.stdout
        and "/pact.outcome = 1" in run.stdout
        and run.stdout.rstrip().endswith("VERIFIED")
    )

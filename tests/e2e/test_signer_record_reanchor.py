"""Issue 25, finding 8, on the command line: a lost signer record stops the log signing with
a clear error, and ``engram log reanchor`` re-anchors it knowingly (from a checkpoint the
operator trusts, refused if the database does not extend it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.processes import ENGRAM


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120)


def test_reanchor_after_a_lost_record(tmp_path: Path) -> None:
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_EMBEDDER": "off"}
    env.pop("ENGRAM_DATABASE_URL", None)
    assert _run(env, "init", "--origin", "reanchor.example/log").returncode == 0
    key = str(tmp_path / "carol.key")
    assert _run(env, "agent", "create", "carol", "--key-file", key).returncode == 0
    append = ("event", "append", "--key-file", key, "--kind", "commitment", "--body", '{"promise":"p"}')
    assert _run(env, *append).returncode == 0
    trusted = tmp_path / "trusted.checkpoint"
    trusted.write_text(_run(env, "log", "checkpoint").stdout, encoding="utf-8")
    record = tmp_path / "home" / "log.key.signed-head"
    assert record.exists()
    record.unlink()
    refused = _run(env, *append)
    assert refused.returncode != 0 and "signer.record_missing" in refused.stderr + refused.stdout
    dry = _run(env, "log", "reanchor", "--checkpoint", str(trusted))
    assert dry.returncode == 2 and "add --yes" in dry.stdout and not record.exists()
    forged = tmp_path / "forged.checkpoint"
    forged.write_text(
        trusted.read_text(encoding="utf-8").replace("\n", "\n", 1)[:-20] + "x" * 20, encoding="utf-8"
    )
    bad = _run(env, "log", "reanchor", "--checkpoint", str(forged), "--yes")
    assert bad.returncode != 0 and not record.exists()
    done = _run(env, "log", "reanchor", "--checkpoint", str(trusted), "--yes")
    assert done.returncode == 0, done.stderr
    assert record.exists()
    assert _run(env, *append).returncode == 0  # the log signs again
    assert _run(env, "audit").returncode == 0

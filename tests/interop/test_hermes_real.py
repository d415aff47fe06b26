"""Issue 26, finding 1: Hermes Agent 0.19 never loaded the provider (it discovers memory
providers only as plugin directories, never through our entry point), and the test only
checked that the entry point existed. Here the real ``hermes-agent`` from the registry,
pinned, in its own environment (``.ci/install-interop.sh`` makes ``.venv-hermes``):
``engram hermes install`` writes the plugin directory (twice: idempotent), ``hermes config
set`` selects it, ``hermes memory status`` reports it installed and available, and Hermes'
own discovery and MemoryManager drive it through two chats against an ``engram serve``:
what the first chat said is recalled in the second, and a 5,000-character query (issue 40,
finding 7) is recalled for."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from engram.protocol.longtext import PART_MARKER
from tests.e2e.processes import ENGRAM, engram_serve

ROOT = Path(__file__).resolve().parents[2]
HERMES_VENV = ROOT / ".venv-hermes"


def test_real_hermes_discovers_and_drives_the_provider(tmp_path: Path) -> None:
    """Issue 26, finding 1."""
    if not (HERMES_VENV / "bin" / "hermes").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs .venv-hermes (bash .ci/install-interop.sh)")
        pytest.skip("no .venv-hermes here (bash .ci/install-interop.sh)")
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "log"), "ENGRAM_EMBEDDER": "off"}
    env |= {"ENGRAM_DEV_MODE": "1"}
    env.pop("ENGRAM_DATABASE_URL", None)
    run = subprocess.run
    assert run([ENGRAM, "init"], env=env, capture_output=True, timeout=120).returncode == 0
    key = tmp_path / "hermes-bot.key"
    made = run(
        [ENGRAM, "agent", "create", "hermes-bot", "--key-file", str(key)], env=env, capture_output=True
    )
    assert made.returncode == 0, made.stderr
    # issue 30: ada shares her LEARNING memories with hermes-bot through a Memory Mesh
    ada = str(tmp_path / "ada.key")
    for argv in (
        ["agent", "create", "ada", "--key-file", ada],
        ["mesh", "create", "--key-file", ada, "--name", "ops"],
        ["mesh", "invite", "--key-file", ada, "--mesh", "ada/ops", "--agent", "hermes-bot"],
        ["mesh", "join", "--key-file", str(key), "--mesh", "ada/ops"],
        ["mesh", "grant", "--key-file", str(key), "--mesh", "ada/ops", "--share", "", "--read", "LEARNING"],
        ["mesh", "grant", "--key-file", ada, "--mesh", "ada/ops", "--share", "LEARNING", "--read", ""],
        [
            "memory",
            "write",
            "--key-file",
            ada,
            "--category",
            "LEARNING",
            "--content",
            "Zorblax deploys need the cache warmed first.",
        ],
    ):
        done = run([ENGRAM, *argv], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    home = tmp_path / "hermes-home"
    henv = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "VIRTUAL_ENV"))}
    henv |= {"HERMES_HOME": str(home), "PATH": f"{HERMES_VENV / 'bin'}:{henv.get('PATH', '')}"}
    henv["ENGRAM_VERIFIER_STATE"] = os.environ["ENGRAM_VERIFIER_STATE"]
    engram_h, hermes = str(HERMES_VENV / "bin" / "engram"), str(HERMES_VENV / "bin" / "hermes")

    first = run([engram_h, "hermes", "install"], env=henv, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and "wrote __init__.py" in first.stdout, first.stdout + first.stderr
    again = run([engram_h, "hermes", "install"], env=henv, capture_output=True, text=True, timeout=60)
    assert "already installed" in again.stdout
    select = run(
        [hermes, "config", "set", "memory.provider", "engram"], env=henv, capture_output=True, text=True
    )
    assert select.returncode == 0, select.stdout + select.stderr

    with engram_serve(env) as url:
        (home / "engram.json").write_text(json.dumps({"url": url, "key_file": str(key)}), encoding="utf-8")
        status = run([hermes, "memory", "status"], env=henv, capture_output=True, text=True, timeout=120)
        assert "Plugin:    installed" in status.stdout and "Status:    available" in status.stdout, (
            status.stdout
        )
        python = str(HERMES_VENV / "bin" / "python")
        script = str(ROOT / "tests" / "interop" / "hermes" / "lifecycle.py")
        out = run([python, script], env=henv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout)
    assert result["discovered"].get("engram") is True
    assert "engram_recall" in result["first"]["tools"]
    assert "tabs" in result["second"]["prefetch"].lower(), result["second"]
    third = result["third"]["prefetch"]
    assert "cache warmed" in third and "by ada via mesh ada/ops" in third, third
    # issue 40, finding 7: Hermes' prefetch of a 5,000-character query recalls (it failed)
    fourth = result["fourth"]["prefetch"]
    assert "cache warmed" in fourth, fourth
    # ... and its 40,000-character turn is in the log whole, in two marked parts
    con = sqlite3.connect(next((tmp_path / "log").glob("*.db")))
    try:
        rows = con.execute(
            "SELECT b.body FROM bodies b JOIN leaves l ON l.idx = b.idx WHERE l.kind = 'session.turn'"
        ).fetchall()
    finally:
        con.close()
    parts = [t for t in (json.loads(bytes(r[0]))["content"] for r in rows) if "/srv/zorblax/" in t]
    assert len(parts) == 2 and len("".join(PART_MARKER.sub("", p) for p in parts)) == 40_000

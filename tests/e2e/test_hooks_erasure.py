"""Issue 25, finding 3, through the Claude Code hook: the session-state snapshot ("Current
focus: ...") quoted the prompt without citing its turn, so erasing the turn left the text in
the snapshot, in recall and in the hook's state file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from tests.e2e.processes import ENGRAM
from tests.e2e.test_hooks import _cc, embedded_env, hook

WORD = "quetzalfig91"


def test_snapshot_and_state_file_forget_an_erased_turn(tmp_path: Path) -> None:
    env = embedded_env(tmp_path, ENGRAM_SNAPSHOT_EVERY="1")
    key = Path(env["ENGRAM_KEY_FILE"])
    s = "2c3d4e5f-0000-4e5a-8b9c-0d1e2f3a4b5c"
    for payload in (
        _cc("SessionStart", s, tmp_path, source="startup", model="m"),
        _cc("UserPromptSubmit", s, tmp_path, prompt=f"my home alarm code is {WORD}, remind me tonight"),
    ):
        assert hook(env, "claude-code", payload).returncode == 0
    state_files = list((tmp_path / "hookstate").rglob("*.json"))
    assert state_files and all(WORD.encode() not in f.read_bytes() for f in state_files)  # never there
    resumed = hook(env, "claude-code", _cc("SessionStart", s, tmp_path, source="resume", model="m"))
    assert WORD in json.loads(resumed.stdout)["hookSpecificOutput"]["additionalContext"]  # the test can fail
    db = next(Path(env["ENGRAM_HOME"]).glob("*.db"))
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT l.idx, b.body FROM leaves l JOIN bodies b ON b.idx = l.idx WHERE l.kind = 'session.turn'"
        ).fetchall()
    finally:
        con.close()
    (turn,) = [idx for idx, body in rows if WORD.encode() in body]
    erase = subprocess.run(
        [ENGRAM, "memory", "erase", "--key-file", str(key), "--index", str(turn), "--reason", "secret"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert erase.returncode == 0, erase.stderr
    resumed = hook(env, "claude-code", _cc("SessionStart", s, tmp_path, source="resume", model="m"))
    assert resumed.returncode == 0, resumed.stderr
    assert WORD not in resumed.stdout
    recall = subprocess.run(
        [ENGRAM, "memory", "recall", "--agent", "claude", f"alarm code {WORD}", "--include-cold"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert recall.returncode == 0 and WORD not in recall.stdout
    for f in [db, *Path(env["ENGRAM_HOME"]).glob("*-wal"), *state_files]:
        assert WORD.encode() not in f.read_bytes(), f.name

"""Issue 40, finding 6, through the Claude Code and Codex hooks as a user runs them (embedded
log, real processes): a prompt pasting a Vault token, a ``.pgpass`` line, a docker
``config.json``, a ``mysql -p`` command and a password told in a sentence is logged as a
turn; no byte of any of those secrets is in the database file, its WAL or anything else
under the home. The hooks reach redaction through the SDK's write path (AgentMemory.turn)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_hooks import _cc, embedded_env, hook

SECRETS = [
    "hvs.CAESIHq8Lm2Nx7Vb4Tz9Kp3Wd5Rf1Gs6Jh0Yc",
    "N7qLp2xVw9Kz4RbT",
    "YWNtZS1jaTpaazN2UTl3UjdfdFkydUk1bw==",
    "S3cr3t!Zq81",
    "hunter2-SECRET-key",
]
PROMPT = (
    f"vault login {SECRETS[0]} fails, and so does psql with this ~/.pgpass line:\n"
    f"db.prod.acme.io:5432:billing:billing_app:{SECRETS[1]}\n"
    f'my ~/.docker/config.json is {{"auths": {{"registry.acme.io": {{"auth": "{SECRETS[2]}"}}}}}}\n'
    f"I ran: mysql -h db -u root -p{SECRETS[3]} billing\n"
    f"The prod DB password is {SECRETS[4]}."
)


def _codex(event: str, session: str, tmp_path: Path, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": None,
        "cwd": str(tmp_path),
        "hook_event_name": event,
        "model": "gpt-5",
        "permission_mode": "default",
        **fields,
    }


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_prompt_pasting_secrets_never_reaches_the_files(harness: str, tmp_path: Path) -> None:
    assert len(PROMPT) < 1000  # the hooks' prompt limit on the code this test was written against
    env = embedded_env(tmp_path)
    s = "7a2e4c1b-0d55-4f43-9d8e-4b1f0a2c9e11"
    if harness == "claude-code":
        payloads = [
            _cc("SessionStart", s, tmp_path, source="startup", model="m"),
            _cc("UserPromptSubmit", s, tmp_path, prompt=PROMPT),
            _cc("Stop", s, tmp_path, stop_hook_active=False, last_assistant_message="Rotate them all now."),
            _cc("SessionEnd", s, tmp_path, reason="exit"),
        ]
    else:
        payloads = [
            _codex("SessionStart", s, tmp_path, source="startup"),
            _codex("UserPromptSubmit", s, tmp_path, turn_id="t1", prompt=PROMPT),
            _codex(
                "Stop", s, tmp_path, turn_id="t1", stop_hook_active=False, last_assistant_message="Rotate."
            ),
        ]
    for payload in payloads:
        run = hook(env, harness, payload)
        assert run.returncode == 0, run.stderr
    home = Path(env["ENGRAM_HOME"])
    con = sqlite3.connect(next(home.glob("*.db")))
    try:
        (turns,) = con.execute("SELECT count(*) FROM leaves WHERE kind = 'session.turn'").fetchone()
    finally:
        con.close()
    assert turns >= 2  # the prompt and the answer were logged
    for f in [*home.rglob("*"), *(tmp_path / "hookstate").rglob("*")]:
        if f.is_file():
            data = f.read_bytes()
            for secret in SECRETS:
                assert secret.encode() not in data, (f.name, secret)

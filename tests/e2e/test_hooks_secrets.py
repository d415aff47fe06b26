"""Issue 25, findings 1 and 2, through the Claude Code hook as a user runs it (embedded log,
real processes): a prompt carrying a GitHub token, an AWS key and a pasted .env excerpt is
logged and recalled for; afterwards no byte of any of those secrets is in the database file,
its WAL or anything else under the home, and the access entries carry no query."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from tests.e2e.processes import ENGRAM
from tests.e2e.test_hooks import _cc, embedded_env, hook

SECRETS = [
    "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8",
    "AKIA" + "ZXCVBNMASDFGHJKL",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "pg-hunter2-prod",
    "YWxpY2U6c2VjcmV0LXBhc3M=",
]
PROMPT = (
    f"deploy fails, token {SECRETS[0]} and key {SECRETS[1]}; my .env is\n"
    f"AWS_SECRET_ACCESS_KEY={SECRETS[2]}\nSTRIPE_SECRET_KEY={SECRETS[3]}\nPGPASSWORD={SECRETS[4]}\n"
    f"Authorization: Basic {SECRETS[5]}\n"
)


def test_hook_prompt_secrets_never_reach_the_files(tmp_path: Path) -> None:
    """Issue 25, finding 1."""
    env = embedded_env(tmp_path)
    key = Path(env["ENGRAM_KEY_FILE"])
    subprocess.run(
        [ENGRAM, "memory", "write", "--key-file", str(key), "--category", "LEARNING", "--content",
         "Deploy fails when the staging token expires; rotate it first"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    s = "6f1d1c7e-0a55-4f43-9d8e-4b1f0a2c9e11"
    for payload in (
        _cc("SessionStart", s, tmp_path, source="startup", model="m"),
        _cc("UserPromptSubmit", s, tmp_path, prompt="the deploy runbook says staging restarts nightly"),
        _cc(
            "Stop",
            s,
            tmp_path,
            stop_hook_active=False,
            last_assistant_message="Noted: staging restarts nightly.",
        ),
        _cc("UserPromptSubmit", s, tmp_path, prompt=PROMPT),
        _cc("SessionEnd", s, tmp_path, reason="exit"),
    ):
        run = hook(env, "claude-code", payload)
        assert run.returncode == 0, run.stderr
    home = Path(env["ENGRAM_HOME"])
    db = next(home.glob("*.db"))
    con = sqlite3.connect(db)
    try:
        kinds = con.execute(
            "SELECT b.body FROM bodies b JOIN leaves l ON l.idx = b.idx WHERE l.kind = 'memory.accessed'"
        ).fetchall()
    finally:
        con.close()
    assert kinds, "the recall recorded its uses"
    for (raw,) in kinds:
        body = json.loads(raw)
        assert "query" not in body and len(body.get("query_digest", "0" * 64)) == 64
    for f in [*home.rglob("*"), *(tmp_path / "hookstate").rglob("*")]:
        if f.is_file():
            data = f.read_bytes()
            for secret in SECRETS:
                assert secret.encode() not in data, (f.name, secret)

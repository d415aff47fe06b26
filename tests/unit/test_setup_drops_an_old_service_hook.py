"""Re-running ``engram setup`` for a new service leaves no ``engram hook`` naming the old
one: a hook the user grouped with their own (one group, two hooks) kept shipping every
prompt and reply to the old service (another log), and a Codex config's user part with such
a group ran the turn twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.harness.setup import SetupError, codex_block, hook_command, merge_claude_hooks, merge_codex

ENGRAM = "/opt/engram/bin/engram"
KEY = Path("/home/ann/.config/engram/claude.key")
VKEY = "localhost/engram-1+0123abcd+AAAA"


def _hook(harness: str, url: str) -> str:
    return hook_command(ENGRAM, harness, url, KEY, VKEY)


def test_claude_setup_takes_an_old_service_hook_out_of_a_users_group() -> None:
    old = _hook("claude-code", "http://old.example:8080")
    new = _hook("claude-code", "http://new.example:8080")
    mine = {"type": "command", "command": "echo mine"}
    settings = {
        "hooks": {"UserPromptSubmit": [{"matcher": "", "hooks": [{"type": "command", "command": old}, mine]}]}
    }
    out = merge_claude_hooks(settings, new, Path("settings.json"))
    commands = [h["command"] for g in out["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    assert old not in json.dumps(out)
    assert commands.count(new) == 1 and "echo mine" in commands  # the user's hook is kept
    assert {"matcher": "", "hooks": [mine]} in out["hooks"]["UserPromptSubmit"]


def test_codex_setup_refuses_an_engram_hook_beside_the_users_own_outside_its_block() -> None:
    user = (
        'model = "o3"\n[[hooks.UserPromptSubmit]]\n[[hooks.UserPromptSubmit.hooks]]\ntype = "command"\n'
        f"command = {json.dumps(_hook('codex', 'http://old.example:8080'))}\n"
        '[[hooks.UserPromptSubmit.hooks]]\ntype = "command"\ncommand = "echo mine"\n'
    )
    with pytest.raises(SetupError) as e:
        merge_codex(Path("config.toml"), user, codex_block(ENGRAM, "http://new.example:8080", KEY, VKEY))
    assert e.value.check == "setup.codex_duplicate"

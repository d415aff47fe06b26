"""Issue 44, deliver 1: how ``engram setup`` merges into a harness's own files: the user's
other entries kept, Engram's own replaced where they stand (never twice), files it cannot
read or that are links refused before anything is written."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from engram.harness.setup import (
    CLAUDE_EVENTS,
    CODEX_BEGIN,
    CODEX_END,
    SetupError,
    codex_block,
    hermes_provider,
    hook_command,
    is_engram_hook,
    load_json_object,
    merge_claude_hooks,
    merge_codex,
    read_text,
)

VKEY = "localhost/engram-1+0123abcd+AAAA"
KEY = Path("/home/a user/keys/claude.key")  # a space, as in many homes
ENGRAM = "/opt/my tools/bin/engram"


def _cmd(harness: str = "claude-code") -> str:
    return hook_command(ENGRAM, harness, "http://127.0.0.1:8080", KEY, VKEY)


def test_hook_command_quotes_paths_with_spaces_and_is_recognised() -> None:
    cmd = _cmd()
    assert cmd.startswith("'/opt/my tools/bin/engram' hook claude-code")
    assert "'/home/a user/keys/claude.key'" in cmd
    assert is_engram_hook(cmd, "claude-code") and not is_engram_hook(cmd, "codex")
    assert is_engram_hook("engram hook claude-code --server x", "claude-code")  # the docs' paste
    assert not is_engram_hook("my-engram-wrapper hook claude-code", "claude-code")
    assert not is_engram_hook("echo 'unterminated", "claude-code")


def test_claude_hooks_keep_the_users_hooks_and_replace_engrams_in_place() -> None:
    user_hook = {"hooks": [{"type": "command", "command": "~/bin/lint.sh"}]}
    pasted = {"hooks": [{"type": "command", "command": "engram hook claude-code --server http://old"}]}
    settings = {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {"UserPromptSubmit": [pasted, user_hook, pasted], "Notification": [user_hook]},
    }
    merged = merge_claude_hooks(settings, _cmd(), Path("settings.json"))
    assert merged["model"] == "opus" and merged["permissions"] == {"allow": ["Bash(ls)"]}
    assert merged["hooks"]["Notification"] == [user_hook]
    ups = merged["hooks"]["UserPromptSubmit"]
    assert len(ups) == 2 and ups[1] == user_hook  # the pasted group replaced where it stood, once
    assert ups[0]["hooks"][0]["command"] == _cmd()
    assert set(merged["hooks"]) == {e for e, _ in CLAUDE_EVENTS} | {"Notification"}
    assert merge_claude_hooks(merged, _cmd(), Path("settings.json")) == merged  # idempotent
    assert settings["hooks"]["UserPromptSubmit"][0] is pasted  # the input is not mutated


@pytest.mark.parametrize(
    "text",
    [
        '{\n  // my settings\n  "model": "opus"\n}',  # comments are not JSON
        '{"model": "opus",}',  # a trailing comma
        "[1, 2]",  # JSON, but not an object
        '{"hooks": {"Stop": []}, "model": "x", "hooks": {}}',  # a key twice: rewriting would drop one
    ],
)
def test_claude_settings_that_are_not_a_json_object_are_refused(text: str) -> None:
    with pytest.raises(SetupError) as e:
        load_json_object(Path("settings.json"), text)
    assert e.value.check == "setup.json" and "nothing was written" in str(e.value)


def test_claude_hooks_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(SetupError, match=r"hooks\.Stop is not a list"):
        merge_claude_hooks({"hooks": {"Stop": {"oops": 1}}}, _cmd(), Path("s.json"))


def test_a_symlinked_config_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}", encoding="utf-8")
    link = tmp_path / "settings.json"
    os.symlink(real, link)
    with pytest.raises(SetupError) as e:
        read_text(link)
    assert e.value.check == "setup.symlink"
    dangling = tmp_path / "dangling.json"
    os.symlink(tmp_path / "nowhere", dangling)  # a link to nothing is refused too
    with pytest.raises(SetupError, match="symbolic link"):
        read_text(dangling)


def test_codex_block_is_valid_toml_with_spaces_and_quotes() -> None:
    key = Path('/home/a "quoted" user/codex.key')
    parsed = tomllib.loads(codex_block(ENGRAM, "http://127.0.0.1:8080", key, VKEY))
    server = parsed["mcp_servers"]["engram"]
    assert server["command"] == ENGRAM
    assert server["args"][server["args"].index("--key-file") + 1] == str(key)
    assert set(parsed["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}


def test_codex_merge_keeps_the_users_config_and_comments_and_is_idempotent() -> None:
    user = '# my settings\nmodel = "o3"  # the model\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    block = codex_block(ENGRAM, "http://127.0.0.1:8080", KEY, VKEY)
    once = merge_codex(Path("config.toml"), user, block)
    assert once.startswith(user) and "# the model" in once
    parsed = tomllib.loads(once)
    assert parsed["model"] == "o3" and set(parsed["mcp_servers"]) == {"docs", "engram"}
    assert merge_codex(Path("config.toml"), once, block) == once
    # a new URL replaces the block where it is; what the user added after it stays
    later = once + '\n[profiles.fast]\nmodel = "o4-mini"\n'
    moved = merge_codex(Path("config.toml"), later, codex_block(ENGRAM, "http://10.0.0.2:8080", KEY, VKEY))
    assert moved.count(CODEX_BEGIN) == 1 and "10.0.0.2" in moved and "127.0.0.1" not in moved
    assert tomllib.loads(moved)["profiles"] == {"fast": {"model": "o4-mini"}}


def test_codex_merge_refuses_what_would_run_twice_or_break() -> None:
    block = codex_block(ENGRAM, "http://127.0.0.1:8080", KEY, VKEY)
    pasted = '[mcp_servers.engram]\ncommand = "engram"\nargs = ["mcp"]\n'
    with pytest.raises(SetupError) as e:
        merge_codex(Path("c.toml"), pasted, block)
    assert e.value.check == "setup.codex_duplicate"
    hooks = (
        '[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\ncommand = "engram hook codex --server x"\n'
    )
    with pytest.raises(SetupError, match="logged twice"):
        merge_codex(Path("c.toml"), hooks, block)
    with pytest.raises(SetupError) as e:
        merge_codex(Path("c.toml"), "model = = 1\n", block)
    assert e.value.check == "setup.toml"
    with pytest.raises(SetupError) as e:
        merge_codex(Path("c.toml"), f"{CODEX_BEGIN}\n[x]\n", block)  # its end marker deleted
    assert e.value.check == "setup.codex_block"
    # an inline hooks table the block's [[hooks.X]] cannot extend: the merged file is checked
    with pytest.raises(SetupError) as e:
        merge_codex(Path("c.toml"), "hooks = { Stop = [] }\n", block)
    assert e.value.check == "setup.toml"
    assert CODEX_END in block


def test_hermes_provider_is_read_from_its_memory_section(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "model: x\nmemory:\n  # chosen by hand\n  provider: engram\n  other: 1\nagent:\n  provider: mem0\n",
        encoding="utf-8",
    )
    assert hermes_provider(tmp_path) == "engram"
    (tmp_path / "config.yaml").write_text("memory:\n  provider: 'mem0'\n", encoding="utf-8")
    assert hermes_provider(tmp_path) == "mem0"
    (tmp_path / "config.yaml").write_text("agent:\n  provider: engram\n", encoding="utf-8")
    assert hermes_provider(tmp_path) is None


def test_a_config_that_is_not_utf8_or_not_a_file_is_refused(tmp_path: Path) -> None:
    latin = tmp_path / "settings.json"
    latin.write_bytes(b'{"model": "caf\xe9"}')
    with pytest.raises(SetupError) as e:
        read_text(latin)
    assert e.value.check == "setup.encoding"
    folder = tmp_path / ".claude.json"
    folder.mkdir()
    with pytest.raises(SetupError) as e:
        read_text(folder)
    assert e.value.check == "setup.not_file"
    assert read_text(tmp_path / "absent.json") is None

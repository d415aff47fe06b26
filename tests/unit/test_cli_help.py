"""Every ``engram`` command's --help is complete as written (issue 13): flags show no
``<bool>`` type, and help texts keep their brackets (``[a-z0-9]`` was eaten as markup)."""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.testing import CliRunner

from engram.cli.app import app


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _commands(sub, (*path, name))
    return out


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_every_help_is_complete() -> None:
    root = typer.main.get_command(app)
    runner = CliRunner()
    checked = 0
    for path, cmd in _commands(root):
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, (path, res.output)
        assert "<bool>" not in res.output, path
        shown = _norm(res.output)
        for p in cmd.params:
            if getattr(p, "help", None):
                assert _norm(p.help) in shown, (path, p.name, p.help)
                checked += 1
    assert checked > 100
    create = runner.invoke(app, ["agent", "create", "--help"], env={"COLUMNS": "200"}).output
    assert "[a-z0-9][a-z0-9._-]{0,63}" in create


def test_the_top_help_lists_every_command_whole_with_the_version() -> None:
    """Issue 44: ``engram --help`` listed neither mcp, hook, hermes nor --version, and cut
    descriptions at "..."; the harness commands' help was in argparse's style."""
    import subprocess
    import sys
    from pathlib import Path

    engram = str(Path(sys.executable).parent / "engram")
    env = {"COLUMNS": "80", "PATH": str(Path(sys.executable).parent)}
    top = subprocess.run([engram, "--help"], capture_output=True, text=True, env=env, check=True).stdout
    commands = top.split("Commands:", 1)[1]
    for name in ("mcp", "hook", "hermes", "memory", "mesh", "ui", "serve"):
        assert re.search(rf"^  {name} ", commands, re.MULTILINE), name
    assert "--version" in top and "..." not in commands, top
    for group in ("memory", "mesh", "log", "session", "token", "agent"):
        sub = subprocess.run([engram, group, "--help"], capture_output=True, text=True, env=env, check=True)
        assert "..." not in sub.stdout.split("Commands:", 1)[1], sub.stdout
    for argv in (["mcp", "--help"], ["hook", "--help"], ["hermes", "--help"], ["log", "pin", "--help"]):
        shown = subprocess.run([engram, *argv], capture_output=True, text=True, env=env, check=True).stdout
        assert shown.startswith("Usage: engram ") and "\nOptions:\n" in shown, shown
        assert "  -h, --help" in shown and "Show this message and exit." in shown, shown
    version = subprocess.run([engram, "--version"], capture_output=True, text=True, env=env, check=True)
    assert version.stdout.startswith("engram ")
    via_typer = CliRunner().invoke(app, ["--version"])
    assert via_typer.exit_code == 0 and via_typer.output == version.stdout

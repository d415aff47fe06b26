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

"""Issue 26, finding 6: the demo's "check it yourself" commands failed in a fresh shell
(``engram`` is in ``.venv/bin`` after the README's set-up command, not on PATH). Each printed
command now runs as printed from a shell whose PATH does not hold the venv.

Issue 44, finding 3: all 14 demo sessions landed on one server day (one dot, one bar, a
vertical log-size step, coverage 0). The sessions now spread over the demo's simulated weeks,
on the ledger's forward-only clock, each covered by its pact outcome; the demo prints the
commands that open its log in the web UI (tests/e2e/test_ui_browser.py runs them).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM


@dataclass(frozen=True)
class Demo:
    home: Path
    env: dict[str, str]
    stdout: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """One ``engram demo`` run (about a minute) for the tests of this module, in a shell whose
    PATH does not hold the venv."""
    tmp_path = tmp_path_factory.mktemp("demo")
    venv_bin = str(Path(ENGRAM).parent)
    fresh_path = ":".join(p for p in os.environ["PATH"].split(":") if p and Path(p) != Path(venv_bin))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")} | {
        "PATH": fresh_path,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_EMBEDDER": "off",
        "ENGRAM_VERIFIER_STATE": str(tmp_path / "verifier-state"),  # (module scope: not conftest's)
        "COLUMNS": "80",
    }
    run = subprocess.run([ENGRAM, "demo"], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    return Demo(home=tmp_path / "home", env=env, stdout=run.stdout)


def test_demo_commands_run_in_a_fresh_shell(demo: Demo, tmp_path: Path) -> None:
    env = demo.env
    section = demo.stdout.split("How to check it yourself", 1)[1].split("demo complete", 1)[0]
    commands = [
        line.strip() for line in section.splitlines() if line.startswith("  ") and " DIR " not in line
    ]
    assert len(commands) >= 9, section
    shell_env = {k: v for k, v in env.items() if k != "ENGRAM_HOME"}  # each command sets it
    for cmd in commands:
        run = subprocess.run(
            ["bash", "-c", cmd], env=shell_env, capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert run.returncode == 0, f"{cmd}\n{run.stdout[-1000:]}{run.stderr[-1000:]}"


def test_demo_sessions_span_weeks_are_covered_and_it_says_how_to_open_the_ui(demo: Demo) -> None:
    from ledger import explore
    from ledger.compose import open_ledger
    from ledger.config import Settings
    from ledger.oracle import agent_statement

    settings = Settings.from_env({"ENGRAM_HOME": str(demo.home), "ENGRAM_EMBEDDER": "off"})
    ledger = open_ledger(settings)
    size = ledger.size()
    rows = explore.entries_page(ledger, size, agent="support-bot", kind="session.opened", limit=100).rows
    opened = sorted(datetime.fromtimestamp(r.timestamp_us / 1e6, UTC) for r in rows)
    assert len(opened) == 15  # 14 tickets and the lifecycle's follow-up
    assert (opened[-1] - opened[0]).days >= 45
    assert len({d.isocalendar()[:2] for d in opened}) >= 8  # eight weeks or more, not one day
    assert opened[-1] <= datetime.now(UTC)  # simulated time never passes the present
    stamps = [r.timestamp_us for r in explore.entries_page(ledger, size, limit=100).rows]
    assert stamps == sorted(stamps, reverse=True) and len(set(stamps)) == len(stamps)  # honest order
    coverage = agent_statement(ledger, "support-bot").payload["coverage"]
    assert coverage["covered_sessions"] == 14 and coverage["closed_sessions"] == 15, coverage

    section = demo.stdout.split("Open it in the web UI", 1)[1].split("How to check it yourself", 1)[0]
    serve, ui = (shlex.split(line) for line in section.splitlines() if line.startswith("  "))
    assert serve[:2] == [f"ENGRAM_HOME={demo.home}", "ENGRAM_DEV_MODE=1"] and serve[3:] == [
        "serve",
        "--port",
        "8080",
    ]
    key = demo.home / "support-bot.key"
    assert ui[1:] == [
        "ui",
        "--key-file",
        str(key),
        "--server",
        "http://127.0.0.1:8080",
        "--log-key",
        ledger.vkey,
    ]
    assert key.stat().st_mode & 0o777 == 0o600 and re.match(r"^\S", key.read_text())
    from engram.protocol.keyfiles import load_agent_key

    agent, private = load_agent_key(key)
    assert agent == "support-bot"
    active = ledger.store.keys_of("support-bot")[-1]
    assert private.public_key().public_bytes_raw() == active.public_key  # the key after its rotation


def test_the_demo_never_overwrites_a_key_file_left_in_its_home(tmp_path: Path) -> None:
    """A ``support-bot.key`` left from another log stays as it was; the demo's key gets a
    name of its own, and the printed ``engram ui`` command names that one."""
    from types import SimpleNamespace

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from rich.console import Console

    from engram.cli.demo import _how_to_open
    from engram.client.sdk import Agent
    from verifier.note import format_verifier_key

    vkey = format_verifier_key(
        "example.com/demo", Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    )
    left = tmp_path / "support-bot.key"
    left.write_text("left from another log\n")
    console = Console(width=400, record=True)
    support, research = (
        Agent.generate(n, log_vkey=vkey, transport=None) for n in ("support-bot", "research-bot")
    )  # type: ignore[arg-type]
    d = SimpleNamespace(
        console=console,
        settings=SimpleNamespace(home=tmp_path),
        support=support,
        research=research,
        ledger=SimpleNamespace(vkey=vkey),
        key_path=None,
    )
    _how_to_open(d, into_this_log=False)  # type: ignore[arg-type]
    assert left.read_text() == "left from another log\n"
    assert d.key_path != left and d.key_path.name.startswith("support-bot-") and d.key_path.is_file()
    assert f"--key-file {d.key_path} " in console.export_text()

"""``ENGRAM_SEQUENCER`` takes effect (issue 43, Deliver 1): ``engram serve`` with more than one
worker hands its workers ``host`` unless the environment names a mode, a ledger opened with
``host`` routes its single appends through the host's sequencer (ledger.sequencer), and one
opened with ``process`` (the CLI's and the embedded SDK's default) has none, so in-process use
pays nothing for it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

import engram.cli.app as cli
import ledger.compose as compose
from ledger.compose import init_ledger, open_ledger
from ledger.config import Settings
from ledger.sequencer import HostSequencer


def _serve(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workers: int, env: dict[str, str]) -> str | None:
    seen: dict[str, Any] = {}
    # what the workers inherit: the environment when uvicorn starts them
    monkeypatch.setattr(
        uvicorn, "run", lambda app, **kw: seen.update(mode=os.environ.get("ENGRAM_SEQUENCER"))
    )
    monkeypatch.setattr(compose, "open_services", lambda settings: None)
    for name in ("ENGRAM_SEQUENCER", "ENGRAM_DATABASE_URL"):
        # Set, then deleted: monkeypatch records a variable only when it changes one, and serve
        # sets ENGRAM_SEQUENCER in this process's environment for its workers: a variable
        # absent before must be absent again after the test.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    full = {"ENGRAM_HOME": str(tmp_path), "ENGRAM_DEV_MODE": "1", **env}
    result = CliRunner().invoke(cli.app, ["serve", "--port", "8099", "--workers", str(workers)], env=full)
    assert result.exit_code == 0, result.output
    return seen["mode"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("workers", "env", "mode"),
    [
        (2, {}, "host"),
        (1, {}, None),
        (4, {"ENGRAM_SEQUENCER": "process"}, "process"),
        (1, {"ENGRAM_SEQUENCER": "host"}, "host"),
    ],
)
def test_serve_with_several_workers_defaults_to_one_sequencer_per_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workers: int, env: dict[str, str], mode: str | None
) -> None:
    assert _serve(monkeypatch, tmp_path, workers, env) == mode


def test_an_unknown_mode_stops_serve_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)
    monkeypatch.delenv("ENGRAM_DATABASE_URL", raising=False)
    env = {"ENGRAM_HOME": str(tmp_path), "ENGRAM_DEV_MODE": "1", "ENGRAM_SEQUENCER": "cluster"}
    result = CliRunner().invoke(cli.app, ["serve", "--workers", "2"], env=env)
    assert result.exit_code == 2 and "ENGRAM_SEQUENCER" in result.output


def test_the_mode_decides_where_a_ledger_sends_its_single_appends(tmp_path: Path) -> None:
    env = {"ENGRAM_HOME": str(tmp_path), "ENGRAM_EMBEDDER": "off"}
    init_ledger(Settings.from_env(env), "seq.example/log").store.engine.dispose()
    process = open_ledger(Settings.from_env(env))
    host = open_ledger(Settings.from_env({**env, "ENGRAM_SEQUENCER": "host"}))
    try:
        assert process.sequencer is None
        assert isinstance(host.sequencer, HostSequencer)
        assert host.sequencer.paths.lock == (tmp_path / "engram.db-sequencer.lock").resolve()
        assert not host.sequencer.paths.lock.exists()  # lazy: nothing until the first append
        from engram.client.sdk import Agent
        from ledger.inprocess import InProcess

        Agent.generate("a", log_vkey=host.vkey, transport=InProcess(host, log_only=True)).register()
        assert host.sequencer.is_sequencer and host.sequencer.paths.socket.exists()
        Agent.generate("b", log_vkey=host.vkey, transport=InProcess(process, log_only=True)).register()
        assert host.sequencer.server is not None and host.sequencer.server.forwarded == 0  # not through it
    finally:
        if isinstance(host.sequencer, HostSequencer):
            host.sequencer.close()
        for lg in (process, host):
            lg.store.engine.dispose()


def test_serving_in_a_test_leaves_the_process_environment_as_it_was(tmp_path: Path) -> None:
    """serve hands its workers ENGRAM_SEQUENCER through this process's environment: a test
    that runs it in process must not leave it set (it leaked into later tests of the same
    worker, whose subprocesses then joined a host sequencer they were not meant to)."""
    before = os.environ.get("ENGRAM_SEQUENCER")
    with pytest.MonkeyPatch.context() as mp:
        assert _serve(mp, tmp_path, 2, {}) == "host"
    assert os.environ.get("ENGRAM_SEQUENCER") == before

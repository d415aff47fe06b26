"""Issue 26, finding 3: after a different log was served at the same URL, every hook and
``--server`` command said "the request signature does not verify" (the check name printed
three times): the pinned key was used without comparing it with the service's key. Now the
service's key is compared on every connection, a difference is refused with one message
naming both keys, the pin file and how to re-pin, and ``engram log pin --reset`` re-pins."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.processes import ENGRAM, free_port, listening


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_stale_pin_explains_itself(tmp_path: Path) -> None:
    base = {**os.environ, "ENGRAM_EMBEDDER": "off", "ENGRAM_DEV_MODE": "1"}
    base.pop("ENGRAM_DATABASE_URL", None)
    a = {**base, "ENGRAM_HOME": str(tmp_path / "a")}
    b = {**base, "ENGRAM_HOME": str(tmp_path / "b")}
    assert _run(a, "init", "--origin", "first.example/log").returncode == 0
    assert _run(b, "init", "--origin", "second.example/log").returncode == 0
    key_a, key_b = _run(a, "log", "key").stdout.strip(), _run(b, "log", "key").stdout.strip()
    key = str(tmp_path / "ada.key")
    assert _run(a, "agent", "create", "ada", "--key-file", key).returncode == 0
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    client = {**base, "ENGRAM_HOME": str(tmp_path / "client")}
    recall = ("memory", "recall", "--server", url, "--key-file", key, "anything")
    with listening([ENGRAM, "serve", "--port", str(port)], a, port, what="first log"):
        first = _run(client, *recall)
        assert first.returncode == 0, first.stderr
        shown = _run(client, "log", "pin", "--server", url)
        assert shown.returncode == 0 and key_a in shown.stdout
    with listening([ENGRAM, "serve", "--port", str(port)], b, port, what="second log"):
        stale = _run(client, *recall)
        out = stale.stdout + stale.stderr
        assert stale.returncode != 0
        assert key_a in out and key_b in out and "engram log pin --reset" in out, out
        assert "signature" not in out, out
        reset = _run(client, "log", "pin", "--reset", "--server", url)
        assert reset.returncode == 0 and key_b in reset.stdout, reset.stdout + reset.stderr
        assert key_b in _run(client, "log", "pin", "--server", url).stdout

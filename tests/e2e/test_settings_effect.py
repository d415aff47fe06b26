"""Documented settings take effect through the real commands: ``ENGRAM_COMPACT_ON_SESSION_END=0
engram session close`` does not distil, and ``ENGRAM_DISTILLER_URL`` makes ``engram serve``
distil with a chat-completions endpoint (a local fake), sending the model and the API key."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from engram.client import Agent, AgentMemory, HttpTransport

ENGRAM = str(Path(sys.executable).parent / "engram")
TOKEN = "hF09VNC5e4iirW8x0N8fqZiaPiy8NoH4MtuhVJ03"
FAKE_MEMORY = "The customer wants every reply written in Esperanto (noted by the fake model)."


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "ENGRAM_HOME": str(tmp_path / "home"),
        "COLUMNS": "300",
        "CWD": str(tmp_path),
        **extra,
    }
    for k in ("ENGRAM_DATABASE_URL", "ENGRAM_WITNESS_POLICY", "ENGRAM_DISTILLER_URL"):
        if k not in extra:
            env.pop(k, None)
    return env


def _engram(env: dict[str, str], *args: str) -> str:
    run = subprocess.run(
        [ENGRAM, *args], env=env, cwd=env["CWD"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def _session(env: dict[str, str]) -> str:
    sid = _engram(env, "session", "open", "--key-file", "a.key").strip()
    _engram(env, "session", "turn", "--key-file", "a.key", "--session", sid, "--role", "user",
            "--content", "I prefer short answers, please.")  # fmt: skip
    _engram(env, "session", "turn", "--key-file", "a.key", "--session", sid, "--role", "assistant",
            "--content", "I will follow up on the refund by Friday.")  # fmt: skip
    return sid


def test_compact_on_session_end_off_means_close_does_not_distil(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _engram(env, "init", "--origin", "settings.example/log")
    _engram(env, "agent", "create", "ada", "--key-file", "a.key")

    off = _engram({**env, "ENGRAM_COMPACT_ON_SESSION_END": "0"}, "session", "close", "--key-file", "a.key",
                  "--session", _session(env))  # fmt: skip
    assert "closed at index" in off and "distilled" not in off

    on = _engram(env, "session", "close", "--key-file", "a.key", "--session", _session(env))
    assert "closed at index" in on and "distilled" in on


class _FakeChat(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeChat.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        entries = [
            {
                "category": "PREFERENCE",
                "subject": "the customer",
                "content": FAKE_MEMORY,
                "tags": ["style"],
                "confidence": 90,
                "source_turns": [0],
            }
        ]
        reply = {"choices": [{"message": {"role": "assistant", "content": json.dumps({"entries": entries})}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_llm() -> Iterator[str]:
    _FakeChat.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def test_distiller_url_makes_engram_serve_use_the_chat_completions_endpoint(
    tmp_path: Path, fake_llm: str
) -> None:
    env = _env(
        tmp_path,
        ENGRAM_OPERATOR_TOKEN=TOKEN,
        ENGRAM_DISTILLER_URL=fake_llm,
        ENGRAM_DISTILLER_MODEL="tiny-model",
        ENGRAM_DISTILLER_API_KEY="sk-fake",
    )
    _engram(env, "init", "--origin", "settings.example/serve")
    vkey = _engram(env, "log", "key").strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen([ENGRAM, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError("the server did not start")
        http = HttpTransport(url, operator_token=TOKEN)
        mem = AgentMemory(Agent.generate("bea", log_vkey=vkey, transport=http, state_dir=None), http)
        mem.agent.register()
        sid = mem.open_session(title="style")
        mem.turn(sid, "user", "Please answer me in Esperanto from now on.")
        closed = mem.close_session(sid)
        items = mem.items(status="all")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert closed.entries == 1
    assert len(_FakeChat.requests) == 1
    sent = _FakeChat.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["auth"] == "Bearer sk-fake" and sent["body"]["model"] == "tiny-model"
    assert "Esperanto" in json.dumps(sent["body"]["messages"])
    assert any(it.content == FAKE_MEMORY for it in items)

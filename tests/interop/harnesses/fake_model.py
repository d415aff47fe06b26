"""A fake model endpoint on loopback for the real Claude Code and Codex binaries: the
Anthropic Messages API (``POST /v1/messages``, streamed or not) and the OpenAI Responses API
(``POST /v1/responses``, streamed), each answering every request with one short text reply
and no tool call. Every request is appended to ``--log`` as one JSON line (path and body),
so a test can read what the harness sent the model (e.g. the context its hooks injected).

    python tests/interop/harnesses/fake_model.py --port 0 --log requests.jsonl --reply "Noted."
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


def anthropic_events(reply: str, model: str) -> list[tuple[str, dict[str, Any]]]:
    usage = {
        "input_tokens": 10,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": reply}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def responses_events(reply: str, model: str) -> list[tuple[str, dict[str, Any]]]:
    item = {
        "id": "msg_fake",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": reply, "annotations": []}],
    }
    base = {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1,
        "model": model,
        "status": "in_progress",
        "output": [],
    }
    done = {
        **base,
        "status": "completed",
        "output": [item],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 3,
            "total_tokens": 13,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    return [
        ("response.created", {"type": "response.created", "response": base}),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
        ),
        (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "msg_fake",
                "output_index": 0,
                "content_index": 0,
                "delta": reply,
            },
        ),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *_: Any) -> None:
        pass

    def _record(self, body: Any) -> None:
        with self.server.lock, open(self.server.log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, "body": body}) + "\n")

    def do_GET(self) -> None:
        self._record(None)
        if self.path.startswith("/v1/models"):
            self._json(
                {
                    "data": [
                        {"id": "fake-model", "object": "model", "type": "model", "display_name": "fake"}
                    ],
                    "object": "list",
                    "has_more": False,
                }
            )
            return
        self._json({}, status=404)

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self._record(body)
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        stream = isinstance(body, dict) and body.get("stream")
        path = self.path.split("?", 1)[0]
        if path.endswith("/messages/count_tokens"):
            self._json({"input_tokens": 10})
        elif path.endswith("/messages"):
            if stream:
                self._stream(_sse(anthropic_events(self.server.reply, model)))
            else:
                self._json(
                    {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [{"type": "text", "text": self.server.reply}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 3},
                    }
                )
        elif path.endswith("/responses"):
            self._stream(_sse(responses_events(self.server.reply, model)))
        else:
            self._json({"error": {"type": "not_found", "message": path}}, status=404)

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, log: Path, reply: str) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.log, self.reply, self.lock = log, reply, threading.Lock()


def serve(port: int, log: Path, reply: str) -> _Server:
    """Start the fake endpoint in a thread; returns the server (``server_address[1]``, ``shutdown()``)."""
    srv = _Server(port, log, reply)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--reply", default="Noted.")
    a = ap.parse_args()
    srv = _Server(a.port, a.log, a.reply)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()

"""Processes the end-to-end tests start on loopback: a free port, a process that must come
to listen, and ``engram serve`` for the length of a ``with`` block."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ENGRAM = str(Path(sys.executable).parent / "engram")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def listening(args: Sequence[str], env: dict[str, str], port: int, *, what: str) -> Iterator[None]:
    """Run ``args`` until the block ends; enter once it accepts connections on ``port``
    (fails with its stderr if it exits first)."""
    proc = subprocess.Popen(list(args), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            if proc.poll() is not None:
                raise AssertionError(f"{what} exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError(f"{what} did not listen on {port}")
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def engram_serve(env: dict[str, str]) -> Iterator[str]:
    """``engram serve`` (one worker) on a free port; yields its URL."""
    port = free_port()
    with listening([ENGRAM, "serve", "--port", str(port)], env, port, what="engram serve"):
        yield f"http://127.0.0.1:{port}"

"""Start-up cost of the ``engram`` command on its paths: prints figures; asserts no timings.

    python bench/bench_cli.py            # full run (20 runs per path)
    python bench/bench_cli.py --smoke    # CI smoke run (2 runs per path)

A harness hook is a process per prompt, so its start-up is paid on every turn. Measured as
CPU seconds (user + system) of the child process, which the machine's load moves less than
wall time, and as wall time; the median per path, with the ratio to the service CLI's
``engram --help`` measured in the same run:

* ``--version``: the entry point alone;
* ``hook (client path)``: ``engram hook claude-code`` with a ``Stop`` payload against an
  Engram service, the whole hook (the turn is signed, appended over HTTP, its receipt and
  inclusion proof verified); the target is under 0.2 s of CPU;
* ``hook (import only)``: the same with an unknown event (start-up without the round trip);
* ``hook (client, 5k prompt)`` and ``(40k prompt)``: ``UserPromptSubmit`` against the
  service with a pasted traceback of 5,000 and 40,000 characters (issue 40, finding 7: the
  hook failed above 1,000): the bounded query derived, recall injected, the prompt logged
  (the 40,000 in two parts);
* ``--help`` (service CLI): typer, SQLAlchemy, Alembic;
* ``hook (embedded, prompt)``: ``engram hook claude-code`` with a ``UserPromptSubmit``
  payload on the embedded log (the prompt logged, recall injected; target under 1 s);
* ``mcp first call``: ``engram mcp`` started fresh over stdio, ``initialize`` and one
  ``tools/call`` (``memory_recall``) answered, then closed; against the service and on the
  embedded log (issue 26's target: under 1 s of wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENGRAM = str(Path(sys.executable).parent / "engram")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _measure(args: list[str], env: dict[str, str], stdin: bytes = b"") -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run = subprocess.run(args, env=env, input=stdin, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {run.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def _mcp_first_call(env: dict[str, str]) -> tuple[float, float]:
    """(CPU, wall seconds) of a fresh ``engram mcp``: initialize and one tools/call."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [ENGRAM, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None
    assert proc.stdout is not None

    def send(obj: dict[str, object]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(obj) + "\n").encode())
        proc.stdin.flush()

    def answer(want: int) -> dict[str, object]:
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(
                    f"engram mcp exited: {proc.stderr.read().decode()[-500:] if proc.stderr else ''}"
                )
            msg = json.loads(line)
            if msg.get("id") == want:
                return dict(msg)

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    )
    answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_recall", "arguments": {"query": "cache key"}},
        }
    )
    reply = answer(2)
    wall = time.perf_counter() - t0
    result = reply.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        raise SystemExit(f"engram mcp: the call failed: {reply}")
    proc.stdin.close()
    proc.wait(timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    runs = 2 if a.smoke else a.runs
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "ENGRAM_HOME": f"{tmp}/home",
            "ENGRAM_VERIFIER_STATE": f"{tmp}/vstate",
            "ENGRAM_HOOK_STATE": f"{tmp}/hooks",
            "ENGRAM_OPERATOR_TOKEN": secrets.token_urlsafe(32),
            "ENGRAM_EMBEDDER": "off",
        }
        for var in ("ENGRAM_DATABASE_URL", "ENGRAM_URL", "ENGRAM_DEV_MODE"):
            env.pop(var, None)
        subprocess.run(
            [ENGRAM, "init", "--origin", "bench.example/log"], env=env, check=True, capture_output=True
        )
        key = f"{tmp}/a.key"
        subprocess.run(
            [ENGRAM, "agent", "create", "a", "--key-file", key], env=env, check=True, capture_output=True
        )
        vkey = subprocess.run(
            [ENGRAM, "log", "key"], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        port = _free_port()
        server = subprocess.Popen(
            [ENGRAM, "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(300):
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.1)
            client = {**env, "ENGRAM_URL": url, "ENGRAM_KEY_FILE": key, "ENGRAM_LOG_KEY": vkey}
            start = json.dumps(
                {"session_id": "bench", "hook_event_name": "SessionStart", "cwd": tmp}
            ).encode()
            _measure([ENGRAM, "hook", "claude-code"], client, start)
            stop = json.dumps(
                {
                    "session_id": "bench",
                    "hook_event_name": "Stop",
                    "last_assistant_message": "Done: the cache key was stale.",
                }
            ).encode()
            noop = json.dumps({"session_id": "bench", "hook_event_name": "Notification"}).encode()
            prompt = json.dumps(
                {"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": "what was stale?"}
            ).encode()
            frames = "".join(f'  File "/srv/app/step_{i}.py", line {i}, in run_{i}\n' for i in range(1200))
            pasted = {
                n: json.dumps(
                    {
                        "session_id": "bench",
                        "hook_event_name": "UserPromptSubmit",
                        "prompt": ("why does the deploy fail?\n" + frames)[:n],
                    }
                ).encode()
                for n in (5_000, 40_000)
            }
            embedded = {k: v for k, v in client.items() if k not in ("ENGRAM_URL", "ENGRAM_LOG_KEY")}
            _measure([ENGRAM, "hook", "claude-code"], embedded, start)
            paths = {
                "--version": ([ENGRAM, "--version"], env, b""),
                "hook (import only)": ([ENGRAM, "hook", "claude-code"], client, noop),
                "hook (client path, Stop)": ([ENGRAM, "hook", "claude-code"], client, stop),
                "hook (client, 5k prompt)": ([ENGRAM, "hook", "claude-code"], client, pasted[5_000]),
                "hook (client, 40k prompt)": ([ENGRAM, "hook", "claude-code"], client, pasted[40_000]),
                "--help (service CLI)": ([ENGRAM, "--help"], env, b""),
                "hook (embedded, prompt)": ([ENGRAM, "hook", "claude-code"], embedded, prompt),
            }
            results: dict[str, tuple[float, float]] = {}
            for name, (args, e, stdin) in paths.items():
                samples = [_measure(args, e, stdin) for _ in range(runs)]
                results[name] = (
                    statistics.median(c for c, _ in samples),
                    statistics.median(w for _, w in samples),
                )
            for name, e in (("mcp first call (service)", client), ("mcp first call (embedded)", embedded)):
                samples = [_mcp_first_call(e) for _ in range(runs)]
                results[name] = (
                    statistics.median(c for c, _ in samples),
                    statistics.median(w for _, w in samples),
                )
        finally:
            server.terminate()
            server.wait(timeout=30)
    base_cpu = results["--help (service CLI)"][0]
    print(f"engram start-up, median of {runs} runs (CPU = user + system of the child)")
    print(f"{'path':28} {'CPU s':>7} {'wall s':>7} {'CPU vs service CLI':>19}")
    for name, (cpu, wall) in results.items():
        print(f"{name:28} {cpu:7.3f} {wall:7.3f} {cpu / base_cpu:18.2f}x")
    hook_cpu = results["hook (client path, Stop)"][0]
    print(f"hook client path: {hook_cpu:.3f} s CPU against the 0.2 s target ({hook_cpu / 0.2:.2f}x of it)")
    for name in ("hook (embedded, prompt)", "mcp first call (service)", "mcp first call (embedded)"):
        wall = results[name][1]
        print(f"{name}: {wall:.3f} s wall against the 1 s target ({wall:.2f}x of it)")


if __name__ == "__main__":
    main()

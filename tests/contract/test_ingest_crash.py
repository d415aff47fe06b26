"""Issue 42, Deliver 5, on both backends: in process the projection follows a session's turns
in batches (the door defers them), so a process killed mid-ingest leaves acknowledged turns
the projection has not applied. Every acknowledged turn is in the log, and the next process
applies it and recalls it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.keyfiles import LogKey
from ledger.compose import memory_rules
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from verifier.event import Leaf
from verifier.jcs import parse_strict

ORIGIN = "crash.example/ingest"
ROOT = Path(__file__).resolve().parents[2]

#: The writer: a fresh log, one agent, sessions of 6 turns each closed (distilled), every
#: acknowledged turn printed as "<index> <text>" once its call returned; it runs until killed.
WRITER = """
import sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine

ledger = create_ledger(
    make_engine(sys.argv[1]),
    LogKey(sys.argv[2], Ed25519PrivateKey.from_private_bytes(bytes(range(32)))),
    policy_key=Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))),
)
memory = MemoryService(ledger, access_log="off")
agent = Agent.generate("ada", log_vkey=ledger.vkey, transport=InProcessMemory(memory), state_dir=None)
agent.register()
ada = AgentMemory(agent)
i = 0
while True:
    sid = ada.open_session(title=f"part {i}")
    for _ in range(6):
        text = f"kiwi{i} crate number {i} left the depot on time"
        print(ada.turn(sid, "user", text).index, text, flush=True)
        i += 1
    ada.close_session(sid)
"""


def test_turns_acknowledged_before_a_kill_are_logged_applied_and_recalled_after_it(db_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, db_url, ORIGIN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    acks: list[tuple[int, str]] = []
    deadline = time.monotonic() + 240
    try:
        assert proc.stdout is not None
        while len(acks) < 15 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            index, text = line.rstrip("\n").split(" ", 1)
            acks.append((int(index), text))
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-ingest: turns of the open session not applied
        proc.wait(30)
    assert len(acks) >= 15, proc.stderr.read() if proc.stderr else ""

    engine = make_engine(db_url)
    try:
        ledger = Ledger(
            SqlStore(engine),
            LogKey(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32)))),
            policy_key=Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))),
            rules=memory_rules(),
        )
        for index, text in acks:  # every acknowledged turn is in the log, as signed
            raw = ledger.store.leaf(index)
            stored = ledger.store.body(index)
            assert raw is not None and stored is not None
            assert Leaf.from_bytes(raw).envelope.kind == "session.turn"
            assert parse_strict(stored[1], max_bytes=1 << 20)["content"] == text
        memory = MemoryService(ledger, access_log="off")
        for index, text in acks[-3:]:  # the next process applies them, and recall finds them
            found = memory.recall("ada", text.split()[0], record_access=False, sources="records")
            assert index in [r.index for r in found.ranked], (index, text)
        assert all(memory.projection.item("ada", f"{i}.0") is not None for i, _ in acks)
    finally:
        engine.dispose()

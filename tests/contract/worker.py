"""Subprocess worker for concurrency and crash tests: appends events and reports each ack.

Usage: python -m tests.contract.worker DB_URL AGENT COUNT [--register] [--threads N]
       [--sequencer HOME [--retry-lost] [--linger]] [--wait-go]

Prints one line ``ack <index> <leaf_hash_hex>`` per acknowledged append, flushed at once,
so that a parent that kills this process knows exactly which appends were acknowledged.
With ``--threads N``, N agents (``AGENT-0`` ...) append COUNT events each from N threads
through the process's group commit, so a kill lands in the middle of shared batches.

With ``--sequencer HOME`` single appends go through the host's sequencer (ledger.sequencer,
``ENGRAM_SEQUENCER=host``; HOME keys it on PostgreSQL): this process becomes it or forwards to
it. ``--retry-lost``: an append answered ``StorageError`` (the sequencer died with it in
flight) prints ``lost`` and is tried again (the agent learns from a version conflict if it was
logged after all). ``--linger``: after its appends the process stays (serving, if it is the
sequencer) until its standard input closes. At the end it prints
``stats <forwarded> <local> <served>``. ``--wait-go``: once set up (imports, the log opened,
the sequencer attached) the process prints ``ready`` and starts appending only when a line
arrives on its standard input, so that a parent can start several processes' appends at once.
"""

from __future__ import annotations

import sys
import threading

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.sdk import Agent
from engram.protocol.errors import StorageError
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt
from ledger.compose import memory_rules
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore

ORIGIN = "example.com/engram-test"
LOG_SEED = bytes(range(32))


def agent_key(name: str) -> Ed25519PrivateKey:
    import hashlib

    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(name.encode()).digest())


def main(argv: list[str]) -> None:
    url, name, count = argv[0], argv[1], int(argv[2])
    threads = int(argv[argv.index("--threads") + 1]) if "--threads" in argv else 0
    ledger = Ledger(
        SqlStore(make_engine(url)),
        LogKey(ORIGIN, Ed25519PrivateKey.from_private_bytes(LOG_SEED)),
        rules=memory_rules(),
    )
    seq = None
    if "--sequencer" in argv:
        from pathlib import Path

        from ledger.sequencer import attach

        seq = attach(ledger, url, Path(argv[argv.index("--sequencer") + 1]))
    retry_lost = "--retry-lost" in argv
    out = threading.Lock()

    def one(agent: Agent, agent_name: str, i: int) -> Receipt:
        if i % 2:
            return agent.append("commitment", {"promise": f"{agent_name} promise {i}"})
        return agent.append("eval.outcome", {"eval": f"{agent_name}-{i}", "result": "pass", "score": i % 101})

    def run(agent_name: str) -> None:
        agent = Agent(
            AgentSigner(agent_name, agent_key(agent_name), origin=ORIGIN),
            log_vkey=ledger.vkey,
            transport=InProcess(ledger, log_only=True),
            max_retries=50,
        )
        if "--register" in argv:
            agent.register()
        for i in range(count):
            while True:
                try:
                    r = one(agent, agent_name, i)
                    break
                except StorageError:
                    if not retry_lost:
                        raise
                    with out:
                        sys.stdout.write("lost\n")
                        sys.stdout.flush()
            with out:
                sys.stdout.write(f"ack {r.index} {r.leaf_hash.hex()}\n")
                sys.stdout.flush()

    if "--wait-go" in argv:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()
    if not threads:
        run(name)
    else:
        workers = [threading.Thread(target=run, args=(f"{name}-{t}",)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    if seq is not None:
        if "--linger" in argv:
            sys.stdin.read()
        served = 0 if seq.server is None else seq.server.forwarded
        sys.stdout.write(f"stats {seq.forwarded} {seq.local} {served}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])

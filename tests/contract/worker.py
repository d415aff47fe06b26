"""Subprocess worker for concurrency and crash tests: appends events and reports each ack.

Usage: python -m tests.contract.worker DB_URL AGENT COUNT [--register] [--threads N]

Prints one line ``ack <index> <leaf_hash_hex>`` per acknowledged append, flushed at once,
so that a parent that kills this process knows exactly which appends were acknowledged.
With ``--threads N``, N agents (``AGENT-0`` ...) append COUNT events each from N threads
through the process's group commit, so a kill lands in the middle of shared batches.
"""

from __future__ import annotations

import sys
import threading

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
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
    out = threading.Lock()

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
            if i % 2:
                r = agent.append("commitment", {"promise": f"{agent_name} promise {i}"})
            else:
                r = agent.append(
                    "eval.outcome", {"eval": f"{agent_name}-{i}", "result": "pass", "score": i % 101}
                )
            with out:
                sys.stdout.write(f"ack {r.index} {r.leaf_hash.hex()}\n")
                sys.stdout.flush()

    if not threads:
        run(name)
        return
    workers = [threading.Thread(target=run, args=(f"{name}-{t}",)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main(sys.argv[1:])

"""A process that appends and reports every acknowledged entry, for the crash harness.

Usage: python -m tests.harness.appender AGENT COUNT THREADS [--http URL --token T --vkey VKEY]
       [--shared]

In process (the ``engram init`` home ``ENGRAM_HOME`` names, with its log key and the signer's
record) or over HTTP: THREADS agents ``AGENT-0`` ... register and append COUNT events each.
Prints ``ack <index> <timestamp_us> <leaf_hash_hex>`` per acknowledged append, flushed at
once, so that a parent that SIGKILLs this process knows exactly what was acknowledged.

With ``--shared`` every thread of every such process appends to one stream, ``AGENT``'s
``commitment`` stream (the agent registered beforehand), racing for each version: each
attempt reads the head and submits the next version; a receipt prints ``ack``, a stream
conflict prints ``conflict`` and the thread tries again with the new head, any other error
ends the process with exit code 1. So every attempt is answered exactly once.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from engram.client.sdk import Agent, Transport
from engram.protocol.signer import AgentSigner
from tests.contract.worker import agent_key


def main(argv: list[str]) -> None:
    name, count, threads = argv[0], int(argv[1]), int(argv[2])
    transport: Transport
    if "--http" in argv:
        from engram.client.http import HttpTransport

        url = argv[argv.index("--http") + 1]
        token = argv[argv.index("--token") + 1]
        transport = HttpTransport(url, operator_token=token)
        vkey = argv[argv.index("--vkey") + 1]
    else:
        from ledger.compose import open_ledger
        from ledger.config import Settings
        from ledger.inprocess import InProcess

        ledger = open_ledger(Settings.from_env())
        transport = InProcess(ledger, log_only=True)
        vkey = ledger.vkey
    out = threading.Lock()
    if "--shared" in argv:
        _shared(name, count, threads, transport, vkey, out)
        return

    def run(agent_name: str) -> None:
        signer = AgentSigner(agent_name, agent_key(agent_name), origin=vkey.split("+")[0])
        agent = Agent(signer, log_vkey=vkey, transport=transport, max_retries=50)
        agent.register()
        for i in range(count):
            r = agent.append("commitment", {"promise": f"{agent_name} promise {i}"})
            with out:
                sys.stdout.write(f"ack {r.index} {r.timestamp_us} {r.leaf_hash.hex()}\n")
                sys.stdout.flush()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(run, [f"{name}-{t}" for t in range(threads)]))


def _shared(
    name: str, count: int, threads: int, transport: Transport, vkey: str, out: threading.Lock
) -> None:
    from engram.protocol.errors import ConflictError
    from engram.protocol.wire import StreamState

    signer = AgentSigner(name, agent_key(name), origin=vkey.split("+")[0])

    def run(_: int) -> None:
        done = 0
        while done < count:
            head: StreamState | None = transport.head(name, "commitment")
            sub = signer.event(
                "commitment",
                {"promise": f"{name} shared {done}"},
                version=0 if head is None else head.version + 1,
                prev=None if head is None else head.leaf_hash,
                client_time_us=time.time_ns() // 1000,
            )
            try:
                (r,) = transport.submit([sub])
            except ConflictError:
                with out:
                    sys.stdout.write("conflict\n")
                    sys.stdout.flush()
                continue
            done += 1
            with out:
                sys.stdout.write(f"ack {r.index} {r.timestamp_us} {r.leaf_hash.hex()} {r.version}\n")
                sys.stdout.flush()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(run, range(threads)))


if __name__ == "__main__":
    main(sys.argv[1:])

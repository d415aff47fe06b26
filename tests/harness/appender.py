"""A process that appends and reports every acknowledged entry, for the crash harness.

Usage: python -m tests.harness.appender AGENT COUNT THREADS [--http URL --token T --vkey VKEY]

In process (the ``engram init`` home ``ENGRAM_HOME`` names, with its log key and the signer's
record) or over HTTP: THREADS agents ``AGENT-0`` ... register and append COUNT events each.
Prints ``ack <index> <timestamp_us> <leaf_hash_hex>`` per acknowledged append, flushed at
once, so that a parent that SIGKILLs this process knows exactly what was acknowledged.
"""

from __future__ import annotations

import sys
import threading
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
        transport = InProcess(ledger)
        vkey = ledger.vkey
    out = threading.Lock()

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


if __name__ == "__main__":
    main(sys.argv[1:])

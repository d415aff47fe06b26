"""How long ``engram maintain --scrub-erased`` takes (docs/privacy.md, Erasure).

    python bench/bench_scrub.py --memories 5000            # SQLite
    python bench/bench_scrub.py --memories 5000 --pg URL   # PostgreSQL (a database it may fill)

Writes N memories of one agent in batches, erases one, then times the scrub. Prints figures;
asserts nothing about time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.client import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.bodies import written_body
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.maintain import scrub_erased
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--pg", help="a PostgreSQL URL (else SQLite in a temporary directory)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = a.pg or f"sqlite:///{tmp}/engram.db"
        engine = make_engine(url)
        ledger = create_ledger(
            engine,
            LogKey("bench.example/log", Ed25519PrivateKey.generate()),
            policy_key=Ed25519PrivateKey.generate(),
            signed_head=Path(tmp) / "signed-head",
        )
        memory = MemoryService(ledger, access_log="off")
        ada = Agent.generate("ada", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
        ada.register()
        t0 = time.monotonic()
        receipts = [
            ada.append(
                "memory.written",
                written_body(
                    ledger.gate, category="LEARNING", content=f"Fact {i}: build {i} used cache key k{i}"
                ),
            )
            for i in range(a.memories)
        ]
        first = receipts[0].index
        memory.sync()
        wrote = time.monotonic() - t0
        ada.transport = InProcessMemory(memory)  # the erasure goes in through the memory service
        AgentMemory(ada).erase(first, reason="bench")
        report = scrub_erased(engine)
        print(
            f"{engine.dialect.name}: {a.memories} memories written in {wrote:.1f} s; "
            f"scrub of {', '.join(report.tables)}: {report.seconds:.2f} s (complete: {report.complete})"
        )


if __name__ == "__main__":
    main()

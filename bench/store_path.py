"""The store path's CPU per operation (issue 43, Deliver 2): seconds of this process's CPU
(``time.process_time``, so less swayed by a loaded machine than a rate) for an append batch of
32 prepared events and of 1, the hot reads, a memory write with its projection sync, and a
recall. Prints one JSON line of microseconds. Not a section of ``python -m bench``: it
compares two trees, run alternately against each (docs/performance.md, "The store path
without the ORM"):

    PYTHONPATH=<tree> python -m bench.store_path sqlite|postgresql
"""

import json
import os
import sys
import tempfile
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.bench_log import new_ledger, pg_database
from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.signer import AgentSigner
from ledger.inprocess import InProcess
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory

backend = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
drop = None
if backend == "sqlite":
    url = f"sqlite:///{tempfile.mkdtemp(prefix='store-path-')}/store.db"
else:
    made = pg_database(
        os.environ.get("ENGRAM_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"), "_sp"
    )
    if made is None:
        raise SystemExit("PostgreSQL is unreachable")
    url, drop = made
ledger = new_ledger(url)
out: dict[str, float] = {}

# 1. append batches of 32 pre-signed, prepared events (fresh agents: registration batch, then one event each)
BATCH, ROUNDS = 32, 12
cpu = 0.0
n = 0
for r in range(ROUNDS):
    signers = [
        AgentSigner(f"r{r}-{i}", Ed25519PrivateKey.generate(), origin=ledger.origin) for i in range(BATCH)
    ]
    ledger.append([s.registration(client_time_us=1) for s in signers], operator=True)
    prepared = [
        ledger.prepare(s.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=2))
        for s in signers
    ]
    t = time.process_time()
    ledger.append_batch(prepared)
    if r >= 2:  # warm
        cpu += time.process_time() - t
        n += BATCH
out["append_batch_cpu_us_per_event"] = 1e6 * cpu / n

# 2. single-event appends (the batch of one: fixed per-transaction cost)
signers = [AgentSigner(f"one-{i}", Ed25519PrivateKey.generate(), origin=ledger.origin) for i in range(200)]
ledger.append([s.registration(client_time_us=1) for s in signers], operator=True)
prepared = [
    ledger.prepare(s.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=2))
    for s in signers
]
t = time.process_time()
for p in prepared:
    ledger.append_batch([p])
out["append_one_cpu_us"] = 1e6 * (time.process_time() - t) / len(prepared)

# 3. hot reads
t = time.process_time()
for _ in range(2000):
    ledger.store.latest_checkpoint()
out["latest_checkpoint_cpu_us"] = 1e6 * (time.process_time() - t) / 2000
t = time.process_time()
for i in range(2000):
    ledger.store.stream_heads(f"one-{i % 200}")
out["stream_heads_cpu_us"] = 1e6 * (time.process_time() - t) / 2000

# 4. memory writes (append + projection sync) and recall reads
memory = MemoryService(ledger, access_log="off")
agents = []
for i in range(4):
    a = Agent.generate(f"mem{i}", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
    a.register()
    a.transport = InProcessMemory(memory)
    agents.append(AgentMemory(a))
for i in range(20):
    agents[i % 4].write(category="LEARNING", content=f"warm up fact {i} about the staging database")
W = 120
t = time.process_time()
for i in range(W):
    agents[i % 4].write(category="LEARNING", content=f"release {i} ships on a Thursday from Frankfurt")
out["memory_write_cpu_us"] = 1e6 * (time.process_time() - t) / W
proj = memory.projection
t = time.process_time()
for i in range(500):
    proj.newest(f"mem{i % 4}", tiers=["HOT", "WARM"], statuses=["active"], limit=20)
    proj.items_by_refs(f"mem{i % 4}", ["30.0", "31.0", "32.0"], tiers=["HOT", "WARM"], statuses=["active"])
    proj.applied_size()
out["recall_reads_cpu_us"] = 1e6 * (time.process_time() - t) / 500
t = time.process_time()
for i in range(60):
    memory.recall(f"mem{i % 4}", "when does the release ship", record_access=False)
out["recall_cpu_us"] = 1e6 * (time.process_time() - t) / 60

ledger.store.engine.dispose()
if drop:
    drop()
print(json.dumps({k: round(v, 1) for k, v in out.items()}))

"""Memory Mesh recall benchmark: what a member's recall costs as its meshes' creator makes
meshes the member is not in. Prints figures and ratios; asserts no timings.

    python bench/bench_mesh.py            # 300 unrelated meshes (SQLite)
    python bench/bench_mesh.py --smoke    # CI smoke run
    python bench/bench_mesh.py --meshes 1000 --recalls 60

Scenario: ada creates mesh ``ada/team`` and shares LEARNING with bob; ada writes WARM
LEARNING memories. bob recalls (median and p90 of ``--recalls`` recalls, each recording its
use, so the log grows between two recalls as it does in use) with ada having no other mesh,
then again after ada created ``--meshes`` meshes of its own (each with an invitation and a
grant), which bob is not in. Issue 40, finding 10: every recall re-read and parsed every mesh
body of every member, so the second figure was 4-10x the first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.client import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine


def _recalls(memory: MemoryService, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        res = memory.recall("bob", f"Northwind bond lesson {i % 7}")
        out.append((time.perf_counter() - t0) * 1000)
        assert any(r.author == "ada" for r in res.ranked), "the shared memories must flow"
    return out


def _figures(label: str, ms: list[float]) -> float:
    p50 = statistics.median(ms)
    p90 = sorted(ms)[int(len(ms) * 0.9) - 1]
    print(f"  {label:<44} p50 {p50:7.2f} ms   p90 {p90:7.2f} ms   ({len(ms)} recalls)")
    return p50


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--meshes", type=int, default=300, help="unrelated meshes of the creator")
    p.add_argument("--memories", type=int, default=40, help="shared WARM memories of the author")
    p.add_argument("--recalls", type=int, default=40)
    p.add_argument("--smoke", action="store_true", help="a small, quick run")
    args = p.parse_args(argv)
    if args.smoke:
        args.meshes, args.memories, args.recalls = 30, 10, 8
    with tempfile.TemporaryDirectory() as d:
        log_key = LogKey("bench.example/mesh", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
        ledger = create_ledger(
            make_engine(f"sqlite:///{Path(d) / 'mesh.db'}"),
            log_key,
            policy_key=Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))),
        )
        memory = MemoryService(ledger, access_log="sync")
        transport = InProcessMemory(memory)

        def agent(name: str) -> AgentMemory:
            a = Agent.generate(name, log_vkey=ledger.vkey, transport=transport, state_dir=None)
            a.register()
            return AgentMemory(a)

        ada, bob, cy = agent("ada"), agent("bob"), agent("cy")
        team = ada.mesh_create("team")
        ada.mesh_invite(team, "bob")
        bob.mesh_join(team)
        ada.mesh_grant(team, share=["LEARNING"], read=[])
        bob.mesh_grant(team, share=[], read=["LEARNING"])
        for i in range(args.memories):
            ada.write(
                category="LEARNING", content=f"Northwind bond lesson {i % 7}: settle trade {i} on Fridays."
            )
        print(f"bench_mesh: ada shares {args.memories} WARM memories with bob through {team}")
        _recalls(memory, 3)  # warm up
        before = _figures("bob's recall, ada has 1 mesh", _recalls(memory, args.recalls))
        t0 = time.perf_counter()
        for m in range(args.meshes):
            other = ada.mesh_create(f"side-{m}", title=f"side project {m}")
            ada.mesh_invite(other, "cy")
            ada.mesh_grant(other, share=["CONTEXT"], read=["CONTEXT"])
        made = time.perf_counter() - t0
        print(
            f"  ada created {args.meshes} more meshes in {made:.1f} s (each with an invitation and a grant)"
        )
        _recalls(memory, 3)
        after = _figures(f"bob's recall, ada has {args.meshes + 1} meshes", _recalls(memory, args.recalls))
        print(f"  ratio: {after / before:.2f}x")
        del cy
    return 0


if __name__ == "__main__":
    sys.exit(main())

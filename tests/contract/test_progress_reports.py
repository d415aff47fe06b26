"""Issue 26, finding 8: ``import``, ``audit`` and ``rebuild`` printed one line at the end and
nothing while they ran. Each now reports progress (the CLI draws it as a bar on stderr)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engram.cli.local import memory_of as local_memory
from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.harness.transfer import import_source
from ledger.compose import Services
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory


def test_rebuild_reports_progress_to_the_end(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    memory = MemoryService(ledger, access_log="off")
    ada = make_agent("ada")
    ada.transport = InProcessMemory(memory)
    mem = AgentMemory(ada)
    for n in range(30):
        mem.write(category="LEARNING", content=f"Fact number {n} about the staging cluster")
    seen: list[tuple[int, int]] = []
    size, _ = MemoryService(ledger, access_log="off").rebuild(progress=lambda d, t: seen.append((d, t)))
    assert seen and all(0 <= d <= t for d, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # it only moves forward
    assert any(d == t and t == 2 * size for d, t in seen)  # read, then replayed, to the end


def test_import_reports_each_write(ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path) -> None:
    src = tmp_path / "hermes"
    src.mkdir()
    (src / "MEMORY.md").write_text(
        "Deploys go out on Tuesdays\n§\nStaging restarts nightly\n", encoding="utf-8"
    )
    mem = local_memory(
        Services(ledger=ledger, memory=MemoryService(ledger, access_log="off")), make_agent("ada")
    )
    ticks: list[tuple[int, int]] = []
    report = import_source(mem, "hermes", src, progress=lambda d, t: ticks.append((d, t)))
    assert len(report.written) == 2 and ticks == [(1, 2), (2, 2)]

"""Issue 29, finding 3: the recall budget is the budget for the whole ``<memory-context>``
block. Recall counted HOT and the entries but not the section headings after HOT, nor the
notes, so a block with every section came out 27% over its ``budget_tokens``. Here blocks
with every section (HOT, WARM, COLD, ARCHIVED, RECORDS) are rendered at many budgets
and counted whole with the encoder."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.tokens import count_tokens
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf

DAY = 86_400_000_000
SECTIONS = ("## HOT", "## WARM", "## COLD", "## ARCHIVED", "## RECORDS")


def test_every_line_of_the_block_counts_against_the_budget(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    memory = MemoryService(ledger)
    ada = memory_of(make_agent("ada"))
    for i in range(4):  # archived a month later
        ada.write(category="CONTEXT", content=f"the staging cluster {i} runs the deploy canary", tier="WARM")
    clock.now += 120 * DAY
    memory.compact("ada")
    for i in range(3):
        ada.write(category="PREFERENCE", content=f"deploy checklist item {i}: tabs in makefiles", tier="HOT")
        ada.write(
            category="LEARNING", content=f"the deploy canary {i} needs the staging cluster", tier="WARM"
        )
        ada.record("commitment", {"promise": f"deploy canary {i} to the staging cluster by Friday"})
    sid = ada.open_session(title="deploys")
    for i in range(3):
        ada.turn(sid, "user", f"did the deploy canary {i} reach the staging cluster?")
    query = "deploy canary staging cluster"
    full = memory.recall(
        "ada", query, include_cold=True, budget_tokens=100_000, limit=40, record_access=False
    )
    block = full.render()
    assert all(h in block for h in SECTIONS), block
    for budget in (*range(full.total_tokens // 8, count_tokens(block) + 40, 7), 100_000):
        res = memory.recall(
            "ada", query, include_cold=True, budget_tokens=budget, limit=40, record_access=False
        )
        out = res.render()
        assert count_tokens(out) <= max(budget, _frame(memory, query)), (budget, out)
        assert res.total_tokens == pytest.approx(count_tokens(out), abs=len(out.splitlines()))
    # a budget that holds every section holds it whole: nothing was dropped for headings' sake
    whole = memory.recall(
        "ada", query, include_cold=True, budget_tokens=count_tokens(block), limit=40, record_access=False
    )
    assert whole.render() == block


def _frame(memory: MemoryService, query: str) -> int:
    """The block with no entry: what a budget below it still gets (the preamble is kept)."""
    res = memory.recall("ada", query, include_cold=True, budget_tokens=1, limit=40, record_access=False)
    assert not res.hot and not res.ranked
    return count_tokens(res.render())

"""Issue 42, Deliver 4: the demo showed the same assistant turn three times under RECORDS. Its
scenario has the agent give the same reply to each repeated question ("You will get an update
on the refund within a day."), each reply its own logged turn, and recall ranked every copy
as a record of its own. A reply said again word for word is one record: the best ranked copy
stands for it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf

pytestmark = pytest.mark.filterwarnings("ignore")

REPLY = "You will get an update on the refund within a day."


def test_a_reply_said_three_times_is_one_record(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session(title="refund")
    ada.turn(sid, "user", "Hi, I need help with a refund issue on my account.")
    for _ in range(3):
        ada.turn(sid, "user", "Thanks, one more question about the refund: when will I hear back?")
        ada.turn(sid, "assistant", REPLY)
    res = memory.recall("ada", "refund update", include_cold=True, record_access=False)
    records = [r for r in res.ranked if r.is_record]
    assert [r.content for r in records].count(REPLY) == 1
    assert len({r.content for r in records}) == len(records)  # no record's words twice
    assert res.render().count(REPLY) == 1

"""One recall row from ranking to the wire on the service side (issue 41): the rows recall
ranks, budgets and renders (ledger.memory.block.RecallLine) are the rows both answers carry,
over HTTP (api.schemas.RecalledOut) and in process (engram.protocol.answers.Recalled)."""

from __future__ import annotations

import dataclasses

from api.convert import recalled
from api.schemas import RecalledOut
from engram.protocol.answers import ROW_FIELDS, TIME_FIELDS, Recalled
from ledger.memory import recall
from ledger.memory.block import RecallLine, RecallResult, to_recalled


def _line() -> RecallLine:
    r = to_recalled(
        7, "7.0", "WARM", "LEARNING", "deploys on tuesday", ["project-x"], 2, 0, 86_400_000_000, 0.25
    )
    return dataclasses.replace(r, author="bob", mesh="ops", earlier="monday, until 2024-01-01 (ref 3.0)")


def test_the_http_row_is_the_recall_row_field_for_field() -> None:
    assert set(RecalledOut.model_fields) == {f.name for f in dataclasses.fields(RecallLine)}
    r = _line()
    assert recalled(r).model_dump() == r.to_json() | {"tags": list(r.tags), "provenance": list(r.provenance)}


def test_the_in_process_answer_carries_the_same_rows() -> None:
    r = _line()
    res = RecallResult(
        agent="ada", origin="log", query="deploys", as_of_size=8, session=None,
        hot=(), ranked=(r,), hot_tokens=0, total_tokens=0,
    )  # fmt: skip
    answer = res.answer()
    assert isinstance(answer, Recalled)
    assert answer.context == res.render()
    [row] = answer.ranked
    assert {k: getattr(row, k) for k in (*ROW_FIELDS, *TIME_FIELDS) if k != "tags"} == {
        k: getattr(r, k) for k in (*ROW_FIELDS, *TIME_FIELDS) if k != "tags"
    }
    assert row.scope == "project:x"


def test_the_old_service_row_name_still_imports() -> None:
    assert recall.Recalled is RecallLine

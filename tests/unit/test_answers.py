"""engram.protocol.answers: AgentMemory's frozen answers (issue 27, finding 3: they were
dicts spelled again by every caller) and the JSON they print, the same keys as before."""

from __future__ import annotations

import dataclasses

import pytest

from engram.protocol.answers import (
    ROW_FIELDS,
    TIME_FIELDS,
    Appended,
    Closed,
    Proven,
    Recalled,
    RecallRow,
    Shown,
    Written,
)


def test_answers_are_frozen_and_print_the_json_keys_callers_read() -> None:
    w = Written(index=7, ref="7.0", duplicate=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.index = 8  # type: ignore[misc]
    assert w.to_json() == {"index": 7, "ref": "7.0", "duplicate": False, "redacted": 0}
    assert Appended(index=3, redacted=2).to_json() == {"index": 3, "redacted": 2}
    assert Closed(closed=9, distilled=None, entries=0, decisions=2).to_json() == {
        "closed": 9,
        "distilled": None,
        "entries": 0,
        "decisions": 2,
        "redacted": 0,
    }
    proof = Proven(
        index=1,
        size=2,
        leaf_hash="ab",
        root="r",
        proof=["p"],
        checkpoint="c",
        agent="a",
        kind="k",
        timestamp_us=5,
    )
    assert Shown(item={"ref": "1.0"}, proof=proof).to_json()["proof"]["agent"] == "a"


def test_a_recall_row_has_the_row_fields_and_its_scope() -> None:
    row = RecallRow.of(
        {"ref": "4.0", "index": 4, "tier": "WARM", "tags": ["ops", "project-billing"], "extra": 1}
    )
    out = row.to_json()
    assert set(out) == {*ROW_FIELDS, *TIME_FIELDS, "scope"}
    assert out["scope"] == "project:billing" and out["content"] is None and "extra" not in out
    turn = RecallRow.of({"ref": "5.0", "tier": "RECORD", "tags": ["project-x"]})
    assert turn.scope == "global"  # session turns are global
    rec = Recalled.of(
        context="<memory-context/>", hot=[], ranked=[{"ref": "4.0"}], notes=("n",), as_of_size=9
    )
    assert rec.to_json()["ranked"][0]["ref"] == "4.0" and rec.notes == ["n"]


def test_recall_json_is_one_shape_for_the_cli_and_mcp() -> None:
    """Issue 44: ``engram memory recall --json`` answered ``hot``/``ranked`` while the MCP tool
    answered ``results``; both answer ``Recalled.results_json()`` now: HOT rows first."""
    rec = Recalled.of(
        context="<memory-context/>",
        hot=[{"ref": "1.0", "tier": "HOT"}],
        ranked=[{"ref": "4.0", "tier": "WARM"}],
        notes=("n",),
        as_of_size=9,
    )
    shape = rec.results_json()
    assert set(shape) == {"context", "results", "notes", "as_of_size"}
    assert [r["ref"] for r in shape["results"]] == ["1.0", "4.0"]
    assert [r["tier"] for r in shape["results"]] == ["HOT", "WARM"]

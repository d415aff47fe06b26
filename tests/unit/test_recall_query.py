"""RecallQuery.of: the first recall stage parses and bounds what a caller sent."""

from __future__ import annotations

import pytest

from engram.protocol.errors import RejectedEventError
from engram.protocol.queries import MAX_RECALL_LIMIT, RecallQuery
from engram.protocol.schemas import MAX_QUERY_CHARS


def test_defaults_and_normal_form() -> None:
    q = RecallQuery.of("what db?", scopes=["global"], meshes=["ada/m1"])
    assert q.text == "what db?" and q.limit == 10 and q.sources == "all"
    assert q.scopes == frozenset({"global"}) and q.meshes == ("ada/m1",)
    with pytest.raises(AttributeError):
        q.limit = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "check"),
    [
        ({"text": "x" * (MAX_QUERY_CHARS + 1)}, "request.query"),
        ({"text": "q", "limit": 0}, "request.limit"),
        ({"text": "q", "limit": MAX_RECALL_LIMIT + 1}, "request.limit"),
        ({"text": "q", "limit": True}, "request.limit"),
        ({"text": "q", "sources": "everything"}, "request.sources"),
        ({"text": "q", "budget_tokens": -1}, "request.budget"),
        ({"text": "q", "meshes": "m1"}, "request.meshes"),
        ({"text": "q", "meshes": ["m1"]}, "request.meshes"),
        ({"text": "q", "meshes": ["Ada/Team"]}, "request.meshes"),
        ({"text": "q", "scopes": ["nope:"]}, "request.scopes"),
    ],
)
def test_out_of_bounds_is_refused_naming_the_check(kwargs: dict, check: str) -> None:
    text = kwargs.pop("text")
    with pytest.raises(RejectedEventError) as e:
        RecallQuery.of(text, **kwargs)
    assert e.value.check == check

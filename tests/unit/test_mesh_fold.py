"""Issue 30: the mesh fold (verifier/mesh.py) is total over whatever bodies a bundle carries:
arbitrary events never raise out of it, and the fold's answer never depends on the order the
events are given in (only on their log indices)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.mesh import MESH_KINDS, fold, mesh_read

AGENTS = ["ada", "bob", "cy"]
CATS = ["LEARNING", "CONTEXT", "PREFERENCE"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
BODY = st.fixed_dictionaries(
    {"mesh": st.sampled_from(["ada/m", "bob/m", "x"])},
    optional={
        "agent": st.sampled_from(AGENTS) | JSON,
        "share": st.lists(st.sampled_from(CATS), unique=True) | JSON,
        "read": st.lists(st.sampled_from(CATS), unique=True) | JSON,
        "backfill": st.booleans() | JSON,
    },
)
EVENT = st.tuples(st.sampled_from(AGENTS), st.sampled_from(MESH_KINDS), BODY)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(EVENT, max_size=14),
    st.randoms(use_true_random=False),
    st.dictionaries(st.sampled_from(["category", "entries", "x"]), JSON | st.sampled_from(CATS), max_size=3),
    st.sampled_from(["memory.written", "memory.distilled"]),
)
def test_the_mesh_fold_is_total_and_order_free(
    events: list[tuple[str, str, dict[str, Any]]], rnd: Any, memory: dict[str, Any], kind: str
) -> None:
    indexed = [(i, a, k, b) for i, (a, k, b) in enumerate(events)]
    shuffled = list(indexed)
    rnd.shuffle(shuffled)
    a, b = fold(indexed), fold(shuffled)
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert a.to_json() == b.to_json()
    statement = {"agent": "bob", "author": "ada", "mesh": "ada/m", "kind": kind, "ref": "99.0"}
    for body in ({"category": "LEARNING"}, memory):
        holds, why = mesh_read(statement, indexed, ("ada", kind, body))
        assert isinstance(holds, bool) and why

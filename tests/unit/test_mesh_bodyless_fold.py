"""A mesh entry without a body (erased on an old log, or withheld from a bundle) is never
read as absent (issue 40, finding 2): the fold (verifier/mesh.py, the one the ledger and both
verifiers use) takes it as concerning the mesh being folded, by its most restrictive reading,
so no erasure and no withheld body ever lets more flow than the body did."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.mesh import MESH_KINDS, Mesh, MeshRuleError, apply_event, fold

M = "ada/m"


def _grant(share: list[str], read: list[str], backfill: bool = False) -> dict[str, Any]:
    return {"mesh": M, "share": share, "read": read, "backfill": backfill}


def _swarm() -> list[tuple[int, str, str, dict[str, Any] | None]]:
    """ada creates M and shares LEARNING; bob joins and reads it."""
    return [
        (1, "ada", "mesh.created", {"mesh": M}),
        (2, "ada", "mesh.invited", {"mesh": M, "agent": "bob"}),
        (3, "bob", "mesh.joined", {"mesh": M}),
        (4, "ada", "mesh.granted", _grant(["LEARNING"], [])),
        (5, "bob", "mesh.granted", _grant([], ["LEARNING"])),
    ]


def _flows(m: Mesh | None) -> dict[tuple[str, str, str], int]:
    """What flows in a folded mesh: (author, reader, category) -> the index it flows from."""
    if m is None or m.dissolved:
        return {}
    out = {}
    for a in m.active_members():
        for r in m.active_members():
            if a.agent != r.agent:
                for c, since in a.shared_since().items():
                    if c in r.reads:
                        out[(a.agent, r.agent, c)] = since
    return out


def test_a_left_member_whose_leave_has_no_body_stays_out() -> None:
    events = [*_swarm(), (6, "bob", "mesh.left", None)]
    assert _flows(fold(events, mesh=M)) == {}
    folded = fold(events, mesh=M)
    assert folded is not None and folded.members["bob"].left_index == 6


def test_a_dissolution_without_a_body_keeps_the_mesh_dissolved() -> None:
    events = [
        *_swarm(),
        (6, "ada", "mesh.dissolved", None),
        (7, "ada", "mesh.granted", _grant(["LEARNING"], [])),
    ]
    folded = fold(events, mesh=M)
    assert folded is not None and folded.dissolved_index == 6
    assert _flows(folded) == {}


def test_a_removal_without_a_body_removes_every_member_but_the_creator() -> None:
    events = [
        *_swarm(),
        (6, "ada", "mesh.invited", {"mesh": M, "agent": "cy"}),
        (7, "ada", "mesh.removed", None),
    ]
    folded = fold(events, mesh=M)
    assert folded is not None
    assert [m.agent for m in folded.active_members()] == ["ada"]
    assert folded.invited == {"cy": 6}  # a pending invitation of a non-member stays


def test_a_grant_without_a_body_shares_and_reads_nothing() -> None:
    events = [*_swarm(), (6, "ada", "mesh.granted", None)]
    assert _flows(fold(events, mesh=M)) == {}
    # a later grant shares again, from its own index: the body-less one broke the sharing
    later = fold([*events, (7, "ada", "mesh.granted", _grant(["LEARNING"], []))], mesh=M)
    assert _flows(later) == {("ada", "bob", "LEARNING"): 7}


def test_a_join_without_a_body_consumes_the_invitation_and_makes_no_member() -> None:
    events = [*_swarm()[:2], (3, "bob", "mesh.joined", None), (4, "bob", "mesh.joined", {"mesh": M})]
    folded = fold(events, mesh=M)
    assert folded is not None and "bob" not in folded.members and folded.invited == {}


def test_an_invitation_without_a_body_invites_no_one() -> None:
    events = [*_swarm()[:1], (2, "ada", "mesh.invited", None), (3, "bob", "mesh.joined", {"mesh": M})]
    folded = fold(events, mesh=M)
    assert folded is not None and "bob" not in folded.members


def test_a_creation_without_a_body_leaves_the_mesh_dissolved_from_the_start() -> None:
    """It may have been this mesh's creation: nothing can revive the mesh by creating it anew."""
    events = [(1, "ada", "mesh.created", None), *_swarm()]
    folded = fold(events, mesh=M)
    assert folded is not None and folded.dissolved_index == 1 and folded.created_index == 1
    assert _flows(folded) == {}
    with pytest.raises(MeshRuleError) as e:
        apply_event(folded, 9, "ada", "mesh.created", {"mesh": M})
    assert e.value.check == "mesh.exists"
    # a body-less creation after the mesh exists changes nothing
    assert _flows(fold([*_swarm(), (6, "ada", "mesh.created", None)], mesh=M)) == _flows(
        fold(_swarm(), mesh=M)
    )


def test_a_body_less_entry_needs_the_mesh_it_is_folded_for() -> None:
    with pytest.raises(ValueError, match="named mesh"):
        fold([(1, "ada", "mesh.left", None)])


AGENTS = ["ada", "bob", "cy"]
CATS = ["LEARNING", "CONTEXT", "PREFERENCE"]
BODY = st.fixed_dictionaries(
    {"mesh": st.sampled_from([M, M, M, "ada/n"])},
    optional={
        "agent": st.sampled_from(AGENTS),
        "share": st.lists(st.sampled_from(CATS), unique=True),
        "read": st.lists(st.sampled_from(CATS), unique=True),
        "backfill": st.booleans(),
    },
)
EVENT = st.tuples(st.sampled_from(AGENTS), st.sampled_from(MESH_KINDS), BODY, st.booleans())


def _prefix() -> list[tuple[str, str, dict[str, Any], bool]]:
    """A mesh that usually works, so the random events have something to take away."""
    return [
        ("ada", "mesh.created", {"mesh": M}, False),
        ("ada", "mesh.invited", {"mesh": M, "agent": "bob"}, False),
        ("ada", "mesh.invited", {"mesh": M, "agent": "cy"}, False),
        ("bob", "mesh.joined", {"mesh": M}, False),
        ("cy", "mesh.joined", {"mesh": M}, False),
        ("ada", "mesh.granted", _grant(["LEARNING", "CONTEXT"], ["LEARNING"]), False),
        ("bob", "mesh.granted", _grant(["LEARNING"], ["LEARNING", "CONTEXT"]), False),
        ("cy", "mesh.granted", _grant(["CONTEXT"], ["LEARNING"]), False),
    ]


@settings(max_examples=500, deadline=None)
@given(st.lists(EVENT, max_size=14), st.lists(st.integers(0, 7), max_size=3))
def test_no_erased_or_withheld_body_lets_more_flow_than_the_body_did(
    events: list[tuple[str, str, dict[str, Any], bool]], erase_in_prefix: list[int]
) -> None:
    """For any log of mesh events and any set of erased bodies: whatever flows in the fold
    with the bodies erased also flows with them, from the same index or earlier. (A body of
    another mesh, once erased, may be any mesh's: the fold of M takes it as M's.)"""
    plan = _prefix() + events
    erased = {i for i, (*_, e) in enumerate(plan) if e} | set(erase_in_prefix)
    full = [(i, a, k, b) for i, (a, k, b, _) in enumerate(plan) if b["mesh"] == M]
    cut = [
        (i, a, k, None if i in erased else b)
        for i, (a, k, b, _) in enumerate(plan)
        if i in erased or b["mesh"] == M
    ]
    with_bodies, without = _flows(fold(full, mesh=M)), _flows(fold(cut, mesh=M))
    for key, since in without.items():
        assert key in with_bodies, (key, without, with_bodies)
        assert with_bodies[key] <= since

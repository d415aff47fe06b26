"""Memory Mesh rules: the fold of a mesh's events, and the ``mesh_read`` claim.

The one definition of what a mesh is, shared by the ledger (ledger.mesh folds meshes from
the log; its append preconditions refuse what the rules would ignore) and the offline
verifier (a bundle's ``mesh_read`` statement is recomputed from the complete mesh streams
it carries). specs/mesh.md has the rules; in short, applied in log order:

* ``mesh.created``: only by the agent the id ``<creator>/<name>`` names, once;
* ``mesh.invited``, ``mesh.removed``, ``mesh.dissolved``: only by the creator;
* ``mesh.joined``: only by an agent invited since it last left, consuming the invitation;
* ``mesh.granted``: only by a member; it replaces the member's grant (WARM categories it
  shares and reads, ``backfill``);
* ``mesh.left``: a member other than the creator.

An event that breaks a rule has no effect (:class:`MeshRuleError` names the rule).

A body-less entry (its body erased, or withheld from a bundle) is never read as absent
(erasing one's own ``mesh.left`` made sharing flow again). The fold of a mesh
takes it as concerning that mesh, with its most restrictive reading (specs/mesh.md,
"Entries without a body"): a ``mesh.left``, ``mesh.removed`` or ``mesh.dissolved`` keeps its
effect (removing everyone it could have removed), a ``mesh.granted`` becomes a grant that
shares and reads nothing, a ``mesh.joined`` consumes the invitation without making a member,
a ``mesh.created`` before the mesh exists leaves it dissolved from the start, and a
``mesh.invited`` (which only widens) has no effect. So no body-less entry ever lets more
flow than its body did.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verifier.errors import VerificationError

__all__ = [
    "MEMBER_KINDS",
    "MESH_KINDS",
    "Member",
    "Mesh",
    "MeshRuleError",
    "apply_event",
    "creator_of",
    "fold",
    "memory_category",
    "mesh_read",
    "statement_agents",
    "statement_streams",
]


class MeshRuleError(VerificationError):
    """A mesh event the rules give no effect (its ``check`` names the rule)."""

    default_check = "mesh.rule"


MESH_KINDS = (
    "mesh.created",
    "mesh.invited",
    "mesh.joined",
    "mesh.granted",
    "mesh.left",
    "mesh.removed",
    "mesh.dissolved",
)
CREATOR_KINDS = (
    "mesh.created",
    "mesh.invited",
    "mesh.removed",
    "mesh.dissolved",
    "mesh.granted",
    "mesh.left",
)
MEMBER_KINDS = ("mesh.joined", "mesh.granted", "mesh.left")


MESH_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}/[a-z0-9][a-z0-9._-]{0,31}")


def creator_of(mesh: str) -> str:
    return mesh.split("/", 1)[0]


@dataclass(slots=True)
class Member:
    agent: str
    joined_index: int
    left_index: int | None = None
    #: The member's grants in log order: (index, share, read, backfill).
    grants: list[tuple[int, frozenset[str], frozenset[str], bool]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.left_index is None

    @property
    def reads(self) -> frozenset[str]:
        return self.grants[-1][2] if self.grants else frozenset()

    def shared_since(self) -> dict[str, int]:
        """Per category the member shares now, the log index from which its memories flow:
        the grant that began sharing it without a break since (0 with ``backfill``)."""
        since: dict[str, int] = {}
        for index, share, _, _ in self.grants:
            since = {c: since.get(c, index) for c in share}
        if self.grants and self.grants[-1][3]:
            since = dict.fromkeys(since, 0)
        return since


@dataclass(slots=True)
class Mesh:
    mesh: str
    creator: str
    created_index: int
    title: str | None = None
    dissolved_index: int | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: Pending invitations: agent -> the index of the invitation.
    invited: dict[str, int] = field(default_factory=dict)

    @property
    def dissolved(self) -> bool:
        return self.dissolved_index is not None

    def active_members(self) -> list[Member]:
        return [m for m in self.members.values() if m.active]

    def to_json(self) -> dict[str, Any]:
        return {
            "mesh": self.mesh,
            "creator": self.creator,
            "created_index": self.created_index,
            "title": self.title,
            "dissolved_index": self.dissolved_index,
            "invited": dict(sorted(self.invited.items())),
            "members": [
                {
                    "agent": m.agent,
                    "joined_index": m.joined_index,
                    "left_index": m.left_index,
                    "grant": None
                    if not m.grants
                    else {
                        "index": m.grants[-1][0],
                        "share": sorted(m.grants[-1][1]),
                        "read": sorted(m.grants[-1][2]),
                        "backfill": m.grants[-1][3],
                    },
                }
                for m in sorted(self.members.values(), key=lambda m: m.agent)
            ],
        }


def _refuse(message: str, check: str) -> MeshRuleError:
    return MeshRuleError(message, check=check)


_CATEGORY_NAMES = frozenset(
    ("COMMITMENT", "PERFORMANCE", "LEARNING", "FAILURE", "PREFERENCE", "ANOMALY", "CONTEXT")
)


def _check_shape(kind: str, body: Mapping[str, Any]) -> None:
    ok = (
        isinstance(body, Mapping)
        and isinstance(body.get("mesh"), str)
        and bool(MESH_ID.fullmatch(body["mesh"]))
    )
    if ok and kind in ("mesh.invited", "mesh.removed"):
        ok = isinstance(body.get("agent"), str)
    if ok and kind == "mesh.granted":
        ok = all(
            isinstance(body.get(k), list)
            and all(isinstance(c, str) and c in _CATEGORY_NAMES for c in body[k])
            for k in ("share", "read")
        ) and isinstance(body.get("backfill", False), bool)
    if not ok:
        raise _refuse(f"a {kind} body of the wrong shape", "mesh.malformed")


def apply_event(
    state: Mesh | None,
    index: int,
    agent: str,
    kind: str,
    body: Mapping[str, Any] | None,
    *,
    mesh: str | None = None,
) -> Mesh:
    """The mesh after one event, or :class:`MeshRuleError` (its check named) when the
    rules give the event no effect. ``state`` is None before ``mesh.created``. A body that
    is not the kind's shape (the verifier reads bodies it did not validate) has no effect
    either (``mesh.malformed``).

    ``body`` None is an entry whose body is erased or withheld: it is folded for ``mesh``
    (the mesh being folded, which must be given) by its most restrictive reading
    (:func:`_apply_bodyless`), never skipped."""
    if body is None:
        if mesh is None or not MESH_ID.fullmatch(mesh):
            raise ValueError("a body-less mesh entry is folded for a named mesh")
        return _apply_bodyless(state, index, agent, kind, mesh)
    _check_shape(kind, body)
    mesh = str(body["mesh"])
    if kind == "mesh.created":
        _may_create(state, agent, mesh)
        title = body.get("title")
        return Mesh(
            mesh=mesh,
            creator=agent,
            created_index=index,
            title=title if isinstance(title, str) else None,
            members={agent: Member(agent=agent, joined_index=index)},
        )
    state = _live(state, agent, kind, mesh)
    apply = _WITH_BODY.get(kind)
    if apply is not None:
        apply(state, index, agent, mesh, body)
    return state


def _may_create(state: Mesh | None, agent: str, mesh: str) -> None:
    if agent != creator_of(mesh):
        raise _refuse(f"mesh {mesh} can only be created by {creator_of(mesh)}", "mesh.policy")
    if state is not None:
        raise _refuse(f"mesh {mesh} already exists", "mesh.exists")


def _live(state: Mesh | None, agent: str, kind: str, mesh: str) -> Mesh:
    """The mesh an event after its creation acts on: it exists, is not dissolved, and only its
    creator invites, removes or dissolves. Another agent's invitation, removal or dissolution
    is refused for that before anything about the mesh is read: the answer is the same whether
    the mesh exists, is dissolved or not (its creator is in its id), so it discloses nothing of
    another agent's meshes."""
    if kind in _CREATOR_ONLY and agent != creator_of(mesh):
        raise _refuse(
            f"only {creator_of(mesh)} may invite to, remove from or dissolve mesh {mesh}", "mesh.policy"
        )
    if state is None:
        raise _refuse(f"there is no mesh {mesh}", "mesh.missing")
    if state.dissolved:
        raise _refuse(f"mesh {mesh} is dissolved", "mesh.dissolved")
    if kind in _CREATOR_ONLY and agent != state.creator:
        raise _refuse(f"only {state.creator}, who created mesh {mesh}, may do that", "mesh.policy")
    return state


_CREATOR_ONLY = frozenset(("mesh.invited", "mesh.removed", "mesh.dissolved"))


def _active_member(state: Mesh, agent: str, mesh: str) -> Member:
    member = state.members.get(agent)
    if member is None or not member.active:
        raise _refuse(f"{agent} is not a member of {mesh}", "mesh.not_member")
    return member


def _invited(state: Mesh, index: int, agent: str, mesh: str, body: Mapping[str, Any]) -> None:
    target = state.members.get(str(body["agent"]))
    if target is not None and target.active:
        raise _refuse(f"{body['agent']} is already a member of {mesh}", "mesh.member")
    state.invited[str(body["agent"])] = index


def _joined(state: Mesh, index: int, agent: str, mesh: str, body: Mapping[str, Any]) -> None:
    member = state.members.get(agent)
    if member is not None and member.active:
        raise _refuse(f"{agent} is already a member of {mesh}", "mesh.member")
    if agent not in state.invited:
        raise _refuse(f"{agent} is not invited to {mesh}", "mesh.not_invited")
    del state.invited[agent]
    state.members[agent] = Member(agent=agent, joined_index=index)


def _granted(state: Mesh, index: int, agent: str, mesh: str, body: Mapping[str, Any]) -> None:
    _active_member(state, agent, mesh).grants.append(
        (index, frozenset(body["share"]), frozenset(body["read"]), bool(body.get("backfill", False)))
    )


def _left(state: Mesh, index: int, agent: str, mesh: str, body: Mapping[str, Any] | None = None) -> None:
    member = _active_member(state, agent, mesh)
    if agent == state.creator:
        raise _refuse(f"the creator of {mesh} dissolves it instead of leaving", "mesh.policy")
    member.left_index = index


def _removed(state: Mesh, index: int, agent: str, mesh: str, body: Mapping[str, Any]) -> None:
    target = state.members.get(str(body["agent"]))
    if target is None or not target.active or target.agent == state.creator:
        raise _refuse(f"{body['agent']} is not a removable member of {mesh}", "mesh.not_member")
    target.left_index = index
    state.invited.pop(target.agent, None)


def _dissolved(state: Mesh, index: int, agent: str, mesh: str, body: Mapping[str, Any] | None = None) -> None:
    state.dissolved_index = index


#: What each kind does to a live mesh (after :func:`_live`), read from its body.
_WITH_BODY: dict[str, Callable[[Mesh, int, str, str, Mapping[str, Any]], None]] = {
    "mesh.invited": _invited,
    "mesh.joined": _joined,
    "mesh.granted": _granted,
    "mesh.left": _left,
    "mesh.removed": _removed,
    "mesh.dissolved": _dissolved,
}


def _apply_bodyless(state: Mesh | None, index: int, agent: str, kind: str, mesh: str) -> Mesh:
    """A body-less entry of ``kind`` by ``agent`` at ``index``, folded for ``mesh``: it may
    have concerned this mesh, and its body can no longer say otherwise, so it takes the
    reading that lets the least flow (specs/mesh.md, "Entries without a body"). Readings
    that would widen what flows (an invitation, a membership, a grant's categories) are
    never assumed."""
    if kind == "mesh.created":
        _may_create(state, agent, mesh)
        # It may have been this mesh's creation: the mesh exists from here, dissolved, so
        # no later creation, invitation or grant can revive it.
        return Mesh(mesh=mesh, creator=agent, created_index=index, dissolved_index=index)
    state = _live(state, agent, kind, mesh)
    apply = _BODYLESS.get(kind)
    if apply is not None:
        apply(state, index, agent, mesh)
    return state


def _invited_bodyless(state: Mesh, index: int, agent: str, mesh: str) -> None:
    raise _refuse(f"an invitation without a body invites no one to {mesh}", "mesh.erased")


def _joined_bodyless(state: Mesh, index: int, agent: str, mesh: str) -> None:
    # It may have consumed the invitation; it never makes a member.
    if state.invited.pop(agent, None) is None:
        raise _refuse(f"{agent} is not invited to {mesh}", "mesh.not_invited")


def _granted_bodyless(state: Mesh, index: int, agent: str, mesh: str) -> None:
    _active_member(state, agent, mesh).grants.append((index, frozenset(), frozenset(), False))


def _removed_bodyless(state: Mesh, index: int, agent: str, mesh: str) -> None:
    # It may have removed any member but the creator: all of them leave.
    for m in state.members.values():
        if m.active and m.agent != state.creator:
            m.left_index = index
            state.invited.pop(m.agent, None)


#: What each kind does to a live mesh when its body is gone: the reading that lets least flow.
_BODYLESS: dict[str, Callable[[Mesh, int, str, str], None]] = {
    "mesh.invited": _invited_bodyless,
    "mesh.joined": _joined_bodyless,
    "mesh.granted": _granted_bodyless,
    "mesh.left": _left,
    "mesh.removed": _removed_bodyless,
    "mesh.dissolved": _dissolved,
}


def fold(
    events: Iterable[tuple[int, str, str, Mapping[str, Any] | None]], *, mesh: str | None = None
) -> Mesh | None:
    """A mesh's state from its events (index, agent, kind, body), applied in log order;
    events the rules give no effect are skipped. An event with body None (erased or
    withheld) is folded for ``mesh``, the mesh these events are of, by its most
    restrictive reading (:func:`apply_event`); ``mesh`` must be given when there is one."""
    state: Mesh | None = None
    for index, agent, kind, body in sorted(events, key=lambda e: e[0]):
        try:
            state = apply_event(state, index, agent, kind, body, mesh=mesh)
        except MeshRuleError:
            continue
    return state


#: The memory kinds a ``mesh_read`` statement may name.
MEMORY_KINDS = ("memory.written", "memory.distilled")


def statement_agents(s: Mapping[str, Any]) -> set[str]:
    """The agents a claim statement is about (a ``mesh_read``: reader, author, creator)."""
    if s.get("predicate") == "mesh_read":
        return {str(s["agent"]), str(s["author"]), creator_of(str(s["mesh"]))}
    return {str(s["agent"])}


def statement_streams(s: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The streams a claim statement needs complete. A ``mesh_read`` needs none: the log's
    mesh-read index (verifier.mesh_index) lists exactly the entries of its mesh and memory,
    so the creator's other meshes and the author's other memories stay undisclosed."""
    if s.get("predicate") != "mesh_read":
        return {(str(s["agent"]), str(s["kind"]))}
    return set()


def memory_category(
    s: Mapping[str, Any], memory: tuple[str, str, Mapping[str, Any] | None]
) -> tuple[str | None, str]:
    """The category of memory ``s["ref"]`` from its entry (agent, kind, body as disclosed),
    or None and why not."""
    index, _, pos = str(s["ref"]).partition(".")
    agent, kind, body = memory
    author = str(s["author"])
    if agent != author or kind != s["kind"]:
        return None, f"entry {index} is a {kind} of {agent}, not a {s['kind']} of {author}"
    if body is None:
        return None, f"entry {index}'s body is not disclosed (erased?)"
    if kind == "memory.distilled":
        entries = body.get("entries")
        if not isinstance(entries, list) or not int(pos) < len(entries):
            return None, f"entry {index} has no memory {pos}"
        entry = entries[int(pos)]
        category = entry.get("category") if isinstance(entry, Mapping) else None
    else:
        category = body.get("category") if pos == "0" else None
    if not isinstance(category, str):
        return None, f"memory {s['ref']} has no category"
    return category, ""


def mesh_read(
    s: Mapping[str, Any],
    events: Iterable[tuple[int, str, str, Mapping[str, Any] | None]],
    memory: tuple[str, str, Mapping[str, Any] | None],
) -> tuple[bool, str]:
    """Whether the memory ``s["ref"]`` (``memory``: its entry's agent, kind and body) was
    shared with reader ``s["agent"]`` by ``s["author"]`` through ``s["mesh"]``, as of the
    mesh's entries given (index, agent, kind, body; all of them to the checkpoint, bodies of
    other meshes ignored, body-less ones folded restrictively): the author wrote it, both are
    active members of the undissolved mesh, the author's grant shares the memory's category
    from an index at or before the memory's entry, and the reader's grant reads it. The
    memory's tier and status are verifier.tiers' question. Returns (holds, why)."""
    mesh_id, reader, author = str(s["mesh"]), str(s["agent"]), str(s["author"])
    index = str(s["ref"]).partition(".")[0]
    category, why = memory_category(s, memory)
    if category is None:
        return False, why
    mesh = fold(
        [
            (i, who, k, b)
            for i, who, k, b in events
            if k in MESH_KINDS and (b is None or b.get("mesh") == mesh_id)
        ],
        mesh=mesh_id,
    )
    if mesh is None or mesh.dissolved:
        return False, f"mesh {mesh_id} does not exist or is dissolved"
    a, r = mesh.members.get(author), mesh.members.get(reader)
    if a is None or not a.active or r is None or not r.active:
        return False, f"{author} and {reader} are not both members of {mesh_id}"
    since = a.shared_since().get(category)
    if since is None or since > int(index):
        return False, f"{author}'s grant does not share {category} memories from entry {index}"
    if category not in r.reads:
        return False, f"{reader}'s grant does not read {category}"
    return True, f"{author}'s {category} memory {s['ref']} flows to {reader} through {mesh_id}"

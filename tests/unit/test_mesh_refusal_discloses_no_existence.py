"""Another agent's `engram mesh remove|dissolve` (or invite) is refused with one answer,
whether the mesh exists, is dissolved or was never created: the refusal discloses nothing of
another agent's meshes (a mesh's id and title are in its creator's bodies, not the public leaves)."""

from __future__ import annotations

import pytest

from verifier.mesh import Mesh, MeshRuleError, apply_event

MESH = "bob/secret-merger"


def _states() -> dict[str, Mesh | None]:
    live = apply_event(None, 1, "bob", "mesh.created", {"mesh": MESH, "title": "Project Falcon"})
    gone = apply_event(None, 1, "bob", "mesh.created", {"mesh": MESH})
    gone = apply_event(gone, 2, "bob", "mesh.dissolved", {"mesh": MESH})
    return {"missing": None, "live": live, "dissolved": gone}


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("mesh.dissolved", {"mesh": MESH}),
        ("mesh.removed", {"mesh": MESH, "agent": "bob"}),
        ("mesh.invited", {"mesh": MESH, "agent": "eve"}),
    ],
)
def test_another_agents_creator_only_event_gets_one_answer_whatever_the_mesh(
    kind: str, body: dict[str, str]
) -> None:
    answers = set()
    for state in _states().values():
        with pytest.raises(MeshRuleError) as e:
            apply_event(state, 9, "eve", kind, body)
        answers.add((e.value.check, str(e.value)))
    assert len(answers) == 1, answers
    [(check, message)] = answers
    assert check == "mesh.policy" and "Project Falcon" not in message


def test_the_creator_still_learns_what_is_wrong() -> None:
    states = _states()
    for name, check in (("missing", "mesh.missing"), ("dissolved", "mesh.dissolved")):
        with pytest.raises(MeshRuleError) as e:
            apply_event(states[name], 9, "bob", "mesh.dissolved", {"mesh": MESH})
        assert e.value.check == check

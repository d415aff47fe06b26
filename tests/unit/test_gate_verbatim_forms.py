"""Issue 42, Deliver 5: a session's distillation checks each memory against the session's
turns for verbatim copies; the turns' compared forms are computed once, not once per memory,
and refuse exactly what the one-memory check refuses."""

from __future__ import annotations

import pytest

from engram.protocol import gate as gate_module
from engram.protocol.gate import GateRejection, WriteGate

TURNS = [f"turn {i}: the payment API timed out at {i} am" for i in range(40)]


def test_the_turns_forms_are_computed_once_for_many_memories(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = gate_module.normalize_text

    def counting(text: str) -> str:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(gate_module, "normalize_text", counting)
    forms = WriteGate.verbatim_forms(TURNS)
    for i in range(50):
        WriteGate.check_not_among(f"Observation {i}: payments time out in the morning", forms)
    assert len(calls) == len(TURNS) + 50  # one per turn, one per memory (not 40 per memory)


@pytest.mark.parametrize(
    ("memory", "refused"),
    [
        ("Turn 3: the payment API  timed out at 3 am", True),
        ("turn 3: the\u200b payment API timed out at 3 am", True),
        ("The payment API times out in the morning", False),
    ],
)
def test_the_forms_refuse_what_the_one_memory_check_refuses(memory: str, refused: bool) -> None:
    outcomes = []
    for check in (
        lambda: WriteGate.check_not_verbatim(memory, TURNS),
        lambda: WriteGate.check_not_among(memory, WriteGate.verbatim_forms(TURNS)),
    ):
        try:
            check()
            outcomes.append(False)
        except GateRejection:
            outcomes.append(True)
    assert outcomes == [refused, refused]

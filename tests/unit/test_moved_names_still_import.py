"""Names that moved when long modules were split by job still import from where they were.

Issue 41: ledger/memory/projection.py, ledger/memory/distill.py and
engram/protocol/secret_rules.py were split; their public names are re-exported.
"""

from __future__ import annotations

import importlib

import pytest

MOVED = (
    ("ledger.memory.projection", "SqlState", "ledger.memory.projection_state"),
    ("ledger.memory.projection", "BatchState", "ledger.memory.projection_state"),
    ("ledger.memory.projection", "item_from_row", "ledger.memory.projection_rows"),
    ("ledger.memory.distill", "ROLE_SUBJECTS", "ledger.memory.sentences"),
    ("ledger.memory.distill", "speaker_of", "ledger.memory.sentences"),
    ("engram.protocol.secret_rules", "value_is_secret", "engram.protocol.secret_rules.names"),
    ("engram.protocol.secret_rules", "library_rules", "engram.protocol.secret_rules.library"),
    ("engram.protocol.secret_rules", "MARKER", "engram.protocol.secret_rules.core"),
)


@pytest.mark.parametrize(("old", "name", "new"), MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_a_moved_name_is_the_same_object_at_its_old_path(old: str, name: str, new: str) -> None:
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)

"""Kind knowledge has one home: every table keyed by event kind has a row for every kind of the
registry (engram/protocol/kinds.py), and no row for anything else. Adding a kind means one
registry entry plus one row in each table below (docs/design.md, "Layout")."""

from __future__ import annotations

import pytest

from engram.client.http import ROUTES
from engram.protocol import schemas
from engram.protocol.kinds import GATED_KINDS, KINDS, gated_texts, kinds_where, require_kind, validate_body
from engram.protocol.records import RECORD_KINDS
from ledger.memory.preconditions import PRECONDITIONS
from ledger.memory.state import EVOLVE

TABLES = {"evolve": EVOLVE, "preconditions": PRECONDITIONS, "client routes": ROUTES}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_registered_kind_has_a_row_in_each_table(name: str) -> None:
    table = TABLES[name]
    assert set(table) == set(KINDS), {
        "missing": sorted(set(KINDS) - set(table)),
        "unregistered": sorted(set(table) - set(KINDS)),
    }
    assert all(callable(f) for f in table.values())


def test_registry_entries_are_complete() -> None:
    for name, spec in KINDS.items():
        assert spec.name == name
        assert spec.group in {"key", "session", "memory", "record", "share", "mesh"}
        assert spec.signer in {"agent", "policy"}
        assert callable(spec.schema) and spec.schema.__module__ == schemas.__name__
        assert require_kind(name) is spec


def test_record_categories_cover_exactly_the_record_group() -> None:
    assert set(RECORD_KINDS) == kinds_where(group="record") == kinds_where(items=("record",))


def test_policy_kinds_are_not_routed_to_an_agent_route() -> None:
    """The service signs policy kinds itself; a client never has a dedicated route for them."""
    for kind in kinds_where(signer="policy"):
        assert ROUTES[kind]("/v1/agents/a", b"{}") is None


def test_gated_kinds_are_the_kinds_whose_text_becomes_memory() -> None:
    assert {
        "memory.written",
        "memory.superseded",
        "memory.decay_exempted",
        "memory.distilled",
        "pact.outcome",
        "eval.outcome",
        "boundary.event",
        "commitment",
    } == GATED_KINDS
    assert gated_texts("memory.tier_changed", {"content": "never gated"}) == []


def test_unknown_kind_is_refused_everywhere_it_could_enter() -> None:
    from engram.protocol.errors import RejectedEventError

    with pytest.raises(RejectedEventError) as e:
        require_kind("memory.deleted")
    assert e.value.check == "ledger.kind"
    with pytest.raises(RejectedEventError):
        validate_body("memory.deleted", {})

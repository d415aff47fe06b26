"""The bundle's wire shape is written once, by the producer's typed values
(engram.protocol.bundle_wire), and both verifiers' member lists are held equal to it.

Issue 41, Deliver 6: the members of a bundle were spelled in the producer's dict literals,
in verifier/bundle.py and in the TypeScript verifier, with nothing holding them together.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engram.protocol.bundle_wire import (
    BundleConsistency,
    BundleDocument,
    BundleEntry,
    Claim,
    MeshReadStatement,
    Statement,
    members,
)
from engram.protocol.errors import MalformedError
from verifier import bundle as verifier_bundle
from verifier.bundle import MEDIA_TYPE

ROOT = Path(__file__).resolve().parents[2]
TS_VERIFIER = ROOT / "clients" / "ts" / "src" / "bundle.ts"

#: (the verifier's name for the object, the producer's value)
OBJECTS = (
    ("bundle", BundleDocument, verifier_bundle._BUNDLE_MEMBERS),
    ("entry", BundleEntry, verifier_bundle._ENTRY_MEMBERS),
    ("consistency proof", BundleConsistency, verifier_bundle._CONSISTENCY_MEMBERS),
    ("claim", Claim, verifier_bundle._CLAIM_MEMBERS),
    ("statement", Statement, verifier_bundle._STATEMENT_MEMBERS),
    ("statement", MeshReadStatement, verifier_bundle._MESH_READ_MEMBERS),
)


@pytest.mark.parametrize(("what", "value", "verifier_members"), OBJECTS, ids=[o[1].__name__ for o in OBJECTS])
def test_the_python_verifier_reads_exactly_the_members_the_producer_writes(
    what: str, value: type, verifier_members: tuple[frozenset[str], frozenset[str]]
) -> None:
    assert members(value) == verifier_members, what


def _ts_member_lists() -> dict[str, list[tuple[frozenset[str], frozenset[str]]]]:
    """Every ``exact(obj, [required], [optional], "what")`` call of the TypeScript verifier,
    by ``what`` (two statement forms share a name)."""
    call = re.compile(r"exact\(\s*\w+,\s*\[([^\]]*)\],\s*\[([^\]]*)\],\s*\"([^\"]+)\"\s*,?\s*\)", re.S)
    names = re.compile(r"\"([^\"]+)\"")
    out: dict[str, list[tuple[frozenset[str], frozenset[str]]]] = {}
    for m in call.finditer(TS_VERIFIER.read_text()):
        lists = (frozenset(names.findall(m.group(1))), frozenset(names.findall(m.group(2))))
        out.setdefault(m.group(3), []).append(lists)
    return out


@pytest.mark.parametrize(("what", "value", "verifier_members"), OBJECTS, ids=[o[1].__name__ for o in OBJECTS])
def test_the_typescript_verifier_reads_exactly_the_members_the_producer_writes(
    what: str, value: type, verifier_members: tuple[frozenset[str], frozenset[str]]
) -> None:
    lists = _ts_member_lists()
    assert what in lists, f"clients/ts/src/bundle.ts checks no {what!r} object"
    assert members(value) in lists[what], what


def _entry(**kw: object) -> BundleEntry:
    return BundleEntry(index=3, leaf=b"leaf", proof=[b"\x00" * 32], **kw)  # type: ignore[arg-type]


def test_an_entry_discloses_a_body_with_its_salt_or_not_at_all() -> None:
    with pytest.raises(MalformedError) as e:
        _entry(body=b"{}")
    assert e.value.check == "bundle.entry"
    with pytest.raises(MalformedError):
        _entry(salt=b"s" * 32)
    with pytest.raises(MalformedError):
        _entry(salt=b"s" * 32, body=b"{}", erased=True)


def test_an_entry_without_a_stored_body_is_marked_erased() -> None:
    assert BundleEntry.disclosing(3, b"leaf", [], None).to_json()["erased"] is True
    disclosed = BundleEntry.disclosing(3, b"leaf", [], (b"s", b"{}")).to_json()
    assert set(disclosed) == {"index", "leaf", "proof", "salt", "body"}


def test_a_document_writes_its_optional_members_only_when_set() -> None:
    doc = BundleDocument.of(
        origin="o",
        checkpoint="c",
        stream_heads="h",
        entries=[_entry()],
        claim={"statements": [{"predicate": "count"}]},
    )
    assert set(json.loads(doc.to_bytes())) == members(BundleDocument)[0]
    full = json.loads(doc.with_consistency([BundleConsistency(old_size=1, proof=[])]).to_bytes())
    assert set(full) == members(BundleDocument)[0] | {"consistency"}
    assert full["media_type"] == MEDIA_TYPE


def test_a_document_refuses_a_mesh_read_claim_without_its_index() -> None:
    with pytest.raises(MalformedError) as e:
        BundleDocument.of(
            origin="o",
            checkpoint="c",
            stream_heads="h",
            entries=[_entry()],
            claim={"statements": [{"predicate": "mesh_read"}]},
        )
    assert e.value.check == "bundle.format"


def test_the_producers_claims_are_typed_statements() -> None:
    count = Statement(
        predicate="count", agent="ada", kind="pact.outcome", value=2, where={"result": "fulfilled"}
    )
    assert set(count.to_json()) == {"predicate", "agent", "kind", "value", "where"}
    read = MeshReadStatement.of(agent="bo", author="ada", mesh="ada.m1", kind="memory.written", ref="7.0")
    assert set(read.to_json()) == members(MeshReadStatement)[0]
    with pytest.raises(MalformedError):
        Statement(predicate="sum", agent="ada", kind="pact.outcome", value=1)
    with pytest.raises(MalformedError):
        Claim(statements=[])

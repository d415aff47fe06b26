"""The projection digest, hashed as rows stream by, equals its definition: SHA-256 of the
domain prefix and the RFC 8785 form of the whole document built at once (issue 14: the SQL
projection's digest no longer holds every row in memory)."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from ledger.memory.state import Item, Session, digest
from verifier.jcs import canonical_bytes

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ints = st.integers(min_value=0, max_value=2**53 - 1)

items = st.builds(
    Item,
    agent=st.sampled_from(["a", "b", "\ue000", "\U0001f600"]),
    ref=st.builds(lambda i, p: f"{i}.{p}", ints, st.integers(0, 3)),
    index=ints,
    source_kind=st.sampled_from(["memory.written", "session.turn"]),
    tier=st.sampled_from(["HOT", "WARM", "COLD", "RECORD"]),
    status=st.sampled_from(["active", "erased"]),
    category=st.sampled_from(["FACT", "CONTEXT"]),
    content=text,
    tags=st.lists(text, max_size=3),
    confidence=st.integers(0, 100),
    provenance=st.lists(st.dictionaries(text, text, max_size=2), max_size=2),
    tier_history=st.lists(st.fixed_dictionaries({"index": ints, "rule": text}), max_size=2),
    session=st.none() | text,
)
sessions = st.builds(
    Session,
    agent=st.sampled_from(["a", "b", "\ue000"]),
    session=text,
    opened_index=ints,
    opened_us=ints,
    title=st.none() | text,
    hot_snapshot=st.lists(
        st.fixed_dictionaries({"ref": text, "tags": st.lists(text, max_size=2)}), max_size=2
    ),
)


@given(
    st.lists(items, max_size=6, unique_by=lambda i: (i.agent, i.ref)),
    st.lists(sessions, max_size=4, unique_by=lambda s: (s.agent, s.session)),
    ints,
)
def test_the_streamed_digest_is_the_digest_of_the_whole_document(
    its: list[Item], sess: list[Session], applied: int
) -> None:
    doc = {
        "applied_size": applied,
        "items": sorted((i.to_json() for i in its), key=lambda d: (d["agent"], d["ref"])),
        "sessions": sorted((s.to_json() for s in sess), key=lambda d: (d["agent"], d["session"])),
    }
    expected = hashlib.sha256(b"engram/projection/v1\x00" + canonical_bytes(doc)).hexdigest()
    assert digest(reversed(its), reversed(sess), applied) == expected

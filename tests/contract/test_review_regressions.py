"""Regressions for attacks found in review, on both backends. Each must stay refused."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from engram.client.sdk import Agent
from engram.protocol.errors import KeyStateError, MalformedError, ProofError, RejectedEventError, StorageError
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import StreamState
from ledger.compose import create_ledger, memory_rules
from ledger.inprocess import InProcess
from ledger.log import Ledger, Receipt, Submission
from ledger.memory.service import MemoryService
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.conftest import PgServer, StepClock
from tests.contract.test_log_contract import _snapshot, replay
from verifier.errors import VerificationError
from verifier.event import Envelope, Leaf, NewKey, agent_key_id, body_commitment, sign_event
from verifier.jcs import canonical_bytes

IDENTITY_POINT = bytes([1]) + bytes(31)
# A signature that verifies for every message under the identity key: R = B, S = 1.
BASE_POINT = bytes([0x58]) + bytes([0x66]) * 31
UNIVERSAL_SIG = BASE_POINT + (1).to_bytes(32, "little")


def _active_in_db(ledger: Ledger, agent: str) -> list[str]:
    return [k.key_id for k in ledger.store.keys_of(agent) if k.retired_at is None]


def test_rotate_then_revoke_in_one_batch_stores_the_revocation(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    k2 = Ed25519PrivateKey.generate()
    rotate = alice.signer.event("key.rotated", {}, version=0, prev=None, client_time_us=1, new_key=k2)
    revoke = AgentSigner("alice", k2, origin=ledger.origin).event(
        "key.revoked", {"reason": "test"}, version=0, prev=None, client_time_us=1
    )
    ledger.append([rotate, revoke])
    assert _active_in_db(ledger, "alice") == []
    with pytest.raises(KeyStateError, match="revoked"):
        ledger.append(
            [
                AgentSigner("alice", k2, origin=ledger.origin).event(
                    "commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1
                )
            ]
        )
    assert replay(ledger).active_key("alice") is None


def test_register_then_revoke_in_one_batch(ledger: Ledger) -> None:
    k = Ed25519PrivateKey.generate()
    signer = AgentSigner("bob", k, origin=ledger.origin)
    ledger.append(
        [
            signer.registration(client_time_us=1),
            signer.event("key.revoked", {}, version=0, prev=None, client_time_us=1),
        ],
        operator=True,
    )
    assert _active_in_db(ledger, "bob") == []
    assert replay(ledger).active_key("bob") is None


def test_register_then_rotate_in_one_batch_leaves_one_active_key(ledger: Ledger) -> None:
    k1, k2 = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    signer = AgentSigner("carol", k1, origin=ledger.origin)
    ledger.append(
        [
            signer.registration(client_time_us=1),
            signer.event("key.rotated", {}, version=0, prev=None, client_time_us=1, new_key=k2),
        ],
        operator=True,
    )
    k2_id = agent_key_id(k2.public_key().public_bytes_raw())
    assert _active_in_db(ledger, "carol") == [k2_id]
    assert replay(ledger).active_key("carol") == k2_id


def _envelope_bytes(obj: dict) -> bytes:
    return canonical_bytes(obj)


@pytest.mark.parametrize("kind", ["key.rotated", "key.registered"])
def test_small_order_keys_are_refused(ledger: Ledger, make_agent: Callable[..., Agent], kind: str) -> None:
    alice = make_agent("alice")
    weak = NewKey(key_id=agent_key_id(IDENTITY_POINT), public_key=IDENTITY_POINT, pop=UNIVERSAL_SIG)
    body = canonical_bytes({})
    env = {
        "v": 1,
        "origin": ledger.origin,
        "agent": "alice" if kind == "key.rotated" else "mallory",
        "key_id": alice.signer.key_id if kind == "key.rotated" else weak.key_id,
        "kind": kind,
        "version": 0,
        "client_time_us": 1,
        "body_commitment": body_commitment(bytes(16), body),
        "new_key": weak.to_obj(),
    }
    raw = _envelope_bytes(env)
    sig = (
        alice.signer.private_key.sign(b"engram/event/v1\x00" + raw)
        if kind == "key.rotated"
        else UNIVERSAL_SIG
    )
    before = _snapshot(ledger)
    with pytest.raises(MalformedError) as e:
        ledger.append([Submission(envelope=raw, signature=sig, body=body, salt=bytes(16))], operator=True)
    assert e.value.check == "key.small_order"
    assert _snapshot(ledger) == before


def test_prev_null_at_version_zero_is_refused(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    alice = make_agent("alice")
    good = alice.signer.event("commitment", {"promise": "x"}, version=0, prev=None, client_time_us=1)
    obj = json.loads(good.envelope)
    obj["prev"] = None
    raw = canonical_bytes(obj)
    sig = alice.signer.private_key.sign(b"engram/event/v1\x00" + raw)
    before = _snapshot(ledger)
    with pytest.raises(MalformedError) as e:
        ledger.append([Submission(envelope=raw, signature=sig, body=good.body, salt=good.salt)])
    assert e.value.check == "envelope.prev"
    assert _snapshot(ledger) == before
    # The same malleability at the leaf level: a second encoding of a logged leaf is refused.
    r = alice.append("commitment", {"promise": "y"})
    leaf = json.loads(r.leaf)
    leaf["event"]["prev"] = None
    with pytest.raises(VerificationError):
        Leaf.from_bytes(canonical_bytes(leaf))


def test_replacing_rows_is_refused_by_the_database(ledger: Ledger, engine: Engine) -> None:
    sqlite = engine.dialect.name == "sqlite"
    statements = {
        "leaves": "INSERT OR REPLACE INTO leaves SELECT * FROM leaves WHERE idx = 0"
        if sqlite
        else "INSERT INTO leaves SELECT * FROM leaves WHERE idx = 0 ON CONFLICT (idx) DO UPDATE SET leaf = 'x'",
        "nodes": "INSERT OR REPLACE INTO nodes (level, idx, hash) VALUES (0, 0, x'00')"
        if sqlite
        else "INSERT INTO nodes VALUES (0, 0, '\\x00') ON CONFLICT (level, idx) DO UPDATE SET hash = EXCLUDED.hash",
        "checkpoints": "REPLACE INTO checkpoints (size, root, note, signed_at_us) VALUES (0, x'00', x'00', 1)"
        if sqlite
        else "INSERT INTO checkpoints VALUES (0, '\\x00', '\\x00', 1) ON CONFLICT (size) DO UPDATE SET note = EXCLUDED.note",
    }
    for sql in statements.values():
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text(sql))
    replay(ledger)


def _tamper_node(engine: Engine) -> None:
    """What an attacker who owns the tables can do: drop the guard, rewrite a stored hash."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER nodes_no_update"))
        else:
            conn.execute(text("ALTER TABLE nodes DISABLE TRIGGER nodes_append_only"))
        # Node (1, 0) covers leaves 0-1: part of the tree border at size 3.
        conn.execute(text("UPDATE nodes SET hash = :h WHERE level = 1 AND idx = 0"), {"h": bytes(32)})


def test_the_log_refuses_to_sign_over_corrupted_hashes(
    ledger: Ledger, make_agent: Callable[..., Agent], engine: Engine
) -> None:
    """A process that opens a database whose stored hashes were rewritten refuses to sign
    over them or to prove from them. The process that committed the tree keeps extending
    the tree it committed (its in-memory frontier, issue 14), so it never signs a checkpoint
    inconsistent with one it signed either."""
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "n1"})
    _tamper_node(engine)
    restarted = Ledger(
        SqlStore(engine), ledger.log_key, clock=ledger.clock, policy_key=ledger.policy_key, rules=ledger.rules
    )
    head = ledger.stream_head("alice", "commitment")
    assert head is not None
    n2 = alice.signer.event(
        "commitment", {"promise": "n2"}, version=head.version + 1, prev=head.leaf_hash.hex(), client_time_us=1
    )
    before = _snapshot(ledger)
    with pytest.raises(StorageError, match="disagree"):
        restarted.append([n2])
    assert _snapshot(ledger) == before
    with pytest.raises(StorageError, match="disagree"):
        restarted.prove_consistency(1)
    receipt = ledger.append([n2])[0]
    assert receipt.index == before[2].size
    replay(ledger)  # every checkpoint, the new one too, is a prefix of the leaves' tree


class _ForkingTransport:
    """Sends the first submission to one log and later ones to a fork with the same key."""

    def __init__(self, first: Ledger, fork: Ledger) -> None:
        self.first, self.fork, self.calls = InProcess(first), InProcess(fork), 0

    def _target(self) -> InProcess:
        return self.first if self.calls <= 1 else self.fork

    def submit(self, subs: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        self.calls += 1
        return self._target().submit(subs, operator=operator)

    def head(self, agent: str, kind: str) -> StreamState | None:
        return self._target().head(agent, kind)

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        return self._target().consistency(old, new)


def test_the_sdk_detects_a_forked_log(
    ledger: Ledger,
    backend: str,
    tmp_path: Path,
    log_key: LogKey,
    clock: StepClock,
    request: pytest.FixtureRequest,
) -> None:
    fork_url = (
        f"sqlite:///{tmp_path / 'fork.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_server").new_database()
    )
    fork = create_ledger(make_engine(fork_url), log_key, clock=clock)  # same key, other history
    key = Ed25519PrivateKey.generate()
    fork.append([AgentSigner("alice", key, origin=fork.origin).registration(client_time_us=1)], operator=True)
    filler = AgentSigner("filler", Ed25519PrivateKey.generate(), origin=fork.origin)
    fork.append([filler.registration(client_time_us=1)], operator=True)  # the fork grows past the anchor
    agent = Agent(
        AgentSigner("alice", key, origin=ledger.origin),
        log_vkey=ledger.vkey,
        transport=_ForkingTransport(ledger, fork),
        clock=clock,
    )
    agent.register()  # on the first log: its checkpoint becomes the agent's anchor
    with pytest.raises(ProofError):
        agent.append("commitment", {"promise": "on the fork"})


def test_policy_agent_cannot_be_force_revoked_and_a_foreign_policy_key_is_refused(
    ledger: Ledger, log_key: LogKey, clock: StepClock
) -> None:
    with pytest.raises(RejectedEventError):
        ledger.force_revoke("engram.policy", "oops")
    from engram.protocol.errors import ConfigError

    with pytest.raises(ConfigError, match="policy"):
        Ledger(ledger.store, log_key, clock=clock, policy_key=Ed25519PrivateKey.generate())


def test_envelope_of_a_logged_event_signed_again_by_another_agent_is_refused(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice, bob = make_agent("alice"), make_agent("bob")
    r = alice.append("commitment", {"promise": "x"})
    env = Leaf.from_bytes(r.leaf).envelope
    # bob re-signs alice's envelope: his key does not belong to alice.
    forged = Envelope(
        **{**{f: getattr(env, f) for f in env.__slots__}, "version": 1, "prev": r.leaf_hash.hex()}
    )
    salt, body = ledger.store.body(r.index)
    with pytest.raises(VerificationError):
        ledger.append(
            [
                Submission(
                    envelope=forged.canonical(),
                    signature=sign_event(forged, bob.signer.private_key),
                    body=body,
                    salt=salt,
                )
            ]
        )


@pytest.mark.postgres
def test_postgres_service_role_can_append_but_not_rewrite(
    pg_server: PgServer, log_key: LogKey, clock: StepClock, policy_key: Ed25519PrivateKey
) -> None:
    """The PostgreSQL role split of docs/tour.md: the service role cannot touch the guards."""
    import secrets

    role = f"engram_app_{secrets.token_hex(4)}"
    db_url = pg_server.new_database()
    owner = make_engine(db_url)
    create_ledger(owner, log_key, clock=clock, policy_key=policy_key)
    with owner.begin() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(text(GRANTS.format(role=role)))
    app_engine = make_engine(db_url.replace("postgres@", f"{role}@", 1))
    try:
        app = Ledger(SqlStore(app_engine), log_key, clock=clock, rules=memory_rules())
        agent = Agent.generate("alice", log_vkey=app.vkey, transport=InProcess(app), clock=clock)
        agent.register()
        agent.append("commitment", {"promise": "by the service role"})
        memory = MemoryService(app)
        memory.write(agent, category="LEARNING", content="written through the service role")
        assert memory.rebuild() == memory.digest()
        for sql in (
            "ALTER TABLE leaves DISABLE TRIGGER leaves_append_only",
            "DROP TRIGGER nodes_append_only ON nodes",
            "UPDATE leaves SET leaf = leaf",
        ):
            with (
                pytest.raises(DBAPIError, match=r"must be owner|permission denied"),
                app_engine.begin() as conn,
            ):
                conn.execute(text(sql))
        # DELETE on checkpoints reaches only rows ahead of the log (issue 25, finding 10)
        with pytest.raises(DBAPIError, match="append-only"), app_engine.begin() as conn:
            conn.execute(text("DELETE FROM checkpoints WHERE size = 1"))
        replay(app)
    finally:
        app_engine.dispose()
        with owner.begin() as conn:
            conn.execute(text(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        owner.dispose()


GRANTS = """
GRANT SELECT, INSERT ON leaves, nodes, checkpoints TO "{role}";
GRANT DELETE ON checkpoints TO "{role}";
GRANT SELECT, INSERT, UPDATE ON log_state, stream_heads, agent_keys TO "{role}";
GRANT SELECT, INSERT, UPDATE, DELETE ON bodies TO "{role}";
GRANT SELECT ON alembic_version TO "{role}";
GRANT SELECT, INSERT, UPDATE, DELETE ON mem_items, mem_sessions, mem_cursor, mem_vectors TO "{role}";
"""

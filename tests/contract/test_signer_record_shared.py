"""Issue 25, finding 8: hosts sharing one signer record write it before each commit
(``before_commit``, ledger.signed_head.SignedHeadRecord.claim), and only if no other host
moved it since the batch checked its tree against it. Split brain: two hosts on two copies
of one database, both checked against the same record, the first signs, the second is
refused at its claim and its transaction rolls back (nothing signed, nothing written)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.signed_head import ForkRefusedError, SignedHead, SignedHeadRecord
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.conftest import StepClock


def test_claim_refuses_a_record_another_host_moved(tmp_path: Path) -> None:
    host_a = SignedHeadRecord(tmp_path / "shared.signed-head", "o.example/log")
    host_b = SignedHeadRecord(tmp_path / "shared.signed-head", "o.example/log")
    first = SignedHead(1, b"\x01" * 32)
    host_a.claim(first, seen=None)
    host_a.claim(SignedHead(2, b"\x02" * 32), seen=first)
    with pytest.raises(ForkRefusedError) as e:
        host_b.claim(SignedHead(2, b"\x03" * 32), seen=first)
    assert e.value.check == "signer.fork"
    assert host_b.read() == SignedHead(2, b"\x02" * 32)
    # A record that cannot be written (a read-only mount): refused before the commit.
    stuck = SignedHeadRecord(tmp_path / "stuck.signed-head", "o.example/log")

    def read_only(_head: SignedHead) -> None:
        raise OSError(30, "Read-only file system")

    stuck._write = read_only  # type: ignore[method-assign]
    with pytest.raises(ForkRefusedError) as e2:
        stuck.claim(first, seen=None)
    assert e2.value.check == "signer.record_unwritable"
    assert stuck.read() is None


def test_split_brain_second_claim_rolls_back(tmp_path: Path) -> None:
    log_key = LogKey("hosts.example/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
    policy = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    clock = StepClock()
    record = tmp_path / "shared.signed-head"
    engine_a = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    host_a = create_ledger(engine_a, log_key, clock=clock, policy_key=policy, signed_head=record)
    assert host_a.signed_head is not None
    host_a.signed_head.before_commit = True
    carol = Agent.generate(
        "carol", log_vkey=host_a.vkey, transport=InProcess(host_a, log_only=True), clock=clock
    )
    carol.register()
    carol.append("commitment", {"promise": "p"})
    # A second copy of the database, served by a second host (split brain).
    engine_a.dispose()
    with sqlite3.connect(tmp_path / "a.db") as src, sqlite3.connect(tmp_path / "b.db") as dst:
        src.backup(dst)
    engine_a = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    host_a = Ledger(SqlStore(engine_a), log_key, clock=clock, policy_key=policy, signed_head=record)
    host_b = Ledger(
        SqlStore(make_engine(f"sqlite:///{tmp_path / 'b.db'}")),
        log_key,
        clock=clock,
        policy_key=policy,
        signed_head=record,
    )
    for h in (host_a, host_b):
        assert h.signed_head is not None
        h.signed_head.before_commit = True
    size = host_b.size()
    on_a = Agent.generate(
        "dave", log_vkey=host_a.vkey, transport=InProcess(host_a, log_only=True), clock=clock
    )
    on_b = Agent.generate(
        "erin", log_vkey=host_b.vkey, transport=InProcess(host_b, log_only=True), clock=clock
    )
    checked = host_b._check_signed_head

    def check_then_host_a_signs(tx, size, root):  # type: ignore[no-untyped-def]
        seen = checked(tx, size, root)
        on_a.register()  # host a signs meanwhile, on its copy: the record moves
        return seen

    host_b._check_signed_head = check_then_host_a_signs  # type: ignore[method-assign]
    with pytest.raises(ForkRefusedError) as e:
        on_b.register()
    assert e.value.check == "signer.fork" and "moved from size" in str(e.value)
    assert host_b.size() == size  # rolled back: nothing written, nothing released
    assert host_a.size() == size + 1

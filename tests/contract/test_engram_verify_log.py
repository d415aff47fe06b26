"""`engram-verify log`: the auditor's replay of an exported tiles directory (both backends)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine
from ledger.tiles import export_tiles, tile_path
from tests.conftest import StepClock
from verifier.cli import audit_log, main
from verifier.note import VerifierKey, format_verifier_key


def _grow(memory: MemoryService, make_agent: Callable[..., Agent], n: int = 300) -> None:
    alice, bob = make_agent("alice"), make_agent("bob")
    alice.transport = bob.transport = InProcessMemory(memory)
    alice_mem, bob_mem = AgentMemory(alice), AgentMemory(bob)
    for i in range(n):
        (alice_mem if i % 2 else bob_mem).record("commitment", {"promise": f"promise {i}"})
    sid = alice_mem.open_session()
    alice_mem.turn(sid, "user", "I prefer short answers. We decided to ship Monday.")
    alice_mem.close_session(sid)
    alice.rotate()
    alice.append("commitment", {"promise": "after rotation"})
    memory.ledger.force_revoke("bob", "lost laptop")


@pytest.fixture
def exported(ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path) -> tuple[Path, VerifierKey]:
    _grow(MemoryService(ledger), make_agent)
    out = tmp_path / "tiles"
    export_tiles(ledger.store, out)
    return out, VerifierKey.parse(ledger.vkey)


def test_an_honest_export_verifies(
    exported: tuple[Path, VerifierKey], capsys: pytest.CaptureFixture[str]
) -> None:
    root, key = exported
    report = audit_log(root, key, quiet=True)
    assert report.failed is None, report.checks
    assert [c["check"] for c in report.checks] == [
        "checkpoint",
        "entries",
        "leaves",
        "signatures",
        "streams",
        "tiles",
        "root",
        "history",
    ]
    assert report.summary["keys"] == 4 and report.summary["checkpoints"] > 300  # policy, alice x2, bob
    assert main(["log", str(root), "--log-key", str(key), "--quiet"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("VERIFIED")
    assert main(["log", str(root), "--log-key", str(key), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True


def _tampered(root: Path, tmp_path: Path, rel: str, mutate: Callable[[bytes], bytes]) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / rel
    path.write_bytes(mutate(path.read_bytes()))
    return copy


@pytest.mark.parametrize(
    ("rel", "mutate", "step"),
    [
        ("checkpoint", lambda b: b[:-10] + bytes([b[-10] ^ 1]) + b[-9:], "checkpoint"),
        (tile_path("entries", 0), lambda b: b[:-1], "entries"),
        (tile_path("entries", 0), lambda b: b[:300] + bytes([b[300] ^ 1]) + b[301:], "leaves"),
        (tile_path(0, 0), lambda b: bytes(32) + b[32:], "tiles"),
        ("engram/checkpoints.jsonl", lambda b: b.replace(b'"size":5,', b'"size":6,', 1), "history"),
    ],
    ids=["checkpoint", "truncated-bundle", "flipped-leaf-byte", "hash-tile", "history-size"],
)
def test_tampering_fails_at_the_right_check(
    exported: tuple[Path, VerifierKey], tmp_path: Path, rel: str, mutate: Callable[[bytes], bytes], step: str
) -> None:
    root, key = exported
    report = audit_log(_tampered(root, tmp_path, rel, mutate), key, quiet=True)
    assert report.failed is not None and report.failed["check"] == step, report.checks
    assert (
        main(["log", str(_tampered(root, tmp_path / "b", rel, mutate)), "--log-key", str(key), "--quiet"])
        == 1
    )


def test_a_foreign_key_fails_and_a_bad_key_is_a_usage_error(exported: tuple[Path, VerifierKey]) -> None:
    root, key = exported
    other = VerifierKey.parse(
        format_verifier_key(key.name, Ed25519PrivateKey.generate().public_key().public_bytes_raw())
    )
    report = audit_log(root, other, quiet=True)
    assert report.failed is not None and report.failed["check"] == "checkpoint"
    assert main(["log", str(root), "--log-key", "not-a-key"]) == 2
    assert main(["log", str(root / "nope"), "--log-key", str(key)]) == 2


def test_a_forked_log_is_caught_by_its_own_history(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    tmp_path: Path,
    log_key: LogKey,
    clock: StepClock,
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    """Same key, two histories: the fork's export carrying the original's earlier checkpoints fails."""
    memory = MemoryService(ledger)
    _grow(memory, make_agent, n=10)
    original = tmp_path / "original"
    export_tiles(ledger.store, original)
    url = (
        f"sqlite:///{tmp_path / 'fork.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_server").new_database()
    )
    fork = create_ledger(make_engine(url), log_key, clock=clock, policy_key=Ed25519PrivateKey.generate())
    mallory = Agent.generate(
        "mallory", log_vkey=fork.vkey, transport=InProcess(fork, log_only=True), clock=clock, state_dir=None
    )
    mallory.register()
    for i in range(30):
        mallory.append("commitment", {"promise": f"rewritten {i}"})
    forked = tmp_path / "forked"
    export_tiles(fork.store, forked)
    key = VerifierKey.parse(ledger.vkey)
    assert audit_log(forked, key, quiet=True).failed is None  # alone, a fork looks fine
    (forked / "engram/checkpoints.jsonl").write_bytes((original / "engram/checkpoints.jsonl").read_bytes())
    report = audit_log(forked, key, quiet=True)
    assert report.failed is not None and report.failed["check"] == "history"
    assert report.failed["failed_check"] == "replay.consistency"


def _flip_sig_char(bundle: bytes) -> bytes:
    """Change one base64 character inside the first leaf's signature: the leaf stays
    canonical and well formed, its signature no longer verifies."""
    at = bundle.index(b'"sig":"') + len(b'"sig":"') + 10
    c = bundle[at : at + 1]
    return bundle[:at] + (b"B" if c != b"B" else b"C") + bundle[at + 1 :]


@pytest.mark.parametrize(
    ("rel", "mutate"),
    [
        (None, None),
        (tile_path("entries", 0), lambda b: b[:-1]),
        (tile_path("entries", 0), lambda b: b[:3000] + bytes([b[3000] ^ 1]) + b[3001:]),
        (tile_path("entries", 0), _flip_sig_char),
        (tile_path(0, 0), lambda b: bytes(32) + b[32:]),
        ("engram/checkpoints.jsonl", lambda b: b.replace(b'"size":5,', b'"size":6,', 1)),
    ],
    ids=["honest", "truncated-bundle", "flipped-leaf-byte", "bad-signature", "hash-tile", "history-size"],
)
def test_signature_workers_give_the_same_report_as_one_process(
    exported: tuple[Path, VerifierKey],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rel: str | None,
    mutate: Callable[[bytes], bytes] | None,
) -> None:
    """verifier.parallel verifies signatures ahead of the replay; the answer must be the
    same, check for check, as one process's (issue 14)."""
    root, key = exported
    if rel is not None and mutate is not None:
        root = _tampered(root, tmp_path, rel, mutate)
    monkeypatch.setattr("verifier.cli.MIN_PARALLEL_ENTRIES", 0)  # the pool even for 300 entries
    alone = audit_log(root, key, quiet=True, jobs=1)
    workers = audit_log(root, key, quiet=True, jobs=2)
    assert workers.checks == alone.checks
    assert (workers.failed is None) == (rel is None)
    if rel is not None and mutate is _flip_sig_char:
        assert workers.failed is not None and workers.failed["failed_check"] == "event.signature"

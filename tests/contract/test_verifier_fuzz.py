"""Fuzzing the offline verifier (issue 9, item 6): whatever a forger sends, the verifier
answers with a verified value or a :class:`VerificationError` naming its check; no input
reaches the CLI's catch-all ``verifier.error`` (which is kept for bugs only)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.bundle import create_bundle
from ledger.compose import create_ledger
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine
from ledger.tiles import export_tiles
from tests.conftest import StepClock
from verifier.bundle import verify_bundle
from verifier.cli import audit_log, main
from verifier.errors import VerificationError
from verifier.note import VerifierKey, verify_checkpoint

NOW = 1_900_000_000
EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.text(max_size=40),
    st.sampled_from(["", "AAAA", "=", "alice", "pact.outcome", "engram.policy", "\u2014 x"]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


@pytest.fixture
def signed(
    tmp_path: Path, log_key: LogKey, clock: StepClock, policy_key: Ed25519PrivateKey
) -> tuple[Ledger, bytes]:
    """The verifier is backend-independent: one SQLite log builds the inputs."""
    ledger = create_ledger(
        make_engine(f"sqlite:///{tmp_path / 'f.db'}"), log_key, clock=clock, policy_key=policy_key
    )
    memory = MemoryService(ledger)
    alice = Agent.generate("alice", log_vkey=ledger.vkey, transport=InProcessMemory(memory), clock=clock)
    alice.register()
    mem = AgentMemory(alice)
    for i in range(5):
        mem.record("pact.outcome", {"pact": f"p-{i}", "result": "fulfilled", "quality": 80 + i})
    first = ledger.store.stream_indices("alice", "pact.outcome", ledger.size())[0]
    mem.erase(first, reason="asked")
    alice.append("share.revoked", {"token_id": "abc"})
    claim = {"statements": [{"predicate": "count", "agent": "alice", "kind": "pact.outcome", "value": 5}]}
    return ledger, create_bundle(ledger, claim, trusted_size=1)


def _only_typed(call: Callable[[], object]) -> None:
    # A named check is what the verifier must answer; any other exception fails the test.
    with contextlib.suppress(VerificationError):
        call()


def test_fuzz_bundle_members_replaced_by_any_json(signed: tuple[Ledger, bytes]) -> None:
    ledger, data = signed
    key = VerifierKey.parse(ledger.vkey)
    doc = json.loads(data)
    paths = _paths(doc)

    @FUZZ
    @given(st.sampled_from(paths), json_value, st.booleans())
    def run(path: tuple[Any, ...], value: Any, delete: bool) -> None:
        mutated = json.loads(data)
        if delete and path:
            parent = mutated
            for step in path[:-1]:
                parent = parent[step]
            del parent[path[-1]]
        else:
            mutated = _set(mutated, path, value)
        _only_typed(lambda: verify_bundle(json.dumps(mutated).encode(), key, audience="buyer-1", now=NOW))

    run()


def test_fuzz_bundle_bytes(signed: tuple[Ledger, bytes]) -> None:
    ledger, data = signed
    key = VerifierKey.parse(ledger.vkey)

    @FUZZ
    @given(
        st.integers(min_value=0, max_value=len(data) - 1),
        st.binary(min_size=0, max_size=8),
        st.integers(0, 8),
    )
    def run(pos: int, insert: bytes, cut: int) -> None:
        tampered = data[:pos] + insert + data[pos + cut :]
        _only_typed(lambda: verify_bundle(tampered, key, now=NOW))

    run()


def test_fuzz_notes_inside_a_bundle(signed: tuple[Ledger, bytes]) -> None:
    """Checkpoint and stream-head notes edited line by line (re-signing is covered by the
    soundness tests); also the checkpoint parser alone on arbitrary text."""
    ledger, data = signed
    key = VerifierKey.parse(ledger.vkey)
    doc = json.loads(data)

    @FUZZ
    @given(
        st.sampled_from(["checkpoint", "stream_heads"]),
        st.integers(0, 12),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=60),
    )
    def run(member: str, line: int, text: str) -> None:
        lines = doc[member].split("\n")
        lines[line % len(lines)] = text
        mutated = dict(doc, **{member: "\n".join(lines)})
        _only_typed(lambda: verify_bundle(json.dumps(mutated).encode(), key, now=NOW))
        _only_typed(lambda: verify_checkpoint(mutated["checkpoint"].encode("utf-8", "surrogatepass"), key))

    run()


def test_fuzz_the_tiles_export(signed: tuple[Ledger, bytes], tmp_path: Path) -> None:
    ledger, _ = signed
    key = VerifierKey.parse(ledger.vkey)
    export_tiles(ledger.store, tmp_path / "clean")
    files = sorted(p.relative_to(tmp_path / "clean") for p in (tmp_path / "clean").rglob("*") if p.is_file())
    counter = iter(range(10**6))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.sampled_from(files),
        st.integers(min_value=0, max_value=10**6),
        st.binary(max_size=6),
        st.integers(0, 6),
    )
    def run(rel: Path, pos: int, insert: bytes, cut: int) -> None:
        root = tmp_path / f"t{next(counter)}"
        shutil.copytree(tmp_path / "clean", root)
        data = (root / rel).read_bytes()
        pos %= max(len(data), 1)
        (root / rel).write_bytes(data[:pos] + insert + data[pos + cut :])
        report = audit_log(root, key, quiet=True)  # raises nothing: failures are in the report
        assert report.failed is None or report.failed["failed_check"] != "verifier.error"
        shutil.rmtree(root)

    run()


def test_fuzz_the_cli_never_reaches_verifier_error(
    signed: tuple[Ledger, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, data = signed

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=200), st.sampled_from(["bundle", "checkpoint"]))
    def run(junk: bytes, command: str) -> None:
        path = tmp_path / "input"
        path.write_bytes(junk if junk else data[:50])
        code = main([command, str(path), "--log-key", ledger.vkey, "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == 1 and out["checks"][-1]["failed_check"] != "verifier.error"

    run()


def test_fuzz_share_tokens(signed: tuple[Ledger, bytes]) -> None:
    from verifier.token import verify_token

    ledger, _ = signed

    @FUZZ
    @given(st.text(max_size=300), st.binary(min_size=32, max_size=32))
    def run(token: str, key: bytes) -> None:
        _only_typed(
            lambda: verify_token(
                token,
                agent_keys=[key],
                origin=ledger.origin,
                agent="alice",
                audience="buyer-1",
                kinds=["pact.outcome"],
                now=NOW,
                revoked_ids=[],
            )
        )
        _only_typed(
            lambda: verify_token(
                base64.urlsafe_b64encode(token.encode()).decode(),
                agent_keys=[key],
                origin=ledger.origin,
                agent="alice",
                audience="buyer-1",
                kinds=["pact.outcome"],
                now=NOW,
                revoked_ids=[],
            )
        )

    run()

"""Attestation bundles on both backends: honest bundles verify; omissions, tampering,
stale or forked checkpoints, misstated claims and erased bodies are caught offline."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.bundle import create_bundle, pact_claim
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine
from tests.conftest import StepClock
from tests.contract.conftest import unchecked_bundle
from verifier.bundle import heads_text, verify_bundle
from verifier.cli import _bundle_step, main
from verifier.errors import VerificationError
from verifier.note import VerifierKey, sign_note

QUALITIES = [94, 81, 99, 40, 88, 97]


@pytest.fixture
def world(ledger: Ledger, make_agent: Callable[..., Agent]) -> tuple[Ledger, MemoryService, Agent]:
    memory = MemoryService(ledger)
    alice, bob = make_agent("alice"), make_agent("bob")
    alice.transport = bob.transport = InProcessMemory(memory)  # the tests use alice on it too
    for i, q in enumerate(QUALITIES):
        AgentMemory(alice).record(
            "pact.outcome",
            {"pact": f"p-{i}", "result": "violated" if q < 50 else "fulfilled", "quality": q},
        )
        AgentMemory(bob).record("pact.outcome", {"pact": f"b-{i}", "result": "fulfilled", "quality": 10})
        if i == 2:
            alice.rotate()  # the verifier must follow the key history
    AgentMemory(alice).record("commitment", {"promise": "reply within a day"})
    return ledger, memory, alice


def _verify(ledger: Ledger, data: bytes, **kw: bytes) -> object:
    return verify_bundle(data, VerifierKey.parse(ledger.vkey), **kw)


def test_an_honest_bundle_verifies_and_recomputes_the_claim(
    world: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, _, _ = world
    claim = pact_claim(ledger, "alice")
    assert [s["value"] for s in claim["statements"]] == [6, 5, "83.17"]
    result = _verify(ledger, create_bundle(ledger, claim))
    assert [c.recomputed for c in result.claims] == [6, 5, "83.17"]
    assert result.streams[("alice", "pact.outcome")] == 5
    path = tmp_path / "b.json"
    path.write_bytes(create_bundle(ledger, claim))
    assert main(["bundle", str(path), "--log-key", ledger.vkey]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("VERIFIED")
    assert "[ok  ] completeness:" in out and "[ok  ] claim: count of alice/pact.outcome = 6;" in out


def _without(data: bytes, pick: Callable[[list[dict]], dict]) -> bytes:
    doc = json.loads(data)
    pacts = [e for e in doc["entries"] if b"pact.outcome" in base64.b64decode(e["leaf"])]
    doc["entries"].remove(pick(pacts))
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("which", "pick"),
    [("first", lambda p: p[0]), ("middle", lambda p: p[len(p) // 2]), ("last", lambda p: p[-1])],
)
def test_dropping_any_record_of_a_claimed_stream_fails(world: tuple, which: str, pick: Callable) -> None:
    ledger, _, _ = world
    data = create_bundle(ledger, pact_claim(ledger, "alice"))
    with pytest.raises(VerificationError) as e:
        _verify(ledger, _without(data, pick))
    assert e.value.check.startswith("completeness"), (which, e.value.check)


def test_a_misstated_claim_fails(world: tuple) -> None:
    ledger, _, _ = world
    claim = pact_claim(ledger, "alice")
    claim["statements"][1]["value"] = 6  # "all six fulfilled"
    with pytest.raises(VerificationError) as e:
        _verify(ledger, unchecked_bundle(ledger, claim))
    assert e.value.check == "claim.value"
    with pytest.raises(VerificationError) as e:  # and the builder never hands it out
        create_bundle(ledger, claim)
    assert e.value.check == "bundle.claim.value"


def test_a_stream_head_statement_that_hides_a_record_is_a_fraud_proof(world: tuple) -> None:
    ledger, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "alice")))
    cp_lines = doc["checkpoint"].split("\n")
    heads = ledger.store.heads_at("alice", ledger.size())
    lowered = [
        (
            h.agent,
            h.kind,
            h.version - 1 if h.kind == "pact.outcome" else h.version,
            h.index,
            h.leaf_hash.hex(),
        )
        for h in heads
    ]
    text = heads_text(
        ledger.origin,
        int(cp_lines[1]),
        cp_lines[2],
        lowered
        + [
            (h.agent, h.kind, h.version, h.index, h.leaf_hash.hex())
            for h in ledger.store.heads_at("engram.policy", ledger.size())
        ],
        agents=["alice", "engram.policy"],
    )
    doc["stream_heads"] = sign_note(text, ledger.origin, ledger.log_key.private_key).decode()
    with pytest.raises(VerificationError) as e:
        _verify(ledger, json.dumps(doc).encode())
    assert e.value.check == "completeness.fraud"


@pytest.mark.parametrize("version", [2**31, 2**62])
def test_a_signed_head_version_far_beyond_the_records_is_missing_versions_not_a_crash(
    world: tuple, version: int
) -> None:
    """Regression: the completeness check built ``list(range(head version + 1))``, so a
    stream-head statement naming version 2^62 (a log that signs nonsense) made the verifier
    raise MemoryError, and 2^31 allocate gigabytes, instead of failing the bundle."""
    ledger, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "alice")))
    cp_lines = doc["checkpoint"].split("\n")
    heads = [
        (h.agent, h.kind, version if h.kind == "pact.outcome" else h.version, h.index, h.leaf_hash.hex())
        for a in ("alice", "engram.policy")
        for h in ledger.store.heads_at(a, ledger.size())
    ]
    text = heads_text(ledger.origin, int(cp_lines[1]), cp_lines[2], heads, agents=["alice", "engram.policy"])
    doc["stream_heads"] = sign_note(text, ledger.origin, ledger.log_key.private_key).decode()
    with pytest.raises(VerificationError) as e:
        _verify(ledger, json.dumps(doc).encode())
    assert e.value.check == "completeness.missing"
    assert f"lacks versions [{len(QUALITIES)}, {len(QUALITIES) + 1}," in str(e.value)


def test_stale_and_forked_checkpoints_fail_against_a_trusted_one(
    world: tuple,
    tmp_path: Path,
    log_key: LogKey,
    clock: StepClock,
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    ledger, _, alice = world
    old = ledger.latest_checkpoint()
    stale = create_bundle(ledger, pact_claim(ledger, "alice"))
    AgentMemory(alice).record("pact.outcome", {"pact": "p-new", "result": "fulfilled", "quality": 90})
    newer = ledger.latest_checkpoint()
    fresh = create_bundle(ledger, pact_claim(ledger, "alice"), trusted_size=old.size)
    assert _verify(ledger, fresh, trusted_checkpoint=old.note)
    with pytest.raises(VerificationError) as e:
        _verify(ledger, stale, trusted_checkpoint=newer.note)
    assert e.value.check == "trusted.stale"
    # A fork signed with the same key cannot prove consistency with what the buyer trusts.
    url = (
        f"sqlite:///{tmp_path / 'fork.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_server").new_database()
    )
    fork = create_ledger(make_engine(url), log_key, clock=clock, policy_key=Ed25519PrivateKey.generate())
    # The forger's own SDK keeps no state: it would refuse the fork it is building.
    m = Agent.generate(
        "alice", log_vkey=fork.vkey, transport=InProcess(fork, log_only=True), clock=clock, state_dir=None
    )
    m.register()
    for i in range(old.size + 3):
        m.append("pact.outcome", {"pact": f"f-{i}", "result": "fulfilled", "quality": 100})
    forged = create_bundle(fork, pact_claim(fork, "alice"), trusted_size=old.size)
    with pytest.raises(VerificationError) as e:
        _verify(fork, forged, trusted_checkpoint=old.note)
    assert e.value.check == "trusted.fork"


def test_erased_bodies_are_reported_and_block_only_claims_that_need_them(world: tuple) -> None:
    ledger, memory, alice = world
    first = ledger.store.stream_indices("alice", "pact.outcome", ledger.size())[0]
    AgentMemory(alice).erase(first, reason="customer asked")
    assert ledger.store.body(first) is None
    count_only = {
        "statements": [{"predicate": "count", "agent": "alice", "kind": "pact.outcome", "value": 6}]
    }
    result = _verify(ledger, create_bundle(ledger, count_only))
    assert result.erased == [first] and result.claims[0].recomputed == 6
    with pytest.raises(VerificationError) as e:
        _verify(ledger, unchecked_bundle(ledger, pact_claim(ledger, "alice")))
    assert e.value.check == "claim.undisclosed"
    assert memory.rebuild() == memory.digest()  # projection unchanged by the body's deletion


@pytest.mark.slow
def test_flipping_any_byte_of_a_bundle_fails_verification(world: tuple) -> None:
    ledger, _, _ = world
    data = create_bundle(ledger, pact_claim(ledger, "alice"))
    key = VerifierKey.parse(ledger.vkey)
    verify_bundle(data, key)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(min_value=0, max_value=len(data) - 1), st.integers(min_value=1, max_value=255))
    def flip(pos: int, delta: int) -> None:
        tampered = data[:pos] + bytes([(data[pos] + delta) % 256]) + data[pos + 1 :]
        with pytest.raises(VerificationError):
            verify_bundle(tampered, key)

    flip()


def test_bundles_match_their_json_schema(world: tuple) -> None:
    import jsonschema

    ledger, _, _ = world
    schema = json.loads((Path(__file__).resolve().parents[2] / "specs" / "bundle.schema.json").read_text())
    jsonschema.validate(json.loads(create_bundle(ledger, pact_claim(ledger, "alice"))), schema)


# -- share tokens --------------------------------------------------------------------------

NOW = 1_900_000_000


def _mint(
    ledger: Ledger, agent: Agent, kinds: list[str], *, audience: str = "buyer-1", expires: int = NOW + 3600
) -> str:
    from verifier.token import mint

    return mint(
        seed=agent.signer.private_key.private_bytes_raw(),
        origin=ledger.origin,
        agent=agent.agent_id,
        audience=audience,
        kinds=kinds,
        expires=expires,
    )


def _keys(ledger: Ledger, agent: str) -> list[bytes]:
    return [k.public_key for k in ledger.store.keys_of(agent) if k.retired_how != "revoked"]


def _pact_bundle_carrying(ledger: Ledger, alice: Agent, token: str) -> bytes:
    """An honest token-scoped pact bundle, with ``token`` put in place of the honest one."""
    honest = create_bundle(
        ledger, pact_claim(ledger, "alice"), token=_mint(ledger, alice, ["pact.outcome"]), audience="buyer-1"
    )
    return _swap_token(honest, token)


def _swap_token(data: bytes, token: str) -> bytes:
    """A bundle the builder would not have made: someone else's token put in its place."""
    doc = json.loads(data)
    doc["token"] = token
    return json.dumps(doc).encode()


def test_a_token_scoped_bundle_verifies_for_its_audience_only(world: tuple) -> None:
    from verifier.token import attenuate

    ledger, _, alice = world
    token = attenuate(
        _mint(ledger, alice, ["pact.outcome", "eval.outcome"]),
        agent_keys=_keys(ledger, "alice"),
        kinds=["pact.outcome"],
    )
    data = create_bundle(ledger, pact_claim(ledger, "alice"), token=token, audience="buyer-1")
    ok = _verify(ledger, data, audience="buyer-1", now=NOW)
    assert ok.claims[1].recomputed == 5
    for kw, check in [
        ({"audience": "mallory", "now": NOW}, "token.scope"),  # wrong audience
        ({"audience": "buyer-1", "now": NOW + 7200}, "token.scope"),  # expired
        ({"now": NOW}, "token.audience"),  # the verifier must say who it is
    ]:
        with pytest.raises(VerificationError) as e:
            _verify(ledger, data, **kw)
        assert e.value.check == check


def test_the_builder_discloses_nothing_a_token_does_not_allow(world: tuple) -> None:
    ledger, _, alice = world
    AgentMemory(alice).record("eval.outcome", {"eval": "e-1", "result": "pass", "score": 70})
    eval_claim = {
        "statements": [{"predicate": "count", "agent": "alice", "kind": "eval.outcome", "value": 1}]
    }
    for token, audience, check in [
        (_mint(ledger, alice, ["pact.outcome"]), "buyer-1", "token.scope"),  # kind out of scope
        (_mint(ledger, alice, ["eval.outcome"], expires=1_000), "buyer-1", "token.scope"),  # expired
        (_mint(ledger, alice, ["eval.outcome"]), None, "token.audience"),  # no audience
        (_mint(ledger, alice, ["eval.outcome"]), "buyer-2", "token.scope"),  # not this buyer's
    ]:
        with pytest.raises(VerificationError) as e:
            create_bundle(ledger, eval_claim, token=token, audience=audience)
        assert e.value.check == check


def test_a_body_outside_the_tokens_scope_fails(world: tuple) -> None:
    ledger, _, alice = world
    AgentMemory(alice).record("eval.outcome", {"eval": "e-1", "result": "pass", "score": 70})
    claim = {
        "statements": [
            {
                "predicate": "count",
                "agent": "alice",
                "kind": "eval.outcome",
                "where": {"result": "pass"},
                "value": 1,
            }
        ]
    }
    data = create_bundle(ledger, claim, token=_mint(ledger, alice, ["eval.outcome"]), audience="buyer-1")
    with pytest.raises(VerificationError) as e:
        _verify(
            ledger, _swap_token(data, _mint(ledger, alice, ["pact.outcome"])), audience="buyer-1", now=NOW
        )
    assert e.value.check == "token.scope"


def test_a_widened_token_fails(world: tuple) -> None:
    import biscuit_auth as b

    ledger, _, alice = world
    AgentMemory(alice).record("eval.outcome", {"eval": "e-1", "result": "pass", "score": 70})
    parsed = b.Biscuit.from_base64(
        _mint(ledger, alice, ["pact.outcome"]),
        b.PublicKey.from_bytes(_keys(ledger, "alice")[-1], b.Algorithm.Ed25519),
    )
    widened = parsed.append(b.BlockBuilder('right("eval.outcome");', {})).to_base64()
    claim = {"statements": [{"predicate": "count", "agent": "alice", "kind": "eval.outcome", "value": 1}]}
    data = create_bundle(ledger, claim, token=_mint(ledger, alice, ["eval.outcome"]), audience="buyer-1")
    with pytest.raises(VerificationError) as e:
        _verify(ledger, _swap_token(data, widened), audience="buyer-1", now=NOW)
    assert e.value.check in {"token.template", "token.scope"}


def test_a_runaway_attenuation_block_fails_cleanly(
    world: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import biscuit_auth as b

    ledger, _, alice = world
    parsed = b.Biscuit.from_base64(
        _mint(ledger, alice, ["pact.outcome"]),
        b.PublicKey.from_bytes(_keys(ledger, "alice")[-1], b.Algorithm.Ed25519),
    )
    heavy = parsed.append(b.BlockBuilder("n(0); n(1); p($x, $y) <- n($x), n($y);", {})).to_base64()
    data = _pact_bundle_carrying(ledger, alice, heavy)
    with pytest.raises(VerificationError) as e:
        _verify(ledger, data, audience="buyer-1", now=NOW)
    assert e.value.check == "token.template"
    path = tmp_path / "b.json"
    path.write_bytes(data)
    assert main(["bundle", str(path), "--log-key", ledger.vkey, "--audience", "buyer-1", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verified"] is False


def test_a_revoked_token_fails_and_the_revocation_cannot_be_hidden(world: tuple) -> None:
    from verifier.token import attenuate, revocation_ids

    ledger, _, alice = world
    root = _mint(ledger, alice, ["pact.outcome"])
    derived = attenuate(root, agent_keys=_keys(ledger, "alice"), expires=NOW + 60)
    alice.append("share.revoked", {"token_id": revocation_ids(root, agent_keys=_keys(ledger, "alice"))[0]})
    with pytest.raises(VerificationError) as e:  # the builder refuses it too
        create_bundle(ledger, pact_claim(ledger, "alice"), token=derived, audience="buyer-1")
    assert e.value.check == "token.revoked"
    data = _pact_bundle_carrying(ledger, alice, derived)
    with pytest.raises(VerificationError) as e:
        _verify(ledger, data, audience="buyer-1", now=NOW)
    assert e.value.check == "token.revoked"
    doc = json.loads(data)
    doc["entries"] = [x for x in doc["entries"] if b"share.revoked" not in base64.b64decode(x["leaf"])]
    with pytest.raises(VerificationError) as e:
        _verify(ledger, json.dumps(doc).encode(), audience="buyer-1", now=NOW)
    assert e.value.check.startswith("completeness")


def test_tokens_of_another_agent_or_a_rotated_out_key_fail(
    world: tuple, make_agent: Callable[..., Agent]
) -> None:
    ledger, _, alice = world
    carol = make_agent("carol")
    good = create_bundle(
        ledger, pact_claim(ledger, "alice"), token=_mint(ledger, alice, ["pact.outcome"]), audience="buyer-1"
    )
    with pytest.raises(VerificationError) as e:
        _verify(
            ledger, _swap_token(good, _mint(ledger, carol, ["pact.outcome"])), audience="buyer-1", now=NOW
        )
    assert e.value.check == "token.signature"
    old_signer = alice.signer
    alice.rotate()
    from verifier.token import mint

    stale = mint(
        seed=old_signer.private_key.private_bytes_raw(),
        origin=ledger.origin,
        agent="alice",
        audience="buyer-1",
        kinds=["pact.outcome"],
        expires=NOW + 3600,
    )
    fresh = create_bundle(
        ledger, pact_claim(ledger, "alice"), token=_mint(ledger, alice, ["pact.outcome"]), audience="buyer-1"
    )
    with pytest.raises(VerificationError) as e:
        _verify(ledger, _swap_token(fresh, stale), audience="buyer-1", now=NOW)
    assert e.value.check == "token.signature"


def test_claims_compare_types_strictly(world: tuple) -> None:
    ledger, _, _ = world
    for statement in [
        {
            "predicate": "count",
            "agent": "alice",
            "kind": "pact.outcome",
            "where": {"result": "violated"},
            "value": True,
        },
        {"predicate": "exists", "agent": "alice", "kind": "pact.outcome", "value": 1},
        {
            "predicate": "count",
            "agent": "alice",
            "kind": "pact.outcome",
            "where": {"nonexistent": None},
            "value": 6,
        },
    ]:
        with pytest.raises(VerificationError) as e:
            _verify(ledger, unchecked_bundle(ledger, {"statements": [statement]}))
        assert e.value.check == "format.claim"
    where_missing = {
        "predicate": "count",
        "agent": "alice",
        "kind": "pact.outcome",
        "where": {"nonexistent": "x"},
        "value": 0,
    }
    assert _verify(ledger, create_bundle(ledger, {"statements": [where_missing]})).claims[0].recomputed == 0


def test_an_erasure_must_be_proven(world: tuple) -> None:
    ledger, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "alice")))
    for e in doc["entries"]:
        if "body" in e:
            del e["body"], e["salt"]
            e["erased"] = True
    with pytest.raises(VerificationError) as err:
        _verify(ledger, json.dumps(doc).encode())
    assert err.value.check == "bodies.erased"


def test_unicode_garbage_is_a_format_error_not_a_crash(world: tuple) -> None:
    ledger, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "alice")))
    doc["checkpoint"] = "\ud800"
    with pytest.raises(VerificationError) as e:
        _verify(ledger, json.dumps(doc).encode())
    # Refused by the strict parser itself, before any member is read (the format step).
    assert e.value.check == "canonical.string"
    assert _bundle_step(e.value.check) == "format"


def test_mesh_read_bundles_match_their_json_schema(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService
) -> None:
    """The schema knows the mesh_read statement and the log's mesh-read indexes (issue 40)."""
    import jsonschema

    transport = InProcessMemory(memory)
    ada, bob = (make_agent(n) for n in ("ada", "bob"))
    ada.transport = bob.transport = transport
    a, b = AgentMemory(ada), AgentMemory(bob)
    mesh = a.mesh_create("desk")
    a.mesh_invite(mesh, "bob")
    b.mesh_join(mesh)
    a.mesh_grant(mesh, share=["LEARNING"], read=[])
    b.mesh_grant(mesh, share=[], read=["LEARNING"])
    w = a.write(category="LEARNING", content="Northwind's bonds settle on Fridays.", tier="WARM")
    schema = json.loads((Path(__file__).resolve().parents[2] / "specs" / "bundle.schema.json").read_text())
    jsonschema.validate(json.loads(memory.mesh_proof("bob", mesh, w.ref or "")), schema)


def test_bundle_create_refuses_a_claim_its_verifier_would_fail(world: tuple) -> None:
    """Issue 40, finding 10: after a record was erased, the builder behind `engram bundle
    create` (its default claim: the pact summary, whose mean needs every body) made without a
    word a bundle whose own claim failed verification. It verifies what it made and refuses,
    naming the verifier's check (tests/e2e/test_bundle_cli.py: the command writes nothing)."""
    ledger, _, alice = world
    first = ledger.store.stream_indices("alice", "pact.outcome", ledger.size())[0]
    AgentMemory(alice).erase(first, reason="customer asked")
    with pytest.raises(VerificationError) as e:
        create_bundle(ledger, pact_claim(ledger, "alice"))
    assert e.value.check == "bundle.claim.undisclosed"
    assert "claim.undisclosed" in str(e.value)
    # a claim that needs no body still makes a bundle, and it verifies
    count_only = {
        "statements": [{"predicate": "count", "agent": "alice", "kind": "pact.outcome", "value": 6}]
    }
    assert _verify(ledger, create_bundle(ledger, count_only)).claims[0].holds

"""A real witness quorum on loopback: three ``engram witness serve`` processes cosign the log's
checkpoints over c2sp.org/tlog-witness, and a buyer holding a 2-of-3 witness policy and its
default state directory detects a rollback, a fork and a split view on its own, on both backends.

The split view: the log-key holder forks the log (same key, same origin, other entries) and
shows the fork to one buyer only. The witnesses, who saw the real log, refuse to cosign the
fork, so its bundle has no quorum; copying the real checkpoint's cosignatures onto it fails
their signatures. A buyer that never saw the real log still refuses it."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import Buyer, HttpTransport
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.bundle import create_bundle, pact_claim
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine
from ledger.tiles import export_tiles
from ledger.witness import WitnessSubmitter
from ledger.witnessing import witness_checkpoint
from tests.conftest import StepClock
from verifier.cli import main as verify_main
from verifier.errors import VerificationError
from verifier.witness import WitnessPolicy

ENGRAM = str(Path(sys.executable).parent / "engram")
OPERATOR = "wYp-CvtUbxbqgWODDfrzTUKX8F_5EhyNKKuwRdQM"


def _engram(*args: str) -> str:
    proc = subprocess.run([ENGRAM, *args], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture
def witnesses(ledger: Ledger, tmp_path: Path) -> Iterator[list[tuple[str, str]]]:
    """Three witness processes trusting the log; yields (vkey, url) of each."""
    with _witness_processes(ledger.vkey, tmp_path) as out:
        yield out


@contextmanager
def _witness_processes(log_vkey: str, tmp_path: Path) -> Iterator[list[tuple[str, str]]]:
    procs, out = [], []
    try:
        for i in range(3):
            d = tmp_path / f"witness{i}"
            vkey = _engram("witness", "init", "--name", f"w{i}.test/witness", "--dir", str(d)).strip()
            _engram("witness", "add-log", log_vkey, "--dir", str(d))
            p = subprocess.Popen(
                [ENGRAM, "witness", "serve", "--dir", str(d), "--port", "0"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "COLUMNS": "200"},
            )
            procs.append(p)
            assert p.stdout is not None
            line = p.stdout.readline()
            m = re.search(r"listening on (http://\S+)", line)
            assert m, line
            out.append((vkey, m.group(1)))
        yield out
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


def _policy_text(ws: list[tuple[str, str]], *, urls: bool) -> str:
    lines = [f"witness w{i} {vkey}" + (f" {url}" if urls else "") for i, (vkey, url) in enumerate(ws)]
    return "\n".join([*lines, "group two-of-three 2 w0 w1 w2", "quorum two-of-three", ""])


def _fork(log_key: LogKey, clock: StepClock, url: str, size: int) -> Ledger:
    fork = create_ledger(make_engine(url), log_key, clock=clock, policy_key=Ed25519PrivateKey.generate())
    mallory = Agent.generate(
        "ada", log_vkey=fork.vkey, transport=InProcess(fork, log_only=True), clock=clock, state_dir=None
    )
    mallory.register()
    while fork.size() < size:
        mallory.append("commitment", {"promise": f"rewritten {fork.size()}"})
    return fork


@pytest.fixture
def fork_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'fork.db'}"
    return str(request.getfixturevalue("pg_server").new_database())


def test_buyer_with_state_and_witness_policy_detects_rollback_fork_and_split_view(
    ledger: Ledger,
    witnesses: list[tuple[str, str]],
    log_key: LogKey,
    clock: StepClock,
    fork_url: str,
    tmp_path: Path,
) -> None:
    ledger.witnesses = WitnessSubmitter(WitnessPolicy.parse(_policy_text(witnesses, urls=True)))
    client = TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))
    transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    ada = AgentMemory(Agent.generate("ada", log_vkey=ledger.vkey, transport=transport), transport)
    ada.agent.register()
    for q in (91, 95):
        ada.record("pact.outcome", {"pact": f"p{q}", "result": "fulfilled", "quality": q})

    # The buyer configures a policy (without URLs: it only verifies) and nothing else.
    buyer_policy = WitnessPolicy.parse(_policy_text(witnesses, urls=False))
    buyer = Buyer(
        transport, log_vkey=ledger.vkey, audience_key=Ed25519PrivateKey.generate(), witnesses=buyer_policy
    )
    token = ada.mint_token(audience=buyer.audience, kinds=["pact.outcome"], expires=int(time.time()) + 600)

    first = buyer.bundle(token, agent="ada", kinds=["pact.outcome"])
    vb = buyer.verify(first)
    assert vb.witnesses == ("w0", "w1", "w2")  # building the bundle collected the cosignatures
    assert all(c.holds for c in vb.claims)
    # GET /checkpoint serves the cosignatures too
    assert client.get("/checkpoint").text.count("\u2014 ") == 4

    ada.record("pact.outcome", {"pact": "p3", "result": "violated", "quality": 20})
    second = buyer.bundle(token, agent="ada", kinds=["pact.outcome"])
    assert buyer.verify(second).checkpoint.size > vb.checkpoint.size

    # Rollback: the older (genuine, fully cosigned) bundle, shown again.
    with pytest.raises(VerificationError) as e:
        buyer.verify(first)
    assert e.value.check == "state.rollback"

    # The log-key holder forks the log at the same size (another root) and shows the fork.
    fork = _fork(log_key, clock, fork_url, ledger.size())
    fork.witnesses = WitnessSubmitter(WitnessPolicy.parse(_policy_text(witnesses, urls=True)))
    round_ = witness_checkpoint(fork)
    assert not round_.quorum
    assert all(r.cosignature is None for r in round_.results)  # every witness refused it
    forged = create_bundle(fork, {"statements": [_never_violated("ada")]})
    doc = json.loads(forged)
    assert doc["checkpoint"].count("\u2014 ") == 1  # the log's signature, no cosignature

    # Fork: this buyer remembered the real log (state) and would catch it even without witnesses.
    no_policy = Buyer(transport, log_vkey=ledger.vkey, audience_key=Ed25519PrivateKey.generate())
    with pytest.raises(VerificationError) as e:
        no_policy.verify(forged)
    assert e.value.check == "state.fork"

    # Split view: a buyer who never saw the real log, with a fresh state directory.
    stranger = Buyer(
        transport,
        log_vkey=ledger.vkey,
        audience_key=Ed25519PrivateKey.generate(),
        state_dir=tmp_path / "fresh-state",
        witnesses=buyer_policy,
    )
    with pytest.raises(VerificationError) as e:
        stranger.verify(forged)
    assert e.value.check == "witness.quorum"
    assert stranger.remembered() is None  # nothing was remembered from the failed check
    # ... and the real checkpoint's cosignatures, copied onto the fork, do not verify.
    real = client.get("/checkpoint").text
    cosigs = [ln for ln in real.splitlines() if ln.startswith("\u2014 w")]
    doc["checkpoint"] += "".join(ln + "\n" for ln in cosigs)
    with pytest.raises(VerificationError) as e:
        stranger.verify(json.dumps(doc).encode())
    assert e.value.check == "witness.signature"


def _never_violated(agent: str) -> dict:
    return {
        "predicate": "count",
        "agent": agent,
        "kind": "pact.outcome",
        "where": {"result": "violated"},
        "value": 0,
    }


def test_engram_verify_requires_the_quorum_and_the_witness_keeps_its_own_state(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    witnesses: list[tuple[str, str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    memory = MemoryService(ledger)
    alice = make_agent("alice")
    alice.transport = InProcessMemory(memory)
    mem = AgentMemory(alice)
    mem.record("pact.outcome", {"pact": "a", "result": "fulfilled", "quality": 90})
    policy = tmp_path / "policy"
    policy.write_text(_policy_text(witnesses, urls=False))
    # Without witnesses configured, a bundle carries no cosignature: the policy fails it.
    bare = tmp_path / "bare.json"
    bare.write_bytes(create_bundle(ledger, pact_claim(ledger, "alice")))
    args = ["--log-key", ledger.vkey, "--witness-policy", str(policy), "--json"]
    assert verify_main(["bundle", str(bare), *args]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["checks"][-1]["failed_check"] == "witness.quorum"
    assert report["checks"][-1]["check"] == "witnesses"

    # Two witnesses reachable, one down: 2-of-3 still holds.
    live = [witnesses[0], witnesses[1], (witnesses[2][0], "http://127.0.0.1:9")]
    ledger.witnesses = WitnessSubmitter(WitnessPolicy.parse(_policy_text(live, urls=True)), timeout_s=2)
    good = tmp_path / "good.json"
    good.write_bytes(create_bundle(ledger, pact_claim(ledger, "alice")))
    assert verify_main(["bundle", str(good), *args]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["witnesses"] == ["w0", "w1"]
    # --witness keys with a quorum: 3-of-3 fails, 2-of-3 holds; checkpoints alike.
    keys = [a for vkey, _ in witnesses for a in ("--witness", vkey)]
    assert verify_main(["bundle", str(good), "--log-key", ledger.vkey, *keys, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "witness.quorum"
    cp = tmp_path / "cp"
    cp.write_bytes(ledger.cosigned_note(ledger.latest_checkpoint()))
    assert verify_main(["checkpoint", str(cp), "--log-key", ledger.vkey, *keys, "--witness-quorum", "2"]) == 0
    capsys.readouterr()

    # The log keeps submitting: the next checkpoint goes with a consistency proof from the
    # size each witness last cosigned (old size > 0), and they accept it.
    mem.record("pact.outcome", {"pact": "b", "result": "fulfilled", "quality": 80})
    round_ = witness_checkpoint(ledger)
    assert round_.quorum and round_.size == ledger.size()
    assert [r.cosignature is not None for r in round_.results] == [True, True, False]
    # An auditor's replay of the export can require the quorum on its checkpoint too.
    export_tiles(ledger.store, tmp_path / "tiles")
    assert verify_main(["log", str(tmp_path / "tiles"), *args, "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["checks"][-1]["check"] == "witnesses"
    mem.record("pact.outcome", {"pact": "c", "result": "fulfilled", "quality": 70})
    export_tiles(ledger.store, tmp_path / "tiles2")  # a checkpoint nobody cosigned yet
    assert verify_main(["log", str(tmp_path / "tiles2"), *args, "--quiet"]) == 1
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "witness.quorum"


def test_engram_serve_submits_new_checkpoints_to_the_witnesses_of_its_policy(tmp_path: Path) -> None:
    """ENGRAM_WITNESS_POLICY and ENGRAM_WITNESS_INTERVAL_S take effect in `engram serve`."""
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_OPERATOR_TOKEN": OPERATOR}
    env.pop("ENGRAM_DATABASE_URL", None)
    subprocess.run([ENGRAM, "init", "--origin", "serve.test/log"], env=env, check=True, capture_output=True)
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env={**env, "COLUMNS": "400"}, check=True, capture_output=True, text=True
    ).stdout.strip()
    with _witness_processes(vkey, tmp_path) as ws:
        policy = tmp_path / "policy"
        policy.write_text(_policy_text(ws, urls=True))
        env |= {"ENGRAM_WITNESS_POLICY": str(policy), "ENGRAM_WITNESS_INTERVAL_S": "1"}
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen(
            [ENGRAM, "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}/checkpoint"
            note = ""
            for _ in range(150):
                try:
                    note = httpx.get(url).text
                except httpx.HTTPError:
                    note = ""
                if note.count("\u2014 w") == 3:
                    break
                time.sleep(0.2)
            assert note.count("\u2014 w") == 3, note
            cp = tmp_path / "cp"
            cp.write_text(note)
            policy_only = tmp_path / "verify-policy"
            policy_only.write_text(_policy_text(ws, urls=False))
            args = ["checkpoint", str(cp), "--log-key", vkey, "--witness-policy", str(policy_only)]
            assert verify_main(args) == 0
        finally:
            server.terminate()
            server.wait(timeout=30)

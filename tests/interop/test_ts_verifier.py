"""Issue 31, Deliver 2 (first slice): the TypeScript verifier in clients/ts (pinned with its
package-lock.json, installed with ``npm ci`` into a temporary copy) builds and passes its
tests: the same known-answer vectors as the Python verifier (specs/vectors/merkle.json,
checkpoint.json, jcs.json), every invalid vector failing with the check name the vector
states, and its tamper tests. Here the two verifiers are also held to the same answer on
checkpoints this log signs."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engram.client.sdk import Agent
from ledger.log import Ledger
from verifier.errors import VerificationError
from verifier.merkle import leaf_hash, verify_inclusion
from verifier.note import VerifierKey, verify_checkpoint

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() == "true"

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clients/ts installed (npm ci) and built in a temporary copy; its test output checked."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        if IN_CI:
            pytest.fail("CI requires node and npm for the TypeScript verifier")
        pytest.skip("node and npm are not installed")
    tmp_path = tmp_path_factory.mktemp("tsverifier")
    ts = tmp_path / "clients" / "ts"
    shutil.copytree(ROOT / "clients" / "ts", ts, ignore=shutil.ignore_patterns("node_modules", "dist"))
    shutil.copytree(ROOT / "specs" / "vectors", tmp_path / "specs" / "vectors")
    ci = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=ts, capture_output=True, text=True, timeout=600
    )
    assert ci.returncode == 0, ci.stdout[-2000:] + ci.stderr[-2000:]
    test = subprocess.run(["npm", "test"], cwd=ts, capture_output=True, text=True, timeout=600)
    out = test.stdout + test.stderr
    assert test.returncode == 0, out[-4000:]
    assert "# fail 0" in out and "# pass " in out, out[-2000:]
    passed = int(out.split("# pass ", 1)[1].split()[0])
    assert passed >= 100, out[-2000:]  # the vectors are really run, not skipped
    return ts


def test_the_typescript_verifier_passes_the_shared_vectors(built: Path) -> None:
    assert (built / "dist" / "src" / "index.js").exists()


_CHECK = """
import { readFileSync } from "node:fs";
import * as v from "./dist/src/index.js";
const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const b = (s) => Uint8Array.from(Buffer.from(s, "base64"));
const out = [];
for (const c of cases) {
  try {
    const cp = v.verifyCheckpoint(b(c.note), v.VerifierKey.parse(c.vkey));
    v.verifyInclusion({ leafHash: b(c.leaf_hash), index: BigInt(c.index), size: cp.size,
                        proof: c.proof.map(b), root: cp.root });
    out.push("ok");
  } catch (e) { out.push(e.check ?? "crash:" + e); }
}
console.log(JSON.stringify(out));
"""


def test_both_verifiers_agree_on_this_logs_checkpoints_and_proofs(
    built: Path, ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """Honest checkpoints and inclusion proofs from this log verify in both; each tampered
    one fails in both with the same check name."""
    for name in ("ada", "bob", "cy"):
        make_agent(name)
    cp = ledger.latest_checkpoint()
    note = ledger.cosigned_note(cp)
    cases, expected = [], []
    for index in range(cp.size):
        leaf = ledger.store.leaf(index)
        assert leaf is not None
        proof = ledger.prove_inclusion(index, cp.size)
        case = {
            "vkey": ledger.vkey,
            "note": base64.b64encode(note).decode(),
            "leaf_hash": base64.b64encode(leaf_hash(leaf)).decode(),
            "index": index,
            "proof": [base64.b64encode(h).decode() for h in proof.hashes],
        }
        cases.append(case)
        tampered = dict(case)
        if index % 3 == 0 and proof.hashes:  # a flipped bit in a proof hash
            h = bytearray(proof.hashes[0])
            h[0] ^= 1
            tampered["proof"] = [base64.b64encode(bytes(h)).decode(), *case["proof"][1:]]
        elif index % 3 == 1:  # a flipped bit in the signed note's root line
            text = note.decode()
            lines = text.split("\n")
            lines[2] = ("A" if lines[2][0] != "A" else "B") + lines[2][1:]
            tampered["note"] = base64.b64encode("\n".join(lines).encode()).decode()
        else:  # the wrong index
            tampered["index"] = (index + 1) % cp.size if cp.size > 1 else index + 1
        cases.append(tampered)
    for c in cases:
        expected.append(_python(c))
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (built / "check.mjs").write_text(_CHECK)
    got = subprocess.run(
        ["node", "check.mjs", str(tmp_path / "cases.json")],
        cwd=built,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == expected
    assert expected.count("ok") == cp.size and all(e != "ok" for e in expected[1::2])


def _python(c: dict[str, Any]) -> str:
    try:
        cp = verify_checkpoint(base64.b64decode(c["note"]), VerifierKey.parse(c["vkey"]))
        verify_inclusion(
            leaf_hash=base64.b64decode(c["leaf_hash"]),
            index=c["index"],
            size=cp.size,
            proof=[base64.b64decode(h) for h in c["proof"]],
            root=cp.root,
        )
    except VerificationError as e:
        return e.check
    return "ok"


_TOKENS = """
import { readFileSync } from "node:fs";
import * as v from "./dist/src/index.js";
const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const b = (s) => Uint8Array.from(Buffer.from(s, "base64"));
const out = [];
for (const c of cases) {
  try {
    const r = v.verifyToken(c.token, { agentKeys: c.keys.map(b), origin: c.origin, agent: c.agent,
      audience: c.audience, kinds: c.kinds, at: c.at, revokedIds: c.revoked });
    out.push("VERIFIED:" + r.kinds.join(",") + ":" + r.revocationIds.join(","));
  } catch (e) { out.push(e.check ?? "crash:" + e); }
}
console.log(JSON.stringify(out));
"""


def test_both_verifiers_agree_on_share_tokens_biscuit_python_mints(built: Path, tmp_path: Path) -> None:
    """Share tokens as biscuit-python mints and attenuates them (fresh random ephemeral keys on
    every run, unlike the TypeScript fixtures): both verifiers accept the honest ones with the
    same kinds and revocation ids, and refuse each tampered one with the same check."""
    import hashlib

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from verifier.token import attenuate, mint, revocation_ids, verify_token

    seed = hashlib.sha256(b"interop/token/ann").digest()
    other = hashlib.sha256(b"interop/token/bob").digest()
    pk = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    bob = Ed25519PrivateKey.from_private_bytes(other).public_key().public_bytes_raw()
    origin, at = "example.com/interop", 1_800_000_000
    root = mint(
        seed=seed,
        origin=origin,
        agent="ann",
        audience="buyer-1",
        kinds=["pact.outcome", "commitment"],
        expires=1_900_000_000,
    )
    narrowed = attenuate(root, agent_keys=[pk], kinds=["pact.outcome"], expires=1_850_000_000)
    twice = attenuate(narrowed, agent_keys=[pk], expires=1_840_000_000)
    flipped = root[:60] + ("A" if root[60] != "A" else "B") + root[61:]
    base: dict[str, Any] = {
        "origin": origin,
        "agent": "ann",
        "audience": "buyer-1",
        "kinds": ["pact.outcome"],
        "at": at,
        "keys": [base64.b64encode(pk).decode()],
        "revoked": [],
    }
    cases: list[dict[str, Any]] = [
        {**base, "token": root},
        {**base, "token": root, "kinds": ["pact.outcome", "commitment"]},
        {**base, "token": narrowed},
        {**base, "token": narrowed, "kinds": ["commitment"]},
        {**base, "token": twice, "at": 1_840_000_001},
        {**base, "token": twice},
        {**base, "token": root, "audience": "buyer-2"},
        {**base, "token": root, "at": 1_900_000_001},
        {**base, "token": narrowed, "revoked": revocation_ids(root, agent_keys=[pk])[:1]},
        {**base, "token": twice, "revoked": revocation_ids(twice, agent_keys=[pk])[2:]},
        {**base, "token": root, "keys": [base64.b64encode(bob).decode()]},
        {**base, "token": root, "origin": "example.com/other"},
        {**base, "token": root, "agent": "bob"},
        {**base, "token": flipped},
        {**base, "token": root + "!"},
    ]
    expected: list[str] = []
    for c in cases:
        try:
            r = verify_token(
                c["token"],
                agent_keys=[base64.b64decode(k) for k in c["keys"]],
                origin=c["origin"],
                agent=c["agent"],
                audience=c["audience"],
                kinds=c["kinds"],
                now=c["at"],
                revoked_ids=c["revoked"],
            )
            expected.append(f"VERIFIED:{','.join(r.kinds)}:{','.join(r.revocation_ids)}")
        except VerificationError as e:
            expected.append(e.check)
    (tmp_path / "tokens.json").write_text(json.dumps(cases))
    (built / "tokens.mjs").write_text(_TOKENS)
    got = subprocess.run(
        ["node", "tokens.mjs", str(tmp_path / "tokens.json")],
        cwd=built,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == expected
    assert sum(e.startswith("VERIFIED") for e in expected) == 4


def test_the_browser_build_in_the_package_is_the_build_of_these_sources(built: Path, tmp_path: Path) -> None:
    """The web UI verifies with api/ui/static/engram-verify.js, which `npm run build:web`
    makes from clients/ts (esbuild, deterministic): a source changed without rebuilding would
    leave the browser running an older verifier than the one these tests check."""
    out = tmp_path / "engram-verify.js"
    run = subprocess.run(
        ["node", "scripts/build-web.mjs", str(out)], cwd=built, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    committed = (ROOT / "api" / "ui" / "static" / "engram-verify.js").read_bytes()
    assert out.read_bytes() == committed, "run `cd clients/ts && npm run build:web` and commit the result"

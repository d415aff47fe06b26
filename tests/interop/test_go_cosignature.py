"""Independent cross-check of witness cosignatures (c2sp.org/tlog-cosignature v1) with Go.

``cosigcheck/`` opens notes with ``golang.org/x/mod/sumdb/note`` and a cosignature/v1
verifier and signer written on Go's ``crypto/ed25519``: it must accept the cosignatures an
Engram witness produces and reject tampered ones, and Engram must accept the cosignatures
and verifier keys it produces. Install the toolchain with ``.ci/install-interop.sh``.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.witness import Witness
from tests.interop.test_go_tlog import GOPATH, XMOD_SUMDB, _missing_toolchain
from verifier.merkle import root_from_leaf_hashes
from verifier.note import VerifierKey, checkpoint_text, sign_note
from verifier.witness import WitnessKey, format_add_checkpoint, verify_cosignatures

pytestmark = pytest.mark.interop

SRC = Path(__file__).parent / "cosigcheck"
SEED = bytes(range(100, 132))


@pytest.fixture(scope="module")
def cosigcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        _missing_toolchain("`go` is not on PATH")
    if not (XMOD_SUMDB / "note").is_dir():
        _missing_toolchain(f"{XMOD_SUMDB / 'note'} is missing")
    out = tmp_path_factory.mktemp("cosigcheck")
    env = dict(os.environ, GO111MODULE="off", GOPATH=str(GOPATH), GOFLAGS="", GOCACHE=str(out / "gocache"))
    env["CGO_ENABLED"] = "0"
    proc = subprocess.run(
        [go, "build", "-o", str(out / "cosigcheck"), "."], cwd=SRC, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return out / "cosigcheck"


def _run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def cosigned(tmp_path: Path) -> tuple[Path, VerifierKey, list[WitnessKey]]:
    log = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    vkey = VerifierKey.from_public_key("interop.example/log", log.public_key().public_bytes_raw())
    root = root_from_leaf_hashes([bytes([i]) * 32 for i in range(7)])
    note = sign_note(checkpoint_text(vkey.name, 7, root), vkey.name, log)
    keys = []
    for i in range(2):
        w = Witness(
            tmp_path / f"w{i}",
            name=f"w{i}.interop.example/w",
            key=Ed25519PrivateKey.from_private_bytes(bytes([i + 1]) * 32),
            logs=[vkey],
        )
        reply = w.add_checkpoint(format_add_checkpoint(0, [], note))
        assert reply.status == 200
        note += reply.body
        keys.append(w.vkey)
    path = tmp_path / "checkpoint"
    path.write_bytes(note)
    return path, vkey, keys


def test_go_verifies_engram_witness_cosignatures(cosigcheck: Path, cosigned: tuple) -> None:
    path, vkey, keys = cosigned
    args = ["-vkey", str(vkey), "-file", str(path)]
    run = _run(cosigcheck, "verify", *args, *(a for k in keys for a in ("-witness", str(k))))
    assert run.returncode == 0, run.stderr
    assert (
        run.stdout.strip() == "OK log=interop.example/log cosigners=w0.interop.example/w,w1.interop.example/w"
    )


def test_go_rejects_a_tampered_cosignature(cosigcheck: Path, cosigned: tuple) -> None:
    path, vkey, keys = cosigned
    lines = path.read_text().split("\n")
    last = lines[-2]
    name, blob = last[2:].split(" ")
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    lines[-2] = f"\u2014 {name} {base64.b64encode(bytes(raw)).decode()}"
    path.write_text("\n".join(lines))
    run = _run(cosigcheck, "verify", "-vkey", str(vkey), "-file", str(path), "-witness", str(keys[1]))
    assert run.returncode == 1 and "FAIL" in run.stderr


def test_engram_verifies_go_cosignatures_and_agrees_on_the_key_id(cosigcheck: Path, cosigned: tuple) -> None:
    path, _, _ = cosigned
    name = "go.interop.example/w"
    go_vkey = _run(cosigcheck, "vkey", "-name", name, "-seed", SEED.hex()).stdout.strip()
    ours = WitnessKey.from_public_key(
        name, Ed25519PrivateKey.from_private_bytes(SEED).public_key().public_bytes_raw()
    )
    assert go_vkey == str(ours)
    run = _run(
        cosigcheck, "sign", "-name", name, "-seed", SEED.hex(), "-time", "1679315147", "-file", str(path)
    )
    assert run.returncode == 0, run.stderr
    got = verify_cosignatures(run.stdout.encode(), [WitnessKey.parse(go_vkey)], now=1679315147)
    assert got[ours].timestamp == 1679315147

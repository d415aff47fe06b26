"""Independent cross-check of Engram's tlog-tiles export with Go's reference code.

The Go program in ``tlogcheck/`` uses ``golang.org/x/mod/sumdb/tlog`` and
``golang.org/x/mod/sumdb/note`` (Debian: golang-go, golang-golang-x-mod-dev) to
verify the signed checkpoint, recompute the root from the hash tiles, check
every entry bundle against the level-0 hashes, and check inclusion and
consistency proofs. These tests drive Engram's CLI to produce an export and
feed it to that program, plus some tampered copies that must be rejected.

Install the toolchain with ``.ci/install-interop.sh``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

pytestmark = pytest.mark.interop

GOPATH = Path("/usr/share/gocode")
XMOD_SUMDB = GOPATH / "src/golang.org/x/mod/sumdb"
CHECKER_SRC = Path(__file__).parent / "tlogcheck"
ORIGIN = "example.com/engram-interop"
OK_LINE = re.compile(
    r"^OK origin=(?P<origin>\S+) size=(?P<size>\d+) root=(?P<root>\S+) entries=(?P<entries>\d+)$"
)


def _missing_toolchain(reason: str) -> NoReturn:
    msg = (
        f"Go interop check unavailable: {reason}. "
        "Run `.ci/install-interop.sh` (installs golang-go and golang-golang-x-mod-dev)."
    )
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def tlogcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the Go checker once per session; return the binary's path."""
    go = shutil.which("go")
    if go is None:
        _missing_toolchain("`go` is not on PATH")
    for pkg in ("tlog", "note"):
        if not (XMOD_SUMDB / pkg).is_dir():
            _missing_toolchain(f"{XMOD_SUMDB / pkg} is missing")

    out = tmp_path_factory.mktemp("tlogcheck")
    binary = out / "tlogcheck"
    env = dict(os.environ)
    env.update(
        GO111MODULE="off",  # GOPATH mode: x/mod comes from Debian's source tree
        GOPATH=str(GOPATH),
        GOFLAGS="",
        GOCACHE=str(out / "gocache"),
        CGO_ENABLED="0",
    )
    proc = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=CHECKER_SRC,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"go build failed:\n{proc.stdout}\n{proc.stderr}"
    return binary


def _engram(home: Path, *args: str) -> str:
    """Run the project's CLI from this interpreter's scripts dir; return stdout."""
    exe = Path(sys.executable).parent / "engram"
    assert exe.exists(), f"Engram CLI not installed at {exe} (pip install -e .)"
    env = dict(os.environ, ENGRAM_HOME=str(home))
    proc = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"engram {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    )
    return proc.stdout


class Export:
    def __init__(self, home: Path, vkey: str, tiles: Path) -> None:
        self.home = home
        self.vkey = vkey
        self.tiles = tiles


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Export:
    """A fresh Engram home with the demo data, exported as a tiles directory."""
    home = tmp_path_factory.mktemp("engram-home")
    _engram(home, "init", "--origin", ORIGIN)
    _engram(home, "demo")
    key_lines = _engram(home, "log", "key").splitlines()
    assert len(key_lines) == 1, f"`engram log key` printed {key_lines!r}, want one line"
    vkey = key_lines[0].strip()
    tiles = tmp_path_factory.mktemp("export") / "tiles"
    _engram(home, "export", "tiles", str(tiles))
    assert (tiles / "checkpoint").is_file(), "export has no checkpoint file"
    return Export(home, vkey, tiles)


def _check(binary: Path, vkey: str, tiles: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), "-vkey", vkey, "-dir", str(tiles)],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def tampered(export: Export, tmp_path: Path) -> Path:
    """A private copy of the exported directory that a test may modify."""
    copy = tmp_path / "tiles"
    shutil.copytree(export.tiles, copy)
    return copy


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    assert data, f"{path} is empty"
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _is_partial(path: Path, root: Path) -> bool:
    # C2SP partial tiles live at tile/<L>/<N>.p/<W>.
    return any(part.endswith(".p") for part in path.relative_to(root).parts)


# ---------------------------------------------------------------------------


def test_export_verifies_with_go_reference(tlogcheck: Path, export: Export) -> None:
    proc = _check(tlogcheck, export.vkey, export.tiles)
    assert proc.returncode == 0, f"tlogcheck rejected the export:\n{proc.stdout}{proc.stderr}"
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    m = OK_LINE.match(lines[0])
    assert m, f"unexpected tlogcheck output: {proc.stdout!r}"
    assert m["origin"] == ORIGIN
    size = int(m["size"])
    assert size > 0, "engram demo should have logged some entries"
    assert int(m["entries"]) == size

    # The summary agrees with the checkpoint body as written by Engram.
    body = (export.tiles / "checkpoint").read_text(encoding="utf-8").split("\n\n", 1)[0]
    assert body.split("\n")[:3] == [ORIGIN, str(size), m["root"]]


def test_tampered_entry_bundle_is_rejected(tlogcheck: Path, export: Export, tampered: Path) -> None:
    bundles = _files(tampered / "tile" / "entries")
    assert bundles, "export has no entry bundles"
    _flip(bundles[0], -1)  # last byte: inside the last entry of the bundle
    proc = _check(tlogcheck, export.vkey, tampered)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("FAIL: "), proc.stdout


def test_tampered_hash_tile_is_rejected(tlogcheck: Path, export: Export, tampered: Path) -> None:
    tile_dir = tampered / "tile"
    hash_tiles = [p for p in _files(tile_dir) if p.relative_to(tile_dir).parts[0] != "entries"]
    assert hash_tiles, "export has no hash tiles"
    full = [p for p in hash_tiles if not _is_partial(p, tile_dir)]
    victim = (full or hash_tiles)[0]
    _flip(victim, 0)
    proc = _check(tlogcheck, export.vkey, tampered)
    assert proc.returncode == 1, f"{victim} tampered, yet: {proc.stdout}{proc.stderr}"
    assert proc.stdout.startswith("FAIL: "), proc.stdout


def test_tampered_checkpoint_is_rejected(tlogcheck: Path, export: Export, tampered: Path) -> None:
    cp = tampered / "checkpoint"
    text = cp.read_text(encoding="utf-8")
    origin, size, rest = text.split("\n", 2)
    cp.write_text(f"{origin}\n{int(size) + 1}\n{rest}", encoding="utf-8")
    proc = _check(tlogcheck, export.vkey, tampered)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("FAIL: "), proc.stdout


def _other_vkey(name: str) -> str:
    """A C2SP/sumdb Ed25519 verifier key for a freshly generated key pair."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    pub = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key = b"\x01" + pub  # algorithm byte 0x01 = Ed25519
    key_id = hashlib.sha256(name.encode() + b"\n" + key).digest()[:4]
    return f"{name}+{key_id.hex()}+{base64.b64encode(key).decode()}"


@pytest.mark.parametrize("name", [ORIGIN, "example.com/someone-else"])
def test_checkpoint_rejected_under_other_key(tlogcheck: Path, export: Export, name: str) -> None:
    vkey = _other_vkey(name)
    assert vkey != export.vkey
    proc = _check(tlogcheck, vkey, export.tiles)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("FAIL: "), proc.stdout

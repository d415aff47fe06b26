"""The trusted core stays standalone: stdlib + cryptography only, and a pinned surface."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import verifier

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "ledger",
    "api",
    "sqlalchemy",
    "fastapi",
    "pydantic",
    "httpx",
    "psycopg",
    "alembic",
    "rfc8785",
    "typer",
    "rich",
}


def test_importing_every_verifier_module_pulls_in_nothing_forbidden() -> None:
    code = (
        "import importlib, pkgutil, sys, verifier\n"
        "for m in pkgutil.walk_packages(verifier.__path__, 'verifier.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(' '.join(sorted({n.split('.')[0] for n in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "verifier" in loaded and "cryptography" in loaded
    assert not (loaded & FORBIDDEN), loaded & FORBIDDEN


def test_verifier_source_imports_only_stdlib_cryptography_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | {"cryptography", "verifier", "__future__", "biscuit_auth"}
    for path in (ROOT / "verifier").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name}: imports {name}"


def test_public_surface_is_pinned() -> None:
    assert sorted(verifier.__all__) == sorted(
        [
            "EMPTY_ROOT",
            "CanonicalFormError",
            "Checkpoint",
            "EngramError",
            "Envelope",
            "KeyHistory",
            "KeyRecord",
            "KeyStateError",
            "Leaf",
            "LimitExceededError",
            "LogReplay",
            "MalformedError",
            "NewKey",
            "OriginMismatchError",
            "ProofError",
            "SignatureError",
            "SignedNote",
            "StreamChainError",
            "UnknownKeyError",
            "VerificationError",
            "VerifiedCheckpoint",
            "VerifiedConsistency",
            "VerifiedInclusion",
            "VerifierKey",
            "WitnessError",
            "WitnessKey",
            "WitnessPolicy",
            "agent_key_id",
            "body_commitment",
            "canonical_bytes",
            "leaf_hash",
            "node_hash",
            "parse_canonical",
            "parse_strict",
            "verify_body",
            "verify_checkpoint",
            "verify_consistency",
            "verify_cosignatures",
            "verify_event_signature",
            "verify_inclusion",
        ]
    )
    for name in verifier.__all__:
        assert hasattr(verifier, name)

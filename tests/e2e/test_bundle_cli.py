"""`engram bundle create` hands out only bundles that verify (issue 40, finding 10), on both
backends: once a record is erased, its default claim (the pact summary, whose mean needs
every body) would fail verification; the command refuses, naming the verifier's check, and
writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENGRAM = str(Path(sys.executable).parent / "engram")
VERIFY = str(Path(sys.executable).parent / "engram-verify")


@pytest.fixture
def cli_db(backend: str, request: pytest.FixtureRequest) -> str | None:
    if backend == "sqlite":
        return None
    return request.getfixturevalue("pg_server").new_database()


def test_bundle_create_refuses_a_claim_its_verifier_would_fail(tmp_path: Path, cli_db: str | None) -> None:
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("ENGRAM_DATABASE_URL", None)
    if cli_db is not None:
        env["ENGRAM_DATABASE_URL"] = cli_db

    def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=300)
        assert (p.returncode == 0) == ok, p.stdout + p.stderr
        return p

    run("init", "--origin", "example.com/engram-bundles")
    key = str(tmp_path / "ada.key")
    run("agent", "create", "ada", "--key-file", key)
    indices = []
    for n, quality in enumerate((90, 70)):
        body = f'{{"pact":"p{n}","result":"fulfilled","quality":{quality}}}'
        out = run("event", "append", "--key-file", key, "--kind", "pact.outcome", "--body", body).stdout
        indices.append(int(out.split('"index":')[1].split(",")[0].strip()))
    before = tmp_path / "before.json"
    run("bundle", "create", "--agent", "ada", "-o", str(before))
    vkey = run("log", "key").stdout.strip()
    ok = subprocess.run([VERIFY, "bundle", str(before), "--log-key", vkey], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    run("memory", "erase", "--key-file", key, "--index", str(indices[0]), "--reason", "asked to forget")
    after = tmp_path / "after.json"
    refused = run("bundle", "create", "--agent", "ada", "-o", str(after), ok=False)
    assert "bundle.claim.undisclosed" in refused.stdout + refused.stderr
    assert not after.exists()
    # a claim that needs no body is still made, and verifies
    count = '{"statements":[{"predicate":"count","agent":"ada","kind":"pact.outcome","value":2}]}'
    run("bundle", "create", "--agent", "ada", "-o", str(after), "--claim", count)
    ok = subprocess.run([VERIFY, "bundle", str(after), "--log-key", vkey], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.rstrip().endswith("VERIFIED"), ok.stdout

"""Regression: the CLI printed leaf hashes as base64 while the HTTP API printed hex. A leaf hash
is lowercase hex on every surface (specs/http-api.md "Encodings")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from verifier.event import Leaf

ENGRAM = str(Path(sys.executable).parent / "engram")


def test_cli_leaf_hashes_are_hex_like_the_api(tmp_path: Path) -> None:
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "COLUMNS": "400"}
    env.pop("ENGRAM_DATABASE_URL", None)
    env.pop("ENGRAM_WITNESS_POLICY", None)

    def engram(*args: str) -> str:
        return subprocess.run(
            [ENGRAM, *args], env=env, cwd=tmp_path, check=True, capture_output=True, text=True
        ).stdout

    engram("init", "--origin", "hex.example/log")
    engram("agent", "create", "hexa", "--key-file", "hexa.key")
    receipt = json.loads(
        engram(
            "event", "append", "--key-file", "hexa.key", "--kind", "commitment", "--body", '{"promise":"p"}'
        )
    )
    leaf = Leaf.from_bytes(engram("log", "entry", "--index", str(receipt["index"])).strip().encode("utf-8"))
    assert receipt["leaf_hash"] == leaf.hash.hex()
    proof = json.loads(engram("log", "prove", "--index", str(receipt["index"])))
    assert proof["leaf_hash"] == leaf.hash.hex()

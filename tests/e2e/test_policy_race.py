"""Memory-policy races between processes (issue 15, Deliver 3), both backends: three
``engram memory write`` loops of one agent, each write of a HOT preference past the HOT cap
deciding which memory to file to WARM, all at once on one log. Every write lands once, every
filing decision lands once (no memory is moved twice), HOT ends at its cap, ``engram audit``
is clean and the caught-up projection equals a rebuild. (Threads on separate connection
pools racing ``compact`` and ``distill``: tests/contract/test_compact_race.py and
test_distill_once.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM
from tests.harness.crash import _check

PROCS, WRITES, CAP = 3, 4, 2


def test_three_processes_writing_past_the_hot_cap_file_each_memory_once(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env |= {
        "ENGRAM_HOME": str(tmp_path / "home"),
        "ENGRAM_HOT_MAX_ITEMS": str(CAP),
        "ENGRAM_EMBEDDER": "off",
        "ENGRAM_KEY_FILE": str(tmp_path / "ada.key"),
    }
    if backend == "postgres":
        env["ENGRAM_DATABASE_URL"] = request.getfixturevalue("pg_server").new_database()
    subprocess.run([ENGRAM, "init", "--origin", "race.example/log"], env=env, check=True, capture_output=True)
    subprocess.run(
        [ENGRAM, "agent", "create", "ada", "--key-file", env["ENGRAM_KEY_FILE"]],
        env=env,
        check=True,
        capture_output=True,
    )
    loop = (
        'for i in $(seq 1 {n}); do "{engram}" memory write --category PREFERENCE --tier HOT --json '
        '--content "Preference {p}-$i: answer tersely, variant {p}$i" || exit 1; done'
    )
    procs = [
        subprocess.Popen(
            ["bash", "-c", loop.format(n=WRITES, engram=ENGRAM, p=p)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCS)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    written = [doc["index"] for out, _ in outs for doc in _documents(out)]
    assert len(written) == len(set(written)) == PROCS * WRITES  # every write landed once

    from ledger.compose import memory_service, open_ledger
    from ledger.config import Settings
    from verifier.event import Leaf

    problems = _check(env, [])  # engram audit clean, projection caught up == rebuild
    assert problems == [], problems
    settings = Settings.from_env(env)
    ledger = open_ledger(settings)
    try:
        moved: Counter[str] = Counter()
        for index, raw in ledger.store.leaves_iter(0, ledger.size()):
            if Leaf.from_bytes(raw).envelope.kind == "memory.tier_changed":
                stored = ledger.store.body(index)
                assert stored is not None
                moved[json.loads(stored[1])["item"]] += 1
        memory = memory_service(ledger, settings)
        memory.sync()
        hot = memory.projection.items("ada", tiers=["HOT"])
        warm = memory.projection.items("ada", tiers=["WARM"])
    finally:
        ledger.store.engine.dispose()
    assert len(hot) == CAP, hot
    assert len(hot) + len(warm) == PROCS * WRITES
    assert len(moved) == PROCS * WRITES - CAP and set(moved.values()) == {1}, moved


def _documents(text: str) -> list[dict[str, object]]:
    """The JSON documents printed one after another (each pretty-printed over lines)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) >= 0:
        doc, at = decoder.raw_decode(text, at)
        out.append(doc)
    return out

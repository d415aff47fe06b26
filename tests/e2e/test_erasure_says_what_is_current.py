"""``engram memory erase`` says what becomes current (issue 40, finding 5): erasing the current
value of a fact that changed made the older value current again without a word. Embedded
and served (the client path)."""

from __future__ import annotations

import json
import subprocess

from tests.e2e.processes import ENGRAM
from tests.e2e.test_hooks import engram_env  # noqa: F401  # the fixture (served and embedded)


def _engram(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, capture_output=True, text=True, timeout=120)


def test_erasing_the_current_value_says_what_becomes_current_on_the_command_line(
    engram_env: dict[str, str],  # noqa: F811
) -> None:
    key = engram_env["ENGRAM_KEY_FILE"]
    refs = []
    for job in ("a nurse", "a pilot"):
        done = _engram(
            engram_env, "memory", "write", "--key-file", key, "--category", "CONTEXT",
            "--content", f"Caroline works as {job}.", "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        refs.append(json.loads(done.stdout)["ref"])
    nurse, pilot = refs
    erased = _engram(
        engram_env, "memory", "erase", "--key-file", key, "--index", pilot.split(".")[0], "--reason", "wrong",
    )  # fmt: skip
    assert erased.returncode == 0, erased.stderr
    assert f"{pilot} was the current value of a fact that changed; {nurse} is current again" in " ".join(
        erased.stdout.split()
    )
    again = _engram(
        engram_env, "memory", "erase", "--key-file", key, "--index", nurse.split(".")[0], "--reason", "x", "--json"
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["current"] == []  # it replaced nothing: nothing else to say

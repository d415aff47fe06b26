"""The tour (docs/tour.md, moved out of the README by issue 26) runs top to bottom as written
(issue 13): every shell and Python block, in order, in one shell in a fresh directory (SQLite; the HTTP part against
the live ``engram serve`` the README starts). Ports are moved to free ones; nothing else is
changed. Plus one named regression per trap a newcomer hit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENGRAM = str(BIN / "engram")


def readme_script() -> str:
    """The tour's blocks, as one bash script (Python blocks as heredocs)."""
    tour = (ROOT / "docs" / "tour.md").read_text(encoding="utf-8")
    body = tour.split("## The tour\n", 1)[1]
    parts: list[str] = []
    for lang, code in re.findall(r"```(bash|python)\n(.+?)\n```", body, flags=re.S):
        if lang == "bash":
            parts.append(code)
        else:
            parts.append(f"python <<'PYTHON'\n{code}\nPYTHON")
    return "\n".join(parts)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "COLUMNS": "200",
        "ENGRAM_VERIFIER_STATE": str(tmp_path / "vstate"),
        "HOME": str(tmp_path / "userhome"),
    }
    for var in (
        "ENGRAM_HOME",
        "ENGRAM_DATABASE_URL",
        "ENGRAM_WITNESS_POLICY",
        "ENGRAM_OPERATOR_TOKEN",
        "ENGRAM_DEV_MODE",
        "ENGRAM_URL",
        "ENGRAM_KEY_FILE",
        "ENGRAM_EMBEDDER",
    ):
        env.pop(var, None)
    return env


def test_the_readme_runs_top_to_bottom(tmp_path: Path) -> None:
    script = readme_script()
    script = script.replace("8080", str(free_port())).replace("8091", str(free_port()))
    assert "kill $SERVER" in script and "engram serve" in script  # the HTTP part is in it
    # a failing line must not leave the service or the witness running
    cleanup = "trap 'kill ${SERVER:-} ${WITNESS:-} 2>/dev/null || true' EXIT\n"
    (tmp_path / "readme.sh").write_text(cleanup + script, encoding="utf-8")
    with (tmp_path / "out.txt").open("w") as stdout, (tmp_path / "err.txt").open("w") as stderr:
        run = subprocess.run(
            ["bash", "-e", "-o", "pipefail", str(tmp_path / "readme.sh")],
            env=_env(tmp_path),
            cwd=tmp_path,
            stdout=stdout,
            stderr=stderr,
            timeout=1500,
            check=False,
        )
    out = (tmp_path / "out.txt").read_text()
    assert run.returncode == 0, (
        out[-4000:] + "\n--- stderr ---\n" + (tmp_path / "err.txt").read_text()[-4000:]
    )
    assert out.count("VERIFIED") >= 5  # log replay, checkpoint, bundle, witness checkpoint and bundle
    assert "FAILED" not in out
    assert "demo complete" in out
    assert "consistent with the trusted checkpoint(s)" in out
    assert "supported" in out  # the Python client's oracle claim
    assert not (tmp_path / ".engram").exists()  # the tour kept to its own home


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def test_init_after_the_setup_demo_says_how_to_start_a_new_log(tmp_path: Path) -> None:
    """Regression: `engram init --origin ...` after `engram demo` failed with a bare origin mismatch."""
    env = _env(tmp_path)
    assert _run([ENGRAM, "demo"], env, tmp_path).returncode == 0
    init = _run([ENGRAM, "init", "--origin", "example.com/engram"], env, tmp_path)
    assert init.returncode == 1
    assert "already holds the log" in init.stderr and "ENGRAM_HOME" in init.stderr
    assert init.stderr.count("\n") == 1  # one line, not wrapped mid-word


def test_demo_refuses_a_configured_database_without_the_flag(tmp_path: Path, pg_server: object) -> None:
    """Regression: `engram demo` with ENGRAM_DATABASE_URL wrote its agents into that log for good."""
    url = pg_server.new_database()  # type: ignore[attr-defined]
    env = {**_env(tmp_path), "ENGRAM_HOME": str(tmp_path / "h"), "ENGRAM_DATABASE_URL": url}
    assert _run([ENGRAM, "init", "--origin", "example.com/pg"], env, tmp_path).returncode == 0
    size = _run([ENGRAM, "log", "checkpoint"], env, tmp_path).stdout
    demo = _run([ENGRAM, "demo"], env, tmp_path)
    assert demo.returncode == 2 and "--into-this-log" in demo.stderr
    assert _run([ENGRAM, "log", "checkpoint"], env, tmp_path).stdout == size  # nothing written


def test_serve_refuses_a_weak_token_before_starting_workers(tmp_path: Path) -> None:
    """Regression: a weak token with --workers 2 printed "running", then workers crashed and
    respawned forever; "aaaa..." passed as a token."""
    env = {**_env(tmp_path), "ENGRAM_HOME": str(tmp_path / "h")}
    assert _run([ENGRAM, "init"], env, tmp_path).returncode == 0
    for token in ("a" * 40, "changeme", "op-" + "e2e" * 10):
        serve = subprocess.run(
            [ENGRAM, "serve", "--port", str(free_port()), "--workers", "2"],
            env={**env, "ENGRAM_OPERATOR_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert serve.returncode == 2, serve.stderr
        assert "ENGRAM_OPERATOR_TOKEN" in serve.stderr and serve.stderr.count("\n") == 1
        assert "Started" not in serve.stderr and "running" not in serve.stdout.lower()


def test_the_version_is_printed(tmp_path: Path) -> None:
    out = _run([ENGRAM, "--version"], _env(tmp_path), tmp_path)
    assert out.returncode == 0 and re.fullmatch(r"engram \d+\.\d+\.\d+\S*\n", out.stdout)

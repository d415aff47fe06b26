"""The one-page README's blocks run as written (issue 26, finding 8: the README moved its tour
to docs/; what stays must still run): "Give your agent memory" then "Check an agent's claim",
in one shell, from a fresh directory holding the set-up's venv, with a fresh HOME. The port
is moved to a free one; nothing else is changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def _section(readme: str, heading: str) -> str:
    body = readme.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.+?)\n```", body, flags=re.S)
    return block


def test_the_readme_quickstart_runs_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    script = "\n".join(
        _section(readme, h)
        for h in (
            "## Give your agent memory",
            "## Share memory between agents (Memory Mesh)",
            "## Check an agent's claim",
        )
    )
    assert "engram serve" in script and "kill $SERVER" in script and "engram-verify bundle" in script
    script = script.replace("8080", str(free_port()))
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)  # the set-up's venv, here
    (tmp_path / "run.sh").write_text("trap 'kill ${SERVER:-} 2>/dev/null || true' EXIT\n" + script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env |= {"HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env["ENGRAM_VERIFIER_STATE"] = os.environ["ENGRAM_VERIFIER_STATE"]
    run = subprocess.run(
        ["bash", "-e", "-o", "pipefail", str(tmp_path / "run.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "The user wants short answers" in run.stdout  # recalled over HTTP
    # issue 44: one `engram setup claude-code` reuses claude's key, and `engram doctor` is green
    assert "reusing the key of agent claude" in run.stdout and "the chain holds" in run.stdout
    settings = (tmp_path / "home" / ".claude" / "settings.json").read_text(encoding="utf-8")
    assert str(tmp_path / ".venv" / "bin" / "engram") in settings  # engram by its absolute path
    # the changed fact (issue 29): the current value says what it replaced, the past one is
    # recalled for the question about the past
    blocks = run.stdout.split("<memory-context")
    now, then = blocks[-3:-1]
    assert "VS Code" in now and "earlier: vim, until" in now and "## EARLIER" not in now
    assert "## EARLIER" in then and "The user's editor is vim." in then.split("## EARLIER", 1)[1]
    # the Mesh tour (issue 30): cy recalls claude's learning, labelled; bob's proof verifies
    shared = blocks[-1]
    assert "## MESH" in shared and "by claude via mesh claude/team" in shared and "cache warmed" in shared
    assert (
        "mesh_read of claude's memory.written" in run.stdout
        and "through mesh claude/team = true" in run.stdout
    )
    assert "VERIFIED" in run.stdout and "FAILED" not in run.stdout
    # issue 31: the owner's link to the web UI, a one-time ticket the agent's key signed
    assert re.search(r"http://127\.0\.0\.1:\d+/ui/login\?ticket=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", run.stdout)
    assert (tmp_path / "home" / ".config" / "engram" / "claude.key").exists()
    log = (tmp_path / "engram-serve.log").read_text()
    assert "GET /healthz" in log or "healthz" in log  # the access log went to the file, not the terminal
    assert "healthz" not in run.stdout

"""Issue 30: the Memory Mesh through the CLI, as the README's Mesh tour runs it, on both
backends: three agents, one shared learning, one withdrawal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.e2e.processes import ENGRAM
from tests.e2e.test_cli import cli_db, run  # noqa: F401  (cli_db is a fixture)

VERIFY = str(Path(ENGRAM).parent / "engram-verify")

LEARNING = "Northwind prefers low-risk bond portfolios."


def test_mesh_tour_through_the_cli(tmp_path: Path, cli_db: str | None) -> None:  # noqa: F811
    home = tmp_path / "home"
    run(home, "init", "--origin", "example.com/mesh", db_url=cli_db)
    keys = {a: str(tmp_path / f"{a}.key") for a in ("ada", "bob", "cy")}
    for agent, key in keys.items():
        run(home, "agent", "create", agent, "--key-file", key, db_url=cli_db)
    mesh = run(
        home, "mesh", "create", "--key-file", keys["ada"], "--name", "advisors", db_url=cli_db
    ).stdout.strip()
    assert mesh == "ada/advisors"
    for agent in ("bob", "cy"):
        run(
            home, "mesh", "invite", "--key-file", keys["ada"], "--mesh", mesh, "--agent", agent, db_url=cli_db
        )
        run(home, "mesh", "join", "--key-file", keys[agent], "--mesh", mesh, db_url=cli_db)
        run(
            home,
            "mesh",
            "grant",
            "--key-file",
            keys[agent],
            "--mesh",
            mesh,
            "--share",
            "",
            "--read",
            "learning",
            db_url=cli_db,
        )
    run(
        home,
        "mesh",
        "grant",
        "--key-file",
        keys["ada"],
        "--mesh",
        mesh,
        "--share",
        "LEARNING",
        "--read",
        "",
        db_url=cli_db,
    )
    run(
        home,
        "memory",
        "write",
        "--key-file",
        keys["ada"],
        "--category",
        "LEARNING",
        "--content",
        LEARNING,
        db_url=cli_db,
    )

    def recall(agent: str) -> str:
        return run(
            home,
            "memory",
            "recall",
            "--agent",
            agent,
            "what risk does Northwind want?",
            db_url=cli_db,
        ).stdout

    for agent in ("bob", "cy"):
        got = recall(agent)
        assert LEARNING in got and f"by ada via mesh {mesh}" in got, got
    shown = json.loads(run(home, "mesh", "show", "--key-file", keys["bob"], "--json", db_url=cli_db).stdout)
    assert [m["mesh"] for m in shown["meshes"]] == [mesh]
    # the reader proves offline that the memory came from ada under her grant
    ref = next(
        r["ref"]
        for r in json.loads(
            run(home, "memory", "recall", "--agent", "bob", "--json", "Northwind risk", db_url=cli_db).stdout
        )["ranked"]
        if r.get("author") == "ada"
    )
    bundle = tmp_path / "shared.json"
    # never written through a link planted at the path (issue 40: as bundle create, issue 25)
    victim, planted = tmp_path / "victim.txt", tmp_path / "planted.json"
    victim.write_text("keep")
    planted.symlink_to(victim)
    through = run(
        home, "mesh", "prove", "--key-file", keys["bob"], "--mesh", mesh, "--ref", ref, "-o", str(planted),
        db_url=cli_db, ok=False,
    )  # fmt: skip
    assert through.returncode != 0 and "file.symlink" in through.stdout + through.stderr
    assert victim.read_text() == "keep"
    run(
        home,
        "mesh",
        "prove",
        "--key-file",
        keys["bob"],
        "--mesh",
        mesh,
        "--ref",
        ref,
        "-o",
        str(bundle),
        db_url=cli_db,
    )
    log_key = run(home, "log", "key", db_url=cli_db).stdout.strip()
    checked = subprocess.run(
        [VERIFY, "bundle", str(bundle), "--log-key", log_key], capture_output=True, text=True, check=False
    )
    assert (
        checked.returncode == 0
        and "VERIFIED" in checked.stdout
        and f"through mesh {mesh} = true" in checked.stdout
    ), checked.stdout + checked.stderr
    only = ["memory", "recall", "--agent", "bob", "Northwind risk"]
    assert LEARNING not in run(home, *only, "--no-mesh", db_url=cli_db).stdout
    assert LEARNING in run(home, *only, "--mesh", mesh, db_url=cli_db).stdout
    run(
        home,
        "mesh",
        "grant",
        "--key-file",
        keys["ada"],
        "--mesh",
        mesh,
        "--share",
        "",
        "--read",
        "",
        db_url=cli_db,
    )
    assert LEARNING not in recall("bob")  # withdrawn: it stops flowing
    refused = run(
        home,
        "mesh",
        "invite",
        "--key-file",
        keys["bob"],
        "--mesh",
        mesh,
        "--agent",
        "cy",
        db_url=cli_db,
        ok=False,
    )
    assert refused.returncode != 0 and "mesh.policy" in refused.stderr + refused.stdout


def test_the_claude_code_prompt_hook_injects_mesh_memories_labelled(tmp_path: Path) -> None:
    from tests.e2e.test_hooks import _cc, embedded_env, hook

    env = embedded_env(tmp_path)  # the agent claude, its key in ENGRAM_KEY_FILE
    home = Path(env["ENGRAM_HOME"])
    ada_key = str(tmp_path / "ada.key")
    run(home, "agent", "create", "ada", "--key-file", ada_key)
    claude_key = env["ENGRAM_KEY_FILE"]
    run(home, "mesh", "create", "--key-file", ada_key, "--name", "ops")
    run(home, "mesh", "invite", "--key-file", ada_key, "--mesh", "ada/ops", "--agent", "claude")
    run(home, "mesh", "join", "--key-file", claude_key, "--mesh", "ada/ops")
    run(
        home,
        "mesh",
        "grant",
        "--key-file",
        claude_key,
        "--mesh",
        "ada/ops",
        "--share",
        "",
        "--read",
        "LEARNING",
    )
    run(
        home, "mesh", "grant", "--key-file", ada_key, "--mesh", "ada/ops", "--share", "LEARNING", "--read", ""
    )
    run(
        home,
        "memory",
        "write",
        "--key-file",
        ada_key,
        "--category",
        "LEARNING",
        "--content",
        "The Zorblax deploy needs the cache warmed first.",
    )
    s = "9c1d2e3f-0000-4e5a-8b9c-0d1e2f3a4b5c"
    assert (
        hook(env, "claude-code", _cc("SessionStart", s, tmp_path, source="startup", model="m")).returncode
        == 0
    )
    got = hook(
        env, "claude-code", _cc("UserPromptSubmit", s, tmp_path, prompt="how do I run the Zorblax deploy?")
    )
    assert got.returncode == 0, got.stderr
    ctx = json.loads(got.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "## MESH" in ctx and "by ada via mesh ada/ops" in ctx and "cache warmed" in ctx

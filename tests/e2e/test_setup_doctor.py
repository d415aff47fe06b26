"""Issue 44, deliver 1: ``engram setup claude-code | codex | hermes`` and ``engram doctor``
against a real ``engram serve``, in a fresh home whose path holds a space: one command sets
a harness up, a second changes nothing, a dry run writes nothing, a symlinked file is refused,
and each broken link of the chain is the one ``doctor`` names, with its fix.
(tests/interop/test_setup_real.py runs the real Claude Code, Codex and Hermes on the result.)"""

from __future__ import annotations

import http.server
import json
import os
import secrets
import shlex
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import ENGRAM, engram_serve, free_port

TOKEN = secrets.token_urlsafe(32)


class World:
    def __init__(self, tmp: Path, url: str, log_env: dict[str, str]) -> None:
        self.url = url
        self.log_env = log_env
        self.home = tmp / "a home"  # a path with a space, as many are
        self.home.mkdir()
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ENGRAM_", "CLAUDE_", "CODEX_", "HERMES_"))
        }
        self.env |= {
            "HOME": str(self.home),
            "ENGRAM_VERIFIER_STATE": os.environ["ENGRAM_VERIFIER_STATE"],
            "ENGRAM_OPERATOR_TOKEN": TOKEN,
            "ENGRAM_URL": url,
        }

    def run(self, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **extra}
        for k in [k for k, v in env.items() if v == ""]:
            del env[k]
        return subprocess.run([ENGRAM, *argv], env=env, capture_output=True, text=True, timeout=120)

    def files(self) -> dict[str, bytes]:
        """Every file under the home and the verifier state (pins), with its bytes."""
        out = {}
        for root in (self.home, Path(self.env["ENGRAM_VERIFIER_STATE"])):
            for p in sorted(root.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    out[str(p)] = p.read_bytes()
        return out


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """One service for the module (each test has its own home and its own agent ids)."""
    log_env = {**os.environ, "ENGRAM_HOME": str(tmp_path_factory.mktemp("log")), "ENGRAM_EMBEDDER": "off"}
    log_env |= {"ENGRAM_DEV_MODE": "1", "ENGRAM_OPERATOR_TOKEN": TOKEN}
    log_env.pop("ENGRAM_DATABASE_URL", None)
    assert subprocess.run([ENGRAM, "init"], env=log_env, capture_output=True, timeout=120).returncode == 0
    with engram_serve(log_env) as url:
        yield url, log_env


@pytest.fixture
def world(tmp_path: Path, service: tuple[str, dict[str, str]]) -> World:
    return World(tmp_path, *service)


def _claude(w: World) -> tuple[Path, Path]:
    return w.home / ".claude" / "settings.json", w.home / ".claude.json"


def _green(w: World, *argv: str) -> str:
    done = w.run("doctor", *argv)
    assert done.returncode == 0 and "the chain holds" in done.stdout, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    return done.stdout


def _fails(w: World, link: str, fix: str, *argv: str, **extra: str) -> str:
    done = w.run("doctor", *argv, **extra)
    assert done.returncode == 1, done.stdout + done.stderr
    fail = [ln for ln in done.stdout.splitlines() if ln.startswith("FAIL")]
    assert len(fail) == 1 and link in fail[0], done.stdout
    assert fix in done.stdout.split("fix:", 1)[1], done.stdout
    return done.stdout


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_setup_then_doctor_is_green_and_a_second_run_changes_nothing(world: World, harness: str) -> None:
    first = world.run("setup", harness)
    assert first.returncode == 0, first.stdout + first.stderr
    agent = {"claude-code": "claude", "codex": "codex"}[harness]
    key = world.home / ".config" / "engram" / f"{agent}.key"
    assert f"created the key of agent {agent} in {key}" in first.stdout
    assert "registered agent" in first.stdout
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    if harness == "codex":
        assert "/hooks" in first.stdout  # the one step only Codex can do: trust the hooks
    before = world.files()
    again = world.run("setup", harness)
    assert again.returncode == 0, again.stderr
    assert "wrote" not in again.stdout and "unchanged" in again.stdout and "reusing the key" in again.stdout
    assert world.files() == before
    out = _green(world, "--harness", harness)
    assert "registration: key" in out and f"agent {agent}'s active key" in out
    # the configuration names engram by its absolute path, and the key
    text = "".join(
        p.read_text(encoding="utf-8")
        for p in ([*_claude(world)] if harness == "claude-code" else [world.home / ".codex" / "config.toml"])
    )
    assert ENGRAM in text and str(key) in text


def test_setup_hermes_writes_the_plugin_and_its_config_and_doctor_names_the_provider(world: World) -> None:
    hermes_home = world.home / ".hermes"
    done = world.run("setup", "hermes", PATH="/usr/bin:/bin")  # no Hermes beside this engram
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hermes config set memory.provider engram" in done.stdout  # the step it could not do
    cfg = json.loads((hermes_home / "engram.json").read_text(encoding="utf-8"))
    assert cfg["url"] == world.url and Path(cfg["key_file"]).is_file() and cfg["log_key"]
    assert (hermes_home / "plugins" / "engram" / "__init__.py").is_file()
    _fails(world, "hermes", "hermes config set memory.provider engram", "--harness", "hermes")
    (hermes_home / "config.yaml").write_text("memory:\n  provider: engram\n", encoding="utf-8")
    _green(world, "--harness", "hermes")
    before = world.files()
    assert "wrote" not in world.run("setup", "hermes", PATH="/usr/bin:/bin").stdout
    assert world.files() == before


def test_dry_run_shows_the_diff_and_writes_nothing(world: World) -> None:
    settings, state = _claude(world)
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n', encoding="utf-8")
    before = world.files()
    done = world.run("setup", "claude-code", "--dry-run", "--agent", "dryrun")
    assert done.returncode == 0, done.stderr
    assert "nothing is written" in done.stdout and "would be created" in done.stdout
    assert f"--- {settings}" in done.stdout and '-{"model": "opus"}' in done.stdout
    assert '+  "model": "opus",' in done.stdout and '+    "SessionEnd": [' in done.stdout
    assert f"+++ {state}" in done.stdout
    assert world.files() == before  # no key, no config, no pin
    assert not (world.home / ".config").exists()
    unregistered = world.run("doctor", "--key-file", str(world.home / "none.key"))
    assert "does not exist" in unregistered.stdout


def test_setup_keeps_the_users_other_entries(world: World) -> None:
    settings, state = _claude(world)
    settings.parent.mkdir()
    theirs = {"hooks": {"Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]}}
    settings.write_text(json.dumps({"model": "opus", **theirs}), encoding="utf-8")
    state.write_text(
        json.dumps({"numStartups": 4, "mcpServers": {"docs": {"command": "docs-mcp"}}}), encoding="utf-8"
    )
    os.chmod(state, 0o600)
    assert world.run("setup", "claude-code", "--agent", "keeper").returncode == 0
    s = json.loads(settings.read_text(encoding="utf-8"))
    assert s["model"] == "opus" and s["hooks"]["Notification"] == theirs["hooks"]["Notification"]
    st = json.loads(state.read_text(encoding="utf-8"))
    assert st["numStartups"] == 4 and set(st["mcpServers"]) == {"docs", "engram"}
    assert oct(state.stat().st_mode & 0o777) == "0o600"  # Claude Code's state file stays private


def test_a_symlinked_config_is_refused_and_nothing_is_written(world: World, tmp_path: Path) -> None:
    settings, _ = _claude(world)
    settings.parent.mkdir()
    elsewhere = tmp_path / "dotfiles-settings.json"
    elsewhere.write_text("{}", encoding="utf-8")
    os.symlink(elsewhere, settings)
    before = world.files()
    done = world.run("setup", "claude-code", "--agent", "linker")
    assert done.returncode == 2 and "[setup.symlink]" in done.stderr and str(settings) in done.stderr
    assert world.files() == before and elsewhere.read_text(encoding="utf-8") == "{}"
    plugin = world.home / ".hermes" / "plugins" / "engram"
    plugin.parent.mkdir(parents=True)
    os.symlink(tmp_path, plugin)
    refused = world.run("setup", "hermes", "--agent", "linked")
    assert refused.returncode == 2 and "[setup.symlink]" in refused.stderr


def test_comments_in_settings_are_refused_not_lost(world: World) -> None:
    settings, _ = _claude(world)
    settings.parent.mkdir()
    settings.write_text('{\n  // mine\n  "model": "opus"\n}\n', encoding="utf-8")
    before = world.files()
    done = world.run("setup", "claude-code", "--agent", "commenter")
    assert done.returncode == 2 and "[setup.json]" in done.stderr and "comments" in done.stderr
    assert world.files() == before


def test_another_agents_key_is_refused(world: World) -> None:
    assert world.run("setup", "claude-code", "--agent", "ada").returncode == 0
    ada_key = world.home / ".config" / "engram" / "ada.key"
    wrong = world.run("setup", "codex", "--key-file", str(ada_key), "--agent", "codex")
    assert wrong.returncode == 2 and "[setup.key_agent]" in wrong.stderr and "'ada'" in wrong.stderr
    # a new key file for an agent the log already has with another key: refused, no file made
    other = world.home / "other.key"
    taken = world.run("setup", "codex", "--key-file", str(other), "--agent", "ada")
    assert taken.returncode == 2 and "[setup.key_conflict]" in taken.stderr and not other.exists()
    assert not (world.home / ".codex").exists()


class _NotEngram(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>hello</html>"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_a_server_that_is_not_engram_or_is_down_is_named(world: World) -> None:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotEngram)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        other = f"http://127.0.0.1:{httpd.server_address[1]}"
        done = world.run("setup", "claude-code", "--server", other)
        assert done.returncode == 2 and "[setup.not_engram]" in done.stderr
        assert not (world.home / ".config").exists()
        _fails(world, "service", "engram serve", "--server", other)
    finally:
        httpd.shutdown()
    dead = f"http://127.0.0.1:{free_port()}"
    done = world.run("setup", "codex", "--server", dead)
    assert done.returncode == 2 and "[setup.unreachable]" in done.stderr
    _fails(world, "service", "start the service", "--server", dead)
    bad = world.run("setup", "codex", "--server", "localhost:8080")
    assert bad.returncode == 2 and "[setup.url]" in bad.stderr
    assert world.run("setup", "codex", ENGRAM_URL="").stderr.count("[setup.server]") == 1


def test_without_the_operator_token_setup_prints_the_one_command_and_doctor_names_it(world: World) -> None:
    done = world.run("setup", "codex", "--agent", "newbie", ENGRAM_OPERATOR_TOKEN="")
    assert done.returncode == 1, done.stdout + done.stderr
    key = world.home / ".config" / "engram" / "newbie.key"
    command = ["engram", "setup", "codex", "--server", world.url, "--key-file", str(key)]
    assert f"ENGRAM_OPERATOR_TOKEN=<the service's token> {shlex.join(command)}" in done.stdout
    _fails(world, "codex: registration", "ENGRAM_OPERATOR_TOKEN=")
    fixed = world.run(*command[1:])  # the printed command, with the token
    assert (
        fixed.returncode == 0
        and "reusing the key" in fixed.stdout
        and "registered agent newbie" in fixed.stdout
    )
    _green(world)


def test_doctor_names_each_broken_link(world: World) -> None:
    assert world.run("setup", "claude-code", "--agent", "links").returncode == 0
    _green(world)
    settings, state = _claude(world)
    key = world.home / ".config" / "engram" / "links.key"
    keep_key, keep_state, keep_settings = key.read_bytes(), state.read_text(), settings.read_text()

    # the key file: gone, then not a key
    key.unlink()
    _fails(world, "claude-code: key file", "engram setup claude-code")
    key.write_bytes(b"not a key\n")
    os.chmod(key, 0o600)
    _fails(world, "claude-code: key file", "engram setup claude-code")
    key.unlink()
    key.write_bytes(keep_key)
    os.chmod(key, 0o600)
    _green(world)

    # the configuration: engram moved away, a hook deleted, a file broken
    st = json.loads(keep_state)
    st["mcpServers"]["engram"]["command"] = "/nowhere/engram"
    state.write_text(json.dumps(st), encoding="utf-8")
    _fails(world, "Claude Code", "engram setup claude-code")
    state.write_text(keep_state, encoding="utf-8")
    s = json.loads(keep_settings)
    del s["hooks"]["SessionEnd"]
    settings.write_text(json.dumps(s), encoding="utf-8")
    out = _fails(world, "Claude Code", "engram setup claude-code")
    assert "SessionEnd" in out
    settings.write_text("{oops", encoding="utf-8")
    _fails(world, "settings.json", "engram setup claude-code")
    settings.write_text(keep_settings, encoding="utf-8")

    # the log key: the configuration trusts another log; the pin says another log
    other_vkey = "localhost/other+0123abcd+" + "A" * 44
    state.write_text(
        keep_state.replace(keep_state.split('"--log-key",')[1].split('"')[1], other_vkey), encoding="utf-8"
    )
    settings.write_text(
        keep_settings.replace(keep_state.split('"--log-key",')[1].split('"')[1], other_vkey), encoding="utf-8"
    )
    _fails(world, "claude-code: log key", "engram setup claude-code")
    state.write_text(keep_state, encoding="utf-8")
    settings.write_text(keep_settings, encoding="utf-8")
    pins = [
        p
        for p in Path(world.env["ENGRAM_VERIFIER_STATE"]).rglob("*")
        if p.is_file() and p.parent.name == "log-keys"
    ]
    assert len(pins) == 1
    pinned = pins[0].read_text(encoding="utf-8")
    pins[0].write_text(other_vkey + "\n", encoding="utf-8")
    _fails(world, "pin", "engram log pin --reset --server")
    pins[0].write_text(pinned, encoding="utf-8")
    _green(world)

    # the registration: revoked by the operator
    revoked = subprocess.run(
        [ENGRAM, "agent", "revoke", "links"], env=world.log_env, capture_output=True, text=True, timeout=120
    )
    assert revoked.returncode == 0, revoked.stderr
    _fails(world, "claude-code: registration", "--agent NEW-ID")


def test_doctor_with_nothing_to_check_says_what_to_run(world: World) -> None:
    _fails(world, "setup", "engram setup claude-code|codex|hermes", ENGRAM_URL="")
    _fails(world, "codex", "engram setup codex", "--harness", "codex", ENGRAM_URL="")
    assert "not set up (engram setup hermes)" in _green(world)


def test_a_symlinked_key_file_or_a_bad_agent_id_is_refused(world: World, tmp_path: Path) -> None:
    """Found attacking the command from outside: a key file that is a link was followed."""
    real = tmp_path / "real.key"
    os.symlink(real, world.home / "linked.key")
    done = world.run("setup", "codex", "--key-file", str(world.home / "linked.key"))
    assert done.returncode == 2 and "[setup.symlink]" in done.stderr and not real.exists()
    bad = world.run("setup", "codex", "--agent", "Not An Id")
    assert bad.returncode == 2 and "[setup.agent]" in bad.stderr
    assert not (world.home / ".codex").exists() and not (world.home / ".config").exists()


def test_a_wrong_operator_token_is_named_and_the_rerun_registers(world: World) -> None:
    """Found attacking the command from outside: a wrong token ended in a bare auth error."""
    done = world.run("setup", "codex", "--agent", "tokenless", ENGRAM_OPERATOR_TOKEN="x" * 40)
    assert done.returncode == 2 and "[setup.register]" in done.stderr, done.stdout + done.stderr
    assert "ENGRAM_OPERATOR_TOKEN is not its operator token" in done.stderr
    assert "engram setup codex --server" in done.stderr  # the command to run with the right one
    again = world.run(
        "setup", "codex", "--key-file", str(world.home / ".config" / "engram" / "tokenless.key")
    )
    assert again.returncode == 0 and "registered agent tokenless" in again.stdout, again.stdout + again.stderr


def test_doctor_says_chmod_for_a_key_file_others_can_read(world: World) -> None:
    """Found attacking the command from outside: the fix said to create a new key."""
    assert world.run("setup", "claude-code", "--agent", "loose").returncode == 0
    key = world.home / ".config" / "engram" / "loose.key"
    os.chmod(key, 0o644)
    _fails(world, "claude-code: key file", f"chmod 600 '{key}'")
    os.chmod(key, 0o600)
    _green(world)


def test_doctor_names_codex_hooks_without_the_mcp_server(world: World) -> None:
    """Found attacking the command from outside: a config.toml with the hooks alone read as
    "not set up" and doctor was green."""
    assert world.run("setup", "codex", "--agent", "halfway").returncode == 0
    config = world.home / ".codex" / "config.toml"
    text = config.read_text(encoding="utf-8")
    head, rest = text.split("[mcp_servers.engram]\n", 1)
    config.write_text(head + rest.split("\n\n", 1)[1], encoding="utf-8")
    _fails(world, "Codex", "engram setup codex")
    assert world.run("setup", "codex", "--agent", "halfway").returncode == 0
    _green(world, "--harness", "codex")


def test_doctor_names_the_missing_key_hermes_memory_setup_accepted(world: World) -> None:
    """Issue 44, finding 1: ``hermes memory setup`` saves a key file that does not exist, and
    ``hermes memory status`` then blamed ENGRAM_LOG_KEY. Doctor names the key file."""
    hermes_home = world.home / ".hermes"
    assert world.run("hermes", "install").returncode == 0
    (hermes_home / "config.yaml").write_text("memory:\n  provider: engram\n", encoding="utf-8")
    missing = world.home / "typo.key"
    (hermes_home / "engram.json").write_text(
        json.dumps({"url": world.url, "key_file": str(missing)}), encoding="utf-8"
    )
    out = _fails(world, "hermes: key file", "engram setup hermes", "--harness", "hermes")
    assert f"{missing} does not exist" in out


def test_setup_refuses_a_service_serving_another_log_than_trusted(world: World) -> None:
    """The log key given or pinned for the URL differs from the one served: nothing is written."""
    other_vkey = "localhost/other+0123abcd+" + "A" * 44
    done = world.run("setup", "codex", "--agent", "wary", "--log-key", other_vkey)
    assert done.returncode == 2 and "[setup.log_key]" in done.stderr and other_vkey in done.stderr
    pinned = world.run("log", "pin", "--server", world.url)
    assert pinned.returncode == 0, pinned.stderr
    pin = next(p for p in Path(world.env["ENGRAM_VERIFIER_STATE"]).rglob("*") if p.parent.name == "log-keys")
    pin.write_text(other_vkey + "\n", encoding="utf-8")
    done = world.run("setup", "codex", "--agent", "wary")
    assert done.returncode == 2 and "[setup.pin]" in done.stderr and "engram log pin --reset" in done.stderr
    assert not (world.home / ".codex").exists() and not (world.home / ".config").exists()

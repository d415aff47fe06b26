"""``engram doctor [--server URL] [--key-file K]``: check the chain from a harness to the log,
link by link, and name the first broken one with its fix (exit code 1; 0 when all hold).

The links, in order, for the service and key given (``--server`` / ``ENGRAM_URL``,
``--key-file`` / ``ENGRAM_KEY_FILE``) and for each harness ``engram setup`` configured:

1. the harness's configuration parses, holds the MCP server and every hook, and each starts
   an ``engram`` executable that exists, with one service, key file and log key;
2. the service answers, and as an Engram service (``GET /v1/log/key`` is a log key);
3. the log key matches the one the configuration names and the one pinned for the URL;
4. the key file exists and is an agent key (0600);
5. its key is registered and active in THIS log;
6. the service accepts a request the key signed (a signed checkpoint read).

Nothing is written, except what any client of the service keeps (the verified checkpoint).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram.harness.setup import (
    CLAUDE_EVENTS,
    CODEX_EVENTS,
    HARNESSES,
    SetupError,
    active_key_of,
    check_url,
    claude_paths,
    codex_config,
    group_is_engram,
    hermes_dir,
    hermes_provider,
    is_engram_hook,
    key_id_of,
    load_json_object,
    pinned_key,
    read_text,
    served_log_key,
    transport_for,
)
from engram.protocol.errors import EngramError

__all__ = ["Broken", "Chain", "main"]


class Broken(Exception):
    """The first broken link: what is wrong and the fix."""

    def __init__(self, link: str, what: str, fix: str) -> None:
        self.link, self.what, self.fix = link, what, fix
        super().__init__(f"{link}: {what}")


@dataclass(frozen=True, slots=True)
class Chain:
    """What one harness (or the command line) starts: the service, the key, the log key."""

    url: str
    key_file: Path | None
    log_key: str | None
    setup: str  # the command that writes this chain again


def _opt(words: Sequence[str], name: str) -> str | None:
    """The value of option ``name`` as the command reads it: the last one given."""
    found = None
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            found = words[i + 1]
        elif w.startswith(name + "="):
            found = w.split("=", 1)[1]
    return found


def _chain_of(where: str, words: Sequence[str], setup: str) -> Chain:
    url = _opt(words, "--server")
    key = _opt(words, "--key-file")
    if not url or not key:
        raise Broken(where, "does not name the service (--server) and the key file (--key-file)", setup)
    return Chain(url=url, key_file=Path(key).expanduser(), log_key=_opt(words, "--log-key"), setup=setup)


def _executable(where: str, path: str, setup: str) -> None:
    p = Path(path)
    if not p.is_absolute():
        raise Broken(where, f"starts {path!r}, not an absolute path (harnesses do not read your PATH)", setup)
    if not p.is_file() or not os.access(p, os.X_OK):
        raise Broken(where, f"starts {path}, which does not exist or is not executable", setup)


def _same(where: str, chains: list[Chain], setup: str) -> Chain:
    first = chains[0]
    for c in chains[1:]:
        if (c.url, c.key_file, c.log_key) != (first.url, first.key_file, first.log_key):
            raise Broken(where, "its MCP server and hooks name different services, keys or log keys", setup)
    return first


def _parse(where: str, fix: str, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except SetupError as e:
        raise Broken(where, str(e), fix) from None


def harness_chain(harness: str, env: Mapping[str, str]) -> tuple[str, Chain] | None:
    """(the configuration's name, its chain); None when the harness is not set up at all."""
    setup = f"engram setup {harness}"
    if harness == "claude-code":
        settings_path, state_path = claude_paths(env)
        s_text = _parse(str(settings_path), setup, lambda: read_text(settings_path))
        st_text = _parse(str(state_path), setup, lambda: read_text(state_path))
        settings = _parse(str(settings_path), setup, lambda: load_json_object(settings_path, s_text))
        state = _parse(str(state_path), setup, lambda: load_json_object(state_path, st_text))
        servers = state.get("mcpServers")
        entry = servers.get("engram") if isinstance(servers, dict) else None
        hooks = settings.get("hooks") if isinstance(settings.get("hooks"), dict) else {}
        if entry is None and not any(
            is_engram_hook(h.get("command"), "claude-code")
            for groups in hooks.values()
            if isinstance(groups, list)
            for g in groups
            if isinstance(g, dict)
            for h in (g.get("hooks") or [])
            if isinstance(h, dict)
        ):
            return None
        where = f"Claude Code ({state_path}, {settings_path})"
        if not isinstance(entry, dict):
            raise Broken(where, "has the hooks but no MCP server engram (mcpServers.engram)", setup)
        command, args = entry.get("command"), entry.get("args")
        if not isinstance(command, str) or not isinstance(args, list) or args[:1] != ["mcp"]:
            raise Broken(where, "mcpServers.engram does not start `engram mcp`", setup)
        _executable(where, command, setup)
        chains = [_chain_of(where, [str(x) for x in args], setup)]
        for event, _ in CLAUDE_EVENTS:
            cmds = [
                h.get("command")
                for g in (hooks.get(event) or [])
                if isinstance(g, dict)
                for h in (g.get("hooks") or [])
                if isinstance(h, dict) and is_engram_hook(h.get("command"), "claude-code")
            ]
            if not cmds:
                raise Broken(where, f"has no `engram hook claude-code` on {event}", setup)
            for cmd in cmds:  # every one runs: each must name the same service
                words = shlex.split(str(cmd))
                _executable(where, words[0], setup)
                chains.append(_chain_of(where, words, setup))
        return where, _same(where, chains, setup)
    if harness == "codex":
        path = codex_config(env)
        text = _parse(str(path), setup, lambda: read_text(path))
        if text is None:
            return None
        try:
            cfg = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise Broken(str(path), f"is not valid TOML ({e})", "fix the file, then " + setup) from None
        servers = cfg.get("mcp_servers")
        entry = servers.get("engram") if isinstance(servers, dict) else None
        where = f"Codex ({path})"
        raw_hooks = cfg.get("hooks")
        hooks = raw_hooks if isinstance(raw_hooks, dict) else {}
        if entry is None:
            if any(group_is_engram(g, "codex") for gs in hooks.values() if isinstance(gs, list) for g in gs):
                raise Broken(where, "has the hooks but no MCP server engram ([mcp_servers.engram])", setup)
            return None
        command, args = entry.get("command"), entry.get("args")
        if not isinstance(command, str) or not isinstance(args, list) or args[:1] != ["mcp"]:
            raise Broken(where, "[mcp_servers.engram] does not start `engram mcp`", setup)
        _executable(where, command, setup)
        chains = [_chain_of(where, [str(x) for x in args], setup)]
        for event in CODEX_EVENTS:
            cmds = [
                h.get("command")
                for g in (hooks.get(event) or [])
                if isinstance(g, dict)
                for h in (g.get("hooks") or [])
                if isinstance(h, dict) and is_engram_hook(h.get("command"), "codex")
            ]
            if not cmds:
                raise Broken(where, f"has no `engram hook codex` on {event}", setup)
            for cmd in cmds:  # every one runs: each must name the same service
                words = shlex.split(str(cmd))
                _executable(where, words[0], setup)
                chains.append(_chain_of(where, words, setup))
        return where, _same(where, chains, setup)
    home = hermes_dir(env)
    cfg_path = home / "engram.json"
    plugin = home / "plugins" / "engram" / "__init__.py"
    text = _parse(str(cfg_path), setup, lambda: read_text(cfg_path))
    if text is None and not plugin.exists():
        return None
    where = f"Hermes ({home})"
    if not plugin.is_file():
        raise Broken(where, f"has no Engram plugin ({plugin}): Hermes would run without memory", setup)
    cfg = _parse(str(cfg_path), setup, lambda: load_json_object(cfg_path, text))
    url, key = cfg.get("url"), cfg.get("key_file")
    if not isinstance(url, str) or not url or not isinstance(key, str) or not key:
        raise Broken(where, f"{cfg_path} does not name the service (url) and the key file (key_file)", setup)
    if hermes_provider(home) != "engram":
        raise Broken(
            where, "memory.provider is not engram in config.yaml", "hermes config set memory.provider engram"
        )
    log_key = cfg.get("log_key")
    return where, Chain(
        url=url,
        key_file=Path(key).expanduser(),
        log_key=log_key if isinstance(log_key, str) else None,
        setup=setup,
    )


def check_chain(chain: Chain, say: Callable[[str], None]) -> None:
    """Links 2-6 for one chain; raises :class:`Broken` at the first that does not hold."""
    from engram.protocol.keyfiles import load_agent_key

    url = chain.url
    try:
        url = check_url(url)
        served = served_log_key(url, transport_for(url))
    except SetupError as e:
        fix = {
            "setup.url": f"give an http(s) URL: {chain.setup} --server http://HOST:PORT",
            "setup.unreachable": "start the service (`engram serve --port PORT`), or give its URL: "
            f"{chain.setup} --server URL",
            "setup.not_engram": f"point at an `engram serve`: {chain.setup} --server URL",
        }.get(e.check, chain.setup)
        raise Broken("service", str(e), fix) from None
    say(f"service: {url} is an Engram service (log {served.split('+', 1)[0]})")
    if chain.log_key and chain.log_key.strip() != served:
        raise Broken(
            "log key",
            f"the configuration trusts the log key {chain.log_key!r}, but {url} serves {served!r}: another log",
            f"if this log is the right one: {chain.setup} (writes its key); else correct the URL",
        )
    pin, pinned = pinned_key(url)
    if pinned is not None and pinned != served:
        raise Broken(
            "pin",
            f"{url} serves {served!r}, but {pinned!r} was pinned for it ({pin})",
            f"if the new log is expected: engram log pin --reset --server {url}",
        )
    say("log key: " + ("matches the configuration and the pin" if pinned else "matches (nothing pinned yet)"))
    if chain.key_file is None:
        return
    key_file = chain.key_file
    if not key_file.exists():
        raise Broken(
            "key file", f"{key_file} does not exist", f"{chain.setup} (creates and registers the key)"
        )
    try:
        agent, private = load_agent_key(key_file)
    except EngramError as e:
        fix = (
            f"chmod 600 {shlex.quote(str(key_file))}"
            if "chmod" in str(e)
            else f"give the agent's key file, or create one: {chain.setup}"
        )
        raise Broken("key file", str(e), fix) from None
    say(f"key file: {key_file} holds agent {agent}'s key")
    try:
        known, active = active_key_of(url, transport_for(url), agent)
    except SetupError as e:
        raise Broken("service", str(e), "start the service, or correct the URL") from None
    mine = key_id_of(private)
    register = (
        f"ENGRAM_OPERATOR_TOKEN=<the service's token> {chain.setup} --server {shlex.quote(url)} "
        f"--key-file {shlex.quote(str(key_file))}"
    )
    if not known:
        raise Broken("registration", f"agent {agent} is not registered in the log at {url}", register)
    if active is None:
        raise Broken(
            "registration",
            f"agent {agent}'s keys in the log at {url} are all revoked",
            f"create a new agent key: {chain.setup} --key-file NEW.key --agent NEW-ID",
        )
    if active != mine:
        raise Broken(
            "registration",
            f"{key_file} holds key {mine}, but agent {agent}'s active key in the log at {url} is {active} "
            "(rotated, or another machine's key)",
            "give the key file that holds the active key (--key-file)",
        )
    say(f"registration: key {mine} is agent {agent}'s active key in this log")
    from engram.client.agent_memory import connect_remote

    try:
        connect_remote(url, key_file, log_key=served, timeout_s=10.0).checkpoint()
    except EngramError as e:
        raise Broken(
            "signed request", f"the service refused a request signed by the key ({e})", chain.setup
        ) from None
    say("signed request: the service accepts the agent's signature")


def _prefixed(say: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda line: say(prefix + line)


def _doctor(a: argparse.Namespace, env: Mapping[str, str], say: Callable[[str], None]) -> None:
    checked: set[Chain] = set()
    url = a.server or env.get("ENGRAM_URL", "").strip()
    key = a.key_file or env.get("ENGRAM_KEY_FILE", "").strip()
    any_checked = False
    if url:
        chain = Chain(
            url=url,
            key_file=Path(key).expanduser() if key else None,
            log_key=env.get("ENGRAM_LOG_KEY") or None,
            setup="engram setup HARNESS",
        )
        check_chain(chain, say)
        checked.add(chain)
        any_checked = True
    elif key:
        raise Broken(
            "service",
            "a key file but no service to check it against",
            "give --server URL or set ENGRAM_URL",
        )
    for harness in a.harness or HARNESSES:
        found = harness_chain(harness, env)
        if found is None:
            if a.harness:
                raise Broken(harness, "is not set up", f"engram setup {harness}")
            sys.stdout.write(f"--    {harness}: not set up (engram setup {harness})\n")
            continue
        where, chain = found
        say(
            f"{where}: the Engram plugin is installed and selected"
            if harness == "hermes"
            else f"{where}: the MCP server and every hook start an existing engram"
        )
        any_checked = True
        if chain not in checked:
            try:
                check_chain(chain, _prefixed(say, f"{harness}: "))
            except Broken as b:
                raise Broken(f"{harness}: {b.link}", b.what, b.fix) from None
            checked.add(chain)
    if not any_checked:
        raise Broken(
            "setup",
            "nothing to check: no --server / ENGRAM_URL and no harness set up",
            "engram setup claude-code|codex|hermes --server URL",
        )


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    ap = argparse.ArgumentParser(
        prog="engram doctor",
        description="Check the chain harness -> engram -> service -> log -> agent key; name the first broken "
        "link and its fix (exit code 1).",
    )
    ap.add_argument("--server", metavar="URL", help="an Engram service (default: $ENGRAM_URL)")
    ap.add_argument("--key-file", metavar="FILE", help="an agent key file (default: $ENGRAM_KEY_FILE)")
    ap.add_argument(
        "--harness",
        action="append",
        choices=HARNESSES,
        help="check this harness, which must be set up (repeatable; default: every harness set up)",
    )
    a = ap.parse_args(list(argv))

    def say(line: str) -> None:
        sys.stdout.write(f"ok    {line}\n")

    try:
        _doctor(a, env, say)
    except Broken as b:
        sys.stdout.write(f"FAIL  {b.link}: {b.what}\n      fix: {b.fix}\n")
        return 1
    sys.stdout.write("the chain holds\n")
    return 0

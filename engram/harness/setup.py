"""``engram setup claude-code | codex | hermes``: one command connects a harness to an Engram
service.

What it does, in this order, and nothing until every check passed:

1. The service (``--server`` / ``ENGRAM_URL``) answers as an Engram service; its log key
   matches the one given (``--log-key`` / ``ENGRAM_LOG_KEY``) or pinned for that URL.
2. The agent key (``--key-file`` / ``ENGRAM_KEY_FILE``, else ``~/.config/engram/<agent>.key``)
   is reused if it exists (its agent must be the one asked for) or created 0600, as
   ``engram agent create`` does. An agent whose active key in this log is another one is
   refused before any file is written.
3. The harness's configuration gets the MCP server and the hooks with the ABSOLUTE path of
   this ``engram`` (harnesses do not start it from the shell's PATH), the service URL, the
   key file and the log key, merged into the user's files without losing their other entries:

   ============  ==================================================================
   claude-code   ``~/.claude/settings.json`` (hooks) and ``~/.claude.json``
                 (``mcpServers.engram``, user scope); ``$CLAUDE_CONFIG_DIR`` if set
   codex         ``~/.codex/config.toml`` (``$CODEX_HOME``): one marked block holding
                 ``[mcp_servers.engram]`` and the hooks, replaced on the next run
   hermes        ``$HERMES_HOME/plugins/engram/`` (as ``engram hermes install``) and
                 ``$HERMES_HOME/engram.json``; ``hermes config set memory.provider
                 engram`` is run when Hermes is installed beside this ``engram``
   ============  ==================================================================

4. The key is registered in the log when it is not yet: with the operator token
   (``ENGRAM_OPERATOR_TOKEN``), else the one command that does it is printed (exit code 1).

A file that is a symbolic link is refused (as ``engram hermes install`` refuses its
directory), a file that does not parse is refused naming it, and running the command again
changes nothing. ``--dry-run`` prints the diff of every file and writes nothing (no key, no
registration, no pin).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from engram.protocol.errors import EngramError, NotFoundError, StorageError

__all__ = [
    "CLAUDE_EVENTS",
    "CODEX_EVENTS",
    "HARNESSES",
    "Change",
    "SetupError",
    "claude_paths",
    "codex_config",
    "engram_executable",
    "main",
]

HARNESSES = ("claude-code", "codex", "hermes")
#: The agent id each harness gets when no key file names one.
DEFAULT_AGENT = {"claude-code": "claude", "codex": "codex", "hermes": "hermes"}
#: Claude Code's hook events and their timeouts (s): a flush distils, so it may take longer.
CLAUDE_EVENTS = (
    ("SessionStart", 15),
    ("UserPromptSubmit", 15),
    ("Stop", 15),
    ("PreCompact", 60),
    ("SubagentStop", 15),
    ("SessionEnd", 60),
)
#: Codex's hook events (0.171, the version the interop tests run; SessionEnd closes and distils);
#: PreCompact distils what came before.
CODEX_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
#: A harness configuration larger than this is not one we merge into (``~/.claude.json`` keeps
#: per-project history; a few MiB is common, 32 MiB is not).
MAX_CONFIG_BYTES = 32 << 20
CODEX_BEGIN = (
    "# >>> engram setup codex: written by `engram setup codex`; run it again to change this block >>>"
)
CODEX_END = "# <<< engram setup codex <<<"


class SetupError(EngramError):
    """A set-up step that cannot go on; ``check`` names it, the message says the fix."""

    def __init__(self, message: str, *, check: str) -> None:
        self.check = check
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One file as it is (``old``: None when absent) and as set-up leaves it."""

    path: Path
    old: str | None
    new: str
    mode: int = 0o644

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        old = [] if self.old is None else self.old.splitlines(keepends=True)
        lines = difflib.unified_diff(
            old,
            self.new.splitlines(keepends=True),
            fromfile="/dev/null" if self.old is None else str(self.path),
            tofile=str(self.path),
        )
        return "".join(ln if ln.endswith("\n") else ln + "\n" for ln in lines)


@dataclass(slots=True, kw_only=True)
class Plan:
    harness: str
    url: str
    log_key: str
    agent: str
    key_file: Path
    key_exists: bool
    registered: bool
    engram: str
    changes: list[Change] = field(default_factory=list)
    run_after: list[list[str]] = field(default_factory=list)  # the harness's own commands
    steps: list[str] = field(default_factory=list)  # what only the user or the harness can do


# -- where things are ------------------------------------------------------------------------


def engram_executable() -> str:
    """The absolute path of the ``engram`` command running now (the one a harness must start:
    it does not read the shell's PATH, and a bare ``engram`` may be another install)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "engram" and argv0.is_file():
        return os.path.abspath(argv0)
    beside = Path(sys.executable).parent / "engram"
    if beside.is_file():
        return str(beside.absolute())
    found = shutil.which("engram")
    if found:
        return os.path.abspath(found)
    raise SetupError(
        "cannot find the engram executable to write into the harness's configuration; "
        "run `engram setup` from the environment that installed engram",
        check="setup.executable",
    )


def claude_paths(env: Mapping[str, str]) -> tuple[Path, Path]:
    """(settings.json holding the hooks, the state file holding user-scope MCP servers)."""
    conf = env.get("CLAUDE_CONFIG_DIR", "").strip()
    if conf:
        base = Path(conf).expanduser()
        return base / "settings.json", base / ".claude.json"
    home = Path.home()
    return home / ".claude" / "settings.json", home / ".claude.json"


def codex_config(env: Mapping[str, str]) -> Path:
    raw = env.get("CODEX_HOME", "").strip()
    return (Path(raw).expanduser() if raw else Path.home() / ".codex") / "config.toml"


def hermes_dir(env: Mapping[str, str]) -> Path:
    raw = env.get("HERMES_HOME", "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".hermes"


def read_text(path: Path) -> str | None:
    """A configuration file's text, None when absent; a symlink, a directory, an oversized or
    non-UTF-8 file is refused (named), so nothing is written through or over it."""
    if path.is_symlink():
        raise SetupError(
            f"{path} is a symbolic link; refusing to write through it (replace it with the file it "
            "points to, then run this again)",
            check="setup.symlink",
        )
    if not path.exists():
        return None
    if not path.is_file():
        raise SetupError(f"{path} is not a regular file", check="setup.not_file")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise SetupError(
            f"{path} is larger than any harness configuration ({size} bytes)", check="setup.size"
        )
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise SetupError(f"{path} is not UTF-8 text (byte {e.start})", check="setup.encoding") from None


def load_json_object(path: Path, text: str | None) -> dict[str, Any]:
    """The JSON object in ``text`` (``{}`` when absent or blank); anything else is refused:
    rewriting a file we cannot read would lose what the user put in it."""
    if text is None or not text.strip():
        return {}
    from engram.protocol.files import loads_bounded

    try:
        obj = loads_bounded(text)
    except EngramError as e:
        raise SetupError(
            f"{path} is not JSON ({e}); fix it (comments and trailing commas are not JSON), nothing was written",
            check="setup.json",
        ) from None
    if not isinstance(obj, dict):
        raise SetupError(f"{path} holds JSON but not an object; nothing was written", check="setup.json")

    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for k, v in pairs:
            if k in seen:  # JSON readers keep one of the two: rewriting would drop the other
                raise SetupError(
                    f"{path} names {k!r} twice in one object; merge the two, nothing was written",
                    check="setup.json",
                )
            seen[k] = v
        return seen

    checked: dict[str, Any] = json.loads(text, object_pairs_hook=no_repeats)
    return checked


def dump_json(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


# -- the commands written --------------------------------------------------------------------


def target_args(url: str, key_file: Path, log_key: str) -> list[str]:
    return ["--server", url, "--key-file", str(key_file), "--log-key", log_key]


def hook_command(engram: str, harness: str, url: str, key_file: Path, log_key: str) -> str:
    """The shell command a harness runs for a hook (each word quoted: paths may hold spaces)."""
    return shlex.join([engram, "hook", harness, *target_args(url, key_file, log_key)])


def is_engram_hook(command: object, harness: str) -> bool:
    """Whether a hook command is an ``engram hook <harness>`` (ours, whoever wrote it)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 3 and Path(words[0]).name == "engram" and words[1:3] == ["hook", harness]


def group_is_engram(group: object, harness: str) -> bool:
    if not isinstance(group, dict):
        return False
    hooks = group.get("hooks")
    return (
        isinstance(hooks, list)
        and bool(hooks)
        and all(isinstance(h, dict) and is_engram_hook(h.get("command"), harness) for h in hooks)
    )


def group_has_engram(group: object, harness: str) -> bool:
    """Whether any hook of a group is an ``engram hook <harness>`` (alone or beside others)."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and is_engram_hook(h.get("command"), harness) for h in hooks
    )


def merge_claude_hooks(settings: dict[str, Any], command: str, path: Path) -> dict[str, Any]:
    """``settings`` with one Engram hook group per event: an existing Engram group is replaced
    where it stands (later duplicates dropped), an Engram hook in a group of the user's is
    taken out of it (it may name an old service: turns would still go there), the user's
    other hooks are kept as they are."""
    out = dict(settings)
    hooks = out.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SetupError(f'{path}: "hooks" is not an object; nothing was written', check="setup.json")
    hooks = dict(hooks)
    for event, timeout in CLAUDE_EVENTS:
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise SetupError(f"{path}: hooks.{event} is not a list; nothing was written", check="setup.json")
        ours = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
        kept: list[Any] = []
        placed = False
        for g in groups:
            if group_is_engram(g, "claude-code"):
                if not placed:
                    kept.append(ours)
                    placed = True
                continue
            if group_has_engram(g, "claude-code"):
                g = {
                    **g,
                    "hooks": [
                        h
                        for h in g["hooks"]
                        if not (isinstance(h, dict) and is_engram_hook(h.get("command"), "claude-code"))
                    ],
                }
            kept.append(g)
        if not placed:
            kept.append(ours)
        hooks[event] = kept
    out["hooks"] = hooks
    return out


def mcp_entry(engram: str, url: str, key_file: Path, log_key: str) -> dict[str, Any]:
    return {
        "type": "stdio",
        "command": engram,
        "args": ["mcp", *target_args(url, key_file, log_key)],
        "env": {},
    }


def _toml_str(s: str) -> str:
    # json.dumps with ensure_ascii emits only the escapes TOML basic strings share (\" \\ \n \uXXXX ...)
    return json.dumps(s, ensure_ascii=True)


def codex_block(engram: str, url: str, key_file: Path, log_key: str) -> str:
    command = hook_command(engram, "codex", url, key_file, log_key)
    args = ", ".join(_toml_str(a) for a in ["mcp", *target_args(url, key_file, log_key)])
    lines = [
        CODEX_BEGIN,
        "[mcp_servers.engram]",
        f"command = {_toml_str(engram)}",
        f"args = [{args}]",
        "startup_timeout_sec = 20",
    ]
    for event in CODEX_EVENTS:
        lines += [
            "",
            f"[[hooks.{event}]]",
            f"[[hooks.{event}.hooks]]",
            'type = "command"',
            f"command = {_toml_str(command)}",
        ]
    lines.append(CODEX_END)
    return "\n".join(lines) + "\n"


def split_codex(path: Path, text: str) -> tuple[str, str, str]:
    """(before the Engram block, the block, after it); the block is empty when absent."""
    begins = [m.start() for m in re.finditer(re.escape(CODEX_BEGIN), text)]
    ends = [m.end() for m in re.finditer(re.escape(CODEX_END), text)]
    if not begins and not ends:
        return text, "", ""
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise SetupError(
            f"{path}: the block `engram setup codex` writes is broken (its begin and end markers do not "
            "pair); delete what is left of it and run this again",
            check="setup.codex_block",
        )
    end = ends[0] + (1 if text[ends[0] : ends[0] + 1] == "\n" else 0)
    return text[: begins[0]], text[begins[0] : end], text[end:]


def _toml(path: Path, text: str, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SetupError(
            f"{path} {what} is not valid TOML ({e}); nothing was written", check="setup.toml"
        ) from None


def merge_codex(path: Path, text: str | None, block: str) -> str:
    """The user's config.toml with the Engram block in place of the old one (else appended);
    refused when the user's own part already defines what the block does."""
    before, _, after = split_codex(path, text or "")
    rest = _toml(path, before + after, "(outside the engram block)")
    servers = rest.get("mcp_servers")
    if isinstance(servers, dict) and "engram" in servers:
        raise SetupError(
            f"{path} already defines [mcp_servers.engram] outside the block engram setup manages; "
            "delete that table (engram setup writes its own) and run this again",
            check="setup.codex_duplicate",
        )
    hooks = rest.get("hooks")
    if isinstance(hooks, dict):
        for event, groups in hooks.items():
            for g in groups if isinstance(groups, list) else []:
                if group_has_engram(g, "codex"):
                    raise SetupError(
                        f"{path} already runs `engram hook codex` on {event} outside the block engram setup "
                        "manages (pasted from the docs?); delete those [[hooks...]] tables and run this again, "
                        "or each turn would be logged twice",
                        check="setup.codex_duplicate",
                    )
    if before and not before.endswith("\n"):
        before += "\n"
    if before and not after and not before.endswith("\n\n"):
        before += "\n"
    merged = before + block + after
    _toml(path, merged, "with the engram block")
    return merged


# -- the service and the key -----------------------------------------------------------------


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SetupError(f"--server / ENGRAM_URL must be an http(s) URL, not {url!r}", check="setup.url")
    return url.rstrip("/")


def transport_for(url: str, *, operator_token: str | None = None, timeout_s: float = 10.0) -> Any:
    from engram.client.http import HttpTransport
    from engram.client.litehttp import LiteHttp

    return HttpTransport(
        url, http=LiteHttp(timeout_s=timeout_s), timeout_s=timeout_s, operator_token=operator_token
    )


def served_log_key(url: str, transport: Any) -> str:
    """The verifier key the service serves; a service that is down or is not an Engram
    service is named as such."""
    from verifier.note import VerifierKey

    try:
        resp = transport.request("GET", "/v1/log/key")
    except StorageError as e:
        raise SetupError(
            f"cannot reach the Engram service at {url} ({e}); start it (`engram serve`) or correct --server",
            check="setup.unreachable",
        ) from None
    except EngramError as e:
        raise SetupError(
            f"{url} does not answer as an Engram service (GET /v1/log/key: {e}); check the URL",
            check="setup.not_engram",
        ) from None
    served = str(resp.text).strip()
    try:
        VerifierKey.parse(served)
    except (EngramError, ValueError):
        raise SetupError(
            f"{url} does not answer as an Engram service (GET /v1/log/key is not a log verifier key); check the URL",
            check="setup.not_engram",
        ) from None
    return served


def pinned_key(url: str) -> tuple[Path | None, str | None]:
    from engram.client.agent_memory import pin_file

    pin = pin_file(url)
    if pin is None or not pin.is_file():
        return pin, None
    return pin, pin.read_text(encoding="utf-8").strip()


def active_key_of(url: str, transport: Any, agent: str) -> tuple[bool, str | None]:
    """(the agent is known to the log, its active key id or None when revoked)."""
    try:
        info = transport.request("GET", f"/v1/agents/{quote(agent, safe='')}").json()
    except NotFoundError:
        return False, None
    except StorageError as e:
        raise SetupError(
            f"cannot reach the Engram service at {url} ({e})", check="setup.unreachable"
        ) from None
    active = info.get("active_key") if isinstance(info, dict) else None
    return True, active if isinstance(active, str) else None


def key_id_of(private_key: Any) -> str:
    from verifier.event import agent_key_id

    return agent_key_id(private_key.public_key().public_bytes_raw())


def _reset_fix(url: str) -> str:
    return f"`engram log pin --reset --server {url}`"


# -- the plan --------------------------------------------------------------------------------


def plan(
    harness: str,
    *,
    url: str,
    key_file: Path,
    agent: str | None,
    log_key: str | None,
    env: Mapping[str, str],
    engram: str,
) -> tuple[Plan, Any]:
    """Every check, and every file as it will be; returns (plan, the private key or None)."""
    from engram.protocol.keyfiles import load_agent_key
    from verifier.event import check_agent_id

    url = check_url(url)
    transport = transport_for(url)
    served = served_log_key(url, transport)
    if log_key and log_key.strip() != served:
        raise SetupError(
            f"the service at {url} serves the log key {served!r}, not the one given (--log-key / "
            f"ENGRAM_LOG_KEY: {log_key.strip()!r}): another log is served there; check the URL",
            check="setup.log_key",
        )
    pin, pinned = pinned_key(url)
    if pinned is not None and pinned != served:
        raise SetupError(
            f"the service at {url} serves the log key {served!r}, but {pinned!r} was pinned for it ({pin}); "
            f"if the new log is expected, re-pin with {_reset_fix(url)}, else do not trust it",
            check="setup.pin",
        )
    private = None
    if key_file.is_symlink():
        raise SetupError(
            f"{key_file} is a symbolic link; refusing to use a key file through it", check="setup.symlink"
        )
    if key_file.exists():
        found, private = load_agent_key(key_file)
        if agent is not None and found != agent:
            raise SetupError(
                f"{key_file} holds the key of agent {found!r}, not {agent!r}: give that agent's key file, "
                "or another --key-file to create one",
                check="setup.key_agent",
            )
        agent = found
    else:
        agent = agent or DEFAULT_AGENT[harness]
        try:
            check_agent_id(agent)
        except EngramError as e:
            raise SetupError(f"--agent {agent!r} is not an agent id ({e})", check="setup.agent") from None
    known, active = active_key_of(url, transport, agent)
    mine = key_id_of(private) if private is not None else None
    if known and active != mine:
        if active is None:
            what = f"agent {agent!r} has no active key in the log at {url} (revoked)"
        elif mine is None:
            what = (
                f"agent {agent!r} already has a key in the log at {url} (key id {active}), not in {key_file}"
            )
        else:
            what = f"{key_file} holds key {mine} of {agent!r}, but the log at {url} has {active} active (rotated?)"
        raise SetupError(
            f"{what}: give the key file that holds the active key (--key-file), or another --agent",
            check="setup.key_conflict",
        )
    p = Plan(
        harness=harness,
        url=url,
        log_key=served,
        agent=agent,
        key_file=key_file,
        key_exists=private is not None,
        registered=known,
        engram=engram,
    )
    if harness == "claude-code":
        _plan_claude(p, env)
    elif harness == "codex":
        _plan_codex(p, env)
    else:
        _plan_hermes(p, env)
    return p, private


def _plan_claude(p: Plan, env: Mapping[str, str]) -> None:
    settings_path, state_path = claude_paths(env)
    old = read_text(settings_path)
    settings = merge_claude_hooks(
        load_json_object(settings_path, old),
        hook_command(p.engram, "claude-code", p.url, p.key_file, p.log_key),
        settings_path,
    )
    same = old is not None and load_json_object(settings_path, old) == settings
    p.changes.append(Change(path=settings_path, old=old, new=old if same and old else dump_json(settings)))
    old_state = read_text(state_path)
    state = load_json_object(state_path, old_state)
    servers = state.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise SetupError(
            f'{state_path}: "mcpServers" is not an object; nothing was written', check="setup.json"
        )
    entry = mcp_entry(p.engram, p.url, p.key_file, p.log_key)
    if servers.get("engram") == entry:
        p.changes.append(Change(path=state_path, old=old_state, new=old_state or "", mode=0o600))
    else:
        state = {**state, "mcpServers": {**servers, "engram": entry}}
        p.changes.append(Change(path=state_path, old=old_state, new=dump_json(state), mode=0o600))
    p.steps.append(
        "Claude Code loads the hooks and the MCP server when it starts: check with `claude mcp list`."
    )


def _plan_codex(p: Plan, env: Mapping[str, str]) -> None:
    path = codex_config(env)
    old = read_text(path)
    new = merge_codex(path, old, codex_block(p.engram, p.url, p.key_file, p.log_key))
    p.changes.append(Change(path=path, old=old, new=new))
    p.steps.append(
        "Codex runs new or changed hooks only once you trust them, and skips untrusted ones without a word: "
        "start `codex`, type /hooks and trust the Engram hooks (a script runs `codex exec "
        "--dangerously-bypass-hook-trust`)."
    )


def _hermes_executable() -> str | None:
    beside = Path(sys.executable).parent / "hermes"
    if beside.is_file():
        return str(beside)
    return shutil.which("hermes")


def hermes_provider(home: Path) -> str | None:
    """``memory.provider`` in Hermes' config.yaml (a two-level lookup; None when absent)."""
    try:
        text = (home / "config.yaml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    m = re.search(r"(?m)^memory:[ \t]*(?:#.*)?\n((?:[ \t]+.*\n?|[ \t]*\n)*)", text)
    if not m:
        return None
    found = re.search(r"(?m)^[ \t]+provider:[ \t]*['\"]?([A-Za-z0-9_.-]+)", m.group(1))
    return found.group(1) if found else None


def _plan_hermes(p: Plan, env: Mapping[str, str]) -> None:
    from engram.harness.hermes_install import PLUGIN_FILES

    home = hermes_dir(env)
    if home.exists() and not home.is_dir():
        raise SetupError(f"{home} is not a directory (HERMES_HOME)", check="setup.not_dir")
    plugin = home / "plugins" / "engram"
    for d in (home / "plugins", plugin):
        if d.is_symlink():
            raise SetupError(f"{d} is a symbolic link; refusing to write through it", check="setup.symlink")
    for name, text in PLUGIN_FILES.items():
        path = plugin / name
        p.changes.append(Change(path=path, old=read_text(path), new=text))
    cfg_path = home / "engram.json"
    old = read_text(cfg_path)
    cfg = load_json_object(cfg_path, old)
    want = {**cfg, "url": p.url, "key_file": str(p.key_file), "log_key": p.log_key}
    p.changes.append(
        Change(path=cfg_path, old=old, new=old if old is not None and cfg == want else dump_json(want))
    )
    if hermes_provider(home) != "engram":
        hermes = _hermes_executable()
        if hermes:
            p.run_after.append([hermes, "config", "set", "memory.provider", "engram"])
        else:
            p.steps.append(
                "Select the provider in Hermes' environment: `hermes config set memory.provider engram`."
            )
    p.steps.append("Check it: `hermes memory status` (Plugin: installed, Status: available).")


# -- doing it --------------------------------------------------------------------------------


def _write(change: Change) -> None:
    """Write ``change``; refused (nothing written) when the file changed since it was read
    (the harness itself rewrites ``~/.claude.json`` as it runs): writing the plan over it
    would drop what was written meanwhile."""
    from engram.protocol.files import write_file

    if read_text(change.path) != change.old:
        raise SetupError(
            f"{change.path} changed while engram setup ran (the harness wrote it?); nothing more was "
            "written: run this again",
            check="setup.changed",
        )
    mode = change.mode
    if change.path.exists():
        mode = stat.S_IMODE(change.path.stat().st_mode)  # keep the user's permissions
    change.path.parent.mkdir(parents=True, exist_ok=True)
    write_file(change.path, change.new, mode=mode)


def _register(p: Plan, token: str) -> int:
    from engram.client.sdk import Agent
    from engram.protocol.errors import AuthError

    agent = Agent.load(p.key_file, log_vkey=p.log_key, transport=transport_for(p.url, operator_token=token))
    try:
        return agent.register().index
    except AuthError as e:
        raise SetupError(
            f"the service at {p.url} refused to register the key ({e}): ENGRAM_OPERATOR_TOKEN is not its "
            f"operator token. The key and the configuration are written; with the right token, run "
            f"{register_command(p)}",
            check="setup.register",
        ) from None


def register_command(p: Plan) -> str:
    return shlex.join(["engram", "setup", p.harness, "--server", p.url, "--key-file", str(p.key_file)])


def _run(a: argparse.Namespace, env: Mapping[str, str]) -> int:
    out = sys.stdout.write
    url = a.server or env.get("ENGRAM_URL", "").strip()
    if not url:
        raise SetupError(
            "give the Engram service: --server URL or ENGRAM_URL (start one with `engram serve`)",
            check="setup.server",
        )
    raw_key = a.key_file or env.get("ENGRAM_KEY_FILE", "").strip()
    agent = a.agent
    if raw_key:
        key_file = Path(raw_key).expanduser().absolute()
    else:
        name = agent or DEFAULT_AGENT[a.harness]
        key_file = Path.home() / ".config" / "engram" / f"{name}.key"
    p, private = plan(
        a.harness,
        url=url,
        key_file=key_file,
        agent=agent,
        log_key=a.log_key or env.get("ENGRAM_LOG_KEY") or None,
        env=env,
        engram=engram_executable(),
    )
    token = env.get("ENGRAM_OPERATOR_TOKEN", "").strip()
    if a.dry_run:
        out(f"engram setup {a.harness} --dry-run: nothing is written.\n")
        out(f"agent {p.agent}: key {'reused from' if p.key_exists else 'would be created at'} {p.key_file}; ")
        if p.registered:
            out(f"registered in the log at {p.url}\n")
        else:
            out(
                f"{'would be registered' if token else 'NOT registered (needs ENGRAM_OPERATOR_TOKEN)'} at {p.url}\n"
            )
        for c in p.changes:
            out(c.diff() if c.changed else f"unchanged {c.path}\n")
        for cmd in p.run_after:
            out(f"would run: {shlex.join(cmd)}\n")
        return 0
    if not p.key_exists:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from engram.protocol.keyfiles import format_agent_key, write_private_file

        private = Ed25519PrivateKey.generate()
        write_private_file(p.key_file, format_agent_key(p.agent, private))
        out(f"created the key of agent {p.agent} in {p.key_file} (0600)\n")
    else:
        out(f"reusing the key of agent {p.agent} in {p.key_file}\n")
    from engram.client.agent_memory import resolve_log_key

    resolve_log_key(p.url, None, transport_for(p.url))  # pins the key checked above (if not yet)
    for c in p.changes:
        if c.changed:
            _write(c)
            out(f"wrote {c.path}\n")
        else:
            out(f"unchanged {c.path}\n")
    for cmd in p.run_after:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603 (Hermes' own CLI, fixed arguments)
        if done.returncode != 0:
            p.steps.insert(0, f"Run `{shlex.join(cmd)}` (it failed here: {done.stderr.strip()[-300:]}).")
        else:
            out(f"ran {shlex.join(cmd)}\n")
    status = 0
    if p.registered:
        out(f"agent {p.agent}'s key is registered in the log at {p.url}\n")
    elif token:
        index = _register(p, token)
        out(f"registered agent {p.agent}'s key in the log at {p.url} (index {index})\n")
    else:
        status = 1
        p.steps.insert(
            0,
            "Register the key (the operator token of the service is needed once):\n"
            f"    ENGRAM_OPERATOR_TOKEN=<the service's token> {register_command(p)}",
        )
    out("Next:\n" if p.steps else "")
    for s in p.steps:
        out(f"  - {s}\n")
    out(
        f"Check the chain: engram doctor --server {shlex.quote(p.url)} --key-file {shlex.quote(str(p.key_file))}\n"
    )
    return status


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    ap = argparse.ArgumentParser(
        prog="engram setup",
        description="Connect a harness to an Engram service in one command: the agent key (created or "
        "reused, registered), the MCP server and the hooks with absolute paths. Idempotent.",
    )
    ap.add_argument("harness", choices=HARNESSES)
    ap.add_argument("--server", metavar="URL", help="the Engram service (default: $ENGRAM_URL)")
    ap.add_argument(
        "--key-file",
        metavar="FILE",
        help="the agent's key file, reused or created (default: $ENGRAM_KEY_FILE, else ~/.config/engram/AGENT.key)",
    )
    ap.add_argument("--agent", help="the agent id of a new key (default: claude, codex or hermes)")
    ap.add_argument(
        "--log-key", metavar="VKEY", help="the log's verifier key (default: $ENGRAM_LOG_KEY, else pinned)"
    )
    ap.add_argument("--dry-run", action="store_true", help="print the diff of every file; write nothing")
    a = ap.parse_args(list(argv))
    try:
        return _run(a, env)
    except SetupError as e:
        sys.stderr.write(f"engram setup: [{e.check}] {e}\n")
        return 2
    except EngramError as e:
        check = getattr(e, "check", None)
        msg = str(e)
        if check and not msg.startswith(f"[{check}]"):
            msg = f"[{check}] {msg}"
        sys.stderr.write(f"engram setup: {msg}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"engram setup: {e}\n")
        return 2

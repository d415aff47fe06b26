"""Which agent, on which log: the settings every harness entry point reads.

=======================  ===========================================  =========================
``ENGRAM_URL``           an Engram service (else the embedded log)    unset
``ENGRAM_KEY_FILE``      the agent's key file                         ``$ENGRAM_HOME/agent.key``
``ENGRAM_LOG_KEY``       the log's verifier key, pinned               fetched once and pinned
=======================  ===========================================  =========================

Command-line options (``--server``, ``--key-file``, ``--log-key``) win over the variables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engram.client.agent_memory import AgentMemory, connect_remote

__all__ = ["EMBEDDED_GROUP", "LocalFactory", "Target", "embedded_opener", "target_from"]

#: How the entry point opens the embedded log for a key file (``engram.cli.entry.open_embedded``).
LocalFactory = Callable[[Path], AgentMemory]

#: The entry-point group the top floor registers the embedded opener in (pyproject.toml), for
#: what a harness starts rather than the ``engram`` command (the Hermes provider).
EMBEDDED_GROUP = "engram.embedded"


def embedded_opener() -> LocalFactory | None:
    """The embedded opener the installed distribution declares, or ``None`` if none is (a
    client-only install still declares it: the opener then says what to install)."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=EMBEDDED_GROUP, name="open"):
        opener: LocalFactory = ep.load()
        return opener
    return None


@dataclass(frozen=True, slots=True)
class Target:
    url: str | None
    key_file: Path
    log_key: str | None

    def open(self, local: LocalFactory | None, *, lite: bool = True, timeout_s: float = 30.0) -> AgentMemory:
        """The agent's memory: over HTTP when a URL is set (``timeout_s``: the longest wait
        for one answer), else the embedded log."""
        if self.url:
            return connect_remote(
                self.url, self.key_file, log_key=self.log_key, lite=lite, timeout_s=timeout_s
            )
        if local is None:
            from engram.protocol.errors import ConfigError

            raise ConfigError("no --server / ENGRAM_URL, and the embedded log is not installed here")
        return local(self.key_file)


def target_from(
    env: Mapping[str, str] | None = None,
    *,
    server: str | None = None,
    key_file: Path | str | None = None,
    log_key: str | None = None,
) -> Target:
    env = os.environ if env is None else env
    home = Path(env.get("ENGRAM_HOME") or ".engram").expanduser()
    kf = key_file or env.get("ENGRAM_KEY_FILE") or home / "agent.key"
    return Target(
        url=(server or env.get("ENGRAM_URL") or None),
        key_file=Path(kf).expanduser(),
        log_key=(log_key or env.get("ENGRAM_LOG_KEY") or None),
    )

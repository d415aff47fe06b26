"""One agent's memory on the embedded log: :class:`engram.client.AgentMemory` over the
in-process transport of this process's memory service (``Services.transport()``: what the
HTTP routes call). The MCP server and the hooks without ``--server`` and the CLI's
agent-side commands open it here, on the top floor: the only code that sees both the
service and the client."""

from __future__ import annotations

from pathlib import Path

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import ConfigError
from engram.protocol.keyfiles import missing_key_file
from ledger.compose import Services, open_services
from ledger.config import Settings

__all__ = ["memory_of", "open_local"]


def memory_of(services: Services, agent: Agent) -> AgentMemory:
    """``agent``'s memory in process, the agent rebound to the services' transport (its
    key, clock and verified-checkpoint state kept)."""
    agent.transport = services.transport()
    return AgentMemory(agent)


def open_local(key_file: Path, settings: Settings | None = None) -> AgentMemory:
    """The agent of ``key_file`` on the embedded log the settings name (``ENGRAM_HOME``)."""
    if not key_file.is_file():
        raise ConfigError(missing_key_file(key_file))
    settings = settings or Settings.from_env()
    if not settings.log_key_file.is_file() and settings.database_url.startswith("sqlite"):
        raise ConfigError(
            f"no --server / ENGRAM_URL, and no embedded log at {settings.home} (ENGRAM_HOME): give the "
            "Engram service's --server URL (or export ENGRAM_URL), or create a log here with `engram init`"
        )
    services = open_services(settings)
    agent = Agent.load(key_file, log_vkey=services.ledger.vkey, transport=services.transport())
    ledger = services.ledger
    if all(k.key_id != agent.signer.key_id for k in ledger.store.keys_of(agent.agent_id)):
        # The usual cause: --server forgotten, so this opened the log of the directory it ran
        # in (or ENGRAM_HOME), not the service's; the verifier's "key ... is not registered
        # in this log" did not say which log.
        where = settings.database_url.rsplit("@", 1)[-1]  # never a password
        raise ConfigError(
            f"the key in {key_file} ({agent.agent_id}, key {agent.signer.key_id}) is not registered in the "
            f"embedded log {ledger.origin} ({where}, ENGRAM_HOME={settings.home}) that this command opened "
            "without --server: to use the service the agent was registered on, give --server URL or "
            "export ENGRAM_URL; to use this log, register a key in it (`engram agent create`)"
        )
    return AgentMemory(agent)

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
        raise ConfigError(f"no agent key file at {key_file} (--key-file / ENGRAM_KEY_FILE)")
    services = open_services(settings or Settings.from_env())
    agent = Agent.load(key_file, log_vkey=services.ledger.vkey, transport=services.transport())
    return AgentMemory(agent)

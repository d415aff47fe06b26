"""Engram inside an agent's harness: the MCP server (``engram mcp``), the lifecycle hooks of
Claude Code and Codex (``engram hook``), the Hermes ``MemoryProvider`` plugin, and import
and export of the harnesses' own memory files. Everything here works on an
:class:`~engram.client.agent_memory.AgentMemory`, local or over HTTP; nothing here imports
the service (the ``engram`` entry point composes the local backend)."""

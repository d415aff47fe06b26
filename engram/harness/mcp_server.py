"""``engram mcp --transport http``: one agent's Engram memory as an MCP server on the
official ``mcp`` SDK (2.x), which serves streamable HTTP (and both protocol eras).

The tools and resources are declared once, in :mod:`engram.harness.mcp_tools`; this
registers the same functions with the SDK, so it derives the same schemas the stdio server
(:mod:`engram.harness.mcp_stdio`, no SDK) lists. A :class:`~engram.harness.mcp_tools.ToolFailure`
becomes the SDK's tool error (``isError``) or resource error with the same problem text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from engram.client.agent_memory import AgentMemory
from engram.harness.mcp_tools import (
    INSTRUCTIONS,
    TITLE,
    TOOLS,
    ToolFailure,
    define,
    problem_json,
    server_version,
)

# TOOLS and problem_json moved to engram.harness.mcp_tools; re-exported here.
__all__ = ["TOOLS", "build_server", "problem_json"]


def _as(error: type[Exception], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its :class:`ToolFailure` raised as the SDK's ``error`` (same signature:
    the SDK reads the wrapped function's annotations)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolFailure as e:
            raise error(str(e)) from e

    return call


def build_server(factory: Callable[[], AgentMemory], *, name: str = "engram") -> MCPServer:
    """The MCP server over the memory ``factory`` opens (called on the first request)."""
    served = define(factory)
    server: MCPServer = MCPServer(
        name=name, title=TITLE, instructions=INSTRUCTIONS, version=server_version(), log_level="WARNING"
    )
    for tool in served.tools:
        server.tool(name=tool.name, description=tool.description)(_as(ToolError, tool.fn))
    for res in served.resources:
        server.resource(res.uri, name=res.name, description=res.description, mime_type=res.mime_type)(
            _as(ResourceError, res.fn)
        )
    return server
